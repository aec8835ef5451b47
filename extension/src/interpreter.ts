// Which Python runs the language server, and whether it can. Pure: every input (the Python
// extension's API, the setting, the environment, a way to run a process) is an argument, so this
// is unit-tested without VS Code.

/** The part of the Python extension's public API (ms-python.python `exports.environments`) we use. */
export interface PythonEnvironmentsApi {
  getActiveEnvironmentPath(resource?: unknown): { id: string; path: string } | undefined;
  resolveEnvironment(
    env: { id: string; path: string } | string,
  ): Promise<{ executable: { uri?: { fsPath: string } | undefined } } | undefined>;
}

export type InterpreterSource = "python-extension" | "setting" | "path";

export interface Interpreter {
  command: string;
  source: InterpreterSource;
}

export interface DiscoveryInputs {
  /** `exports.environments` of the Python extension when it is installed and active, else undefined. */
  pythonApi?: PythonEnvironmentsApi;
  /** The resource (workspace folder uri) the active environment is asked for. */
  resource?: unknown;
  /** The `stitchcuda.interpreter` setting. */
  setting?: string;
  /** For expanding `${workspaceFolder}` in the setting. */
  workspaceFolder?: string;
  /** For expanding `~` in the setting. */
  home?: string;
  /** Logged reasons why a source was skipped. */
  log?: (line: string) => void;
  /** The fallback command (python3, or python on Windows). */
  fallback?: string;
}

export function expandSetting(value: string, workspaceFolder?: string, home?: string): string {
  let v = value.trim();
  if (workspaceFolder !== undefined) {
    v = v.split("${workspaceFolder}").join(workspaceFolder);
  }
  if (home !== undefined && (v === "~" || v.startsWith("~/"))) {
    v = home + v.slice(1);
  }
  return v;
}

/**
 * The Python extension's selected interpreter first (the user already chose it there), else the
 * `stitchcuda.interpreter` setting, else python3 on PATH.
 */
export async function findInterpreter(inp: DiscoveryInputs): Promise<Interpreter> {
  const log = inp.log ?? (() => undefined);
  if (inp.pythonApi) {
    try {
      const active = inp.pythonApi.getActiveEnvironmentPath(inp.resource);
      if (active) {
        const resolved = await inp.pythonApi.resolveEnvironment(active);
        const exe = resolved?.executable?.uri?.fsPath;
        if (exe) {
          return { command: exe, source: "python-extension" };
        }
        log(`Python extension: could not resolve the active environment ${active.path}`);
      }
    } catch (e) {
      log(`Python extension: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  const setting = expandSetting(inp.setting ?? "", inp.workspaceFolder, inp.home);
  if (setting) {
    return { command: setting, source: "setting" };
  }
  return { command: inp.fallback ?? "python3", source: "path" };
}

/** Runs a program; resolves with its exit code (or an error when it could not start) and output. */
export type Exec = (
  command: string,
  args: string[],
) => Promise<{ code: number | null; stdout: string; stderr: string; error?: string }>;

export const CHECK_ARGS = ["-c", "import stitchcuda.server.server"];

/** Quotes one word for a POSIX shell (and reads fine in a notification). */
export function shellQuote(word: string): string {
  return /^[A-Za-z0-9_./:=@+-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

export function installCommand(python: string): string {
  return `${shellQuote(python)} -m pip install 'stitchcuda[server]'`;
}

export type CheckResult =
  | { ok: true }
  | { ok: false; message: string; install: string; detail: string };

/** Whether `python` can import the server; if not, what to tell the user and the command to run. */
export async function checkServer(python: string, exec: Exec): Promise<CheckResult> {
  const r = await exec(python, CHECK_ARGS);
  if (r.code === 0 && !r.error) {
    return { ok: true };
  }
  const install = installCommand(python);
  if (r.error) {
    return {
      ok: false,
      message: `StitchCUDA: could not run the Python interpreter ${python} (${r.error}). ` +
        `Select an interpreter in the Python extension or set stitchcuda.interpreter, then install the server: ${install}`,
      install,
      detail: r.error,
    };
  }
  const lines = (r.stderr || r.stdout).trim().split(/\r?\n/);
  const detail = lines[lines.length - 1] ?? "";
  return {
    ok: false,
    message: `StitchCUDA: the language server is not installed for ${python} (${detail}). Install it with: ${install}`,
    install,
    detail,
  };
}
