// Reason grouping, and how the map marks machines for a waiting run.
import assert from "node:assert/strict";
import { test } from "node:test";

import { groupReasons, mergedText, reading, runMarks } from "../../../coordinator/console/why.js";

const node = (name, ...reasons) => ({ name, state: "Up", reasons });

test("machines with alike reasons are one group, the largest first", () => {
  const groups = groupReasons([
    node("a", "no H100 GPU"),
    node("b", "insufficient gpus: need 8, 0 free and usable"),
    node("c", "insufficient gpus: need 8, 4 free and usable"),
    node("d", "insufficient gpus: need 8, 2 free and usable"),
    node("e", "machine is cordoned: firmware update"),
    node("f", "no H100 GPU"),
  ]);
  assert.deepEqual(groups, [
    { reason: "insufficient gpus: need 8, 0–4 free and usable", machines: ["b", "c", "d"], room: true },
    { reason: "no H100 GPU", machines: ["a", "f"], room: false },
    { reason: "machine is cordoned: firmware update", machines: ["e"], room: false },
  ]);
});

test("numbers that agree stay, those that differ become a range", () => {
  assert.equal(mergedText(["needs 8 healthy GPUs, 6 free (2 more free but at risk)"]), "needs 8 healthy GPUs, 6 free (2 more free but at risk)");
  assert.equal(mergedText(["insufficient cpu: need 12.5, 3 free", "insufficient cpu: need 12.5, 0.5 free"]), "insufficient cpu: need 12.5, 0.5–3 free");
  assert.deepEqual(groupReasons([]), []);
});

test("the closest machine is ringed; a machine short of more than room, or not considered, is greyed", () => {
  const placement = {
    closest: "b",
    nodes: [node("a", "no H100 GPU"), node("b", "insufficient gpus: need 8, 0 free and usable"), node("c", "insufficient memory: need 1, 0 free"), node("d")],
  };
  const marks = runMarks(placement, ["a", "b", "c", "d", "outside"]);
  assert.deepEqual(Object.fromEntries(marks), { a: "never", b: "closest", outside: "never" });
});

test("the guide's reading of a queue reason", () => {
  assert.equal(reading("Queued behind finetune", null), "The run fits, and the queue holds it back: it starts when its turn comes.");
});
