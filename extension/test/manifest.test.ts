// The manifest agrees with the code: every server setting is contributed, every command the
// extension registers is declared, and no declared command clashes with a server command (the
// language client registers the server's commands itself; a second registration would fail).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { CMD, PROPOSAL_SCHEME } from "../src/review";
import { DEFAULTS, SECTION } from "../src/settings";

const root = join(__dirname, "..", "..");
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
const source = readFileSync(join(root, "extension", "src", "extension.ts"), "utf8");

test("every server setting and the extension's own are contributed", () => {
  const props = Object.keys(pkg.contributes.configuration.properties);
  for (const k of [...Object.keys(DEFAULTS), "interpreter", "trace.server"]) {
    assert.ok(props.includes(`${SECTION}.${k}`), `${SECTION}.${k} missing`);
  }
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
