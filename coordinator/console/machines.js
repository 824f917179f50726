// The cluster: the map, the machines table, and one machine's page (its GPUs with their health
// and signals, ports, labels, reservations; and, for admins, cordon, labels and reservations).

import { clusterMapData, enc, get, isAdmin } from "./api.js";
import { adminPanel } from "./admin.js";
import { badge, errorBox, gb, gib, h, markDrawn, mount, table, when } from "./dom.js";
import { HEALTH_WORDS, fabricText, nvlinkText, reservationText, speedText } from "./format.js";
import { clusterMap, legend } from "./map.js";
import { machineRows } from "./mapmodel.js";
import { machinesTable } from "./vtable.js";

const REFRESH_MS = 15000;
const RACK = "topology.astraeus.io/rack";
const SITE = "topology.astraeus.io/site";

/** Map | Table: the two views of the cluster, the one shown marked. */
function views(current) {
  const tab = (href, key, text) => h("a", { href, "data-tab": key, "aria-current": key === current ? "page" : null }, text);
  return h("p", { class: "tabs" }, tab("#/map", "map", "Map"), tab("#/machines", "machines", "Table"));
}

/** Read the map's data every REFRESH_MS while the page is shown; `show(rows)` draws it. */
async function everyMap(ctx, holder, show) {
  await ctx.every(REFRESH_MS, async () => {
    let rows;
    try {
      rows = machineRows(await clusterMapData());
    } catch (err) {
      if (ctx.alive()) mount(holder, errorBox(err));
      return err.status !== 401;
    }
    if (ctx.alive()) show(rows);
    return true;
  });
}

export async function mapPage(ctx) {
  const holder = h("div", { id: "map-holder" }, h("p", { class: "muted" }, "Loading the cluster…"));
  ctx.main.className = "full";
  mount(ctx.main, h("div", { class: "title-row" }, h("h1", {}, "Cluster map"), views("map")), holder);
  let map = null;
  await everyMap(ctx, holder, (rows) => {
    if (!rows.length) {
      map = null;
      mount(holder, h("p", {}, "No machines to show: none reports, or none is in this workspace's pools."));
    } else if (!map) {
      map = clusterMap(rows);
      mount(holder, legend(rows), h("p", { class: "muted small" }, "Hover a GPU to see its machine, model and the run holding it; click to open the machine."), map);
      map.drawNow();
    } else {
      holder.replaceChild(legend(rows), holder.querySelector("#map-legend"));
      map.update(rows);
    }
  });
}

export async function machinesPage(ctx) {
  const holder = h("div", { id: "machines" }, h("p", { class: "muted" }, "Loading machines…"));
  ctx.main.className = "full";
  mount(ctx.main, h("div", { class: "title-row" }, h("h1", {}, "Machines"), views("machines")), holder);
  let view = null;
  await everyMap(ctx, holder, (rows) => {
    if (!view) {
      view = machinesTable(rows);
      mount(holder, view);
      view.update(rows); // its window is sized now that it is in the page
      markDrawn("table");
    } else {
      view.update(rows);
    }
  });
}

/** One machine: what its card showed, its GPUs' table, ports, labels and reservations; the admin
 * controls for an admin. */
export async function machinePage(ctx, name) {
  const body = h("div", { id: "machine", "data-machine": name }, h("p", { class: "muted" }, "Loading…"));
  mount(ctx.main, h("p", { class: "crumbs" }, h("a", { href: "#/machines" }, "Machines"), " / ", name), body);
  const load = async () => {
    let machine;
    try {
      machine = await get(`/machines/${enc(name)}`);
    } catch (err) {
      if (ctx.alive()) mount(body, errorBox(err));
      return;
    }
    if (!ctx.alive()) return;
    mount(
      body,
      machineCard(machine),
      h("section", { class: "card", id: "gpus" }, h("h2", {}, "GPUs"), gpuTable(machine), rdmaTable(machine)),
      labelsCard(machine, isAdmin()),
      isAdmin() ? adminPanel(machine, load) : null,
    );
  };
  await load();
}

