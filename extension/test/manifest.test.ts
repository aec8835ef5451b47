// The manifest agrees with the code: every setting of the schema is contributed as the schema says
// (tests/test_settings.py checks every field against stitchcuda/settings.py), every command the
// extension registers is declared, and no declared command clashes with a server command (the
// language client registers the server's commands itself; a second registration would fail).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { CMD, PROPOSAL_SCHEME } from "../src/review";
import { SCHEMA, SECTION, SERVER_KEYS } from "../src/settings";

const root = join(__dirname, "..", "..");
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
const source = readFileSync(join(root, "extension", "src", "extension.ts"), "utf8");

test("the contributed settings are the schema's keys, with its types, defaults and enums", () => {
  const props = pkg.contributes.configuration.properties;
  assert.deepEqual(Object.keys(props), SCHEMA.keys.map((k) => `${SECTION}.${k.name}`));
  for (const k of SCHEMA.keys) {
    const p = props[`${SECTION}.${k.name}`];
    assert.deepEqual(p.type, k.nullable ? [k.type, "null"] : k.type, k.name);
    assert.deepEqual(p.default, k.default, k.name);
    assert.deepEqual(p.enum, k.enum ?? undefined, k.name);
  }
});

// Every server key comes from the schema (readSettings), so a new setting is added in one place.
test("extension.ts names no server key: it reads them all from the schema", () => {
  const literals = new Set([...source.matchAll(/"([A-Za-z.]+)"/g)].map((m) => m[1]));
  assert.deepEqual(SERVER_KEYS.filter((k) => literals.has(k)), []);
});

test("registered commands are declared and none is a server command", () => {
  const registered = [...source.matchAll(/registerCommand\("([^"]+)"/g)].map((m) => m[1]);
  const declared = pkg.contributes.commands.map((c: { command: string }) => c.command);
  assert.deepEqual([...registered].sort(), [...declared].sort());
  for (const c of Object.values(CMD)) {
    assert.equal(declared.includes(c), false, `${c} is the server's`);
  }
});

test("accept/reject are editor-title actions on proposal documents", () => {
  const title = pkg.contributes.menus["editor/title"];
  assert.deepEqual(title.map((m: { command: string }) => m.command), ["stitchcuda.acceptProposal", "stitchcuda.rejectProposal"]);
  for (const m of title) {
    assert.equal(m.when, `resourceScheme == ${PROPOSAL_SCHEME}`);
  }
});

test("manifest basics", () => {
  assert.equal(pkg.main, "./dist/extension.js");
  assert.deepEqual(pkg.activationEvents, ["onLanguage:python"]);
  assert.equal(pkg.engines.vscode, "^1.90.0");
});

test("runs where the workspace (and its GPU) is, and never in an untrusted workspace", () => {
  // Remote SSH / code-server: the extension, and so the server it starts, run on the workspace's host.
  assert.deepEqual(pkg.extensionKind, ["workspace"]);
  // Optimising a module imports and runs it: not for code the user has not trusted.
  assert.equal(pkg.capabilities.untrustedWorkspaces.supported, false);
  assert.equal(pkg.capabilities.virtualWorkspaces, false);
});
