// The map's layout: sites, then networks, then racks, then machines; a cell per GPU; hit tests.
import assert from "node:assert/strict";
import { test } from "node:test";

import { cellSize, fitLabel, groupOf, hierarchy, hitTest, layoutMap, machineRows, sharedStart, totals } from "../../../coordinator/console/mapmodel.js";

const H100 = "NVIDIA H100 80GB HBM3";

function machine(name, extra = {}, gpus = 8) {
  return {
    name,
    state: "Up",
    site: "fra-1",
    rack: "r1",
    fabric: null,
    network: "Ethernet",
    nvlink_domain: null,
    cordoned: false,
    cordon_reason: null,
    conditions: [],
    gpus: Array.from({ length: gpus }, (_, index) => [index, 0, "healthy", null]),
    ...extra,
  };
}

function rowsOf(machines, runs = []) {
  return machineRows({ models: [H100], runs, machines });
}

/** A cluster like the benchmark's: `n` machines over two sites, fabrics, NVLink domains, racks of 8. */
function big(n) {
  return rowsOf(
    Array.from({ length: n }, (_, i) => {
      const kind = i % 10;
      return machine(`gpu-${String(i).padStart(4, "0")}`, {
        site: i % 3 ? "fra-1" : "ams-1",
        rack: `rack-${Math.floor(i / 8)}`,
        fabric: kind < 6 ? `ib-${i % 2}` : null,
        network: kind < 6 ? "InfiniBand" : kind < 8 ? "RoCE" : "Ethernet",
        nvlink_domain: kind === 9 ? `cafe${Math.floor(i / 72)}/1` : null,
      });
    }),
  );
}

test("rows hold each GPU's model, holder and status", () => {
  const runs = [{ name: "train", workspace: "vision" }, { name: null, workspace: null }];
  const m = machine("gpu-01", {}, 3);
  m.gpus[0][3] = 0;
  m.gpus[1][3] = 1;
  m.gpus[2][2] = "faulted";
  const [row] = rowsOf([m], runs);
  assert.deepEqual(row.gpus.map((g) => [g.model, g.status, g.run]), [
    [H100, "in_use", runs[0]],
    [H100, "in_use", runs[1]],
    [H100, "faulted", null],
  ]);
  assert.equal(row.free, 0);
  assert.deepEqual(totals([row]).gpus, { free: 0, in_use: 2, at_risk: 0, faulted: 1 });
});

test("free means usable by a run now: idle GPUs on cordoned, pressured and Down machines are counted apart", () => {
  const rows = rowsOf([
    machine("up", {}, 4),
    machine("cordoned", { cordoned: true, cordon_reason: "firmware" }, 4),
    machine("pressured", { conditions: ["MemoryPressure"] }, 2),
    machine("pids", { conditions: ["PIDPressure"] }, 2),
    machine("down", { state: "Down" }, 3),
  ]);
  rows[0].gpus[0].status = "faulted";
  assert.deepEqual(rows.map((r) => [r.name, r.usable, r.free, r.idle]), [
    ["up", true, 4, 4],
    ["cordoned", false, 0, 4],
    ["pressured", false, 0, 2],
    ["pids", true, 2, 2],
    ["down", false, 0, 3],
  ]);
  const counted = totals(rows);
  assert.deepEqual(counted.gpus, { free: 5, in_use: 0, at_risk: 0, faulted: 1 });
  assert.deepEqual(counted.idle, { down: 3, pressure: 2, cordoned: 4 });
});

test("networks: an NVLink domain, a fabric, RoCE without one, Ethernet", () => {
  const [nvl, ib, roce, eth] = rowsOf([
    machine("a", { nvlink_domain: "5d1c7a3e-0b4f/1" }),
    machine("b", { fabric: "ib-0", network: "InfiniBand" }),
    machine("c", { network: "RoCE" }),
    machine("d"),
  ]);
  assert.deepEqual([groupOf(nvl), groupOf(ib), groupOf(roce), groupOf(eth)], [
    { rank: 0, label: "NVLink domain 5d1c7a3e/1" },
    { rank: 1, label: "InfiniBand fabric ib-0" },
    { rank: 2, label: "RoCE, no fabric" },
    { rank: 3, label: "Ethernet" },
  ]);
});

test("sites, networks (tightest first), racks and machines in order; no site and no rack last", () => {
  const tree = hierarchy(
    rowsOf([
      machine("gpu-10", { site: "ams-1" }),
      machine("gpu-9", { site: "ams-1" }),
      machine("x", { site: null, rack: null }),
      machine("y", { site: "ams-1", rack: null, fabric: "ib-0", network: "InfiniBand" }),
      machine("z", { site: "ams-1", rack: "r0", fabric: "ib-0", network: "InfiniBand" }),
    ]),
  );
  const shape = tree.map((s) => [s.site, s.groups.map((g) => [g.label, g.racks.map((r) => [r.rack, r.machines.map((m) => m.name)])])]);
  assert.deepEqual(shape, [
    ["ams-1", [["InfiniBand fabric ib-0", [["r0", ["z"]], ["", ["y"]]]], ["Ethernet", [["r1", ["gpu-9", "gpu-10"]]]]]],
    ["", [["Ethernet", [["", ["x"]]]]]],
  ]);
});

