// Words and numbers for machines and GPUs: pure functions, no page (tested with node --test).

/** Each GPU's one colour on the map, the first that holds: faulted, at risk, in use, free. */
export const STATUSES = ["free", "in_use", "at_risk", "faulted"];

export const STATUS_WORDS = { free: "Free", in_use: "In use", at_risk: "At risk", faulted: "Faulted" };

export const HEALTH_WORDS = { healthy: "Healthy", at_risk: "At risk", faulted: "Faulted" };

/** free / in_use / at_risk / faulted: a fault or a risk outweighs who holds the GPU. */
export function gpuStatus(gpu) {
  if (gpu.health === "faulted") return "faulted";
  if (gpu.health === "at_risk") return "at_risk";
  return gpu.run ? "in_use" : "free";
}

/** `1 machine`, `3 machines`, with thousands separated: `5,000 GPUs`. */
export function count(n, word, plural = `${word}s`) {
  return `${n.toLocaleString("en-US")} ${n === 1 ? word : plural}`;
}

/** An NVLink domain as `<cluster UUID's first 8>/<clique>`, as the CLI prints it. */
export function nvlinkText(domain) {
  if (!domain) return "";
  const [cluster, clique] = domain.split("/");
  return clique === undefined ? domain : `${cluster.slice(0, 8)}/${clique}`;
}

/** The fabric a machine is on, for a machine of the list or a machine's detail: the fabric label,
 * else the fabric its InfiniBand ports report, else what its ports are: InfiniBand, RoCE, or
 * Ethernet when it has no RDMA port up. */
export function fabricText(machine) {
  if (machine.fabric) return machine.fabric;
  const layers = machine.rdma_link_layers || [];
  if (layers.includes("InfiniBand")) {
    const named = machine.rdma_fabrics || [];
    return named.length ? named[0] : "InfiniBand";
  }
  return layers.length ? "RoCE" : "Ethernet";
}

/** `Up`, `Down`, `Up, cordoned`, `Up, MemoryPressure`: the CLI's STATE column. */
export function stateText(machine) {
  return [machine.state, machine.cordoned ? "cordoned" : null, ...(machine.conditions || [])]
    .filter(Boolean)
    .join(", ");
}

/** A live task whose machine fell silent (Down): since when, and that it keeps running until it
 * is heard again or counted Lost (the coordinator's `lost_after_seconds`); "" otherwise. `time`
 * formats the ISO time. */
export function silentText(task, time = (iso) => iso) {
  if (!task.machine_silent_since) return "";
  return `Machine silent since ${time(task.machine_silent_since)}: still running unless it stays silent long enough to be Lost`;
}

/** Per model, in the order first seen: how many GPUs, how many are idle (neither faulted nor
 * held: at risk counts, as in the API's `gpus_idle`) and how many free: idle on a machine that
 * takes runs now (`usable`), as the API's `gpus_free`. */
export function modelCounts(gpus, usable = true) {
  const found = new Map();
  for (const gpu of gpus) {
    const seen = found.get(gpu.model) || { model: gpu.model, total: 0, free: 0, idle: 0 };
    seen.total += 1;
    if (gpu.health !== "faulted" && !gpu.run) seen.idle += 1;
    found.set(gpu.model, seen);
  }
  for (const seen of found.values()) seen.free = usable ? seen.idle : 0;
  return [...found.values()];
}

/** `6/8 NVIDIA H100 80GB HBM3, 2/2 NVIDIA A10`; idle GPUs no run can use now shown apart:
 * `0/8 NVIDIA H100 80GB HBM3 (8 idle)`; empty without GPUs. */
export function freeText(models) {
  return models.map((m) => `${m.free}/${m.total} ${m.model}${(m.idle ?? m.free) > m.free ? ` (${m.idle} idle)` : ""}`).join(", ");
}

/** The conditions under which the scheduler places nothing on a machine. */
export const BLOCKING_CONDITIONS = ["MemoryPressure", "DiskPressure"];

/** Whether a run could be placed on the machine now: Up, not cordoned, under no memory or disk
 * pressure (as the API's `gpus_free` counts). */
export function takesRuns(machine) {
  return machine.state === "Up" && !machine.cordoned && !(machine.conditions || []).some((c) => BLOCKING_CONDITIONS.includes(c));
}

export function healthCounts(gpus) {
  const counts = { healthy: 0, at_risk: 0, faulted: 0 };
  for (const gpu of gpus) counts[gpu.health] = (counts[gpu.health] || 0) + 1;
  return counts;
}

/** `8 healthy`, `6 healthy, 1 at risk, 1 faulted`; empty without GPUs. */
export function healthText(counts) {
  return ["healthy", "at_risk", "faulted"]
    .filter((state) => counts[state])
    .map((state) => `${counts[state]} ${state.replace("_", " ")}`)
    .join(", ");
}

/** Who holds a GPU, as a viewer may know it. */
export function holderText(run) {
  if (!run) return "free";
  if (!run.name) return "a run of another workspace";
  return run.workspace ? `run ${run.name} (workspace ${run.workspace})` : `run ${run.name}`;
}

/** The labels an admin set on a machine: those that are not the agent's as reported. */
export function adminLabels(labels, reported) {
  return Object.fromEntries(Object.entries(labels).filter(([key, value]) => reported[key] !== value));
}

/** `pool=h100, team=vision` → `{labels}`, or `{problem}` naming the piece that is not key=value. */
export function parseLabels(text) {
  const labels = {};
  for (const piece of text.split(",").map((p) => p.trim()).filter(Boolean)) {
    const at = piece.indexOf("=");
    if (at <= 0) return { labels: {}, problem: `Write each label as key=value, separated by commas ("${piece}" has no key=value).` };
    labels[piece.slice(0, at).trim()] = piece.slice(at + 1).trim();
  }
  return { labels };
}

/** `Reserved for pool=h100`, `Reserved for workspace vision from … to …` (local times). */
export function reservationText(r, time = (iso) => new Date(iso).toLocaleString()) {
  const labels = Object.entries(r.labels || {}).map(([k, v]) => `${k}=${v}`);
  const who = labels.length ? labels.join(", ") : `workspace ${r.workspace}`;
  const span = r.starts_at ? ` from ${time(r.starts_at)} to ${time(r.ends_at)}` : "";
  return `Reserved for ${who}${span}`;
}

/** `100 Gb/s`, `2.5 Gb/s`, `100 Mb/s` (as the CLI prints it); empty when not known. */
export function speedText(mbps) {
  if (mbps === null || mbps === undefined) return "";
  return mbps >= 1000 ? `${mbps / 1000} Gb/s` : `${mbps} Mb/s`;
}
