// Machines: each with its GPUs and their health (with the signals), fabric, rack, site,
// NVLink domain, and whether it is cordoned and why.

import { machineDetails, machineList } from "./api.js";
import { badge, errorBox, gb, gib, h, mount, table, when } from "./dom.js";

const RACK = "topology.astraeus.io/rack";
const FABRIC = "topology.astraeus.io/fabric";
const SITE = "topology.astraeus.io/site";

export async function machinesPage(ctx) {
  const list = h("div", { id: "machines" }, h("p", { class: "muted" }, "Loading machines…"));
  // The list has no GPUs: each card is drawn from it at once, then redrawn from the machine's
  // detail as that comes. The page reads again on Refresh, not by itself.
  const refresh = h("button", { type: "button", id: "refresh", class: "secondary" }, "Refresh");
  const load = async () => {
    refresh.disabled = true;
    try {
      const openCards = new Set([...list.querySelectorAll("details.gpus[open]")].map((d) => d.dataset.machine));
      const machines = (await machineList()).sort((a, b) => a.name.localeCompare(b.name));
      if (!ctx.alive()) return;
      const cards = new Map(machines.map((m) => [m.name, machineCard(m, openCards)]));
      mount(list, cards.size ? [...cards.values()] : h("p", {}, "No machines in this workspace's pools."));
      const redraw = batched((details) => {
        for (const detail of details) {
          const card = machineCard(detail, openCards);
          cards.get(detail.name)?.replaceWith(card);
          cards.set(detail.name, card);
        }
      });
      await machineDetails(machines.map((m) => m.name), redraw, ctx.alive);
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

/** `draw` gets what `add` was handed, once per frame: one layout for many cards, not one each. */
function batched(draw) {
  let waiting = [];
  return (item) => {
    waiting.push(item);
    if (waiting.length > 1) return;
    requestAnimationFrame(() => {
      const items = waiting;
      waiting = [];
      draw(items);
    });
  };
}

/** The fabric: the label wins, else what the InfiniBand ports report. */
export function fabricOf(machine) {
  if (machine.labels[FABRIC]) return machine.labels[FABRIC];
  const ports = machine.report?.rdma_ports || [];
  const fabrics = [...new Set(ports.map((p) => p.fabric).filter(Boolean))];
  if (fabrics.length) return fabrics.join(", ");
  return ports.length ? `RDMA, no fabric (${[...new Set(ports.map((p) => p.link_layer))].join(", ")})` : "";
}

export function nvlinkDomainOf(machine) {
  const domains = new Set((machine.report?.gpus || []).map((g) => g.nvlink_domain).filter(Boolean));
  return [...domains].join(", ");
}

function machineCard(machine, openCards) {
  const facts = [
    ["State", badge(machine.state)],
    ["Accepting runs", machine.cordoned ? h("span", { class: "cordoned" }, `Cordoned: ${machine.cordon_reason || "no reason given"}`) : "Yes"],
    ["Site", machine.site || machine.labels[SITE] || "—"],
    ["Rack", machine.labels[RACK] || "—"],
    ["Fabric", fabricOf(machine) || "—"],
    ["NVLink domain", nvlinkDomainOf(machine) || "—"],
    ["GPUs", `${machine.gpus_free} free of ${machine.gpus_total} (${machine.gpus_allocated} allocated)`],
    ["CPU", `${machine.cpu_cores_allocated} of ${machine.cpu_cores} cores allocated`],
    ["Memory", `${gib(machine.memory_bytes_allocated)} of ${gib(machine.memory_bytes)} allocated`],
    ["Runs", machine.runs.join(", ") || "—"],
    ["Last report", when(machine.last_seen)],
  ];
  const conditions = machine.report?.conditions || [];
  if (conditions.length) facts.push(["Conditions", conditions.join(", ")]);
  return h(
    "section",
    { class: machine.gpus ? "card machine" : "card machine loading", "data-machine": machine.name },
    h("h2", {}, machine.name),
    h("dl", { class: "facts" }, facts.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
    gpuTable(machine, openCards),
    rdmaTable(machine),
  );
}

function gpuTable(machine, openCards) {
  if (!machine.gpus) return h("p", { class: "muted" }, `${machine.gpus_total} GPUs; reading their health…`);
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
  return h(
    "details",
    { class: "gpus", "data-machine": machine.name, open: openCards.has(machine.name) || machine.gpus.some((g) => g.health !== "healthy") },
    h("summary", {}, `${machine.gpus.length} GPUs`, summaryHealth(machine.gpus)),
    table(["#", "Model", "Memory", "Health", "Signals", "NVLink domain", "Task"], rows, { class: "gpu-table" }),
  );
}

function healthText(health) {
  return { healthy: "Healthy", at_risk: "At risk", faulted: "Faulted" }[health] || health;
}

function summaryHealth(gpus) {
  const risky = gpus.filter((g) => g.health === "at_risk").length;
  const faulted = gpus.filter((g) => g.health === "faulted").length;
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
