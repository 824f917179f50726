// New run's sites: labelled ones, and ones known only from the machines' network.
import assert from "node:assert/strict";
import { test } from "node:test";

import { SITE, siteSelection, sites } from "../../../coordinator/console/choose.js";

const machines = [
  { name: "gpu-01", site: "fra-1", labels: { [SITE]: "fra-1" } },
  { name: "lab-2", site: "10.0.3.0/24", labels: {} },
  { name: "lab-1", site: "10.0.3.0/24", labels: {} },
  { name: "loose", site: null, labels: {} },
];

test("every site is offered, and whether it is a label", () => {
  assert.deepEqual(sites(machines), [
    { site: "10.0.3.0/24", labelled: false, machines: ["lab-2", "lab-1"] },
    { site: "fra-1", labelled: true, machines: ["gpu-01"] },
  ]);
});

test("a labelled site is its label; a network site is its machines' names", () => {
  const offered = sites(machines);
  assert.deepEqual(siteSelection("fra-1", offered, []), { names: [], match_labels: { [SITE]: "fra-1" } });
  assert.deepEqual(siteSelection("10.0.3.0/24", offered, []), { names: ["lab-2", "lab-1"], match_labels: undefined });
  assert.deepEqual(siteSelection("10.0.3.0/24", offered, ["lab-1", "gpu-01"]), { names: ["lab-1"], match_labels: undefined });
  assert.deepEqual(siteSelection("", offered, ["gpu-01"]), { names: ["gpu-01"], match_labels: undefined });
});
