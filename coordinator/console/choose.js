// What New run offers from the workspace's machines: GPU models, sites, and Choose machines….

import { h } from "./dom.js";

export const SITE = "topology.astraeus.io/site";

/** The GPU models the machines report, each with how many GPUs and how many are free, summed
 * from the list's `gpu_models`. */
export function gpuModels(machines) {
  const found = new Map();
  for (const machine of machines) {
    for (const { model, total, free } of machine.gpu_models) {
      const seen = found.get(model) || { model, total: 0, free: 0 };
      seen.total += total;
      seen.free += free;
      found.set(model, seen);
    }
  }
  return [...found.values()].sort((a, b) => a.model.localeCompare(b.model));
}

/** The sites to offer, by name: each machine's site label, else the network it connects from
 * (`labelled` false), with the machines in it. */
export function sites(machines) {
  const found = new Map();
  for (const machine of machines) {
    const label = machine.labels[SITE];
    const site = label || machine.site;
    if (!site) continue;
    const seen = found.get(site) || { site, labelled: false, machines: [] };
    seen.labelled ||= Boolean(label);
    seen.machines.push(machine.name);
    found.set(site, seen);
  }
  return [...found.values()].sort((a, b) => a.site.localeCompare(b.site));
}

/** What choosing `site` (one of `sites()`) and ticking `chosen` machines selects. A labelled site
 * is its label in `match_labels`; a site known only from the network is no label, so it is sent
 * as its machines' names (those ticked in it, if any are). */
export function siteSelection(site, offered, chosen) {
  const found = offered.find((s) => s.site === site);
  if (!found) return { names: chosen, match_labels: undefined };
  if (found.labelled) return { names: chosen, match_labels: { [SITE]: site } };
  if (!chosen.length) return { names: found.machines, match_labels: undefined };
  const inSite = chosen.filter((name) => found.machines.includes(name));
  return { names: inSite.length ? inSite : chosen, match_labels: undefined };
}

function siteOf(machine) {
  return machine.site || machine.labels[SITE] || "";
}

/** Choose machines…: tick boxes, grouped by site, each machine with its free GPUs. */
export function machineChooser(machines) {
  const groups = new Map();
  for (const machine of [...machines].sort((a, b) => a.name.localeCompare(b.name))) {
    const site = siteOf(machine);
    if (!groups.has(site)) groups.set(site, []);
    groups.get(site).push(machine);
  }
  const summary = h("span", { class: "chosen" }, "Any machine: the scheduler picks");
  const boxes = [];
  const fieldsets = [...groups.entries()]
    .sort(([a], [b]) => (a || "~").localeCompare(b || "~"))
    .map(([site, group]) =>
      h(
        "fieldset",
        { class: "site", "data-site": site },
        h("legend", {}, site ? `Site ${site}` : "No site"),
        group.map((machine) => {
          const box = h("input", { type: "checkbox", value: machine.name, name: "machine" });
          const text = h("span", { class: "muted" }, freeText(machine));
          boxes.push(box);
          return h("label", { class: "machine-choice" }, box, h("strong", {}, machine.name), " ", text);
        }),
      ),
    );
  const update = () => {
    const chosen = boxes.filter((b) => b.checked).map((b) => b.value);
    summary.textContent = chosen.length
      ? `${chosen.length} chosen: ${chosen.join(", ")}. The scheduler still decides how many it needs.`
      : "Any machine: the scheduler picks";
  };
  for (const box of boxes) box.addEventListener("change", update);
  const element = h(
    "details",
    { class: "chooser", id: "choose-machines" },
    h("summary", {}, "Choose machines…"),
    machines.length ? fieldsets : h("p", { class: "muted" }, "No machines to choose from."),
  );
  return {
    element,
    summary,
    chosen: () => boxes.filter((b) => b.checked).map((b) => b.value),
  };
}

function freeText(machine) {
  const kinds = machine.gpu_models.map((m) => m.model).join(", ");
  const what = kinds ? ` (${kinds})` : "";
  const state = machine.state === "Up" ? "" : ` — ${machine.state}`;
  const cordon = machine.cordoned ? " — cordoned" : "";
  if (!machine.gpus_total) return `no GPUs${state}${cordon}`;
  return `${machine.gpus_free} of ${machine.gpus_total} GPUs free${what}${state}${cordon}`;
}
