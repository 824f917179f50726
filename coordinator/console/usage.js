// Usage: each workspace's GPU-hours this week as a bar against the fair share its weight
// entitles it to (fair share, `GET /api/v1/usage`). A member sees its own workspace and the
// cluster's total only: the API sends nothing else.

import { get } from "./api.js";
import { errorBox, h, mount, table } from "./dom.js";
import { count } from "./format.js";
import { hours, percent, standingText, usageRows } from "./usagemodel.js";

export async function usagePage(ctx) {
  const body = h("div", { id: "usage" }, h("p", { class: "muted" }, "Loading usage…"));
  mount(ctx.main, h("h1", {}, "Usage"), body);
  await ctx.every(10000, async () => {
    let view;
    try {
      view = await get("/usage");
    } catch (err) {
      if (ctx.alive()) mount(body, errorBox(err));
      return true;
    }
    if (!ctx.alive()) return false;
    mount(body, summary(view), chart(view), explainer(view));
    return true;
  });
}

function summary(view) {
  const c = view.cluster;
  return h(
    "p",
    { class: "usage-summary" },
    `${count(c.gpus_in_use, "GPU")} of ${count(c.gpus, "GPU")} in use now; `,
    `${hours(c.gpu_hours_day)} in the last day, ${hours(c.gpu_hours_week)} in the last week; `,
    `${count(c.runs_waiting, "run")} waiting.`,
  );
}

function chart(view) {
  const rows = usageRows(view);
  if (!rows.length) return h("p", {}, "No workspace has used the cluster yet.");
  const lines = rows.map((row) =>
    h(
      "tr",
      { "data-workspace": row.workspace },
      h("th", { scope: "row", "data-label": "Workspace" }, row.workspace),
      h("td", { class: "usage-bar-cell", "data-label": "This week" }, bar(row), h("span", { class: "usage-text" }, standingText(row))),
      h("td", { "data-label": "Last day" }, hours(row.gpuHoursDay)),
      h("td", { "data-label": "Last week" }, hours(row.gpuHoursWeek)),
      h("td", { "data-label": "In use now" }, `${count(row.gpusNow, "GPU")} (${percent(row.shareNow)})`),
      h("td", { "data-label": "Weight" }, String(row.weight)),
      h("td", { "data-label": "Turn" }, row.turn === null ? "—" : String(row.turn)),
      h("td", { "data-label": "Waiting" }, count(row.waiting, "run")),
    ),
  );
  return table(["Workspace", "This week", "Last day", "Last week", "In use now", "Weight", "Turn", "Waiting"], lines, { class: "usage stacks" });
}

/** The week's GPU-hours as a bar, with a mark at the fair share when there is one to compare. */
function bar(row) {
  const label = `${percent(row.shareWeek)} of this week's GPU-hours`;
  // Sizes go through the style object: the console's Content-Security-Policy refuses style
  // attributes.
  const fill = h("span", { class: "usage-fill" });
  fill.style.width = `${(row.shareWeek * 100).toFixed(1)}%`;
  let fair = null;
  if (row.fairShare !== null) {
    fair = h("span", { class: "usage-fair", title: `fair share ${percent(row.fairShare)}` });
    fair.style.left = `${(row.fairShare * 100).toFixed(1)}%`;
  }
  return h("span", { class: "usage-bar", role: "img", "aria-label": label }, fill, fair);
}

function explainer(view) {
  const days = Math.round((view.half_life_seconds / 86400) * 10) / 10;
  const policy = (name, text, settings) => h("li", {}, h("strong", {}, `${name}. `), text, " ", h("span", { class: "muted" }, settings));
  return h(
    "section",
    { id: "policies" },
    h("h2", {}, "How the queue shares the cluster"),
    h(
      "ul",
      {},
      policy(
        "Fair share",
        `Among runs of equal priority, the workspace that has used the least for its weight goes first (Turn 1); use counts half as much every ${days} day${days === 1 ? "" : "s"}.`,
        "Operators: fair_share_half_life_seconds; a workspace's weight with astra astraeus workspace set NAME --fair-share-weight W.",
      ),
      policy(
        "Holding for big runs",
        "The first run waiting only for room holds the machines it will use, so small runs behind it cannot starve it; one such run per set of machines, so a pool's waiting run never holds another pool.",
        "Always on.",
      ),
      policy(
        "Backfill",
        "A run with a time limit may use held machines when it will end before they free up; the waiting run says when it expects to start. Runs without a time limit never backfill: give honest time limits and short runs start sooner.",
        "Users: time_limit_seconds (--time-limit).",
      ),
      policy(
        "Guarantees",
        "A workspace's guaranteed GPUs are lent to others while it does not use them, and taken back when it needs them: runs beyond their own workspace's guarantee are stopped and queued again.",
        "Operators: astra astraeus workspace set NAME --guaranteed-gpus N.",
      ),
      policy(
        "Preemption",
        "When turned on, a waiting run may stop the cheapest set of lower-priority runs; they get a grace period to save their work and go back to the queue in their old place.",
        'Operators: preemption = "priority" (off by default), preemption_grace_seconds, preemption_max_per_minute; users: preemptible: false.',
      ),
      policy(
        "Requeue",
        "A run that asks for retries starts again from the start, elsewhere, when its GPU fails or its machine is lost; its workers can read ASTRAEUS_RESTART_COUNT to resume from a checkpoint.",
        "Users: retries, retry_on_failure (--retries).",
      ),
    ),
  );
}
