// "Asked and got": the rules a run set, in the console's words, and where it was put.

const KEEP_WITHIN = { node: "one machine", nvlink_domain: "one NVLink domain", fabric: "one fabric", rack: "one rack" };
const SPREAD = { node: "machine", rack: "rack", fabric: "fabric" };
const INTERCONNECT = { auto: "Automatic", rdma: "RDMA", infiniband: "InfiniBand", nvlink: "NVLink" };
const SITE = "topology.astraeus.io/site";
const GIB = 1024 ** 3;

export function gpuAsk(ask) {
  const count = ask?.gpu_requests?.count || 0;
  return count ? `${count} GPU${count === 1 ? "" : "s"}` : "";
}

/** Each rule the run set, as [label, value]; nothing set reads as no rule. */
export function askedRules(ask) {
  const rules = [];
  const gpu = ask.gpu_requests || {};
  const add = (label, value) => rules.push([label, String(value)]);
  if (gpu.count) add("GPUs", gpu.count);
  if (gpu.models?.length) add("GPU model", gpu.models.join(" or "));
  if (gpu.vendor) add("Vendor", gpu.vendor);
  if (gpu.min_memory_gb) add("GPU memory at least", `${gpu.min_memory_gb} GB`);
  if (gpu.min_per_machine) add("GPUs per machine at least", gpu.min_per_machine);
  if (gpu.policy) add("GPU policy", gpu.policy);
  if (gpu.ids?.length) add("GPUs pinned", gpu.ids.join(", "));
  if (gpu.healthy_only) add("Only healthy GPUs", "yes");
  const per = gpu.count ? ask.per_gpu : null;
  if (per?.cpu_cores) add("CPU per GPU", `${per.cpu_cores} cores`);
  if (per?.memory_bytes) add("Memory per GPU", `${+(per.memory_bytes / GIB).toFixed(1)} GiB`);
  if (ask.cpu_cores) add("CPU per worker", `${ask.cpu_cores} cores`);
  if (ask.memory_bytes) add("Memory per worker", `${+(ask.memory_bytes / GIB).toFixed(1)} GiB`);
  if (ask.machines) add("Machines", ask.machines);
  const net = ask.network || {};
  if (net.interconnect && net.interconnect !== "auto") add("Network between workers", INTERCONNECT[net.interconnect]);
  if (net.min_gbps) add("RDMA port speed at least", `${net.min_gbps} Gb/s`);
  const topo = ask.topology || {};
  if (topo.keep_within) add("Never leave", KEEP_WITHIN[topo.keep_within]);
  if (topo.spread) add("One worker per", SPREAD[topo.spread]);
  if (topo.min_nodes || topo.max_nodes) add("Machines between", `${topo.min_nodes || 1} and ${topo.max_nodes || "any"}`);
  if (topo.patience_seconds) add("Wait for a better network", minutes(topo.patience_seconds));
  const sel = ask.node_selection || {};
  const labels = { ...(sel.match_labels || {}) };
  if (labels[SITE]) add("Site", labels[SITE]);
  delete labels[SITE];
  for (const [key, value] of Object.entries(labels)) add("Label", `${key}=${value}`);
  if (sel.names?.length) add("Machines to use", sel.names.join(", "));
  if (ask.array) add("Array", `${ask.array.size} tasks${ask.array.concurrency ? `, at most ${ask.array.concurrency} at once` : ""}`);
  return rules;
}

function minutes(seconds) {
  return seconds % 60 ? `${seconds} s` : `${seconds / 60} min`;
}
