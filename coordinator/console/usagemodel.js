// The usage page's figures (fair share): pure functions, no page (tested with node --test).

/** Each workspace's row of `GET /api/v1/usage` as the chart draws it: its GPU-hours over the
 * week as a share of the cluster's, the share its weight entitles it to among the workspaces
 * listed, and how far its decayed use per weight stands from the others' (what fair share
 * orders by: lowest goes first; `turn` 1 is the workspace whose runs go first among runs of equal
 * priority). The bar is `shareWeek`, on the same scale as the fair share's mark. */
export function usageRows(view) {
  const rows = view.workspaces || [];
  const week = view.cluster.gpu_hours_week;
  const weights = rows.reduce((sum, row) => sum + row.weight, 0);
  // Fair share orders runs of equal priority by decayed use per weight, lowest first.
  const order = [...rows].sort((a, b) => standing(a) - standing(b)).map((row) => row.workspace);
  return rows.map((row) => ({
    workspace: row.workspace,
    gpuHoursDay: row.gpu_hours_day,
    gpuHoursWeek: row.gpu_hours_week,
    shareWeek: week > 0 ? row.gpu_hours_week / week : 0,
    fairShare: weights > 0 && rows.length > 1 ? row.weight / weights : null,
    standing: standing(row),
    turn: rows.length > 1 ? order.indexOf(row.workspace) + 1 : null,
    weight: row.weight,
    gpusNow: row.gpus_now,
    shareNow: row.share_now,
    waiting: row.runs_waiting,
  }));
}

function standing(row) {
  return row.weight > 0 ? row.decayed_gpu_hours / row.weight : 0;
}

/** `12.5 GPU-hours`, `0.25 GPU-hours`, `1,024 GPU-hours`: two significant decimals below 10. */
export function hours(n) {
  const shown = n >= 10 ? Math.round(n).toLocaleString("en-US") : String(Math.round(n * 100) / 100);
  return `${shown} GPU-hour${shown === "1" ? "" : "s"}`;
}

/** `37 %`, `< 1 %` for a sliver that is not nothing, `0 %`. */
export function percent(share) {
  if (share > 0 && share < 0.005) return "< 1 %";
  return `${Math.round(share * 100)} %`;
}

/** What a team lead reads first: the workspace's share of the week against its fair share. */
export function standingText(row) {
  if (row.fairShare === null) return `${percent(row.shareWeek)} of the cluster's GPU-hours this week`;
  const over = row.shareWeek - row.fairShare;
  const verdict = Math.abs(over) < 0.02 ? "about its fair share" : over > 0 ? "more than its fair share" : "less than its fair share";
  return `${percent(row.shareWeek)} of this week's GPU-hours against a fair share of ${percent(row.fairShare)}, ${verdict}`;
}
