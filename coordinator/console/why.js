// "Why it is not running yet": the guide's "How to read it", applied to a pending explanation.
// Reasons are read as the API's data (`reason_kind`, the codes of `rejections` or of the grouped
// explanation's `reasons`), never by their words: the texts are only shown.

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
  NoIMEXChannel: "The NVLink domain's machines have no IMEX channel, which a run across them needs. Ask an operator to start the IMEX service on them; or drop Never leave NVLink domain and NVLink as the network between workers.",
  ClusterTooSmall: "Together the workspace's machines have fewer GPUs of the kind asked than the run needs, however many free up. Ask for fewer GPUs or another model, or ask an admin to grant more machines.",
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

/** What to make of it: the guide's reading of a waiting task (`reason`, `reason_kind`, and its
 * explanation as `placement`, with `rejections` the groups behind it: the full explanation with
 * its `rejections`, or the grouped one with its `reasons`; only their `code`s are read). */
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
  if (kind === "ClusterTooSmall") {
    return `${reason}: no machine frees up enough to change that. ${FIXES.ClusterTooSmall}`;
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

/** The machines of one reason of the grouped explanation (`explain=grouped`), for people: all
 * of them when four or fewer, else the first three and how many more (the API names the first
 * few of each reason only). */
export function machinesText(group) {
  const named = group.machines || [];
  if (group.count <= 4 && named.length === group.count) return named.join(", ");
  const shown = named.slice(0, 3);
  return `${shown.join(", ")} and ${group.count - shown.length} more`;
}

/** The closest machine, then the others short only on room that the grouped explanation
 * names: `gpu-02 (then gpu-05, gpu-07)`. */
export function closestText(grouped) {
  const others = (grouped.closest_machines || []).filter((name) => name !== grouped.closest);
  return others.length ? `${grouped.closest} (then ${others.join(", ")})` : grouped.closest;
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

/** Where a dry run would start, each fact once: `shape.why` ("1 machine × 8 GPUs on nvl-1"),
 * then the landing's group unless the shape already names it ("one machine, nvl-1" does not
 * add), then the machines the text does not name yet. Once it read "… on nvl-1, on one
 * machine, nvl-1 (nvl-1)". */
export function wouldStartText(shape, landing, machines) {
  let text = shape.why;
  const group = landing.where.split(", ").pop();
  if (!holdsName(text, group)) text += `, on ${landing.where}`;
  const unnamed = machines.filter((machine) => !holdsName(text, machine));
  if (unnamed.length) text += ` (${unnamed.join(", ")})`;
  return `It would start now: ${text}.`;
}

/** Whether `text` holds `name` as a whole name: nvl-1 is not in "nvl-10". */
function holdsName(text, name) {
  let at = text.indexOf(name);
  while (at >= 0) {
    const before = at === 0 ? "" : text[at - 1];
    const after = text[at + name.length] || "";
    if (!/[\w-]/.test(before) && !/[\w-]/.test(after)) return true;
    at = text.indexOf(name, at + 1);
  }
  return false;
}
