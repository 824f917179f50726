// New run: the form, the ask it builds, and the API's errors beside the fields.

import { machineList, post, session } from "./api.js";
import { gpuModels, machineChooser, siteSelection, sites } from "./choose.js";
import { errorBox, h, mount } from "./dom.js";
import { clearErrors, fieldBox, showErrors } from "./forms.js";
import { reasonGroups } from "./runpage.js";
import { closestText, wouldStartText } from "./why.js";

const GIB = 1024 ** 3;
const RR = "requested_resources";

export async function newRunPage(ctx) {
  let machines = [];
  let problem = null;
  try {
    machines = await machineList();
  } catch (err) {
    problem = err;
  }
  if (!ctx.alive()) return;
  const chooser = machineChooser(machines);
  const offered = sites(machines);
  const form = runForm(offered, chooser);
  const note = h("div", {}, problem ? errorBox(problem) : null);
  mount(ctx.main, h("h1", {}, "New run"), note, form);
  document.getElementById("name").focus();
  offerModels(form.querySelector("#model"), machines);
}

function offerModels(select, machines) {
  const chosen = select.value;
  const options = gpuModels(machines).map((m) => [m.model, `${m.model} (${m.free} of ${m.total} free)`]);
  select.replaceChildren(...[["", "Any model"], ...options].map(([value, text]) => h("option", { value }, text)));
  select.value = options.some(([value]) => value === chosen) ? chosen : "";
  select.dataset.loaded = "true";
}

const input = (id, attrs = {}) => h("input", { id, name: id, autocomplete: "off", ...attrs });
const number = (id, attrs = {}) => input(id, { type: "number", min: 0, ...attrs });
const select = (id, options) =>
  h("select", { id, name: id }, options.map(([value, text]) => h("option", { value }, text)));

