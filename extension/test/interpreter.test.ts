import assert from "node:assert/strict";
import { test } from "node:test";

import { checkServer, CHECK_ARGS, Exec, expandSetting, findInterpreter, installCommand, PythonEnvironmentsApi } from "../src/interpreter";

function api(exe: string | undefined, active = true): PythonEnvironmentsApi & { asked: unknown[] } {
  const asked: unknown[] = [];
  return {
    asked,
    getActiveEnvironmentPath(resource) {
      asked.push(resource);
      return active ? { id: "env", path: "/envs/a" } : undefined;
    },
    async resolveEnvironment() {
      return exe === undefined ? undefined : { executable: { uri: { fsPath: exe } } };
    },
  };
}

test("the Python extension's interpreter wins over the setting and PATH", async () => {
  const a = api("/envs/a/bin/python");
  const got = await findInterpreter({ pythonApi: a, resource: "folder-uri", setting: "/usr/bin/python3.12" });
  assert.deepEqual(got, { command: "/envs/a/bin/python", source: "python-extension" });
  assert.deepEqual(a.asked, ["folder-uri"]);
});

test("the setting is used when the Python extension is absent or cannot resolve", async () => {
  const logs: string[] = [];
  assert.deepEqual(await findInterpreter({ setting: " /opt/py/bin/python " }), { command: "/opt/py/bin/python", source: "setting" });
  const got = await findInterpreter({ pythonApi: api(undefined), setting: "/opt/py/bin/python", log: (l) => logs.push(l) });
  assert.equal(got.source, "setting");
  assert.match(logs[0] ?? "", /could not resolve/);
});

test("a throwing Python extension falls through to the next source", async () => {
  const broken: PythonEnvironmentsApi = {
    getActiveEnvironmentPath() {
      throw new Error("boom");
    },
    async resolveEnvironment() {
      return undefined;
    },
  };
  const logs: string[] = [];
  const got = await findInterpreter({ pythonApi: broken, log: (l) => logs.push(l) });
  assert.deepEqual(got, { command: "python3", source: "path" });
  assert.deepEqual(logs, ["Python extension: boom"]);
});

test("python3 on PATH last, or the given fallback", async () => {
  assert.deepEqual(await findInterpreter({ pythonApi: api("/x", false), setting: "" }), { command: "python3", source: "path" });
  assert.deepEqual(await findInterpreter({ fallback: "python" }), { command: "python", source: "path" });
});

test("the setting expands ${workspaceFolder} and ~", async () => {
  assert.equal(expandSetting("${workspaceFolder}/.venv/bin/python", "/ws"), "/ws/.venv/bin/python");
  assert.equal(expandSetting("~/py/bin/python", undefined, "/home/u"), "/home/u/py/bin/python");
  assert.equal(expandSetting("/a~b", undefined, "/home/u"), "/a~b");
  const got = await findInterpreter({ setting: "${workspaceFolder}/.venv/bin/python", workspaceFolder: "/ws" });
  assert.equal(got.command, "/ws/.venv/bin/python");
});

test("checkServer runs the import check and passes on exit 0", async () => {
  const calls: [string, string[]][] = [];
  const exec: Exec = async (c, a) => {
    calls.push([c, a]);
    return { code: 0, stdout: "", stderr: "" };
  };
  assert.deepEqual(await checkServer("/venv/bin/python", exec), { ok: true });
  assert.deepEqual(calls, [["/venv/bin/python", ["-c", "import stitchcuda.server.server"]]]);
  assert.deepEqual(CHECK_ARGS, ["-c", "import stitchcuda.server.server"]);
});

test("a missing server gives the exact install command", async () => {
  const exec: Exec = async () => ({
    code: 1,
    stdout: "",
    stderr: "Traceback (most recent call last):\n  ...\nModuleNotFoundError: No module named 'stitchcuda'\n",
  });
  const r = await checkServer("/venv/bin/python", exec);
  assert.equal(r.ok, false);
  if (!r.ok) {
    assert.equal(r.install, "/venv/bin/python -m pip install 'stitchcuda[server]'");
    assert.equal(r.detail, "ModuleNotFoundError: No module named 'stitchcuda'");
    assert.ok(r.message.includes(r.install));
  }
});

test("an interpreter that does not start is reported as such", async () => {
  const exec: Exec = async () => ({ code: null, stdout: "", stderr: "", error: "spawn nope ENOENT" });
  const r = await checkServer("nope", exec);
  assert.equal(r.ok, false);
  if (!r.ok) {
    assert.match(r.message, /could not run the Python interpreter nope/);
    assert.equal(r.install, "nope -m pip install 'stitchcuda[server]'");
  }
});

test("install command quotes paths with spaces", () => {
  assert.equal(installCommand("/My Envs/py/bin/python"), "'/My Envs/py/bin/python' -m pip install 'stitchcuda[server]'");
  assert.equal(installCommand("C:/Program Files/Python/python.exe").startsWith("'C:/Program Files"), true);
});
