// Formatting: the words and numbers the console shows for machines and GPUs.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  adminLabels,
  count,
  fabricText,
  freeText,
  gpuStatus,
  healthCounts,
  healthText,
  holderText,
  modelCounts,
  nvlinkText,
  parseLabels,
  reservationText,
  silentText,
  speedText,
  stateText,
} from "../../../coordinator/console/format.js";

const H100 = "NVIDIA H100 80GB HBM3";

test("a GPU's colour: a fault, then a risk, outweigh who holds it", () => {
  const run = { name: "train", workspace: "vision" };
  assert.equal(gpuStatus({ health: "faulted", run }), "faulted");
  assert.equal(gpuStatus({ health: "at_risk", run }), "at_risk");
  assert.equal(gpuStatus({ health: "healthy", run }), "in_use");
  assert.equal(gpuStatus({ health: "healthy", run: null }), "free");
});

test("counts are plural past one and separate thousands", () => {
  assert.equal(count(1, "machine"), "1 machine");
  assert.equal(count(0, "machine"), "0 machines");
  assert.equal(count(40000, "GPU"), "40,000 GPUs");
});

test("an NVLink domain shows as the CLI prints it", () => {
  assert.equal(nvlinkText("5d1c7a3e-0b4f-4f7e-9a53-6d2e8b1c9f10/1"), "5d1c7a3e/1");
  assert.equal(nvlinkText(""), "");
  assert.equal(nvlinkText(null), "");
});

test("fabric: the label, else the InfiniBand ports' fabric, else RoCE, else Ethernet", () => {
  assert.equal(fabricText({ fabric: "ib-0", rdma_fabrics: ["x"], rdma_link_layers: ["InfiniBand"] }), "ib-0");
  assert.equal(fabricText({ fabric: null, rdma_fabrics: ["ib-fe80"], rdma_link_layers: ["InfiniBand"] }), "ib-fe80");
  assert.equal(fabricText({ fabric: null, rdma_fabrics: [], rdma_link_layers: ["InfiniBand"] }), "InfiniBand");
  assert.equal(fabricText({ fabric: null, rdma_fabrics: [], rdma_link_layers: ["Ethernet"] }), "RoCE");
  assert.equal(fabricText({ fabric: null, rdma_fabrics: [], rdma_link_layers: [] }), "Ethernet");
});

test("state reads like the CLI's STATE column", () => {
  assert.equal(stateText({ state: "Up", cordoned: false, conditions: [] }), "Up");
  assert.equal(stateText({ state: "Up", cordoned: true, conditions: ["MemoryPressure"] }), "Up, cordoned, MemoryPressure");
  assert.equal(stateText({ state: "Down", cordoned: false }), "Down");
});

test("GPUs free by model: neither faulted nor held; at risk counts as free", () => {
  const gpus = [
    { model: H100, health: "healthy", run: null },
    { model: H100, health: "at_risk", run: null },
    { model: H100, health: "faulted", run: null },
    { model: H100, health: "healthy", run: { name: "a" } },
    { model: "NVIDIA A10", health: "healthy", run: null },
  ];
  const models = modelCounts(gpus);
  assert.deepEqual(models, [
    { model: H100, total: 4, free: 2, idle: 2 },
    { model: "NVIDIA A10", total: 1, free: 1, idle: 1 },
  ]);
  assert.equal(freeText(models), `2/4 ${H100}, 1/1 NVIDIA A10`);
  // On a machine that takes no runs now, nothing is free: the idle GPUs are shown apart.
  const unusable = modelCounts(gpus, false);
  assert.deepEqual(unusable[0], { model: H100, total: 4, free: 0, idle: 2 });
  assert.equal(freeText(unusable), `0/4 ${H100} (2 idle), 0/1 NVIDIA A10 (1 idle)`);
  assert.equal(freeText([]), "");
  assert.deepEqual(healthCounts(gpus), { healthy: 3, at_risk: 1, faulted: 1 });
  assert.equal(healthText(healthCounts(gpus)), "3 healthy, 1 at risk, 1 faulted");
  assert.equal(healthText(healthCounts([])), "");
});

test("who holds a GPU, as far as the viewer may know", () => {
  assert.equal(holderText(null), "free");
  assert.equal(holderText({ name: "train", workspace: "vision" }), "run train (workspace vision)");
  assert.equal(holderText({ name: null, workspace: null }), "a run of another workspace");
});

test("labels typed as key=value pairs, and the ones an admin set", () => {
  assert.deepEqual(parseLabels(" pool=h100, team = vision ,"), { labels: { pool: "h100", team: "vision" } });
  assert.deepEqual(parseLabels(""), { labels: {} });
  assert.deepEqual(parseLabels("pool=h100, oops"), {
    labels: {},
    problem: 'Write each label as key=value, separated by commas ("oops" has no key=value).',
  });
  assert.deepEqual(adminLabels({ pool: "demo", team: "x", rack: "r2" }, { pool: "demo", rack: "r1" }), { team: "x", rack: "r2" });
});

test("a reservation in words", () => {
  const time = (iso) => iso.slice(0, 10);
  assert.equal(reservationText({ labels: { pool: "h100" } }, time), "Reserved for pool=h100");
  const ws = { labels: {}, workspace: "vision", starts_at: "2026-01-01T00:00:00Z", ends_at: "2026-01-02T00:00:00Z" };
  assert.equal(reservationText(ws, time), "Reserved for workspace vision from 2026-01-01 to 2026-01-02");
});

test("Ethernet speed as the CLI prints it", () => {
  assert.deepEqual([speedText(100000), speedText(2500), speedText(100), speedText(null)], ["100 Gb/s", "2.5 Gb/s", "100 Mb/s", ""]);
});

test("a task on a silent machine says since when, and that it still runs", () => {
  const task = { state: "Running", machine_silent_since: "2026-10-01T09:00:00+00:00" };
  assert.equal(
    silentText(task, (iso) => iso.slice(11, 16)),
    "Machine silent since 09:00: still running unless it stays silent long enough to be Lost",
  );
  assert.equal(silentText({ state: "Running", machine_silent_since: null }), "");
  assert.equal(silentText({ state: "Lost" }), "");
});