function runForm(offered, chooser) {
  const selection = () => siteSelection(form.querySelector("#site").value, offered, chooser.chosen());
  const gpus = number("gpus", { step: 1, placeholder: "0" });
  const cpuLabel = h("span", {}, "CPU cores per GPU");
  const memLabel = h("span", {}, "Memory per GPU (GiB)");
  const perGpu = () => {
    const any = Number(gpus.value) > 0;
    cpuLabel.textContent = any ? "CPU cores per GPU" : "CPU cores";
    memLabel.textContent = any ? "Memory per GPU (GiB)" : "Memory (GiB)";
  };
  gpus.addEventListener("input", perGpu);
  const modelOptions = [["", "Any model"]];
  const form = h(
    "form",
    { class: "card", id: "new-run", novalidate: true },
    h("p", { class: "form-error", role: "alert", hidden: true }),
    fieldBox("Name", input("name", { required: true, placeholder: "finetune" }), { field: "name", hint: "Lower-case letters, digits and '-'." }),
    fieldBox("Image", input("image", { placeholder: "nvcr.io/nvidia/pytorch:24.08-py3" }), { field: "image" }),
    fieldBox("Command", input("command", { placeholder: "python finetune.py" }), { field: "command", hint: "Split into words like a shell does; quote a word with spaces." }),
    h(
      "div",
      { class: "row" },
      fieldBox("GPUs", gpus, { field: `${RR}.gpu_requests.count`, hint: "For the whole run, not per worker." }),
      fieldBox("GPU model", select("model", modelOptions), { field: `${RR}.gpu_requests.models`, hint: "The models this workspace's machines report." }),
    ),
    h(
      "details",
      { class: "more", id: "more-options" },
      h("summary", {}, "More options"),
      h(
        "div",
        { class: "row" },
        fieldBox("GPU memory at least (GB)", number("min-memory", { step: "any" }), { field: `${RR}.gpu_requests.min_memory_gb` }),
        fieldBox("GPUs per machine at least", number("min-per-machine", { step: 1, min: 1 }), { field: `${RR}.gpu_requests.min_per_machine` }),
      ),
      h(
        "div",
        { class: "row" },
        fieldBox(cpuLabel, number("cpu", { step: "any" }), { field: `${RR}.per_gpu.cpu_cores ${RR}.cpu_cores ${RR}.per_gpu` }),
        fieldBox(memLabel, number("memory", { step: "any" }), { field: `${RR}.per_gpu.memory_bytes ${RR}.memory_bytes` }),
      ),
      fieldBox("Priority", number("priority", { step: 1, min: undefined, placeholder: "0" }), { field: "priority" }),
    ),
    networkOptions(),
    fieldBox("Site", select("site", [["", "Automatic"], ...offered.map((s) => [s.site, s.labelled ? s.site : `${s.site} (from the network)`])]), {
      field: `${RR}.node_selection.match_labels`,
      hint: "A distributed run always stays in one site. A site known only from the machines' network is sent as their names.",
    }),
    h(
      "div",
      { class: "field", "data-field": `${RR}.node_selection.names ${RR}.node_selection` },
      h("span", { class: "label" }, "Machines to use"),
      chooser.summary,
      chooser.element,
      h("p", { class: "field-error", role: "alert", hidden: true }),
    ),
    h(
      "div",
      { class: "actions" },
      h("button", { type: "submit", id: "submit" }, "Start run"),
      h("button", { type: "button", id: "dry-run", class: "secondary" }, "Where would it go?"),
    ),
    h("div", { id: "dry-run-result", "aria-live": "polite" }),
  );
  form.querySelector("#dry-run").addEventListener("click", async () => {
    clearErrors(form);
    const result = form.querySelector("#dry-run-result");
    result.replaceChildren();
    try {
      const spec = runSpec(form, selection());
      result.append(dryRunView(await post("/runs?dry_run=true&explain=grouped", spec)));
    } catch (err) {
      showErrors(form, err);
    }
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(form);
    const submit = form.querySelector("#submit");
    submit.disabled = true;
    try {
      const run = await post("/runs", runSpec(form, selection()));
      window.location.hash = `#/runs/${encodeURIComponent(run.name)}`;
    } catch (err) {
      showErrors(form, err);
    } finally {
      submit.disabled = false;
    }
  });
  return form;
}

function networkOptions() {
  return h(
    "details",
    { class: "more", id: "network-and-placement" },
    h("summary", {}, "Network and placement"),
    h(
      "div",
      { class: "row" },
      fieldBox("Network between workers", select("interconnect", [["auto", "Automatic"], ["rdma", "RDMA (InfiniBand or RoCE)"], ["infiniband", "InfiniBand"], ["nvlink", "NVLink"]]), { field: `${RR}.network.interconnect` }),
      fieldBox("RDMA port speed at least (Gb/s)", number("min-gbps", { step: "any" }), { field: `${RR}.network.min_gbps` }),
    ),
    h(
      "div",
      { class: "row" },
      fieldBox("Never leave", select("keep-within", [["", "No rule"], ["node", "One machine"], ["nvlink_domain", "One NVLink domain"], ["fabric", "One fabric"], ["rack", "One rack"]]), { field: `${RR}.topology.keep_within` }),
      fieldBox("One worker per", select("spread", [["", "No rule"], ["node", "Machine"], ["rack", "Rack"], ["fabric", "Fabric"]]), { field: `${RR}.topology.spread` }),
    ),
    h(
      "div",
      { class: "field", "data-field": `${RR}.topology.min_nodes ${RR}.topology.max_nodes ${RR}.topology ${RR}.machines` },
      h("span", { class: "label" }, "Machines"),
      h("span", { class: "between" }, "Between ", number("min-nodes", { step: 1, min: 1, "aria-label": "Machines, at least" }), " and ", number("max-nodes", { step: 1, min: 1, "aria-label": "Machines, at most" })),
      h("p", { class: "field-error", role: "alert", hidden: true }),
    ),
    fieldBox("Wait for a better network (minutes)", number("patience", { step: "any" }), { field: `${RR}.topology.patience_seconds`, hint: "How long to wait for a tighter network before taking what is free." }),
    fieldBox("Only healthy GPUs", h("input", { type: "checkbox", id: "healthy-only" }), { field: `${RR}.gpu_requests.healthy_only`, hint: "Never take a GPU at risk; wait instead." }),
  );
}

