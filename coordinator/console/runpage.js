// A run: the readout, why it waits, asked and got, its tasks, their logs, and cancel.

import { enc, get, post } from "./api.js";
import { askedRules } from "./asked.js";
import { badge, errorBox, gib, h, mount, table, when } from "./dom.js";
import { shapeText } from "./runs.js";
import { fixFor, reading, sharedReason } from "./why.js";

const REFRESH_MS = 2000;
const LIVE = ["Pending", "Running"];

export async function runPage(ctx, name) {
  const body = h("div", { id: "run" }, h("p", { class: "muted" }, "Loading…"));
  mount(ctx.main, h("p", { class: "crumbs" }, h("a", { href: "#/runs" }, "Runs"), " / ", name), body);
  await ctx.every(REFRESH_MS, async () => {
    let run;
    let logs;
    try {
      run = await get(`/runs/${enc(name)}`);
      logs = await taskLogs(run);
    } catch (err) {
      if (ctx.alive()) mount(body, errorBox(err));
      return err.status !== 404;
    }
    if (!ctx.alive()) return false;
    const openLogs = new Set([...body.querySelectorAll("details.log[open]")].map((d) => d.dataset.task));
    mount(body, ...sections(run, logs, openLogs));
    return LIVE.includes(run.state);
  });
}

async function taskLogs(run) {
  const started = run.tasks.filter((task) => task.state !== "Pending");
  const logs = await Promise.all(started.map((task) => get(`/tasks/${enc(task.name)}/logs`).catch(() => null)));
  return new Map(started.map((task, i) => [task.name, logs[i]]));
}

function sections(run, logs, openLogs) {
  return [
    readout(run),
    run.state === "Pending" ? whyPanel(run) : null,
    askedAndGot(run),
    tasksPanel(run),
    logsPanel(run, logs, openLogs),
  ];
}

