// A run: the readout, why it waits, asked and got, its tasks, their logs, and cancel.

import { clusterMapData, enc, get, post } from "./api.js";
import { askedRules } from "./asked.js";
import { badge, errorBox, gib, h, mount, table, when } from "./dom.js";
import { count, silentText } from "./format.js";
import { clusterMap } from "./map.js";
import { machineRows } from "./mapmodel.js";
import { shapeText } from "./runs.js";
import { closestText, headlineFix, machinesText, reading, runMarks } from "./why.js";

const REFRESH_MS = 2000;
const LIVE = ["Pending", "Running"];

export async function runPage(ctx, name) {
  const body = h("div", { id: "run" }, h("p", { class: "muted" }, "Loading…"));
  mount(ctx.main, h("p", { class: "crumbs" }, h("a", { href: "#/runs" }, "Runs"), " / ", name), body);
  const where = whereItCouldGo();
  const machines = everyMachineReader();
  await ctx.every(REFRESH_MS, async () => {
    let run;
    try {
      // Grouped by reason: what the panel shows, and small however many machines there are.
      run = await get(`/runs/${enc(name)}?explain=grouped`);
    } catch (err) {
      if (ctx.alive()) mount(body, errorBox(err));
      return err.status !== 404;
    }
    // Logs are read for the tasks whose log is open: the first started task's, at first.
    const shown = [...body.querySelectorAll("#logs details.log")];
    const open = shown.length ? new Set(shown.filter((d) => d.open).map((d) => d.dataset.task)) : null;
    const [logs, full] = await Promise.all([taskLogs(run, open), machines.read(waiting(run))]);
    if (!ctx.alive()) return false;
    mount(body, ...sections(run, logs, where, full));
    return LIVE.includes(run.state);
  });
}

/** Each machine's reason for the task explained (the map and the every-machine table need
 * them): the task's full explanation (`GET /tasks/{task}`), read again only when the
 * scheduler has looked at the task again (a new `evaluated_at`), not at every refresh. */
function everyMachineReader() {
  let readFor = null;
  let found = null;
  const read = async (task) => {
    const grouped = task && task.placement_grouped;
    if (!grouped || !grouped.checked_nodes) return null;
    const key = `${task.name} ${grouped.evaluated_at}`;
    if (key !== readFor) {
      found = await get(`/tasks/${enc(task.name)}`).catch(() => null);
      readFor = found ? key : null;
    }
    return found && found.placement ? found : null;
  };
  return { read };
}

/** Each started task, with its log if it is to be shown open (else undefined). */
async function taskLogs(run, open) {
  const started = run.tasks.filter((task) => task.state !== "Pending").map((task) => task.name);
  const wanted = open === null ? started.slice(0, 1) : started.filter((task) => open.has(task));
  const logs = await Promise.all(wanted.map(readLog));
  const byTask = new Map(wanted.map((task, i) => [task, logs[i]]));
  return started.map((task) => [task, byTask.get(task)]);
}

function readLog(task) {
  return get(`/tasks/${enc(task)}/logs`).catch(() => null);
}

