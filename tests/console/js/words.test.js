// Words for people: every API error the console shows is a sentence to act on, with no regular
// expression and no header syntax in it.
import assert from "node:assert/strict";
import { test } from "node:test";

import { forPeople, problemSentence, sentence } from "../../../coordinator/console/words.js";

const NAME = "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$";

test("a token the coordinator does not know", () => {
  const words = forPeople(401, { error: "missing or unknown bearer token: send Authorization: Bearer <token>", fields: [] });
  assert.equal(words.error, "This token is not known here. Ask an admin for a workspace token.");
});

test("a name that is not a name says what a name is, not the pattern", () => {
  const words = forPeople(400, { error: "invalid RunSpec", fields: [{ field: "name", problem: `'Bad_Name' does not match ${NAME}` }] });
  assert.equal(words.error, "Some fields need a change: see the notes beside them.");
  assert.deepEqual(words.fields, [
    {
      field: "name",
      problem: "Use lowercase letters, digits and '-', up to 63 characters, starting and ending with a letter or digit.",
      said: `'Bad_Name' does not match ${NAME}`,
    },
  ]);
});

test("a pattern the console does not know is still never shown", () => {
  const said = problemSentence("'x y' does not match ^[a-z]+\\.[0-9]{2}$");
  assert.equal(said, "'x y' is not in the form this field takes.");
});

test("errors by kind", () => {
  const cases = [
    [403, "this needs an admin token", "Only an admin can do this. Sign in with an admin token to do it."],
    [404, "no workspace named 'nope'", "There is no workspace named nope. Check the name, or ask an admin which workspaces there are."],
    [404, "no run named 'train'", "There is no run named train in this workspace."],
    [404, "no machine named 'gpu-9'", "There is no machine named gpu-9 among the machines you may see."],
    [404, "Not Found", "The coordinator has no such page: it may be older than this console."],
    [415, "send a JSON body with Content-Type: application/json", "The console sent something the coordinator could not read. Reload the page and try again."],
    [413, "request body is larger than 1048576 bytes", "That is more than the coordinator takes in one request: make it shorter."],
    [502, "", "The coordinator could not answer (error 502). Try again; if it keeps failing, tell an admin."],
    [0, "Failed to fetch", "Cannot reach the coordinator. Check that it is running and that this page's address is right, then try again."],
    [409, "a run named 'x' already exists in workspace vision", "A run named 'x' already exists in workspace vision."],
  ];
  for (const [status, error, expected] of cases) assert.equal(forPeople(status, { error, fields: [] }).error, expected, error);
  assert.equal(forPeople(500, null).error, "The coordinator could not answer (error 500). Try again; if it keeps failing, tell an admin.");
});

test("field problems as sentences", () => {
  const cases = [
    ["is required", "Fill this in."],
    ["is required for an admin", "An admin acts in a workspace: name one."],
    ["must be at least 1, got 0", "Use a number of at least 1."],
    ["at most 0 in workspace vision, got 5", "Workspace vision allows a priority of at most 0."],
    ["min_per_machine (9) is more than count (8); lower min_per_machine to at most 8", "9 GPUs on one machine is more than the 8 the run asks for: give at most 8."],
    ["min_nodes (3) is more than max_nodes (2); make min_nodes at most max_nodes", "At least 3 machines is more than at most 2: make the first no more than the second."],
    ["is already used in this workspace; by a run that is Running: cancel that run first (the name of a run that has ended may be used again), or pick another name", "A run of this name is Running: cancel that run first (the name of a run that has ended may be used again), or pick another name."],
    ["has not ended; cancel that run first, then delete it", "This run has not ended: cancel that run first, then delete it."],
    ["a reservation for a workspace needs starts_at and ends_at", "A reservation for a workspace needs a start and an end."],
    ["starts_at must be before ends_at", "The start must be before the end."],
    ["String should have at most 1024 characters", "String should have at most 1024 characters."],
  ];
  for (const [said, expected] of cases) assert.equal(problemSentence(said), expected, said);
});

test("a sentence starts with a capital unless it starts with a name, and ends with a stop", () => {
  assert.equal(sentence("no B200 GPU"), "No B200 GPU.");
  assert.equal(sentence("gpu_requests.count: wrong"), "gpu_requests.count: wrong.");
  assert.equal(sentence("Done!"), "Done!");
  assert.equal(sentence("  "), "");
});
