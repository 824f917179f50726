// The cluster as rows and as a map: `GET /api/v1/cluster/map` made into one row per machine, and
// those rows laid out as sites, then fabrics and NVLink domains, then racks, then machines, with
// a cell per GPU. Pure functions, no page (tested with node --test).

import { BLOCKING_CONDITIONS, gpuStatus, healthCounts, modelCounts, nvlinkText, takesRuns } from "./format.js";

const ORDER = new Intl.Collator("en", { numeric: true });

/** One row per machine, from `GET /api/v1/cluster/map`: what the table shows and the map draws. */
export function machineRows(map) {
  return map.machines.map((m) => {
    // Each GPU comes as [index, model, health, run]: indexes into `models` and `runs`.
    const gpus = m.gpus.map(([index, model, health, run]) => {
      const gpu = { index, model: map.models[model], health, run: run === null ? null : map.runs[run] };
      gpu.status = gpuStatus(gpu);
      return gpu;
    });
    const usable = takesRuns(m);
    const models = modelCounts(gpus, usable);
    return {
      name: m.name,
      state: m.state,
      site: m.site || "",
      rack: m.rack || "",
      fabric: m.fabric || m.network,
      network: m.network,
      nvlinkDomain: m.nvlink_domain || "",
      nvlink: nvlinkText(m.nvlink_domain),
      ethernet: m.ethernet_mbps ?? null,
      cordoned: m.cordoned,
      cordonReason: m.cordon_reason || "",
      conditions: m.conditions,
      gpus,
      models,
      health: healthCounts(gpus),
      usable,
      free: models.reduce((n, c) => n + c.free, 0),
      idle: models.reduce((n, c) => n + c.idle, 0),
    };
  });
}

/** What the map draws a machine as: Down, under pressure, cordoned, or up. */
export function machineLook(row) {
  if (row.state !== "Up") return "down";
  if (row.conditions.length) return "pressure";
  return row.cordoned ? "cordoned" : "up";
}

/** How many GPUs are free, in use, at risk, faulted; machines Down, cordoned, under pressure.
 * Free means usable by a run now: a GPU that would be free on a machine that takes no runs
 * (Down, under pressure, cordoned: the first that holds, as the map draws it) is counted apart
 * in `idle`. */
export function totals(rows) {
  const gpus = { free: 0, in_use: 0, at_risk: 0, faulted: 0 };
  const idle = { down: 0, pressure: 0, cordoned: 0 };
  const machines = { machines: rows.length, down: 0, cordoned: 0, pressure: 0 };
  for (const row of rows) {
    const why = row.usable === false ? unusable(row) : null;
    for (const gpu of row.gpus) {
      if (gpu.status === "free" && why) idle[why] += 1;
      else gpus[gpu.status] += 1;
    }
    if (row.state !== "Up") machines.down += 1;
    if (row.cordoned) machines.cordoned += 1;
    if (row.conditions.length) machines.pressure += 1;
  }
  return { gpus, idle, machines };
}

/** Why a machine takes no runs now: down, pressure (memory or disk) or cordoned. */
function unusable(row) {
  if (row.state !== "Up") return "down";
  return row.conditions.some((c) => BLOCKING_CONDITIONS.includes(c)) ? "pressure" : "cordoned";
}

// The network group's rank, tightest first, as on the guide's ladder.
const NETWORK_RANK = { NVLink: 0, InfiniBand: 1, RoCE: 2, Ethernet: 3 };

/** The network a machine sits in on the map: its NVLink domain, else its fabric, else what its
 * ports are. */
export function groupOf(row) {
  if (row.nvlinkDomain) return { rank: 0, label: `NVLink domain ${row.nvlink}` };
  const rank = NETWORK_RANK[row.network] ?? 3;
  if (row.fabric && row.fabric !== row.network) return { rank, label: `${row.network} fabric ${row.fabric}` };
  return { rank, label: row.network === "RoCE" ? "RoCE, no fabric" : row.network };
}

/** The side of a GPU's cell, in CSS pixels: large for a few machines, small for thousands. */
export function cellSize(gpus) {
  if (gpus <= 256) return 14;
  if (gpus <= 4096) return 9;
  return 6;
}

