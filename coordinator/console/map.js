// The cluster map: every GPU a cell on one canvas, coloured by what it is; hover names it, click
// opens its machine. On a waiting run's page, marks say which machine is closest and which
// machines can never take the run.

import { enc, get } from "./api.js";
import { h, markDrawn } from "./dom.js";
import { STATUS_WORDS, count, holderText, stateText } from "./format.js";
import { fitLabel, hitTest, layoutMap, machineLook, sharedStart, totals } from "./mapmodel.js";

export const COLOURS = { free: "#bfe3c8", in_use: "#1f5fae", at_risk: "#f0a500", faulted: "#c0262d" };
const LOOK = {
  up: { frame: "#c3ccd7", fill: "#ffffff", width: 1 },
  cordoned: { frame: "#e07b00", fill: "#ffffff", width: 2 },
  pressure: { frame: "#a21caf", fill: "#ffffff", width: 2 },
  down: { frame: "#4b5563", fill: "#4b5563", width: 1 },
};
const DOWN_CELL = "#9aa3ae";
const CLOSEST = "#111827";
const INK = { site: "#1c2430", group: "#3c4a5c", rack: "#5d6b7c" };

/** The map of `rows` (from `machineRows`), with `marks`: machine name → "closest" or "never".
 * Returns the element; `element.mapModel` is the layout drawn, for tests and tools. */
export function clusterMap(rows, { marks = new Map(), id = "cluster-map", label = "Cluster map" } = {}) {
  const canvas = h("canvas", { class: "map-canvas", role: "img", "aria-label": summaryText(rows, label) });
  const tip = h("div", { class: "map-tip", role: "tooltip", hidden: true });
  const element = h("div", { class: "cluster-map", id }, canvas, tip);
  const state = { rows, marks, model: null, width: 0 };
  const draw = () => {
    const width = Math.floor(element.clientWidth);
    if (!width || width === state.width) return;
    state.width = width;
    state.model = fitted(state.rows, width);
    element.mapModel = state.model;
    element.mapMarks = Object.fromEntries(state.marks);
    paint(canvas, state.model, state.marks);
  };
  element.update = (newRows, newMarks = state.marks) => {
    state.rows = newRows;
    state.marks = newMarks;
    state.width = 0;
    canvas.setAttribute("aria-label", summaryText(newRows, label));
    draw();
  };
  new ResizeObserver(() => requestAnimationFrame(draw)).observe(element);
  element.drawNow = draw;
  hover(element, canvas, tip, state);
  return element;
}

/** A layout whose canvas the browser can hold: smaller cells when it would be too tall. */
function fitted(rows, width) {
  let model = layoutMap(rows, width);
  while (model.height * (window.devicePixelRatio || 1) > 30000 && model.cell > 3) {
    model = layoutMap(rows, width, { cell: model.cell - 1 });
  }
  return model;
}

function paint(canvas, model, marks) {
  const ratio = window.devicePixelRatio || 1;
  canvas.width = Math.round(model.width * ratio);
  canvas.height = Math.round(model.height * ratio);
  canvas.style.width = `${model.width}px`;
  canvas.style.height = `${model.height}px`;
  const ctx = canvas.getContext("2d", { alpha: false });
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.fillStyle = "#f5f7fa";
  ctx.fillRect(0, 0, model.width, model.height);
  paintBoxes(ctx, model);
  paintMachines(ctx, model, marks);
  paintCells(ctx, model);
  paintMarks(ctx, model, marks);
  canvas.dataset.drawn = String(model.machines.length);
  markDrawn("map");
}

function paintBoxes(ctx, model) {
  const racks = new Path2D();
  for (const box of model.boxes) if (box.kind === "rack") racks.rect(box.x, box.y, box.w, box.h);
  ctx.fillStyle = "#e9edf2";
  ctx.fill(racks);
  ctx.textBaseline = "top";
  const shared = sharedStart(model.boxes.filter((box) => box.kind === "rack").map((box) => box.label));
  for (const kind of ["rack", "group", "site"]) {
    ctx.fillStyle = INK[kind];
    ctx.font = { rack: "10px system-ui, sans-serif", group: "12px system-ui, sans-serif", site: "600 14px system-ui, sans-serif" }[kind];
    for (const box of model.boxes) {
      if (box.kind !== kind) continue;
      // A rack too narrow for its name shows what tells it apart ("rack-312" → "312"); hover
      // names it whole.
      const fits = (text) => ctx.measureText(text).width <= box.w - 4;
      if (kind === "rack") ctx.fillText(fitLabel(box.label, fits, shared), box.x + 2, box.y + 2);
      else ctx.fillText(box.label, box.x + 2, box.y + 3);
    }
  }
}

