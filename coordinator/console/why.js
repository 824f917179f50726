// "Why it is not running yet": the guide's "How to read it", applied to a pending explanation.
// Reasons are read as the API's data (`reason_kind`, `rejections`), never by their words: the
// texts are only shown.

/** The `reason_kind`s of the guide's queue reasons: the run fits, and the queue holds it back. */
export const QUEUE_KINDS = new Set(["NextToRun", "QueuedBehind", "WaitsForQuota", "ArrayLimit"]);

/** The guide's troubleshooting table, by the `code` of the reason (the API's `rejections`). */
export const FIXES = {
  NoGPUModel: "No machine in the workspace's pools has that model. Pick a model from the console's GPU model list, or ask for another pool.",
  InsufficientGPUs: "Other runs hold the GPUs. Wait; or split across machines (drop GPUs per machine at least); or use a higher priority if granted.",
  NotInPool: "The run or the workspace selects a pool those machines are not in. Remove the selector, or move the machines to the pool.",
  SpansSites: "A gang larger than any one site. Fewer GPUs, or label machines that share a network with the same site.",
  NoInfiniBandRoom: "Wait, use RDMA, or Automatic with Wait for a better network.",
  NoRackLabel: "Never leave one rack or One worker per rack on unlabelled machines. Label the racks or drop the rule.",
  CannotPlanWorkers: "The machines do not divide the GPU count. Change one of them.",
  UnderPressure: "The machine is out of memory or disk. It takes work again once it recovers.",
};

export function isQueueKind(kind) {
  return QUEUE_KINDS.has(kind);
}

export function fixFor(code) {
  return Object.hasOwn(FIXES, code || "") ? FIXES[code] : "";
}

/** The machines whose reason is about room only (it may clear by itself). */
export function roomMachines(rejections) {
  return new Set((rejections || []).filter((group) => group.room).flatMap((group) => group.machines));
}

/** The one code every machine's reason has, if there is one. */
function sharedCode(rejections) {
  const codes = new Set((rejections || []).map((group) => group.code));
  return codes.size === 1 ? [...codes][0] : "";
}

/** What to make of it: the guide's reading of a waiting task (`reason`, `reason_kind`,
 * `placement` and `rejections`, as the API gives them). */
export function reading({ reason, kind, placement, rejections }) {
  if (isQueueKind(kind)) {
    return "The run fits, and the queue holds it back: it starts when its turn comes.";
  }
  if (!placement) {
    return "The scheduler has not looked at this run yet; this page updates by itself.";
  }
  if (placement.ready_nodes === 0) {
    return placement.checked_nodes
      ? "No machine is up: the run starts once machines report again."
      : "No machine is in the workspace's pools: ask an admin to grant machines.";
  }
  if (placement.closest) {
    return `${placement.closest} falls short only on room (cores, memory, GPUs): the run starts when enough frees up. ` +
      "Nothing to do, unless it should start sooner: see Priorities.";
  }
  if (kind === "SameReason") {
    return `Every machine gives the same reason, ${reason}: that reason is the problem. ${fixFor(sharedCode(rejections))}`.trim();
  }
  return "No machine could ever take it as asked. Read each machine's reason and change the run " +
    "(another GPU model, fewer GPUs per machine, a looser rule) or the machines.";
}

/** The fix for a headline that is not a machine's reason: no machine in the workspace's pools. */
export function headlineFix(kind) {
  return kind === "NoMachines" ? FIXES.NotInPool : "";
}

/** Machines grouped by what keeps them out (the API's `rejections`: filter, code and room),
 * largest group first. A group shows its most common text; `others` counts its machines whose
 * text differs (other numbers or values of the same reason). */
export function groupReasons(nodes, rejections) {
  const texts = new Map(nodes.map((node) => [node.name, node.reasons.join("; ")]));
  return (rejections || [])
    .map((group) => {
      const counts = new Map();
      for (const name of group.machines) {
        const text = texts.get(name) ?? "";
        counts.set(text, (counts.get(text) || 0) + 1);
      }
      const [reason, same] = [...counts].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))[0];
      return { reason, code: group.code, machines: group.machines, room: group.room, others: group.machines.length - same };
    })
    .sort((a, b) => b.machines.length - a.machines.length || a.reason.localeCompare(b.reason));
}

/** How the map marks machines for a waiting run: the closest one, and those that can never take
 * it as asked (a reason other than room, or not considered at all). Without `rejections` (an
 * explanation stored before they existed) only the closest is marked. */
export function runMarks(placement, rejections, names) {
  const room = roomMachines(rejections);
  const marks = new Map();
  for (const name of names) {
    if (name === placement.closest) marks.set(name, "closest");
    else if (rejections && !room.has(name)) marks.set(name, "never");
  }
  return marks;
}
