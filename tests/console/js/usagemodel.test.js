// The usage chart's figures: shares of the week, the fair share a weight entitles, the words.
import assert from "node:assert/strict";
import { test } from "node:test";

import { hours, percent, standingText, usageRows } from "../../../coordinator/console/usagemodel.js";

const row = (workspace, week, weight, decayed = week) => ({
  workspace,
  gpu_hours_day: week / 7,
  gpu_hours_week: week,
  decayed_gpu_hours: decayed,
  decayed_core_hours: 0,
  weight,
  gpus_now: 0,
  share_now: 0,
  runs_waiting: 0,
});

const view = (rows, week) => ({ workspaces: rows, cluster: { gpu_hours_week: week }, half_life_seconds: 604800 });

test("an admin's chart: shares of the week and the fair share each weight entitles", () => {
  const rows = usageRows(view([row("vision", 300, 1), row("speech", 100, 1), row("prod", 600, 2)], 1000));
  assert.deepEqual(
    rows.map((r) => [r.workspace, r.shareWeek, r.fairShare, r.standing, r.turn]),
    [
      ["vision", 0.3, 0.25, 300, 2],
      ["speech", 0.1, 0.25, 100, 1],
      ["prod", 0.6, 0.5, 300, 3],
    ],
  );
  assert.equal(standingText(rows[0]), "30 % of this week's GPU-hours against a fair share of 25 %, more than its fair share");
  assert.equal(standingText(rows[1]), "10 % of this week's GPU-hours against a fair share of 25 %, less than its fair share");
});

test("a member sees its own row against the cluster's total, with no fair share to compare", () => {
  const [mine] = usageRows(view([row("vision", 30, 1)], 120));
  assert.equal(mine.fairShare, null);
  assert.equal(mine.turn, null);
  assert.equal(mine.shareWeek, 0.25);
  assert.equal(standingText(mine), "25 % of the cluster's GPU-hours this week");
});

test("an idle cluster draws empty bars, never NaN", () => {
  const [idle] = usageRows(view([row("vision", 0, 1), row("speech", 0, 1)].slice(0, 1), 0));
  assert.equal(idle.shareWeek, 0);
  assert.equal(percent(0), "0 %");
  assert.equal(percent(0.001), "< 1 %");
});

test("hours read as people write them", () => {
  assert.equal(hours(0.25), "0.25 GPU-hours");
  assert.equal(hours(1), "1 GPU-hour");
  assert.equal(hours(1234.4), "1,234 GPU-hours");
});