/** Where the run would go now, or why it would wait: the API's dry run, nothing stored; its
 * explanation grouped by reason, with the closest machine. */
function dryRunView(dry) {
  if (dry.would_start) {
    const machines = [...new Set(dry.workers.map((w) => w.machine))];
    return h("p", { class: "advice" }, wouldStartText(dry.shape, dry.landing, machines));
  }
  const grouped = dry.placement_grouped;
  return h(
    "div",
    {},
    h("p", { class: "advice" }, `It would wait: ${dry.reason}`),
    grouped && grouped.closest ? h("p", { id: "dry-run-closest" }, `Closest: ${closestText(grouped)}.`) : null,
    grouped && grouped.reasons.length ? reasonGroups(grouped, "dry-run-reasons") : null,
  );
}

/** The run spec the form describes; empty fields are left out, so the API's defaults apply. */
export function runSpec(form, { names, match_labels: matchLabels }) {
  const text = (id) => form.querySelector(`#${id}`).value.trim();
  const value = (id) => {
    const raw = text(id);
    if (raw === "") return undefined;
    const n = Number(raw);
    return Number.isFinite(n) ? n : raw; // the API names the field and the problem
  };
  const gib = (id) => {
    const v = value(id);
    return typeof v === "number" ? Math.round(v * GIB) : v;
  };
  const prune = (obj) => {
    const kept = Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== undefined && v !== false && v !== ""));
    return Object.keys(kept).length ? kept : undefined;
  };
  const count = value("gpus");
  const model = text("model");
  const gpuRequests = prune({
    count,
    models: model ? [model] : undefined,
    min_memory_gb: value("min-memory"),
    min_per_machine: value("min-per-machine"),
    healthy_only: form.querySelector("#healthy-only").checked,
  });
  const perGpu = Number(count) > 0;
  const cpu = value("cpu");
  const memory = gib("memory");
  const patience = value("patience");
  const interconnect = text("interconnect");
  const resources = prune({
    gpu_requests: gpuRequests,
    per_gpu: perGpu ? prune({ cpu_cores: cpu, memory_bytes: memory }) : undefined,
    cpu_cores: perGpu ? undefined : cpu,
    memory_bytes: perGpu ? undefined : memory,
    network: prune({ interconnect: interconnect === "auto" ? undefined : interconnect, min_gbps: value("min-gbps") }),
    topology: prune({
      keep_within: text("keep-within") || undefined,
      spread: text("spread") || undefined,
      min_nodes: value("min-nodes"),
      max_nodes: value("max-nodes"),
      patience_seconds: typeof patience === "number" ? Math.round(patience * 60) : patience,
    }),
    node_selection: prune({
      // With names, "Any" lets the scheduler pick among them and decide how many it needs.
      mode: names.length ? "Any" : undefined,
      names: names.length ? names : undefined,
      match_labels: matchLabels,
    }),
  });
  return prune({
    name: text("name"),
    workspace: session().workspace || undefined,
    image: text("image") || undefined,
    command: splitWords(text("command")),
    priority: value("priority"),
    requested_resources: resources,
  });
}

/** `python train.py --tag "a b"` → ["python", "train.py", "--tag", "a b"]. */
export function splitWords(line) {
  const words = [];
  const pattern = /"((?:[^"\\]|\\.)*)"|'([^']*)'|(\S+)/g;
  for (const match of line.matchAll(pattern)) {
    words.push(match[1] !== undefined ? match[1].replace(/\\(.)/g, "$1") : match[2] ?? match[3]);
  }
  return words;
}