function readout(run) {
  const ended = ["Succeeded", "Failed", "Cancelled"].includes(run.state);
  const cancel = h("button", { type: "button", id: "cancel", class: "danger", hidden: ended }, "Cancel run");
  const message = h("p", { class: "form-error", role: "alert", hidden: true });
  cancel.addEventListener("click", async () => {
    if (!window.confirm(`Cancel run ${run.name}?`)) return;
    cancel.disabled = true;
    try {
      await post(`/runs/${enc(run.name)}/cancel`);
      window.dispatchEvent(new HashChangeEvent("hashchange"));
    } catch (err) {
      message.textContent = err.message;
      message.hidden = false;
      cancel.disabled = false;
    }
  });
  const rows = [
    ["State", badge(run.state)],
    ["Reason", h("span", { id: "headline" }, run.reason || "—")],
    ["Shape", shapeText(run)],
    ["Image", run.image || "—"],
    ["Command", h("code", {}, run.command.join(" "))],
    ["Priority", run.priority],
    ["Submitted", when(run.submitted_at)],
  ];
  return h(
    "section",
    { class: "card readout" },
    h("div", { class: "title-row" }, h("h1", {}, run.name), cancel),
    message,
    h("dl", {}, rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
    LIVE.includes(run.state) ? h("p", { class: "muted small" }, "This page updates by itself while the run waits or runs.") : null,
  );
}

function whyPanel(run) {
  const waiting = run.tasks.find((task) => task.state === "Pending" && task.placement) ||
    run.tasks.find((task) => task.state === "Pending");
  const placement = waiting ? waiting.placement : null;
  const parts = [h("h2", {}, "Why it is not running yet")];
  parts.push(h("p", { class: "headline" }, run.reason || "Waiting for the scheduler"));
  if (placement) {
    parts.push(
      h(
        "p",
        { id: "counts" },
        `${placement.checked_nodes} machines considered, ${placement.ready_nodes} up` +
          (placement.down_nodes ? `, ${placement.down_nodes} down` : "") + ". ",
        placement.closest ? ["Closest: ", h("strong", { id: "closest" }, placement.closest), "."] : "No machine is closest.",
      ),
    );
  }
  parts.push(h("p", { class: "advice", id: "advice" }, reading(run.reason, placement)));
  const headlineFix = placement && !placement.closest && !sharedReason(placement) ? fixFor(run.reason) : "";
  if (headlineFix) parts.push(h("p", { class: "advice" }, headlineFix));
  if (placement) {
    const rows = placement.nodes.map((node) =>
      h(
        "tr",
        { "data-machine": node.name, class: node.name === placement.closest ? "closest" : "" },
        h("td", {}, node.name, node.name === placement.closest ? h("span", { class: "tag" }, "closest") : null),
        h("td", {}, badge(node.state)),
        h("td", { class: "reason" }, node.reasons.join("; ")),
      ),
    );
    parts.push(table(["Machine", "State", "What keeps it out"], rows, { class: "why", id: "why-machines" }));
    parts.push(h("p", { class: "muted small" }, `Evaluated ${when(placement.evaluated_at)}.`));
  }
  return h("section", { class: "card", id: "why" }, parts);
}

function askedAndGot(run) {
  const rules = askedRules(run.requested_resources);
  const asked = rules.length
    ? h("dl", {}, rules.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]))
    : h("p", {}, "No rules: the tightest network there is room on.");
  let got;
  if (run.landing) {
    got = h(
      "dl",
      {},
      h("dt", {}, "Placed on"),
      h("dd", { id: "landing" }, run.landing.where),
      h("dt", {}, "Shape"),
      h("dd", {}, run.shape ? run.shape.why : "—"),
      h("dt", {}, "Machines"),
      h("dd", {}, run.landing.machines.join(", ") || "—"),
    );
  } else {
    got = h("p", { id: "landing" }, run.state === "Pending" ? "Not placed yet." : "Never placed.");
  }
  return h(
    "section",
    { class: "card", id: "asked-and-got" },
    h("h2", {}, "Asked and got"),
    h("div", { class: "columns" }, h("div", {}, h("h3", {}, "Asked"), asked), h("div", {}, h("h3", {}, "Got"), got)),
  );
}

function tasksPanel(run) {
  const rows = run.tasks.map((task) =>
    h(
      "tr",
      { "data-task": task.name },
      h("td", {}, task.name),
      h("td", {}, badge(task.state)),
      h("td", {}, task.machine ? h("a", { href: `#/machines` }, task.machine) : "—"),
      h("td", { class: "gpus" }, task.assigned_gpu_ids.join(", ") || "—"),
      h("td", {}, task.cpu_cores ? `${task.cpu_cores} cores, ${gib(task.memory_bytes)}` : "—"),
      h("td", { class: "reason" }, taskNote(task)),
    ),
  );
  return h(
    "section",
    { class: "card", id: "tasks" },
    h("h2", {}, "Tasks"),
    table(["Task", "State", "Machine", "GPUs", "CPU and memory", "Note"], rows),
  );
}

function taskNote(task) {
  if (task.exit_code !== null && task.exit_code !== undefined) return `exit code ${task.exit_code}${task.message ? `: ${task.message}` : ""}`;
  return task.message || task.reason || "";
}

function logsPanel(run, logs, openLogs) {
  const parts = [h("h2", {}, "Logs")];
  if (!logs.size) parts.push(h("p", { class: "muted" }, "No logs yet: no task has started."));
  let first = true;
  for (const [task, log] of logs) {
    const open = openLogs.size ? openLogs.has(task) : first;
    first = false;
    const text = log ? log.data : "The log could not be read.";
    const note = log && log.offset ? `(older output dropped: starts at byte ${log.offset})\n` : "";
    parts.push(
      h(
        "details",
        { class: "log", "data-task": task, open },
        h("summary", {}, task),
        h("pre", {}, note + (text || "(empty)")),
      ),
    );
  }
  return h("section", { class: "card", id: "logs" }, parts);
}
