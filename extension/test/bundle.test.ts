// The esbuild bundle loads (with a stand-in for the `vscode` module) and exports activate and
// deactivate. Skipped before `npm run build`.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import Module from "node:module";
import { join } from "node:path";
import { test } from "node:test";

const bundle = join(__dirname, "..", "..", "dist", "extension.js");

test("dist/extension.js loads and exports activate/deactivate", { skip: existsSync(bundle) ? false : "run `npm run build` first" }, () => {
  // Any property of the stand-in is a constructible, callable, indexable stub.
  const stub: unknown = new Proxy(function () {}, {
    get: (_t, p) => (p === "prototype" ? {} : p === Symbol.toPrimitive ? () => "" : stub),
    apply: () => stub,
    construct: () => ({}),
  });
  const loader = Module as unknown as { _load: (req: string, ...rest: unknown[]) => unknown };
  const original = loader._load;
  loader._load = (req: string, ...rest: unknown[]) => (req === "vscode" ? stub : original(req, ...rest));
  try {
    const ext = require(bundle) as { activate?: unknown; deactivate?: unknown };
    assert.equal(typeof ext.activate, "function");
    assert.equal(typeof ext.deactivate, "function");
  } finally {
    loader._load = original;
  }
});
