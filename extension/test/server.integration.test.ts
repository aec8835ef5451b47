// The review flow against the real language server, over stdio, with the messages VS Code's
// language client would answer (configuration through resolveSettings, applyEdit, progress).
// Runs when STITCHCUDA_TEST_PYTHON names a Python that has stitchcuda[server] and torch (the
// repository's .venv); without a GPU the recorded H100 run is replayed, as in tests/test_server_lsp.py.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

import { createMessageConnection, StreamMessageReader, StreamMessageWriter } from "vscode-jsonrpc/node";

import { JobUpdate } from "../src/events";
import { DiffRequest, PickItem, ReviewFlow, ReviewUi } from "../src/review";
import { resolveSettings } from "../src/settings";

const ROOT = join(__dirname, "..", "..");
const PY = process.env.STITCHCUDA_TEST_PYTHON ? resolve(process.env.STITCHCUDA_TEST_PYTHON) : undefined;
const RECORDED = join(ROOT, "bench", "results", "2026-11-23-h100-example-gated_block.json");
const skip = !PY ? "set STITCHCUDA_TEST_PYTHON to a Python with stitchcuda[server]"
  : spawnSync(PY, ["-c", "import stitchcuda.server.server, torch"]).status !== 0 ? `${PY} cannot import the server and torch`
    : !existsSync(RECORDED) ? "no recorded run" : false;

