import assert from "node:assert/strict";
import { test } from "node:test";

import { DEFAULTS, readSettings, redact, resolveSettings, SCHEMA, SECTION, SERVER_KEYS, serverEnv } from "../src/settings";

const noKey = { hasApiKey: false };

/** A stand-in for vscode.WorkspaceConfiguration: `get` of a key that is not set gives undefined. */
function configuration(values: Record<string, unknown>) {
  const asked: string[] = [];
  return {
    asked,
    get(key: string): unknown {
      asked.push(key);
      return values[key];
    },
  };
}

test("the keys and defaults are the schema's server keys (the extension's own stay here)", () => {
  assert.equal(SECTION, "stitchcuda");
  assert.deepEqual([...SERVER_KEYS].sort(), [
    "arches", "coder", "gpu", "gpus", "llmEndpoint", "llmModel", "mode", "outputFolder", "perRound", "precision", "profile", "replay",
    "rounds", "runsFolder", "timeBudget", "timeline",
  ]);
  for (const own of ["interpreter", "trace.server"]) {
    assert.ok(SCHEMA.keys.some((k) => k.name === own && k.attr === null), `${own} is the extension's`);
  }
  assert.deepEqual(DEFAULTS, {
    coder: "builtin", precision: "tf32", mode: "as-built", rounds: 3, arches: "", timeBudget: null, gpu: null, gpus: "", perRound: null,
    llmEndpoint: "", llmModel: "", outputFolder: "", runsFolder: "", profile: true, timeline: true, replay: "",
  });
});

test("defaults when nothing is set", () => {
  const r = resolveSettings(undefined, noKey);
  assert.deepEqual(r.settings, DEFAULTS);
  assert.deepEqual(r.problems, []);
  assert.deepEqual(resolveSettings({ timeBudget: null, gpu: null }, noKey).settings, DEFAULTS);
});

test("VS Code's raw section (with interpreter and trace) maps to the server's keys, paths expanded", () => {
  const raw = {
    interpreter: "/x/python", trace: { server: "off" }, coder: "builtin", rounds: 5, timeBudget: 600, gpu: 0,
    gpus: "0,1", perRound: 2, llmEndpoint: "", llmModel: "", outputFolder: "${workspaceFolder}/out", runsFolder: " ~/runs ",
    replay: "~", profile: false, timeline: false, precision: "strict", mode: "eval", arches: "sm_80,sm_90",
  };
  const r = resolveSettings(raw, { hasApiKey: false, workspaceFolder: "/ws", home: "/home/u" });
  assert.deepEqual(r.settings, {
    coder: "builtin", rounds: 5, timeBudget: 600, gpu: 0, gpus: "0,1", perRound: 2, llmEndpoint: "", llmModel: "",
    outputFolder: "/ws/out", runsFolder: "/home/u/runs", replay: "/home/u", profile: false, timeline: false,
    precision: "strict", mode: "eval", arches: "sm_80,sm_90",
  });
  assert.deepEqual(r.problems, []);
});

test("readSettings asks VS Code for every server key, and false reaches the server (timeline was dropped)", () => {
  const cfg = configuration({ timeline: false, profile: false, rounds: 2, interpreter: "/x/python" });
  const r = readSettings(cfg, noKey);
  assert.deepEqual([...cfg.asked].sort(), [...SERVER_KEYS].sort());
  assert.equal(r.settings.timeline, false);
  assert.equal(r.settings.profile, false);
  assert.equal(r.settings.rounds, 2);
  assert.equal("interpreter" in r.settings, false);
});

test("bad values go to the server as written: it checks them against the schema and says what is wrong", () => {
  const raw = { coder: "gpt", rounds: 0, timeBudget: -1, gpu: 1.5, profile: "yes", timeline: 1 };
  const r = resolveSettings(raw, noKey);
  assert.deepEqual(r.settings, { ...DEFAULTS, ...raw });
  assert.deepEqual(r.problems, []);
});

test("the llm coder needs an endpoint, a model and an API key (errors: optimise is refused)", () => {
  const r = resolveSettings({ coder: "llm", llmEndpoint: "  " }, noKey);
  assert.equal(r.settings.coder, "llm");
  assert.deepEqual(r.problems.map((p) => [p.severity, p.setting]), [
    ["error", "stitchcuda.llmEndpoint"],
    ["error", "stitchcuda.llmModel"],
    ["error", "apiKey"],
  ]);
  const ok = resolveSettings({ coder: "llm", llmEndpoint: "https://api.example.com/v1", llmModel: "m" }, { hasApiKey: true });
  assert.deepEqual(ok.problems, []);
  assert.equal(ok.settings.llmEndpoint, "https://api.example.com/v1");
});

test("an endpoint that is not a URL (the schema's pattern) stops the llm coder; the builtin coder leaves it to the server", () => {
  const llm = resolveSettings({ coder: "llm", llmEndpoint: "api.example.com", llmModel: "m" }, { hasApiKey: true });
  assert.deepEqual(llm.problems.map((p) => [p.severity, p.setting]), [["error", "stitchcuda.llmEndpoint"]]);
  assert.match(llm.problems[0].message, /http\(s\) base URL/);
  assert.deepEqual(resolveSettings({ llmEndpoint: "api.example.com" }, noKey).problems, []);
});

test("the API key reaches the server only through its environment", () => {
  const base = { PATH: "/bin", HOME: "/h" };
  const env = serverEnv(base, "sk-secret");
  assert.equal(env.STITCHCUDA_LLM_API_KEY, "sk-secret");
  assert.equal(env.PATH, "/bin");
  assert.equal("STITCHCUDA_LLM_API_KEY" in base, false, "the extension host's own environment is not changed");
  assert.equal(serverEnv(base, undefined).STITCHCUDA_LLM_API_KEY, undefined);
  assert.equal(serverEnv({ STITCHCUDA_LLM_API_KEY: "inherited" }, undefined).STITCHCUDA_LLM_API_KEY, "inherited");
  assert.equal(serverEnv({ STITCHCUDA_LLM_API_KEY: "inherited" }, "stored").STITCHCUDA_LLM_API_KEY, "stored");
  // and is never in the settings the server is sent
  const r = resolveSettings({ coder: "llm", llmEndpoint: "https://e/v1", llmModel: "m", apiKey: "sk-secret" }, { hasApiKey: true });
  assert.equal(JSON.stringify(r.settings).includes("sk-secret"), false);
});

test("redact hides the key in logged lines", () => {
  assert.equal(redact("failed with key sk-1 and sk-1", "sk-1"), "failed with key *** and ***");
  assert.equal(redact("nothing", undefined), "nothing");
});
