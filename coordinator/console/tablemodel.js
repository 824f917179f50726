// The machines table's columns, and which rows it shows in what order: search by name, a filter
// per column, a sort. Pure functions, no page (tested with node --test).

import { freeText, healthText, speedText } from "./format.js";

const ORDER = new Intl.Collator("en", { numeric: true, sensitivity: "base" });

/** Each column: its key, heading, the text a cell shows (and its filter matches), and what it
 * sorts by when that is not the text. */
export const COLUMNS = [
  { key: "name", heading: "Machine", text: (r) => r.name },
  { key: "state", heading: "State", text: (r) => r.state },
  { key: "site", heading: "Site", text: (r) => r.site || "—" },
  { key: "fabric", heading: "Fabric", text: (r) => r.fabric },
  { key: "ethernet", heading: "Ethernet", text: (r) => speedText(r.ethernet) || "—", sort: (r) => r.ethernet ?? -1 },
  { key: "rack", heading: "Rack", text: (r) => r.rack || "—" },
  { key: "nvlink", heading: "NVLink domain", text: (r) => r.nvlink || "—" },
  { key: "gpus", heading: "GPUs free / total", text: (r) => freeText(r.models) || "—", sort: (r) => r.free * 10_000 + r.gpus.length },
  { key: "health", heading: "Health", text: (r) => healthText(r.health) || "—", sort: (r) => -(r.health.faulted * 10_000 + r.health.at_risk) },
  { key: "conditions", heading: "Conditions", text: (r) => r.conditions.join(", ") || "—" },
  { key: "cordon", heading: "Cordon", text: (r) => (r.cordoned ? `Cordoned${r.cordonReason ? `: ${r.cordonReason}` : ""}` : "—") },
];

const BY_KEY = new Map(COLUMNS.map((column) => [column.key, column]));

/** Each cell's text, and its lower case for filters, worked out once per row. */
export function cellTexts(rows) {
  for (const row of rows) {
    row.cells = COLUMNS.map((column) => column.text(row));
    row.folded = row.cells.map((text) => text.toLowerCase());
  }
  return rows;
}

/** The rows in the order of `sort` ({key, descending}); names break ties. */
export function sortRows(rows, sort) {
  const column = BY_KEY.get(sort.key) || COLUMNS[0];
  const at = COLUMNS.indexOf(column);
  const value = column.sort || ((row) => row.cells[at]);
  const keyed = rows.map((row) => [value(row), row]);
  const sign = sort.descending ? -1 : 1;
  keyed.sort(([a, ra], [b, rb]) => sign * compare(a, b) || ORDER.compare(ra.name, rb.name));
  return keyed.map(([, row]) => row);
}

function compare(a, b) {
  return typeof a === "number" && typeof b === "number" ? a - b : ORDER.compare(String(a), String(b));
}

/** The rows whose name holds `search` and whose every filtered column holds its filter, as
 * typed (case does not matter), in the order given. */
export function filterRows(rows, search, filters) {
  const active = COLUMNS.map((column, i) => [i, (filters[column.key] || "").trim().toLowerCase()]).filter(([, text]) => text);
  const name = search.trim().toLowerCase();
  if (name) active.push([0, name]);
  if (!active.length) return rows;
  return rows.filter((row) => active.every(([i, text]) => row.folded[i].includes(text)));
}
