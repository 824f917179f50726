// Reading a waiting run from the API's data: reason kinds, rejection groups, the map's marks.
import assert from "node:assert/strict";
import { test } from "node:test";

import { closestText, fixFor, headlineFix, machinesText, reading, runMarks, wouldStartText } from "../../../coordinator/console/why.js";

const node = (name, ...reasons) => ({ name, state: "Up", reasons });
const group = (filter, code, room, ...machines) => ({ filter, code, room, machines });

test("a reason's machines are all named up to four, else the first three and how many more", () => {
  const reason = (count, ...machines) => ({ reason: "no H100 GPU", state: "Up", count, machines });
  assert.equal(machinesText(reason(1, "a")), "a");
  assert.equal(machinesText(reason(4, "a", "b", "c", "d")), "a, b, c, d");
  assert.equal(machinesText(reason(5, "a", "b", "c", "d", "e")), "a, b, c and 2 more");
  const first = Array.from({ length: 10 }, (_, i) => `m${i}`);
  assert.equal(machinesText(reason(20000, ...first)), "m0, m1, m2 and 19997 more");
});

test("the closest machine comes first, then the others the grouped explanation names", () => {
  assert.equal(closestText({ closest: "b", closest_machines: ["b", "a", "c"] }), "b (then a, c)");
  assert.equal(closestText({ closest: "b", closest_machines: ["b"] }), "b");
  assert.equal(closestText({ closest: "b" }), "b");
});

test("room comes from the data, not the words: a room-sounding text the engine says is not room is never room", () => {
  const nodes = [node("a", "needs 8 healthy GPUs, 6 free (2 more free but at risk)")];
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

test("the grouped explanation is read as the full one: its reasons' codes, its counts and closest", () => {
  const grouped = {
    checked_nodes: 2,
    ready_nodes: 2,
    down_nodes: 0,
    closest: null,
    closest_machines: [],
    reasons: [{ reason: "machine lacks label pool=h100", state: "Up", filter: "selection", code: "NotInPool", room: false, count: 2, machines: ["a", "b"] }],
  };
  const rejections = grouped.reasons;
  assert.equal(
    reading({ reason: "machine lacks label pool=h100", kind: "SameReason", placement: grouped, rejections }),
    reading({ reason: "machine lacks label pool=h100", kind: "SameReason", placement: grouped, rejections: [group("selection", "NotInPool", false, "a", "b")] }),
  );
  const closest = { ...grouped, closest: "b", closest_machines: ["b"] };
  assert.match(reading({ reason: "x", kind: "NoMachineFits", placement: closest, rejections }), /^b falls short only on room/);
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

test("a run the workspace's machines cannot hold between them says so, with what to change", () => {
  const reason = "the workspace's machines have 52 GPUs that match; the run asks for 128";
  const placement = { checked_nodes: 3, ready_nodes: 3, closest: null, nodes: [node("a", reason)] };
  const text = reading({ reason, kind: "ClusterTooSmall", placement, rejections: [group("topology", "ClusterTooSmall", false, "a")] });
  assert.match(text, /^the workspace's machines have 52 GPUs that match; the run asks for 128: no machine frees up/);
  assert.match(text, /Ask for fewer GPUs or another model, or ask an admin to grant more machines\.$/);
});

test("an NVLink domain without IMEX names the IMEX service as the fix", () => {
  const reason = "IMEX channel is not available on this machine";
  const placement = { checked_nodes: 2, ready_nodes: 2, closest: null, nodes: [node("a", reason), node("b", reason)] };
  const rejections = [group("topology", "NoIMEXChannel", false, "a", "b")];
  assert.match(reading({ reason, kind: "SameReason", placement, rejections }), /start the IMEX service/);
  assert.match(fixFor("NoIMEXChannel"), /^The NVLink domain's machines have no IMEX channel/);
});

test("a dry run's text says each fact once", () => {
  const one = wouldStartText({ why: "1 machine × 8 GPUs on nvl-1" }, { where: "one machine, nvl-1" }, ["nvl-1"]);
  assert.equal(one, "It would start now: 1 machine × 8 GPUs on nvl-1.");
  const fabric = wouldStartText({ why: "2 machines × 8 GPUs" }, { where: "one InfiniBand fabric, ib-0" }, ["ib-a1", "ib-a2"]);
  assert.equal(fabric, "It would start now: 2 machines × 8 GPUs, on one InfiniBand fabric, ib-0 (ib-a1, ib-a2).");
  // nvl-1 named in the text does not name nvl-10.
  const near = wouldStartText({ why: "1 machine × 4 GPUs on nvl-1" }, { where: "one machine, nvl-1" }, ["nvl-10"]);
  assert.equal(near, "It would start now: 1 machine × 4 GPUs on nvl-1 (nvl-10).");
});
