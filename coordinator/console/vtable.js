// The machines table: sortable headings, a filter under each, a search by name, and only the rows
// in view in the page, so 5,000 machines scroll, sort and filter as fast as 50.

import { h } from "./dom.js";
import { COLUMNS, cellTexts, filterRows, sortRows } from "./tablemodel.js";

export const ROW_HEIGHT = 33; // px; console.css gives `tr.m-row` this height
const OVERSCAN = 6;

/** The table of `rows` (from `machineRows`); `element.update(rows)` redraws with new data and the
 * same sort, filters and scroll. */
export function machinesTable(rows) {
  const view = { all: [], sorted: [], shown: [], search: "", filters: {}, sort: { key: "name", descending: false } };
  const search = h("input", { id: "machine-search", type: "search", placeholder: "Search by name", autocomplete: "off", "aria-label": "Search machines by name" });
  const shownCount = h("span", { id: "machines-count", class: "muted", "aria-live": "polite" });
  const body = h("tbody", {});
  const headings = COLUMNS.map((column) => heading(column, view, () => resort()));
  const filters = COLUMNS.map((column) =>
    h("th", {}, h("input", { type: "search", class: "col-filter", "data-filter": column.key, "aria-label": `Filter ${column.heading}`, placeholder: "filter", autocomplete: "off" })),
  );
  const table = h("table", { id: "machines-table", class: "machines" }, colgroup(), h("thead", {}, h("tr", { class: "sort-row" }, headings), h("tr", { class: "filter-row" }, filters)), body);
  const scroller = h("div", { class: "table-scroll", id: "machines-scroll" }, table);
  const element = h("div", { class: "machines-view" }, h("div", { class: "table-tools" }, search, shownCount), scroller);

  const draw = () => drawWindow(body, scroller, view.shown);
  const refilter = () => {
    view.shown = filterRows(view.sorted, view.search, view.filters);
    shownCount.textContent = view.shown.length === view.all.length ? `${view.all.length.toLocaleString("en-US")} machines` : `${view.shown.length.toLocaleString("en-US")} of ${view.all.length.toLocaleString("en-US")} machines`;
    scroller.scrollTop = Math.min(scroller.scrollTop, view.shown.length * ROW_HEIGHT);
    draw();
  };
  const resort = () => {
    view.sorted = sortRows(view.all, view.sort);
    for (const [i, th] of headings.entries()) th.setAttribute("aria-sort", COLUMNS[i].key !== view.sort.key ? "none" : view.sort.descending ? "descending" : "ascending");
    refilter();
  };
  search.addEventListener("input", () => {
    view.search = search.value;
    refilter();
  });
  for (const input of table.querySelectorAll(".col-filter")) {
    input.addEventListener("input", () => {
      view.filters[input.dataset.filter] = input.value;
      refilter();
    });
  }
  let queued = false;
  scroller.addEventListener("scroll", () => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => {
      queued = false;
      draw();
    });
  });
  element.update = (newRows) => {
    view.all = cellTexts(newRows);
    fitColumns(table, view.all);
    resort();
  };
  element.view = view;
  element.update(rows);
  return element;
}

function heading(column, view, resort) {
  const button = h("button", { type: "button", class: "sort", "data-sort": column.key }, column.heading);
  button.addEventListener("click", () => {
    view.sort = { key: column.key, descending: view.sort.key === column.key && !view.sort.descending };
    resort();
  });
  return h("th", { scope: "col", "aria-sort": "none" }, button);
}

function colgroup() {
  return h(
    "colgroup",
    {},
    COLUMNS.map((column) => {
      const col = h("col", { class: `col-${column.key}` });
      col.style.width = `${START_WIDTHS[column.key]}rem`;
      return col;
    }),
  );
}

/** Widths (rem) before the texts are measured (the table is not yet in the page). */
const START_WIDTHS = { name: 8.5, state: 5, site: 6, fabric: 6, ethernet: 5.5, rack: 5.5, nvlink: 6.5, gpus: 17, health: 10, conditions: 7.5, cordon: 12 };
/** The most a column takes (px): a longer cordon reason or list of conditions is cut with "…",
 * whole on hover (the cell's title) and in the machine's page. */
