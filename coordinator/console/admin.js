// What an admin changes on a machine: cordon and uncordon with a reason, the labels admins set,
// reservations. Shown to admins only; the API's field errors go beside the fields.

import { ApiError, del, enc, get, post, put } from "./api.js";
import { h } from "./dom.js";
import { clearErrors, fieldBox, showErrors } from "./forms.js";
import { adminLabels, parseLabels, reservationText } from "./format.js";

/** The admin's controls for `machine` (a machine's detail); `reload` draws the page again. */
export function adminPanel(machine, reload) {
  const done = () => reload();
  return h(
    "section",
    { class: "card", id: "admin" },
    h("h2", {}, "Admin"),
    cordonForm(machine, done),
    labelsForm(machine, done),
    reservationsForm(machine, done),
  );
}

/** Run `act` for a form: its button disabled meanwhile, the API's errors shown beside fields. */
function submitting(form, act) {
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(form);
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      await act();
    } catch (err) {
      showErrors(form, err);
    } finally {
      button.disabled = false;
    }
  });
  return form;
}

function formError() {
  return h("p", { class: "form-error", role: "alert", hidden: true });
}

function cordonForm(machine, done) {
  const path = `/machines/${enc(machine.name)}`;
  if (machine.cordoned) {
    const form = h(
      "form",
      { id: "cordon-form", class: "admin-form", novalidate: true },
      h("h3", {}, "Cordon"),
      formError(),
      h("p", {}, `Cordoned: ${machine.cordon_reason || "no reason given"}. No new run is placed here; runs already here keep running.`),
      h("button", { type: "submit", id: "uncordon" }, "Uncordon"),
    );
    return submitting(form, async () => {
      await post(`${path}/uncordon`);
      await done();
    });
  }
  const reason = h("input", { id: "cordon-reason", autocomplete: "off", placeholder: "firmware update" });
  const form = h(
    "form",
    { id: "cordon-form", class: "admin-form", novalidate: true },
    h("h3", {}, "Cordon"),
    formError(),
    fieldBox("Reason", reason, { field: "reason", hint: "Runs waiting for this machine show it: machine is cordoned: <reason>." }),
    h("button", { type: "submit", id: "cordon", class: "danger" }, "Cordon"),
  );
  return submitting(form, async () => {
    await post(`${path}/cordon`, { reason: reason.value.trim() });
    await done();
  });
}

function labelsForm(machine, done) {
  const rows = h("div", { class: "label-rows" });
  const addRow = (key = "", value = "") => {
    const keyInput = h("input", { class: "label-key", value: key, autocomplete: "off", "aria-label": "Label key", placeholder: "topology.astraeus.io/rack" });
    const valueInput = h("input", { class: "label-value", value, autocomplete: "off", "aria-label": "Label value", placeholder: "r12" });
    const remove = h("button", { type: "button", class: "secondary" }, "Remove");
    const row = h("div", { class: "field label-row", "data-field": key ? `labels.${key}` : "labels" }, h("div", { class: "row" }, keyInput, valueInput, remove), h("p", { class: "field-error", role: "alert", hidden: true }));
    keyInput.addEventListener("input", () => row.setAttribute("data-field", keyInput.value ? `labels.${keyInput.value.trim()}` : "labels"));
    remove.addEventListener("click", () => row.remove());
    rows.append(row);
  };
  for (const [key, value] of Object.entries(adminLabels(machine.labels, machine.report?.labels || {}))) addRow(key, value);
  const add = h("button", { type: "button", class: "secondary", id: "add-label" }, "Add a label");
  add.addEventListener("click", () => addRow());
  const form = h(
    "form",
    { id: "labels-form", class: "admin-form", novalidate: true },
    h("h3", {}, "Labels admins set"),
    h("p", { class: "muted small" }, "They win over the labels the agent reports. Racks, fabrics, sites and pools are labels: topology.astraeus.io/rack, topology.astraeus.io/fabric, topology.astraeus.io/site, pool."),
    formError(),
    h("div", { class: "field", "data-field": "labels" }, rows, h("p", { class: "field-error", role: "alert", hidden: true })),
    h("div", { class: "actions" }, add, h("button", { type: "submit", id: "save-labels" }, "Save labels")),
  );
  return submitting(form, async () => {
    const labels = {};
    for (const row of rows.querySelectorAll(".label-row")) {
      const key = row.querySelector(".label-key").value.trim();
      if (key) labels[key] = row.querySelector(".label-value").value.trim();
    }
    await put(`/machines/${enc(machine.name)}/labels`, { labels });
    await done();
  });
}

function reservationsForm(machine, done) {
  const path = `/machines/${enc(machine.name)}/reservations`;
  const items = machine.reservations.map((r) => {
    const remove = h("button", { type: "button", class: "secondary", "data-remove": r.id }, "Remove");
    const message = h("span", { class: "form-error", role: "alert", hidden: true });
    remove.addEventListener("click", async () => {
      remove.disabled = true;
      try {
        await del(`${path}/${r.id}`);
        await done();
      } catch (err) {
        message.textContent = ` ${err.message}`;
        message.hidden = false;
        remove.disabled = false;
      }
    });
    return h("li", { "data-reservation": r.id }, reservationText(r), " ", remove, message);
  });
  const labels = h("input", { id: "reserve-labels", autocomplete: "off", placeholder: "pool=h100, team=vision" });
  const workspace = h("select", { id: "reserve-workspace" }, h("option", { value: "" }, "No workspace"));
  const starts = h("input", { id: "reserve-starts", type: "datetime-local" });
  const ends = h("input", { id: "reserve-ends", type: "datetime-local" });
  offerWorkspaces(workspace);
  const form = h(
    "form",
    { id: "reserve-form", class: "admin-form", novalidate: true },
    h("h3", {}, "Reservations"),
    items.length ? h("ul", { class: "reservation-list" }, items) : h("p", { class: "muted" }, "None."),
    formError(),
    fieldBox("For work with labels", labels, { field: "labels", hint: "key=value, separated by commas. Only runs selecting them are placed here, first." }),
    h("p", { class: "muted small" }, "Or for a workspace, from a start to an end:"),
    h(
      "div",
      { class: "row" },
      fieldBox("Workspace", workspace, { field: "workspace" }),
      fieldBox("Starts", starts, { field: "starts_at" }),
      fieldBox("Ends", ends, { field: "ends_at" }),
    ),
    h("button", { type: "submit", id: "reserve" }, "Reserve"),
  );
  return submitting(form, async () => {
    const parsed = parseLabels(labels.value);
    if (parsed.problem) throw new ApiError(400, { error: "invalid ReservationSpec", fields: [{ field: "labels", problem: parsed.problem }] });
    const body = { labels: parsed.labels };
    if (workspace.value) body.workspace = workspace.value;
    if (starts.value) body.starts_at = isoOf(starts.value);
    if (ends.value) body.ends_at = isoOf(ends.value);
    await post(path, body);
    await done();
  });
}

/** A `datetime-local` value (the browser's time zone) as an ISO time with its offset. */
function isoOf(local) {
  const date = new Date(local);
  return Number.isNaN(date.getTime()) ? local : date.toISOString();
}

async function offerWorkspaces(select) {
  try {
    const { workspaces } = await get("/workspaces");
    select.append(...workspaces.map((w) => h("option", { value: w.name }, w.name)));
  } catch {
    // The list is a convenience: without it, a reservation by labels still works.
  }
}
