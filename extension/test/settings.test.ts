import assert from "node:assert/strict";
import { test } from "node:test";

import { DEFAULTS, redact, resolveSettings, serverEnv } from "../src/settings";

const noKey = { hasApiKey: false };

test("defaults when nothing is set, with exactly the server's keys", () => {
  const r = resolveSettings(undefined, noKey);
  assert.deepEqual(r.settings, DEFAULTS);
  assert.deepEqual(r.problems, []);
  assert.deepEqual(Object.keys(r.settings).sort(), [
    "coder", "gpu", "llmEndpoint", "llmModel", "outputFolder", "profile", "replay", "rounds", "runsFolder", "timeBudget",
    "timeline",
  ]);
});

test("VS Code's raw section (with interpreter and trace, empty strings) maps to the server's view", () => {
  const raw = {
    interpreter: "/x/python", trace: { server: "off" }, coder: "builtin", rounds: 5, timeBudget: 600, gpu: 1,
    llmEndpoint: "", llmModel: "", outputFolder: "${workspaceFolder}/out", runsFolder: "~/runs", replay: "", profile: false,
    timeline: false,
  };
  const r = resolveSettings(raw, { hasApiKey: false, workspaceFolder: "/ws", home: "/home/u" });
  assert.deepEqual(r.settings, {
    coder: "builtin", rounds: 5, timeBudget: 600, gpu: 1, llmEndpoint: null, llmModel: null,
    outputFolder: "/ws/out", runsFolder: "/home/u/runs", replay: null, profile: false, timeline: false,
  });
  assert.deepEqual(r.problems, []);
});

test("bad values become defaults, with a warning each", () => {
  const r = resolveSettings({ coder: "gpt", rounds: 0, timeBudget: -1, gpu: 1.5, profile: "yes", timeline: 1 }, noKey);
  assert.deepEqual(r.settings, DEFAULTS);
  assert.deepEqual(r.problems.map((p) => [p.severity, p.setting]), [
    ["warning", "stitchcuda.coder"],
    ["warning", "stitchcuda.rounds"],
    ["warning", "stitchcuda.timeBudget"],
    ["warning", "stitchcuda.gpu"],
    ["warning", "stitchcuda.profile"],
    ["warning", "stitchcuda.timeline"],
  ]);
});

test("null timeBudget and gpu are the defaults, not problems", () => {
  const r = resolveSettings({ timeBudget: null, gpu: null, gpu0: 0 }, noKey);
  assert.equal(r.settings.timeBudget, null);
  assert.equal(r.settings.gpu, null);
  assert.equal(resolveSettings({ gpu: 0 }, noKey).settings.gpu, 0);
  assert.deepEqual(r.problems, []);
});

test("the llm coder needs an endpoint, a model and an API key (errors: optimise is refused)", () => {
  const r = resolveSettings({ coder: "llm" }, noKey);
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

test("an endpoint that is not a URL is an error for the llm coder, a warning otherwise", () => {
  const llm = resolveSettings({ coder: "llm", llmEndpoint: "api.example.com", llmModel: "m" }, { hasApiKey: true });
  assert.deepEqual(llm.problems.map((p) => p.severity), ["error"]);
  const builtin = resolveSettings({ llmEndpoint: "api.example.com" }, noKey);
  assert.deepEqual(builtin.problems.map((p) => p.severity), ["warning"]);
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
