// The machines table's sorting, filtering and search, on rows as `machineRows` makes them.
import assert from "node:assert/strict";
import { test } from "node:test";

import { machineRows } from "../../../coordinator/console/mapmodel.js";
import { COLUMNS, cellTexts, filterRows, sortRows } from "../../../coordinator/console/tablemodel.js";

function machine(name, extra = {}, gpus = []) {
  return { name, state: "Up", site: "fra-1", rack: null, fabric: null, network: "Ethernet", nvlink_domain: null, cordoned: false, cordon_reason: null, conditions: [], gpus, ...extra };
}

const gpu = (health = "healthy", run = null) => [0, 0, health, run];
const answer = {
  models: ["NVIDIA H100 80GB HBM3"],
  runs: [{ name: "train", workspace: "vision" }],
  machines: [
    machine("gpu-10", { fabric: "ib-0", network: "InfiniBand", ethernet_mbps: 2500 }, [gpu(), gpu("at_risk")]),
    machine("gpu-2", { cordoned: true, cordon_reason: "firmware update" }, [gpu("healthy", 0), gpu()]),
    machine("gpu-1", { state: "Down", site: null }, []),
  ],
};
const rows = () => cellTexts(machineRows(answer));
const names = (list) => list.map((row) => row.name);

test("the cells' texts, column by column", () => {
  const [first] = sortRows(rows(), { key: "name" });
  assert.deepEqual(COLUMNS.map((c) => c.heading), ["Machine", "State", "Site", "Fabric", "Ethernet", "Rack", "NVLink domain", "GPUs free / total", "Health", "Conditions", "Cordon"]);
  assert.deepEqual(first.cells, ["gpu-1", "Down", "—", "Ethernet", "—", "—", "—", "—", "—", "—", "—"]);
  const cordoned = rows().find((row) => row.name === "gpu-2");
  // Cordoned: its idle GPU is no run's now, so it is not free but shown apart.
  assert.deepEqual(cordoned.cells.slice(7), ["0/2 NVIDIA H100 80GB HBM3 (1 idle)", "2 healthy", "—", "Cordoned: firmware update"]);
  assert.equal(rows().find((row) => row.name === "gpu-10").cells[4], "2.5 Gb/s");
});

test("names sort as people count (gpu-2 before gpu-10), and a second sort reverses", () => {
  assert.deepEqual(names(sortRows(rows(), { key: "name" })), ["gpu-1", "gpu-2", "gpu-10"]);
  assert.deepEqual(names(sortRows(rows(), { key: "name", descending: true })), ["gpu-10", "gpu-2", "gpu-1"]);
  assert.deepEqual(names(sortRows(rows(), { key: "gpus" })), ["gpu-1", "gpu-2", "gpu-10"]);
  assert.deepEqual(names(sortRows(rows(), { key: "health" })), ["gpu-10", "gpu-1", "gpu-2"]);
  assert.deepEqual(names(sortRows(rows(), { key: "ethernet", descending: true })), ["gpu-10", "gpu-1", "gpu-2"]);
});

test("filters hold per column, case aside; search is by name; all must match", () => {
  const all = sortRows(rows(), { key: "name" });
  assert.deepEqual(names(filterRows(all, "", { fabric: "IB" })), ["gpu-10"]);
  assert.deepEqual(names(filterRows(all, "", { cordon: "firmware" })), ["gpu-2"]);
  assert.deepEqual(names(filterRows(all, "gpu-1", {})), ["gpu-1", "gpu-10"]);
  assert.deepEqual(names(filterRows(all, "gpu-1", { state: "up" })), ["gpu-10"]);
  assert.deepEqual(names(filterRows(all, "  ", { state: " " })), ["gpu-1", "gpu-2", "gpu-10"]);
  assert.deepEqual(filterRows(all, "nothing", {}), []);
});