function clip(ctx, text, width) {
  if (ctx.measureText(text).width <= width) return text;
  let cut = text;
  while (cut.length > 1 && ctx.measureText(`${cut}…`).width > width) cut = cut.slice(0, -1);
  return `${cut}…`;
}

/** Machines' tiles and frames, one path per look: a handful of fills and strokes for 5,000. */
function paintMachines(ctx, model, marks) {
  const looks = new Map(Object.keys(LOOK).map((look) => [look, { fill: new Path2D(), frame: new Path2D() }]));
  const closest = new Path2D();
  for (const placed of model.machines) {
    const look = machineLook(placed.row);
    const paths = looks.get(look);
    const inset = LOOK[look].width / 2;
    (marks.get(placed.row.name) === "closest" ? closest : paths.fill).rect(placed.x, placed.y, placed.w, placed.h);
    paths.frame.rect(placed.x + inset, placed.y + inset, placed.w - 2 * inset, placed.h - 2 * inset);
  }
  for (const [look, paths] of looks) {
    ctx.fillStyle = LOOK[look].fill;
    ctx.fill(paths.fill);
  }
  ctx.fillStyle = "#fde68a";
  ctx.fill(closest);
  for (const [look, paths] of looks) {
    ctx.strokeStyle = LOOK[look].frame;
    ctx.lineWidth = LOOK[look].width;
    ctx.stroke(paths.frame);
  }
  if (!model.tile.names) return;
  ctx.font = "10px system-ui, sans-serif";
  ctx.textBaseline = "top";
  for (const placed of model.machines) {
    ctx.fillStyle = machineLook(placed.row) === "down" ? "#ffffff" : INK.group;
    ctx.fillText(clip(ctx, placed.row.name, placed.w - 5), placed.x + 3, placed.y + 2);
  }
}

/** All cells of one colour in one path: 40,000 GPUs are a handful of fills. */
function paintCells(ctx, model) {
  const paths = new Map();
  const size = model.cell;
  const down = model.machines.map((placed) => machineLook(placed.row) === "down");
  for (const cell of model.cells) {
    const colour = down[cell.machine] ? DOWN_CELL : COLOURS[cell.status];
    let path = paths.get(colour);
    if (!path) paths.set(colour, (path = new Path2D()));
    path.rect(cell.x, cell.y, size, size);
  }
  for (const [colour, path] of paths) {
    ctx.fillStyle = colour;
    ctx.fill(path);
  }
}

function paintMarks(ctx, model, marks) {
  if (!marks.size) return;
  ctx.fillStyle = "rgba(245, 247, 250, 0.78)";
  for (const placed of model.machines) {
    if (marks.get(placed.row.name) === "never") ctx.fillRect(placed.x, placed.y, placed.w, placed.h);
  }
  ctx.strokeStyle = CLOSEST;
  ctx.lineWidth = 3;
  for (const placed of model.machines) {
    if (marks.get(placed.row.name) === "closest") ctx.strokeRect(placed.x - 2.5, placed.y - 2.5, placed.w + 5, placed.h + 5);
  }
}

function hover(element, canvas, tip, state) {
  let pending = null;
  let hovered = null;
  const signals = new Map(); // machine, GPU index and health → the signals' messages
  const keyOf = (found) => `${found.machine.name}\u0000${found.gpu.index}\u0000${found.gpu.health}`;
  const signalsOf = (found) => (found && found.gpu ? signals.get(keyOf(found)) || [] : []);
  const at = (event) => {
    const box = canvas.getBoundingClientRect();
    return state.model ? hitTest(state.model, event.clientX - box.left, event.clientY - box.top) : null;
  };
  canvas.addEventListener("mousemove", (event) => {
    pending = event;
    requestAnimationFrame(() => {
      if (!pending) return;
      const found = at(pending);
      const moved = pending;
      showTip(element, tip, found, moved, state.marks, signalsOf(found));
      canvas.style.cursor = found ? "pointer" : "default";
      pending = null;
      hovered = found;
      // An at-risk or faulted GPU: its machine's signals say why (the map's answer has only
      // the health), read once per machine and GPU health while the page is shown.
      if (found && found.gpu && found.gpu.health !== "healthy" && !signals.has(keyOf(found))) {
        signals.set(keyOf(found), null);
        get(`/machines/${enc(found.machine.name)}`)
          .then((machine) => {
            for (const gpu of machine.report?.gpus || []) {
              const key = `${machine.name}\u0000${gpu.index}\u0000${gpu.health?.state}`;
              signals.set(key, (gpu.health?.signals || []).map((s) => s.message));
            }
            if (hovered && keyOf(hovered) === keyOf(found) && !tip.hidden) showTip(element, tip, found, moved, state.marks, signalsOf(found));
          })
          .catch(() => signals.delete(keyOf(found)));
      }
    });
  });
  canvas.addEventListener("mouseleave", () => {
    pending = null;
    tip.hidden = true;
  });
  canvas.addEventListener("click", (event) => {
    const found = at(event);
    if (found) window.location.hash = `#/machines/${encodeURIComponent(found.machine.name)}`;
  });
}

