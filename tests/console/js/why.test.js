// Reading a waiting run from the API's data: reason kinds, rejection groups, the map's marks.
import assert from "node:assert/strict";
import { test } from "node:test";

import { fixFor, groupReasons, headlineFix, reading, runMarks } from "../../../coordinator/console/why.js";

const node = (name, ...reasons) => ({ name, state: "Up", reasons });
const group = (filter, code, room, ...machines) => ({ filter, code, room, machines });

test("machines are grouped as the API's rejections group them, the largest first", () => {
  const nodes = [
    node("a", "no H100 GPU"),
    node("b", "insufficient gpus: need 8, 0 free and usable"),
    node("c", "insufficient gpus: need 8, 4 free and usable"),
    node("d", "insufficient gpus: need 8, 0 free and usable"),
    node("e", "machine is cordoned: firmware update"),
    node("f", "no H100 GPU"),
  ];
  const rejections = [
    group("gpus", "NoGPUModel", false, "a", "f"),
    group("gpus", "InsufficientGPUs", true, "b", "c", "d"),
    group("accepting", "Cordoned", false, "e"),
  ];
  assert.deepEqual(groupReasons(nodes, rejections), [
    { reason: "insufficient gpus: need 8, 0 free and usable", code: "InsufficientGPUs", machines: ["b", "c", "d"], room: true, others: 1 },
    { reason: "no H100 GPU", code: "NoGPUModel", machines: ["a", "f"], room: false, others: 0 },
    { reason: "machine is cordoned: firmware update", code: "Cordoned", machines: ["e"], room: false, others: 0 },
  ]);
  assert.deepEqual(groupReasons([], []), []);
  assert.deepEqual(groupReasons(nodes, null), []);
});

test("room comes from the data, not the words: a room-sounding text the engine says is not room is never room", () => {
  const nodes = [node("a", "needs 8 healthy GPUs, 6 free (2 more free but at risk)")];
  const [only] = groupReasons(nodes, [group("gpus", "NeedsHealthyGPUs", false, "a")]);
  assert.equal(only.room, false);
  const marks = runMarks({ closest: null, nodes }, [group("gpus", "NeedsHealthyGPUs", false, "a")], ["a"]);
  assert.deepEqual(Object.fromEntries(marks), { a: "never" });
});

test("the closest machine is ringed; a machine short of more than room, or not considered, is greyed", () => {
  const placement = {
    closest: "b",
    nodes: [node("a", "no H100 GPU"), node("b", "insufficient gpus: need 8, 0 free and usable"), node("c", "held for a run ahead in the queue")],
  };
  const rejections = [
    group("gpus", "NoGPUModel", false, "a"),
    group("gpus", "InsufficientGPUs", true, "b"),
    group("accepting", "HeldForQueue", true, "c"),
  ];
  const marks = runMarks(placement, rejections, ["a", "b", "c", "outside"]);
  assert.deepEqual(Object.fromEntries(marks), { a: "never", b: "closest", outside: "never" });
  assert.deepEqual(Object.fromEntries(runMarks(placement, null, ["a", "b", "outside"])), { b: "closest" });
});

test("the guide's reading follows the reason's kind, whatever its words", () => {
  const fits = "The run fits, and the queue holds it back: it starts when its turn comes.";
  for (const kind of ["NextToRun", "QueuedBehind", "WaitsForQuota", "ArrayLimit"]) {
    assert.equal(reading({ reason: "anything at all", kind, placement: null, rejections: null }), fits, kind);
  }
  const placement = { checked_nodes: 2, ready_nodes: 2, down_nodes: 0, closest: null, nodes: [node("a"), node("b")] };
  assert.notEqual(reading({ reason: "Queued behind finetune", kind: "NoMachineFits", placement, rejections: [] }), fits);
});

test("every machine giving one reason is that reason, with the fix for its code", () => {
  const placement = { checked_nodes: 2, ready_nodes: 2, down_nodes: 0, closest: null, nodes: [node("a"), node("b")] };
  const rejections = [group("selection", "NotInPool", false, "a", "b")];
  assert.equal(
    reading({ reason: "machine lacks label pool=h100", kind: "SameReason", placement, rejections }),
    "Every machine gives the same reason, machine lacks label pool=h100: that reason is the problem. " +
      "The run or the workspace selects a pool those machines are not in. Remove the selector, or move the machines to the pool.",
  );
  assert.equal(
    reading({ reason: "machine is not among the run's names", kind: "SameReason", placement, rejections: [group("selection", "NotNamed", false, "a", "b")] }),
    "Every machine gives the same reason, machine is not among the run's names: that reason is the problem.",
  );
});

test("fixes are looked up by code, and a workspace without machines gets the pool fix", () => {
  assert.equal(fixFor("InsufficientGPUs"), "Other runs hold the GPUs. Wait; or split across machines (drop GPUs per machine at least); or use a higher priority if granted.");
  assert.equal(fixFor("insufficient gpus: need 8, 4 free and usable"), "");
  assert.equal(fixFor("toString"), "");
  assert.equal(headlineFix("NoMachines"), fixFor("NotInPool"));
  assert.equal(headlineFix("NoMachineFits"), "");
});