const MOST = { cordon: 420, conditions: 320 };
const PAD = 22; // a cell's padding (.6rem each side) and a pixel or two to spare
const LONGEST = 40; // of each column's texts, this many of the longest are measured

/** Each column as wide as its widest text (and its heading with the sort arrow), measured with
 * the fonts the page uses: the table is fixed-layout (every row the same widths, however many
 * are drawn), so it must be told what its texts need. Texts are measured only for the longest
 * few per column: 5,000 rows cost a few milliseconds. Needs the table in the page. */
export function fitColumns(table, rows) {
  if (!table.isConnected) return;
  const style = getComputedStyle(table);
  const px = parseFloat(style.fontSize);
  const font = (weight, scale = 1) => measurer(`${weight} ${px * scale}px ${style.fontFamily}`);
  // Cells in the table's font (a cordon reason in bold); headings (.85rem) and state badges
  // (.8rem) in theirs.
  const cell = font(400);
  const bold = font(600);
  const head = font(600, 0.85);
  const badge = font(600, 0.8);
  const cols = table.querySelectorAll("col");
  let total = 0;
  COLUMNS.forEach((column, i) => {
    const measure = column.key === "state" ? (text) => badge(text) + 14 : column.key === "cordon" ? bold : cell;
    let width = head(`${column.heading} ▼`);
    for (const text of longest(rows, i)) width = Math.max(width, measure(text));
    width = Math.ceil(Math.min(width + PAD, MOST[column.key] || Infinity));
    cols[i].style.width = `${width}px`;
    total += width;
  });
  table.style.minWidth = `${total}px`;
}

/** A function measuring a text's width (px) in `font` (a canvas font: weight, px, family). */
function measurer(font) {
  const context = document.createElement("canvas").getContext("2d");
  context.font = font;
  const seen = new Map();
  return (text) => {
    if (!seen.has(text)) seen.set(text, context.measureText(text).width);
    return seen.get(text);
  };
}

/** Column `at`'s distinct texts, the LONGEST longest by characters. */
function longest(rows, at) {
  const texts = new Set();
  for (const row of rows) texts.add(row.cells[at]);
  return [...texts].sort((a, b) => b.length - a.length).slice(0, LONGEST);
}

/** Draw the rows in view (and a few around), with spacers standing in for the rest. */
function drawWindow(body, scroller, shown) {
  const visible = Math.ceil((scroller.clientHeight || 600) / ROW_HEIGHT);
  const first = Math.max(0, Math.floor(scroller.scrollTop / ROW_HEIGHT) - OVERSCAN);
  const last = Math.min(shown.length, first + visible + 2 * OVERSCAN);
  const rows = [];
  if (first > 0) rows.push(spacer(first * ROW_HEIGHT));
  for (let i = first; i < last; i += 1) rows.push(rowOf(shown[i]));
  if (last < shown.length) rows.push(spacer((shown.length - last) * ROW_HEIGHT));
  if (!shown.length) rows.push(h("tr", {}, h("td", { colspan: COLUMNS.length, class: "muted" }, "No machine matches.")));
  body.replaceChildren(...rows);
}

function spacer(height) {
  const row = h("tr", { class: "spacer", "aria-hidden": "true" }, h("td", { colspan: COLUMNS.length }));
  row.style.height = `${height}px`;
  return row;
}

function rowOf(row) {
  if (!row.element) {
    const cells = row.cells.map((text, i) => {
      const key = COLUMNS[i].key;
      if (key === "name") return h("td", { class: "name" }, h("a", { href: `#/machines/${encodeURIComponent(row.name)}` }, text));
      if (key === "state") return h("td", {}, h("span", { class: `badge state-${text.toLowerCase()}` }, text));
      return h("td", { class: `c-${key}`, title: text }, text);
    });
    row.element = h("tr", { class: `m-row${row.cordoned ? " is-cordoned" : ""}`, "data-machine": row.name }, cells);
  }
  return row.element;
}
