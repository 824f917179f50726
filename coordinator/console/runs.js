// Runs: every run of the workspace with its state, shape and headline reason.

import { enc, get } from "./api.js";
import { badge, errorBox, h, mount, table, when } from "./dom.js";
import { gpuAsk } from "./asked.js";

export async function runsPage(ctx) {
  const list = h("div", { id: "runs" }, h("p", { class: "muted" }, "Loading runs…"));
  mount(
    ctx.main,
    h("div", { class: "title-row" }, h("h1", {}, "Runs"), h("a", { class: "button", href: "#/new" }, "New run")),
    list,
  );
  await ctx.every(3000, async () => {
    let runs;
    try {
      ({ runs } = await get("/runs"));
    } catch (err) {
      if (ctx.alive()) mount(list, errorBox(err));
      return true;
    }
    if (!ctx.alive()) return false;
    mount(list, runs.length ? runsTable(runs) : h("p", {}, "No runs yet. ", h("a", { href: "#/new" }, "Start one.")));
    // Waiting runs change as the cluster does; ended and running lists need no polling.
    return runs.some((run) => run.state === "Pending");
  });
}

function runsTable(runs) {
  const rows = [...runs].reverse().map((run) =>
    h(
      "tr",
      { "data-run": run.name },
      h("td", { "data-label": "Run" }, h("a", { href: `#/runs/${enc(run.name)}` }, run.name)),
      h("td", { "data-label": "State" }, badge(run.state)),
      h("td", { "data-label": "Shape" }, shapeText(run)),
      h("td", { class: "reason", "data-label": "Reason" }, run.reason || ""),
      h("td", { "data-label": "Submitted" }, when(run.submitted_at)),
    ),
  );
  return table(["Run", "State", "Shape", "Reason", "Submitted"], rows, { class: "runs stacks" });
}

export function shapeText(run) {
  if (run.shape) return run.shape.why;
  const gpus = gpuAsk(run.requested_resources);
  return gpus ? `${gpus} asked; not placed yet` : "not placed yet";
}
