// "Why it is not running yet": the guide's "How to read it", applied to a pending explanation.

const QUEUE = ["Next to run", "Queued behind", "Waits for namespace quota:", "Array runs at most"];
const ROOM = [/^insufficient gpus: /, /^needs \d+ healthy GPUs, /, /^insufficient cpu: /, /^insufficient memory: /];

// The guide's troubleshooting table: a reason's start, and its fix.
const FIXES = [
  [/^no .* GPU$/, "No machine in the workspace's pools has that model. Pick a model from the console's GPU model list, or ask for another pool."],
  [/^insufficient gpus: /, "Other runs hold the GPUs. Wait; or split across machines (drop GPUs per machine at least); or use a higher priority if granted."],
  [/^machine lacks label pool=/, "The run or the workspace selects a pool those machines are not in. Remove the selector, or move the machines to the pool."],
  [/^no single site can hold the whole run/, "A gang larger than any one site. Fewer GPUs, or label machines that share a network with the same site."],
  [/^no InfiniBand fabric has room for the whole run/, "Wait, use RDMA, or Automatic with Wait for a better network."],
  [/^no rack set on this machine/, "Never leave one rack or One worker per rack on unlabelled machines. Label the racks or drop the rule."],
  [/^Cannot plan workers: /, "The machines do not divide the GPU count. Change one of them."],
  [/^under pressure: /, "The machine is out of memory or disk. It takes work again once it recovers."],
];

export function isQueueReason(reason) {
  return Boolean(reason) && QUEUE.some((prefix) => reason.startsWith(prefix));
}

export function isRoomReason(reason) {
  return ROOM.some((pattern) => pattern.test(reason));
}

export function fixFor(reason) {
  const found = FIXES.find(([pattern]) => pattern.test(reason || ""));
  return found ? found[1] : "";
}

/** The one non-room reason every machine gives, if there is one. */
export function sharedReason(placement) {
  const texts = new Set(placement.nodes.map((node) => node.reasons.join("; ")));
  if (placement.nodes.length === 0 || texts.size !== 1) return "";
  const [text] = texts;
  return isRoomReason(text) ? "" : text;
}

/** What to make of it: the guide's reading of the reason and the explanation. */
export function reading(reason, placement) {
  if (isQueueReason(reason)) {
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
  const shared = sharedReason(placement);
  if (shared) {
    return `Every machine gives the same reason, ${shared}: that reason is the problem. ${fixFor(shared)}`.trim();
  }
  return "No machine could ever take it as asked. Read each machine's reason and change the run " +
    "(another GPU model, fewer GPUs per machine, a looser rule) or the machines.";
}

const NUMBER = /(\d+(?:\.\d+)?)/;

/** Machines grouped by what keeps them out, largest group first. Reasons that differ only in
 * their numbers are one group; a number that differs shows as its range: `insufficient gpus:
 * need 8, 0–4 free and usable`. `room` says if the group's machines fall short only on room. */
export function groupReasons(nodes) {
  const groups = new Map();
  for (const node of nodes) {
    const text = node.reasons.join("; ");
    const key = text.replace(new RegExp(NUMBER.source, "g"), "#");
    if (!groups.has(key)) groups.set(key, { texts: [], machines: [], room: node.reasons.every(isRoomReason) });
    const group = groups.get(key);
    group.texts.push(text);
    group.machines.push(node.name);
  }
  return [...groups.values()]
    .map(({ texts, machines, room }) => ({ reason: mergedText(texts), machines, room }))
    .sort((a, b) => b.machines.length - a.machines.length || a.reason.localeCompare(b.reason));
}

/** Texts alike but for their numbers, as one: each number that varies shown as `low–high`. */
export function mergedText(texts) {
  const split = texts.map((text) => text.split(NUMBER));
  return split[0]
    .map((part, i) => {
      if (i % 2 === 0) return part;
      const values = split.map((parts) => Number(parts[i]));
      const low = Math.min(...values);
      const high = Math.max(...values);
      return low === high ? part : `${low}–${high}`;
    })
    .join("");
}

/** How the map marks machines for a waiting run: the closest one, and those that can never take
 * it as asked (a reason other than room, or not considered at all). */
export function runMarks(placement, names) {
  const considered = new Map(placement.nodes.map((node) => [node.name, node]));
  const marks = new Map();
  for (const name of names) {
    const node = considered.get(name);
    if (name === placement.closest) marks.set(name, "closest");
    else if (!node || !node.reasons.every(isRoomReason)) marks.set(name, "never");
  }
  return marks;
}
