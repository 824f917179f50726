// Machines: each with its GPUs and their health (with the signals), fabric, rack, site,
// NVLink domain, and whether it is cordoned and why.

import { enc, get, machineList } from "./api.js";
import { badge, errorBox, gb, gib, h, mount, table, when } from "./dom.js";

const RACK = "topology.astraeus.io/rack";
const SITE = "topology.astraeus.io/site";

export async function machinesPage(ctx) {
  const list = h("div", { id: "machines" }, h("p", { class: "muted" }, "Loading machines…"));
  // Every card is drawn from the list, which counts each machine's GPUs by model and health.
  // A machine's GPUs with their signals are read from its detail only when its GPU table is
  // shown: opened by the user, or open because some GPU is not healthy. The page reads again on
  // Refresh, not by itself.
  const refresh = h("button", { type: "button", id: "refresh", class: "secondary" }, "Refresh");
  const load = async () => {
    refresh.disabled = true;
    try {
      const openCards = new Set([...list.querySelectorAll("details.gpus[open]")].map((d) => d.dataset.machine));
      const machines = (await machineList()).sort((a, b) => a.name.localeCompare(b.name));
      if (!ctx.alive()) return;
      const cards = machines.map((m) => machineCard(m, openCards, ctx.alive));
      mount(list, cards.length ? cards : h("p", {}, "No machines in this workspace's pools."));
    } catch (err) {
      if (ctx.alive()) mount(list, errorBox(err));
    } finally {
      refresh.disabled = false;
    }
  };
  refresh.addEventListener("click", load);
  mount(ctx.main, h("div", { class: "title-row" }, h("h1", {}, "Machines"), refresh), list);
  await load();
}

/** The fabric: the label wins, else the fabric names the RDMA ports report. */
export function fabricOf(machine) {
  if (machine.fabric) return machine.fabric;
  if (machine.rdma_fabrics.length) return machine.rdma_fabrics.join(", ");
  const layers = machine.rdma_link_layers;
  return layers.length ? `RDMA, no fabric (${layers.join(", ")})` : "";
}

function modelsText(machine) {
  return machine.gpu_models.map((m) => `${m.free} of ${m.total} free ${m.model}`).join(", ");
}

function machineCard(machine, openCards, alive) {
  const facts = [
    ["State", badge(machine.state)],
    ["Accepting runs", machine.cordoned ? h("span", { class: "cordoned" }, `Cordoned: ${machine.cordon_reason || "no reason given"}`) : "Yes"],
    ["Site", machine.site || machine.labels[SITE] || "—"],
    ["Rack", machine.rack || machine.labels[RACK] || "—"],
    ["Fabric", fabricOf(machine) || "—"],
    ["NVLink domain", machine.nvlink_domains.join(", ") || "—"],
    ["GPUs", `${machine.gpus_free} free of ${machine.gpus_total} (${machine.gpus_allocated} allocated)`],
    ["GPU models", modelsText(machine) || "—"],
    ["CPU", `${machine.cpu_cores_allocated} of ${machine.cpu_cores} cores allocated`],
    ["Memory", `${gib(machine.memory_bytes_allocated)} of ${gib(machine.memory_bytes)} allocated`],
    ["Runs", machine.runs.join(", ") || "—"],
    ["Last report", when(machine.last_seen)],
  ];
  if (machine.conditions.length) facts.push(["Conditions", machine.conditions.join(", ")]);
  return h(
    "section",
    { class: "card machine", "data-machine": machine.name },
    h("h2", {}, machine.name),
    h("dl", { class: "facts" }, facts.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
    gpuSection(machine, openCards, alive),
  );
}

/** The GPUs' summary from the list; their table (with signals) and the RDMA ports from the
 * machine's detail, read the first time the section opens. */
function gpuSection(machine, openCards, alive) {
  if (!machine.gpus_total) return h("p", { class: "muted" }, "No GPUs reported.");
  const { at_risk: risky, faulted } = machine.gpu_health;
  const body = h("div", { class: "gpu-detail" }, h("p", { class: "muted" }, "Reading the GPUs' health…"));
  const section = h(
    "details",
    { class: "gpus", "data-machine": machine.name },
    h("summary", {}, `${machine.gpus_total} GPUs`, summaryHealth(risky, faulted)),
    body,
  );
  let read = false;
  const readDetail = async () => {
    if (read || !section.open) return;
    read = true;
    try {
      const detail = await get(`/machines/${enc(machine.name)}`);
      if (alive()) mount(body, gpuTable(detail), rdmaTable(detail));
    } catch (err) {
      read = false;
      if (alive()) mount(body, errorBox(err));
    }
  };
  section.addEventListener("toggle", readDetail);
  section.open = openCards.has(machine.name) || risky > 0 || faulted > 0;
  return section;
}

function gpuTable(machine) {
  const reported = new Map((machine.report?.gpus || []).map((g) => [g.uuid, g]));
  if (!machine.gpus.length) return h("p", { class: "muted" }, machine.report?.gpu_backend?.detail || "No GPUs reported.");
  const rows = machine.gpus.map((gpu) => {
    const info = reported.get(gpu.uuid) || {};
    const signals = info.health?.signals || [];
    return h(
      "tr",
      { "data-gpu": gpu.uuid, class: `health-${gpu.health}` },
      h("td", {}, gpu.index),
      h("td", {}, gpu.model),
      h("td", {}, info.memory_bytes ? gb(info.memory_bytes) : "—"),
      h("td", {}, h("span", { class: `badge health-${gpu.health}` }, healthText(gpu.health))),
      h("td", { class: "signals" }, signals.length ? h("ul", {}, signals.map((s) => h("li", {}, s.message))) : "—"),
      h("td", {}, info.nvlink_domain || "—"),
      h("td", {}, gpu.task || "free"),
    );
  });
  return table(["#", "Model", "Memory", "Health", "Signals", "NVLink domain", "Task"], rows, { class: "gpu-table" });
}

function healthText(health) {
  return { healthy: "Healthy", at_risk: "At risk", faulted: "Faulted" }[health] || health;
}

function summaryHealth(risky, faulted) {
  const parts = [];
  if (risky) parts.push(`${risky} at risk`);
  if (faulted) parts.push(`${faulted} faulted`);
  return parts.length ? ` — ${parts.join(", ")}` : " — all healthy";
}

function rdmaTable(machine) {
  const ports = machine.report?.rdma_ports || [];
  if (!ports.length) return null;
  const rows = ports.map((p) =>
    h(
      "tr",
      {},
      h("td", {}, `${p.device}:${p.port}`),
      h("td", {}, p.link_layer),
      h("td", {}, p.state),
      h("td", {}, `${p.rate_gbps} Gb/s`),
      h("td", {}, p.fabric || "—"),
      h("td", {}, p.at_risk ? (p.signals || []).map((s) => s.message).join("; ") || "at risk" : "—"),
    ),
  );
  return table(["RDMA port", "Link", "State", "Speed", "Fabric", "Signals"], rows, { class: "rdma-table" });
}