test("cells are large for a few GPUs, small for thousands", () => {
  assert.deepEqual([cellSize(80), cellSize(2000), cellSize(40000)], [14, 9, 6]);
});

test("every tile inside the map, none overlapping, every cell inside its tile", () => {
  for (const [n, width] of [[11, 1200], [300, 420], [1000, 1248]]) {
    const model = layoutMap(big(n), width);
    assert.equal(model.machines.length, n);
    assert.equal(model.cells.length, n * 8);
    const tiles = [...model.machines].sort((a, b) => a.y - b.y || a.x - b.x);
    for (const t of tiles) {
      assert.ok(t.x >= 0 && t.x + t.w <= width && t.y >= 0 && t.y + t.h <= model.height, `${t.row.name} inside`);
    }
    for (let i = 0; i < tiles.length; i += 1) {
      for (let j = i + 1; j < tiles.length && tiles[j].y < tiles[i].y + tiles[i].h; j += 1) {
        const [a, b] = [tiles[i], tiles[j]];
        const apart = a.x + a.w <= b.x || b.x + b.w <= a.x || a.y + a.h <= b.y || b.y + b.h <= a.y;
        assert.ok(apart, `${a.row.name} and ${b.row.name} overlap`);
      }
    }
    for (const cell of model.cells) {
      const t = model.machines[cell.machine];
      assert.ok(cell.x >= t.x && cell.x + model.cell <= t.x + t.w && cell.y >= t.y && cell.y + model.cell <= t.y + t.h);
    }
  }
});

test("a rack's machines stack in columns of eight; racks and groups flow and wrap", () => {
  const rows = rowsOf(Array.from({ length: 20 }, (_, i) => machine(`m-${i}`, { rack: `rack-${Math.floor(i / 8)}` })));
  const model = layoutMap(rows, 1200);
  assert.deepEqual(model.boxes.filter((b) => b.kind === "rack").map((b) => b.label), ["rack-0", "rack-1", "rack-2"]);
  const first = model.machines.filter((m) => m.row.rack === "rack-0");
  assert.equal(new Set(first.map((m) => m.x)).size, 1);
  assert.equal(new Set(first.map((m) => m.y)).size, 8);
  const racks = model.boxes.filter((b) => b.kind === "rack");
  assert.equal(new Set(racks.map((b) => b.y)).size, 1);
  const narrow = layoutMap(big(200), 420);
  const groups = narrow.boxes.filter((b) => b.kind === "group");
  assert.ok(groups.every((g) => g.x + g.w <= 420));
  assert.ok(new Set(groups.map((g) => g.y)).size > 1);
});

test("a point on a GPU's cell finds that GPU; between cells, the machine only; outside, nothing", () => {
  const model = layoutMap(big(40), 800);
  for (const cell of model.cells) {
    const found = hitTest(model, cell.x + model.cell / 2, cell.y + model.cell / 2);
    const row = model.machines[cell.machine].row;
    assert.equal(found.machine, row);
    assert.equal(found.gpu, row.gpus[cell.gpu]);
  }
  const tile = model.machines[0];
  assert.deepEqual(hitTest(model, tile.x + 1, tile.y + 1), { machine: tile.row, gpu: null });
  assert.equal(hitTest(model, 0, model.height - 1), null);
});

test("5,000 machines of 8 GPUs lay out whole", () => {
  const model = layoutMap(big(5000), 1248);
  assert.equal(model.cells.length, 40000);
  assert.equal(model.cell, 6);
  assert.ok(model.height < 30000);
});

test("a rack too narrow for its label shows what tells it apart", () => {
  const labels = Array.from({ length: 625 }, (_, i) => `rack-${i}`);
  assert.equal(sharedStart(labels), "rack-");
  assert.equal(sharedStart(["r1", "r2"]), "");
  assert.equal(sharedStart(["ams-rack-1", "fra-rack-2"]), "");
  assert.equal(sharedStart(["only-one"]), "");
  const upTo = (n) => (text) => text.length <= n; // a width that holds n characters
  assert.equal(fitLabel("rack-312", upTo(8), "rack-"), "rack-312");
  assert.equal(fitLabel("rack-312", upTo(4), "rack-"), "312");
  assert.equal(fitLabel("rack-31204", upTo(4), "rack-"), "…204");
  assert.equal(fitLabel("rack-312", upTo(0), "rack-"), "");
});