test("optimise -> jobUpdate -> showProposal -> diffs -> Accept -> files written", { skip, timeout: 300_000 }, async () => {
  const tmp = mkdtempSync(join(tmpdir(), "stitchcuda-ext-"));
  const ws = join(tmp, "ws");
  mkdirSync(ws);
  const file = join(ws, "gated_block.py");
  writeFileSync(file, readFileSync(join(ROOT, "examples", "gated_block.py"), "utf8"));
  const uri = pathToFileURL(file).toString();

  const proc = spawn(PY!, ["-m", "stitchcuda.cli", "serve"], { cwd: ws, env: { ...process.env, STITCHCUDA_LLM_API_KEY: "sk-test" } });
  const conn = createMessageConnection(new StreamMessageReader(proc.stdout), new StreamMessageWriter(proc.stdin));
  const raw = { replay: RECORDED, runsFolder: join(tmp, "runs"), rounds: 2, interpreter: "ignored" };
  const asked: unknown[] = [];
  conn.onRequest("workspace/configuration", (p: { items: { section?: string }[] }) => {
    asked.push(p);
    return p.items.map((i) => (i.section === "stitchcuda" ? resolveSettings(raw, { hasApiKey: true }).settings : null));
  });
  conn.onRequest("window/workDoneProgress/create", () => null);
  conn.onNotification("$/progress", () => undefined);
  conn.onNotification("window/showMessage", () => undefined);
  conn.onNotification("textDocument/publishDiagnostics", () => undefined);
  conn.onRequest("workspace/applyEdit", (p: { edit: { documentChanges: { kind?: string; uri?: string; textDocument?: { uri: string }; edits?: { newText: string }[] }[] } }) => {
    for (const c of p.edit.documentChanges) {
      if (c.kind === "create") {
        const f = fileURLToPath(c.uri!);
        mkdirSync(join(f, ".."), { recursive: true });
        writeFileSync(f, "");
      } else if (c.textDocument) {
        const f = fileURLToPath(c.textDocument.uri);
        writeFileSync(f, c.edits!.map((e) => e.newText).join("") + readFileSync(f, "utf8"));
      }
    }
    return { applied: true };
  });

  const diffs: DiffRequest[] = [];
  const proposed: string[] = [];
  const opened: string[][] = [];
  let finished!: () => void;
  const done = new Promise<void>((r) => (finished = r));
  const ui: ReviewUi = {
    fileExists: async (u) => existsSync(fileURLToPath(u)),
    showDiff: async (r) => {
      diffs.push(r);
      proposed.push(flow.content(r.jobId, r.index, "proposed") ?? "");
    },
    closeDiffs: async () => undefined,
    setProposalShown: () => undefined,
    ask: async () => "Accept",
    error: (m) => assert.fail(m),
    info: () => undefined,
    openFiles: async (u) => {
      opened.push(u);
      finished();
    },
    status: () => undefined,
    startProgress: () => ({ report: () => undefined, end: () => undefined }),
    pick: async (items: PickItem[]) => items[0],
    showHtml: (title, html) => pages.push([title, html]),
  };
  const pages: [string, string][] = [];
  const flow = new ReviewFlow({ execute: (command, args) => conn.sendRequest("workspace/executeCommand", { command, arguments: args }) }, ui);
  const updates: JobUpdate[] = [];
  conn.onNotification("stitchcuda/jobUpdate", (u: JobUpdate) => {
    updates.push(u);
    void flow.onJobUpdate(u);
  });
  conn.listen();
  try {
    const init = await conn.sendRequest("initialize", {
      processId: process.pid, rootUri: pathToFileURL(ws).toString(), workspaceFolders: [{ uri: pathToFileURL(ws).toString(), name: "ws" }],
      initializationOptions: { client: "stitchcuda-vscode", jobUi: true },
      capabilities: {
        workspace: { configuration: true, applyEdit: true, workspaceEdit: { documentChanges: true, resourceOperations: ["create", "rename", "delete"] } },
        window: { workDoneProgress: true },
      },
    }) as { capabilities: { executeCommandProvider?: { commands: string[] } } };
    assert.deepEqual([...(init.capabilities.executeCommandProvider?.commands ?? [])].sort(), [
      "stitchcuda.accept", "stitchcuda.cancel", "stitchcuda.jobs", "stitchcuda.optimize", "stitchcuda.reject", "stitchcuda.results",
      "stitchcuda.showProposal",
    ]);
    await conn.sendNotification("initialized", {});
    const started = await conn.sendRequest("workspace/executeCommand", { command: "stitchcuda.optimize", arguments: [uri, "Block"] }) as { jobId: string; token: string };
    assert.ok(started.jobId && started.token);
    await done;
    assert.equal(asked.length, 1);
    assert.equal(updates[0]!.state, "running");
    const last = updates[updates.length - 1]!;
    assert.equal(last.state, "done");
    assert.ok(last.hasProposal && last.best?.status === "ok" && last.best.replayed, JSON.stringify(last));
    assert.ok(Math.abs((last.best?.speedup_eager ?? 0) - 5.22) < 0.01, JSON.stringify(last.best));
    // Progress arrives typed: the round as a number, the phase from the fixed vocabulary.
    assert.ok(updates.some((u) => u.progress?.phase === "coding" && u.progress.round === 2), "round 2 was coded");
    assert.deepEqual(diffs.map((d) => [d.fileUri.split("/").pop(), d.exists]), [["fused_kernels.cu", false], ["model_new.py", false]]);
    assert.match(proposed[0]!, /__global__/);
    assert.match(proposed[1]!, /class ModelNew/);
    assert.equal(flow.proposals.size, 0, "accepted: no proposal left");
    const folder = join(ws, "gated_block_stitchcuda");
    const accepted = readdirSync(folder).sort();
    assert.deepEqual(accepted.filter((f) => !f.endsWith(".so")), ["fused_kernels.cu", "model_new.py"]);
    // The kernels' prebuilt library (named by the sources' digest), copied by the server on accept.
    assert.equal(accepted.filter((f) => /^fused_kernels\.[0-9a-f]{16}\.so$/.test(f)).length, 1, accepted.join(", "));
    assert.equal(opened[0]!.length, 2);
    // The results view: the server's page for this job, with the replayed verdict's row.
    await flow.showResults(started.jobId);
    assert.equal(pages.length, 1);
    assert.match(pages[0]![1], /Content-Security-Policy/);
    assert.match(pages[0]![1], /<td>r1-builtin-pointwise \(proposed\)<\/td><td>ok<\/td>/);
  } finally {
    await conn.sendRequest("shutdown").catch(() => undefined);
    await conn.sendNotification("exit").catch(() => undefined);
    conn.dispose();
    proc.kill();
  }
});
