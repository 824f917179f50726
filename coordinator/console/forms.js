// Form fields and the API's 4xx `fields` list: each problem beside the field it concerns.

import { h } from "./dom.js";

/** A labelled field; `field` names the API field paths it edits, separated by spaces. */
export function fieldBox(label, input, { field = "", hint = "" } = {}) {
  const id = input.id || `f-${field.split(" ")[0].replace(/[^a-z0-9]+/gi, "-")}`;
  input.id = id;
  return h(
    "div",
    { class: "field", "data-field": field },
    h("label", { for: id }, label),
    input,
    hint ? h("small", { class: "hint" }, hint) : null,
    h("p", { class: "field-error", role: "alert", hidden: true }),
  );
}

export function clearErrors(form) {
  for (const box of form.querySelectorAll(".field.invalid")) box.classList.remove("invalid");
  for (const p of form.querySelectorAll(".field-error, .form-error")) {
    p.textContent = "";
    p.hidden = true;
  }
}

/** Put each of the error's fields beside its input; what matches no input goes on top. */
export function showErrors(form, error) {
  clearErrors(form);
  const general = [];
  for (const { field = "", problem = "", said = problem } of error.fields || []) {
    const box = findBox(form, field, said);
    if (box) {
      const p = box.querySelector(".field-error");
      p.textContent = p.textContent ? `${p.textContent} ${problem}` : problem;
      p.hidden = false;
      box.classList.add("invalid");
      if (!box.closest("details")?.open) box.closest("details")?.setAttribute("open", "");
    } else {
      general.push(problem);
    }
  }
  // Problems that belong to no field are what to act on; the error's own sentence is shown
  // only when the answer named no field at all.
  const top = form.querySelector(".form-error");
  const said = general.length ? general.join(" ") : (error.fields || []).length ? "" : error.message;
  if (top && said) {
    top.textContent = said;
    top.hidden = false;
  }
  form.querySelector(".field.invalid input, .field.invalid select")?.focus();
}

function boxFor(form, path) {
  return path ? form.querySelector(`.field[data-field~="${CSS.escape(path)}"]`) : null;
}

// A problem found on a whole object (pydantic's model checks) names the field first:
// `min_per_machine (9) is more than count (8)` at `requested_resources.gpu_requests`.
function findBox(form, field, problem) {
  const path = field.replace(/\[\d+\]/g, "");
  const exact = boxFor(form, path);
  if (exact) return exact;
  for (const word of problem.match(/[a-z_]+(\.[a-z_]+)*/g) || []) {
    const inside = boxFor(form, path ? `${path}.${word}` : word);
    if (inside) return inside;
    const top = boxFor(form, `requested_resources.${word}`);
    if (top) return top;
  }
  return null;
}
