// events.ts mirrors stitchcuda/events.py: the keys of every event type as the Python side writes
// them (its to_dict), and the vocabularies (phases, precisions). Runs where STITCHCUDA_TEST_PYTHON
// names a Python that has stitchcuda (the repository's .venv).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { resolve } from "node:path";
import { test } from "node:test";

import { EVENT_KEYS, Phase, Precision } from "../src/events";

const PY = process.env.STITCHCUDA_TEST_PYTHON ? resolve(process.env.STITCHCUDA_TEST_PYTHON) : undefined;
const skip = !PY ? "set STITCHCUDA_TEST_PYTHON to a Python with stitchcuda"
  : spawnSync(PY, ["-c", "import stitchcuda.events"]).status !== 0 ? `${PY} cannot import stitchcuda.events` : false;

const PHASES: Phase[] = ["planning", "budget", "coding", "verifying", "coder-failed", "nothing-new", "profiling"];
const PRECISIONS: Precision[] = ["tf32", "mixed", "3xtf32", "fp32"];

const DUMP = `
import json
from stitchcuda import events, types
v = events.RoundVerdict(1, "c", "ok", True)
print(json.dumps({
    "keys": {e.EVENT: list(e.to_dict()) for e in (events.ProgressEvent("planning"), v, events.RunEnd("m", best=v))},
    "phases": list(events.PHASES),
    "precisions": list(types.PRECISIONS),
}))
`;

test("the TypeScript mirror has the Python events' keys and vocabularies", { skip }, () => {
  const r = spawnSync(PY!, ["-c", DUMP], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  const py = JSON.parse(r.stdout) as { keys: Record<string, string[]>; phases: string[]; precisions: string[] };
  assert.deepEqual(Object.keys(py.keys).sort(), Object.keys(EVENT_KEYS).sort());
  for (const [event, keys] of Object.entries(py.keys)) {
    assert.deepEqual([...keys].sort(), [...EVENT_KEYS[event as keyof typeof EVENT_KEYS]].sort(), event);
  }
  assert.deepEqual(py.phases, PHASES);
  assert.deepEqual(py.precisions, PRECISIONS);
});