function showTip(element, tip, found, event, marks, signals) {
  if (!found) {
    tip.hidden = true;
    return;
  }
  tip.replaceChildren(...tipLines(found, marks, signals).map((line, i) => h(i ? "div" : "strong", {}, line)));
  tip.hidden = false;
  const box = element.getBoundingClientRect();
  const x = event.clientX - box.left + 14;
  const room = element.clientWidth - tip.offsetWidth - 4;
  tip.style.left = `${Math.max(0, Math.min(x, room))}px`;
  tip.style.top = `${event.clientY - box.top + 16}px`;
}

/** What hovering says: the machine (and its rack, which the map may show shortened), its state,
 * then the GPU, its model, why it is at risk or faulted (`signals`: the messages, once read)
 * and who holds it. */
export function tipLines({ machine, gpu }, marks = new Map(), signals = []) {
  const lines = [machine.rack ? `${machine.name} · ${machine.rack}` : machine.name, stateText(machine) + (machine.cordonReason ? `: ${machine.cordonReason}` : "")];
  if (marks.get(machine.name) === "closest") lines.push("Closest: falls short only on room");
  if (marks.get(machine.name) === "never") lines.push("Can never take this run as asked");
  if (gpu) {
    lines.push(`GPU ${gpu.index}: ${gpu.model}`);
    const why = signals.length ? `: ${signals.join("; ")}` : "";
    const health = gpu.health === "healthy" ? "" : `${STATUS_WORDS[gpu.health]}${why}; `;
    lines.push(health + (gpu.run ? `held by ${holderText(gpu.run)}` : "free"));
  } else {
    const idle = machine.idle > machine.free ? ` (${machine.idle} idle; the machine takes no runs now)` : "";
    lines.push(machine.gpus.length ? `${machine.free} of ${count(machine.gpus.length, "GPU")} free${idle}` : "No GPUs");
  }
  return lines;
}

function summaryText(rows, label) {
  const { gpus, idle, machines } = totals(rows);
  const apart = idleText(idle);
  return `${label}: ${count(machines.machines, "machine")}, ${count(gpus.free, "GPU")} free, ${gpus.in_use} in use, ${gpus.at_risk} at risk, ${gpus.faulted} faulted${apart ? `; idle but no run can use them now: ${apart}` : ""}`;
}

/** `8 on cordoned machines, 4 on machines under pressure`: idle GPUs no run can use now, by
 * why; empty when there are none. */
export function idleText(idle) {
  const words = { cordoned: "on cordoned machines", pressure: "on machines under pressure", down: "on Down machines" };
  return Object.keys(words)
    .filter((why) => idle[why])
    .map((why) => `${idle[why].toLocaleString("en-US")} ${words[why]}`)
    .join(", ");
}

/** The legend, with how many GPUs and machines are in each state (colours in console.css). Free
 * counts only GPUs a run could use now; idle GPUs on machines that take no runs follow apart. */
export function legend(rows) {
  const { gpus, idle, machines } = totals(rows);
  const swatch = (kind, text) => h("span", { class: "swatch", "data-kind": kind }, h("i", { class: `key-${kind}` }), text);
  const apart = idleText(idle);
  return h(
    "p",
    { class: "legend", id: "map-legend" },
    Object.keys(COLOURS).map((status) => swatch(status, `${STATUS_WORDS[status]} ${gpus[status].toLocaleString("en-US")}`)),
    apart ? h("span", { class: "idle-apart muted", "data-kind": "idle" }, `Idle, no run can use them now: ${apart}`) : null,
    swatch("down", `Down ${machines.down}`),
    swatch("cordoned", `Cordoned ${machines.cordoned}`),
    swatch("pressure", `Under pressure ${machines.pressure}`),
  );
}