export const GEOMETRY = {
  gap: 1, // between a machine's cells
  pad: 2, // a machine's frame, around its cells
  machineGap: 3,
  rackPad: 3,
  rackHead: 13,
  rackGap: 8,
  rackDepth: 8, // machines stacked in one column of a rack before the next column starts
  groupHead: 18,
  groupGap: 10,
  siteHead: 24,
  siteGap: 14,
  indent: 8,
  namedFrom: 9, // cells this large or larger leave room for each machine's name above its GPUs
  nameHead: 13,
  nameWidth: 64,
};

/** Sites → network groups → racks → machines, each level sorted; no site and no rack last. */
export function hierarchy(rows) {
  const sites = new Map();
  for (const row of rows) {
    const group = groupOf(row);
    const site = nested(sites, row.site, () => new Map());
    const racks = nested(site, `${group.rank}\u0000${group.label}`, () => new Map());
    nested(racks, row.rack, () => []).push(row);
  }
  const last = (a, b) => (a === "") - (b === "") || ORDER.compare(a, b);
  return sorted(sites, last).map(([site, groups]) => ({
    site,
    groups: sorted(groups, ORDER.compare).map(([key, racks]) => ({
      label: key.split("\u0000")[1],
      racks: sorted(racks, last).map(([rack, machines]) => ({ rack, machines: machines.sort((a, b) => ORDER.compare(a.name, b.name)) })),
    })),
  }));
}

function nested(map, key, make) {
  if (!map.has(key)) map.set(key, make());
  return map.get(key);
}

function sorted(map, compare) {
  return [...map.entries()].sort(([a], [b]) => compare(a, b));
}

/** Where everything goes on a map `width` pixels wide: boxes for sites, groups and racks (with
 * their labels), one tile per machine and one cell per GPU, and the height it all takes.
 * Sites are stacked; in a site, groups flow left to right and wrap, and so do racks in a group. */
export function layoutMap(rows, width, options = {}) {
  const g = { ...GEOMETRY, ...options };
  const gpuCount = rows.reduce((n, row) => n + row.gpus.length, 0);
  const cell = options.cell ?? cellSize(gpuCount);
  const most = Math.max(1, ...rows.map((row) => row.gpus.length));
  const cols = most <= 8 ? Math.min(4, most) : Math.ceil(Math.sqrt(most));
  const names = cell >= g.namedFrom ? g.nameHead : 0;
  const w = 2 * g.pad + cols * cell + (cols - 1) * g.gap;
  const tile = { cols, names, w: Math.max(w, names ? g.nameWidth : 0), h: names + 2 * g.pad + Math.ceil(most / cols) * (cell + g.gap) - g.gap };
  const model = { width, height: 0, cell, tile, geometry: g, boxes: [], machines: [], cells: [] };
  let y = 0;
  for (const site of hierarchy(rows)) {
    const top = y;
    const inner = width - 2 * g.indent;
    const groups = site.groups.map((group) => groupLayout(group, inner, model, g));
    y = flow(groups, g.indent, y + g.siteHead, inner, g.groupGap, (group, x, gy) => place(model, group, x, gy, g));
    model.boxes.push({ kind: "site", label: site.site ? `Site ${site.site}` : "No site", x: 0, y: top, w: width, h: y - top });
    y += g.siteGap;
  }
  model.height = Math.max(y, 1);
  return model;
}

/** Items ({w, h}) left to right from (left, top), wrapping at `width`; `put(item, x, y)` places
 * each. Returns the y below the last row. */
function flow(items, left, top, width, gap, put) {
  let x = left;
  let y = top;
  let rowHeight = 0;
  for (const item of items) {
    if (x > left && x + item.w > left + width) {
      y += rowHeight + gap;
      x = left;
      rowHeight = 0;
    }
    put(item, x, y);
    x += item.w + gap;
    rowHeight = Math.max(rowHeight, item.h);
  }
  return y + rowHeight;
}

/** A group laid out at (0, 0) in at most `width`: its label, its racks, their machines. Racks
 * flow and wrap; a rack's machines fill columns of `rackDepth`, like slots, in as many columns
 * as fit. */