function machineCard(machine) {
  const facts = [
    ["State", badge(machine.state)],
    ["Accepting runs", machine.cordoned ? h("span", { class: "cordoned" }, `Cordoned: ${machine.cordon_reason || "no reason given"}`) : "Yes"],
    ["Site", machine.site || machine.labels[SITE] || "—"],
    ["Rack", machine.rack || machine.labels[RACK] || "—"],
    ["Fabric", fabricText(machine)],
    ["Ethernet", speedText(machine.ethernet_mbps) || "—"],
    ["NVLink domain", machine.nvlink_domains.map(nvlinkText).join(", ") || "—"],
    ["GPUs", `${machine.gpus_free} free of ${machine.gpus_total} (${machine.gpus_allocated} allocated${machine.gpus_idle > machine.gpus_free ? `; ${machine.gpus_idle} idle, but the machine takes no runs now` : ""})`],
    ["GPU models", machine.gpu_models.map((m) => `${m.free} of ${m.total} free ${m.model}${m.idle > m.free ? ` (${m.idle} idle)` : ""}`).join(", ") || "—"],
    ["Health", healthSummary(machine.gpu_health, machine.gpus_total)],
    ["CPU", `${machine.cpu_cores_allocated} of ${machine.cpu_cores} cores allocated`],
    ["Memory", `${gib(machine.memory_bytes_allocated)} of ${gib(machine.memory_bytes)} allocated`],
    ["Runs", machine.runs.join(", ") || "—"],
    ["Conditions", machine.conditions.join(", ") || "None"],
    ["Last report", when(machine.last_seen)],
  ];
  return h(
    "section",
    { class: "card machine", id: "machine-card" },
    h("h1", {}, machine.name),
    h("dl", { class: "facts" }, facts.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
  );
}

function healthSummary(counts, total) {
  if (!total) return "No GPUs reported";
  const parts = [];
  if (counts.at_risk) parts.push(`${counts.at_risk} at risk`);
  if (counts.faulted) parts.push(`${counts.faulted} faulted`);
  return parts.length ? parts.join(", ") : "All healthy";
}

function gpuTable(machine) {
  const reported = new Map((machine.report?.gpus || []).map((g) => [g.uuid, g]));
  if (!machine.gpus.length) return h("p", { class: "muted" }, machine.report?.gpu_backend?.detail || "No GPUs reported.");
  const rows = machine.gpus.map((gpu) => {
    const info = reported.get(gpu.uuid) || {};
    const signals = info.health?.signals || [];
    return h(
      "tr",
      { "data-gpu": gpu.uuid, "data-index": gpu.index, class: `health-${gpu.health}` },
      h("td", {}, gpu.index),
      h("td", {}, gpu.model),
      h("td", {}, info.memory_bytes ? gb(info.memory_bytes) : "—"),
      h("td", {}, h("span", { class: `badge health-${gpu.health}` }, HEALTH_WORDS[gpu.health] || gpu.health)),
      h("td", { class: "signals" }, signals.length ? h("ul", {}, signals.map((s) => h("li", {}, s.message))) : "—"),
      h("td", {}, nvlinkText(info.nvlink_domain) || "—"),
      h("td", {}, gpu.task || "free"),
    );
  });
  return h("div", { class: "wide" }, table(["#", "Model", "Memory", "Health", "Signals", "NVLink domain", "Task"], rows, { class: "gpu-table" }));
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
  return h("div", { class: "wide" }, table(["RDMA port", "Link", "State", "Speed", "Fabric", "Signals"], rows, { class: "rdma-table" }));
}

/** The labels, who set each, and (for a member; an admin's panel lists them with Remove) the
 * reservations. */
function labelsCard(machine, admin) {
  const agent = machine.report?.labels || {};
  const rows = Object.entries(machine.labels)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([key, value]) => h("tr", { "data-label": key }, h("td", {}, key), h("td", {}, value), h("td", { class: "muted" }, agent[key] === value ? "agent" : "admin")));
  const reservations = machine.reservations.map((r) => h("li", { "data-reservation": r.id }, reservationText(r)));
  return h(
    "section",
    { class: "card", id: "labels" },
    h("h2", {}, admin ? "Labels" : "Labels and reservations"),
    rows.length ? h("div", { class: "wide" }, table(["Label", "Value", "Set by"], rows, { class: "labels-table" })) : h("p", { class: "muted" }, "No labels."),
    admin ? null : reservations.length ? h("ul", { id: "reservations" }, reservations) : h("p", { class: "muted", id: "reservations" }, "Not reserved."),
  );
}
