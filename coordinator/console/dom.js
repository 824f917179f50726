// Building the page: elements from data, text always as text (never as HTML).

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "class") {
      el.className = value;
    } else if (value === true) {
      el.setAttribute(key, "");
    } else {
      el.setAttribute(key, String(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function mount(root, ...children) {
  root.replaceChildren();
  return append(root, children);
}

const GIB = 1024 ** 3;

export function gib(bytes) {
  if (!bytes) return "0 GiB";
  const value = bytes / GIB;
  return `${Number.isInteger(value) ? value : value.toFixed(1)} GiB`;
}

/** GPU memory in the unit `min_memory_gb` compares (GiB, written GB as the guide does: an
 * 80 GB H100 reports 79.6 GB), rounded down so that asking for what is shown always matches. */
export function gb(bytes) {
  return `${Math.floor((bytes / GIB) * 10) / 10} GB`;
}

export function when(iso) {
  if (!iso) return "—";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
}

export function badge(state) {
  return h("span", { class: `badge state-${String(state).toLowerCase()}` }, state);
}

export function table(headings, rows, attrs = {}) {
  return h(
    "table",
    attrs,
    h("thead", {}, h("tr", {}, headings.map((text) => h("th", { scope: "col" }, text)))),
    h("tbody", {}, rows),
  );
}

export function errorBox(error) {
  return h("p", { class: "error-box", role: "alert" }, error.message || String(error));
}

/** Marks `astraeus:<name>-drawn` now, and `astraeus:<name>-painted` once the frame holding it is
 * rendered (the task after the next animation frame): what benchmarks/console_bench.py reads. */
export function markDrawn(name) {
  performance.mark(`astraeus:${name}-drawn`);
  requestAnimationFrame(() => setTimeout(() => performance.mark(`astraeus:${name}-painted`), 0));
}
