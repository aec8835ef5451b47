// What the server gets when it asks for the `stitchcuda` section (workspace/configuration), and
// what is wrong with it. Pure: the raw section is an argument.

export const SECTION = "stitchcuda";

/** The keys the server reads (stitchcuda/server/jobs.py JobSettings.from_config), nothing else. */
export interface ServerSettings {
  coder: "builtin" | "llm";
  rounds: number;
  timeBudget: number | null;
  gpu: number | null;
  llmEndpoint: string | null;
  llmModel: string | null;
  outputFolder: string | null;
  runsFolder: string | null;
  replay: string | null;
  profile: boolean;
  timeline: boolean;
}

export const DEFAULTS: ServerSettings = {
  coder: "builtin",
  rounds: 3,
  timeBudget: null,
  gpu: null,
  llmEndpoint: null,
  llmModel: null,
  outputFolder: null,
  runsFolder: null,
  replay: null,
  profile: true,
  timeline: true,
};

export interface Problem {
  /** error: a job with these settings cannot work (optimise is refused); warning: a value was replaced. */
  severity: "error" | "warning";
  setting: string;
  message: string;
}

export interface Resolved {
  settings: ServerSettings;
  problems: Problem[];
}

export interface ResolveContext {
  hasApiKey: boolean;
  workspaceFolder?: string;
  home?: string;
}

function text(v: unknown): string | null {
  return typeof v === "string" && v.trim() !== "" ? v.trim() : null;
}

function path(v: unknown, ctx: ResolveContext): string | null {
  let s = text(v);
  if (s === null) {
    return null;
  }
  if (ctx.workspaceFolder !== undefined) {
    s = s.split("${workspaceFolder}").join(ctx.workspaceFolder);
  }
  if (ctx.home !== undefined && (s === "~" || s.startsWith("~/"))) {
    s = ctx.home + s.slice(1);
  }
  return s;
}

/** The server's view of the raw `stitchcuda` section: defaults for bad values, plus what was wrong. */
export function resolveSettings(raw: Record<string, unknown> | undefined | null, ctx: ResolveContext): Resolved {
  const r = raw ?? {};
  const problems: Problem[] = [];
  const s: ServerSettings = { ...DEFAULTS };
  const bad = (setting: string, message: string) =>
    problems.push({ severity: "warning", setting: `${SECTION}.${setting}`, message });

  if (r.coder === "builtin" || r.coder === "llm") {
    s.coder = r.coder;
  } else if (r.coder !== undefined && r.coder !== null) {
    bad("coder", `unknown coder ${JSON.stringify(r.coder)}; using "builtin"`);
  }
  if (r.rounds !== undefined && r.rounds !== null) {
    if (typeof r.rounds === "number" && Number.isInteger(r.rounds) && r.rounds >= 1) {
      s.rounds = r.rounds;
    } else {
      bad("rounds", `rounds must be a whole number >= 1, not ${JSON.stringify(r.rounds)}; using ${DEFAULTS.rounds}`);
    }
  }
  if (r.timeBudget !== undefined && r.timeBudget !== null) {
    if (typeof r.timeBudget === "number" && Number.isFinite(r.timeBudget) && r.timeBudget > 0) {
      s.timeBudget = r.timeBudget;
    } else {
      bad("timeBudget", `timeBudget must be a number of seconds > 0 or null, not ${JSON.stringify(r.timeBudget)}; no budget`);
    }
  }
  if (r.gpu !== undefined && r.gpu !== null) {
    if (typeof r.gpu === "number" && Number.isInteger(r.gpu) && r.gpu >= 0) {
      s.gpu = r.gpu;
    } else {
      bad("gpu", `gpu must be a device index >= 0 or null, not ${JSON.stringify(r.gpu)}; using the default device`);
    }
  }
  s.llmEndpoint = text(r.llmEndpoint);
  s.llmModel = text(r.llmModel);
  s.outputFolder = path(r.outputFolder, ctx);
  s.runsFolder = path(r.runsFolder, ctx);
  s.replay = path(r.replay, ctx);
  for (const key of ["profile", "timeline"] as const) {
    if (typeof r[key] === "boolean") {
      s[key] = r[key] as boolean;
    } else if (r[key] !== undefined && r[key] !== null) {
      bad(key, `${key} must be true or false, not ${JSON.stringify(r[key])}; using true`);
    }
  }

  if (s.llmEndpoint !== null && !/^https?:\/\/[^\s]+$/.test(s.llmEndpoint)) {
    problems.push({
      severity: s.coder === "llm" ? "error" : "warning",
      setting: `${SECTION}.llmEndpoint`,
      message: `llmEndpoint must be an http(s) base URL, not ${JSON.stringify(s.llmEndpoint)}`,
    });
  }
  if (s.coder === "llm") {
    if (s.llmEndpoint === null) {
      problems.push({ severity: "error", setting: `${SECTION}.llmEndpoint`, message: "the llm coder needs stitchcuda.llmEndpoint" });
    }
    if (s.llmModel === null) {
      problems.push({ severity: "error", setting: `${SECTION}.llmModel`, message: "the llm coder needs stitchcuda.llmModel" });
    }
    if (!ctx.hasApiKey) {
      problems.push({
        severity: "error",
        setting: "apiKey",
        message: "the llm coder needs an API key: run 'StitchCUDA: Set LLM API Key'",
      });
    }
  }
  return { settings: s, problems };
}

/** The environment of the server process: the user's, plus the stored API key when there is one
 * (it wins over one inherited from the environment VS Code was started in). */
export function serverEnv(base: NodeJS.ProcessEnv, apiKey: string | undefined): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...base };
  if (apiKey) {
    env.STITCHCUDA_LLM_API_KEY = apiKey;
  }
  return env;
}

/** Hides secrets in anything logged. */
export function redact(line: string, apiKey: string | undefined): string {
  return apiKey ? line.split(apiKey).join("***") : line;
}