function groupLayout(group, width, model, g) {
  const stepX = model.tile.w + g.machineGap;
  const stepY = model.tile.h + g.machineGap;
  const fit = Math.max(1, Math.floor((width - 2 * g.rackPad + g.machineGap) / stepX));
  const racks = group.racks.map(({ rack, machines }) => {
    const columns = Math.min(Math.ceil(machines.length / g.rackDepth), fit);
    const depth = Math.ceil(machines.length / columns);
    return { label: rack || "No rack", machines, depth, w: 2 * g.rackPad + columns * stepX - g.machineGap, h: g.rackHead + 2 * g.rackPad + depth * stepY - g.machineGap };
  });
  const placed = [];
  let used = 0;
  const bottom = flow(racks, 0, g.groupHead, width, g.rackGap, (rack, x, y) => {
    placed.push({ rack, x, y });
    used = Math.max(used, x + rack.w);
  });
  return { label: group.label, placed, stepX, stepY, w: Math.max(used, Math.min(width, group.label.length * 7)), h: bottom };
}

/** Put a laid-out group at (x, y): its boxes, its machines' tiles and their GPUs' cells. */
function place(model, group, x, y, g) {
  model.boxes.push({ kind: "group", label: group.label, x, y, w: group.w, h: g.groupHead });
  for (const { rack, x: rx, y: ry } of group.placed) {
    model.boxes.push({ kind: "rack", label: rack.label, x: x + rx, y: y + ry, w: rack.w, h: rack.h });
    rack.machines.forEach((row, i) => {
      const mx = x + rx + g.rackPad + Math.floor(i / rack.depth) * group.stepX;
      const my = y + ry + g.rackHead + g.rackPad + (i % rack.depth) * group.stepY;
      placeMachine(model, row, mx, my, g);
    });
  }
}

function placeMachine(model, row, x, y, g) {
  const { cell, tile } = model;
  const at = model.machines.length;
  model.machines.push({ row, x, y, w: tile.w, h: tile.h, first: model.cells.length });
  row.gpus.forEach((gpu, j) => {
    const cx = x + g.pad + (j % tile.cols) * (cell + g.gap);
    const cy = y + tile.names + g.pad + Math.floor(j / tile.cols) * (cell + g.gap);
    model.cells.push({ machine: at, gpu: j, x: cx, y: cy, status: gpu.status });
  });
}

/** The machine, and the GPU if any, at (x, y) on the map; null between machines. */
export function hitTest(model, x, y) {
  const { cell, tile, geometry } = model;
  const step = cell + geometry.gap;
  for (const placed of model.machines) {
    if (x < placed.x || y < placed.y || x >= placed.x + placed.w || y >= placed.y + placed.h) continue;
    const dx = x - placed.x - geometry.pad;
    const dy = y - placed.y - tile.names - geometry.pad;
    const col = Math.floor(dx / step);
    const line = Math.floor(dy / step);
    const inCell = dx >= 0 && dy >= 0 && col < tile.cols && dx % step < cell && dy % step < cell;
    const j = line * tile.cols + col;
    const gpu = inCell && j < placed.row.gpus.length ? placed.row.gpus[j] : null;
    return { machine: placed.row, gpu };
  }
  return null;
}

/** What the rack labels share at their start, up to and with its last separator ("rack-" of
 * rack-1 … rack-624): at 5,000 machines a rack is ~30 px wide and every label read "rack…";
 * without it each shows what tells it apart. Empty when the labels share no such start. */
export function sharedStart(labels) {
  if (labels.length < 2) return "";
  let shared = labels[0];
  for (const label of labels) {
    let n = 0;
    while (n < shared.length && n < label.length && shared[n] === label[n]) n += 1;
    shared = shared.slice(0, n);
    if (!shared) return "";
  }
  const cut = Math.max(...["-", "_", ".", "/", " ", ":"].map((sep) => shared.lastIndexOf(sep)));
  return cut < 0 ? "" : shared.slice(0, cut + 1);
}

/** A label as it fits (`fits(text)` says whether a text does): whole; else without the start
 * all labels share; else the end of that, which tells racks apart, after "…". */
export function fitLabel(label, fits, shared = "") {
  if (fits(label)) return label;
  const own = shared && label.startsWith(shared) ? label.slice(shared.length) : label;
  if (fits(own)) return own;
  for (let keep = own.length - 1; keep > 0; keep -= 1) {
    const text = `…${own.slice(own.length - keep)}`;
    if (fits(text)) return text;
  }
  return "";
}