function sections(run, logs, where, full) {
  return [
    readout(run),
    waiting(run) ? whyPanel(run, waiting(run), where, full) : null,
    askedAndGot(run),
    tasksPanel(run),
    attemptsPanel(run),
    logsPanel(logs),
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
    ["Command", h("code", {}, run.command.map(quoted).join(" "))],
    ["Priority", run.priority],
    ["Submitted", when(run.submitted_at)],
    ...(retried(run) ? [["Attempt", attemptText(run)]] : []),
    ...(run.preempted_at ? [["Preempted", preemptedText(run)]] : []),
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

/** The task to explain: a waiting one of a live run, the first with an explanation. */
function waiting(run) {
  if (!LIVE.includes(run.state)) return null;
  const pending = run.tasks.filter((task) => task.state === "Pending");
  return pending.find((task) => task.placement_grouped) || pending[0] || null;
}

/** Why the task waits, from its explanation grouped by reason; `full` (its explanation machine
 * by machine, when read) marks the map and fills the every-machine table. */
function whyPanel(run, task, where, full) {
  const grouped = task.placement_grouped;
  const reason = run.reason || task.reason;
  const kind = run.reason_kind || task.reason_kind;
  const parts = [h("h2", {}, "Why it is not running yet")];
  if (run.state !== "Pending") parts.push(h("p", {}, `${task.name} waits; the run's other tasks are placed.`));
  parts.push(h("p", { class: "headline" }, reason || "Waiting for the scheduler"));
  if (grouped) parts.push(countsLine(grouped));
  const rejections = grouped ? grouped.reasons : null;
  parts.push(h("p", { class: "advice", id: "advice" }, reading({ reason, kind, placement: grouped, rejections })));
  const fix = grouped && !grouped.closest ? headlineFix(kind) : "";
  if (fix) parts.push(h("p", { class: "advice" }, fix));
  if (grouped && grouped.checked_nodes) {
    if (full) where.show(full.placement, full.rejections);
    parts.push(where.element, reasonGroups(grouped, "why-groups"));
    parts.push(grouped.checked_nodes > MANY ? everyMachine(grouped, full) : full ? reasonsTable(full.placement, "why-machines") : null);
  }
  if (grouped) parts.push(h("p", { class: "muted small" }, `Evaluated ${when(grouped.evaluated_at)}.`));
  return h("section", { class: "card", id: "why" }, parts);
}

/** How many machines were considered and are up, and the closest ones. */
function countsLine(grouped) {
  return h(
    "p",
    { id: "counts" },
    `${grouped.checked_nodes} machines considered, ${grouped.ready_nodes} up` +
      (grouped.down_nodes ? `, ${grouped.down_nodes} down` : "") + ". ",
    grouped.closest ? ["Closest: ", h("strong", { id: "closest" }, closestText(grouped)), "."] : "No machine is closest.",
  );
}

const MANY = 20; // more machines than this: their table starts folded, under the groups

/** Every machine's reason, folded: the table is built when it is opened (and kept open as the
 * page refreshes), so thousands of rows cost nothing until someone reads them. */
function everyMachine(grouped, full) {
  const open = document.getElementById("why-all")?.open || false;
  const summary = h("summary", {}, `Every machine (${grouped.checked_nodes.toLocaleString("en-US")})`);
  const details = h("details", { id: "why-all", open }, summary);
  const fill = () => {
    if (!details.open || details.querySelector("table, .muted")) return;
    details.append(full ? reasonsTable(full.placement, "why-machines") : h("p", { class: "muted" }, "Loading…"));
  };
  details.addEventListener("toggle", fill);
  fill();
  return details;
}

/** What keeps the machines out: each reason with how many machines give it and the first few
 * (the grouped explanation's `reasons`, most machines first). */
export function reasonGroups(grouped, id) {
  const items = grouped.reasons.map((group) =>
    h(
      "li",
      { class: group.room ? "room" : "", "data-code": group.code || "" },
      h("strong", {}, count(group.count, "machine")),
      `: ${group.reason}`,
      h("span", { class: "muted" }, ` (${machinesText(group)})`),
    ),
  );
  return h("div", { id }, h("h3", {}, "What keeps them out"), h("ul", {}, items));
}

/** The cluster map for a waiting run: the closest machine ringed, those that can never take it
 * greyed. One element for the page's life, redrawn when the scheduler looks at the run again. */
function whereItCouldGo() {
  const caption = h("p", { class: "muted small", id: "why-map-caption" });
  const holder = h("div", { class: "why-map-holder" });
  const element = h("div", { id: "why-map" }, h("h3", {}, "On the map"), caption, holder);
  let shownFor = null;
  let map = null;
  const show = async (placement, rejections) => {
    if (placement.evaluated_at === shownFor) return;
    shownFor = placement.evaluated_at;
    let rows;
    try {
      rows = machineRows(await clusterMapData());
    } catch (err) {
      holder.replaceChildren(errorBox(err));
      return;
    }
    const marks = runMarks(placement, rejections, rows.map((row) => row.name));
    const never = [...marks.values()].filter((mark) => mark === "never").length;
    caption.textContent =
      (placement.closest ? `Ringed: ${placement.closest}, the closest machine. ` : "No machine is closest. ") +
      `Greyed: ${count(never, "machine")} that can never take this run as asked.`;
    if (!map) {
      map = clusterMap(rows, { marks, id: "run-map", label: "Where this run could go" });
      holder.replaceChildren(map);
      map.drawNow();
    } else {
      map.update(rows, marks);
    }
  };
  return { element, show };
}

/** Every machine considered, with what keeps it out; the closest one marked. */
function reasonsTable(placement, id) {
  const rows = placement.nodes.map((node) =>
    h(
      "tr",
      { "data-machine": node.name, class: node.name === placement.closest ? "closest" : "" },
      h("td", { class: "name" }, node.name, node.name === placement.closest ? h("span", { class: "tag" }, "closest") : null),
      h("td", {}, badge(node.state)),
      h("td", { class: "reason" }, node.reasons.join("; ")),
    ),
  );
  return h("div", { class: "wide" }, table(["Machine", "State", "What keeps it out"], rows, { class: "why", id }));
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
      h("td", { class: "name" }, task.name),
      h("td", {}, badge(task.state)),
      h("td", { class: "name" }, task.machine ? h("a", { href: `#/machines/${enc(task.machine)}` }, task.machine) : "—"),
      h("td", { class: "gpus" }, gpuList(task)),
      h("td", {}, task.cpu_cores ? `${task.cpu_cores} cores, ${gib(task.memory_bytes)}` : "—"),
      h("td", { class: "reason" }, taskNote(task)),
    ),
  );
  return h(
    "section",
    { class: "card", id: "tasks" },
    h("h2", {}, "Tasks"),
    h("div", { class: "wide" }, table(["Task", "State", "Machine", "GPUs", "CPU and memory", "Note"], rows, { class: "tasks" })),
  );
}

/** A task's GPUs as a count ("8 GPUs"), their UUIDs on demand: 8 UUIDs in a cell broke every
 * word of the table. Kept open across the page's refreshes if the user opened it. */
function gpuList(task) {
  const ids = task.assigned_gpu_ids;
  if (!ids.length) return "—";
  const shown = document.querySelector(`#tasks details[data-task="${CSS.escape(task.name)}"]`);
  return h(
    "details",
    { class: "gpu-ids", "data-task": task.name, open: Boolean(shown && shown.open) },
    h("summary", { title: ids.join("\n") }, count(ids.length, "GPU")),
    h("ul", {}, ids.map((id) => h("li", {}, h("code", {}, id)))),
  );
}

/** `2 of 4`; a preempted run's attempts are not bounded by its retries (a preemption uses none). */
function attemptText(run) {
  return run.preemptions ? `${run.attempt}` : `${run.attempt} of ${run.retries + 1}`;
}

/** When the run was last preempted, and why: for what priority, or a reclaimed guarantee. Never
 * which run: it may be another workspace's. */
function preemptedText(run) {
  const why =
    run.preempted_for_priority != null
      ? `for a run of priority ${run.preempted_for_priority}`
      : "by a workspace within its guarantee";
  return `${when(run.preempted_at)}, ${why} (${count(run.preemptions, "time")} in all)`;
}

/** Whether the run may be placed again after a fault, or was: its attempts are worth a panel. */
function retried(run) {
  return run.retries > 0 || run.attempt > 1;
}

/** Each attempt: when its first worker started, when it ended, and why, the current one last. */
function attemptsPanel(run) {
  if (!retried(run)) return null;
  const rows = run.attempts.map((attempt) =>
    h(
      "tr",
      { "data-attempt": attempt.number },
      h("td", {}, attempt.number),
      h("td", {}, attempt.started_at ? when(attempt.started_at) : "—"),
      h("td", {}, attempt.ended_at ? when(attempt.ended_at) : "—"),
      h("td", { class: "reason" }, attempt.reason || ""),
    ),
  );
  const onFailure = run.retry_on_failure ? ", or when a worker fails by itself" : "";
  return h(
    "section",
    { class: "card", id: "attempts" },
    h("h2", {}, "Attempts"),
    h(
      "p",
      { class: "muted small" },
      `Placed again from the start, up to ${count(run.retries, "time")}, when a GPU faults or a machine is lost${onFailure}. ` +
        "Workers read ASTRAEUS_RESTART_COUNT to resume from their checkpoint.",
    ),
    h("div", { class: "wide" }, table(["Attempt", "Started", "Ended", "Why it ended"], rows)),
  );
}

function taskNote(task) {
  const silent = silentText(task, when);
  if (silent) return silent;
  if (task.exit_code !== null && task.exit_code !== undefined) return `exit code ${task.exit_code}${task.message ? `: ${task.message}` : ""}`;
  return task.message || task.reason || "";
}

function logsPanel(logs) {
  const parts = [h("h2", {}, "Logs")];
  if (!logs.length) parts.push(h("p", { class: "muted" }, "No logs yet: no task has started."));
  for (const [task, log] of logs) {
    const pre = h("pre", {}, log === undefined ? "" : logText(log));
    const details = h("details", { class: "log", "data-task": task, open: log !== undefined }, h("summary", {}, task), pre);
    details.addEventListener("toggle", async () => {
      if (details.open && !pre.textContent) pre.textContent = logText(await readLog(task));
    });
    parts.push(details);
  }
  return h("section", { class: "card", id: "logs" }, parts);
}

function logText(log) {
  if (!log) return "The log could not be read.";
  const note = log.offset ? `(older output dropped: this starts at byte ${log.offset})\n` : "";
  return note + (log.data || "(empty)");
}

/** A word as a shell would need it: quoted when it holds spaces or quotes. */
function quoted(word) {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, "'\\''")}'`;
}
