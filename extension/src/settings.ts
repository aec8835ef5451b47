// What the server gets when it asks for the `stitchcuda` section (workspace/configuration), and
// what stops a job before it starts. Pure: the configuration is an argument.
//
// The keys, defaults and types are not written here: they come from settings.schema.json, which
// `python -m stitchcuda.settings --write` generates from the one schema (stitchcuda/settings.py).
// The server validates the values against the same schema and tells the user (window/showMessage)
// about each bad one, in VS Code and any other client alike; this side only expands paths, which
// need the workspace, and refuses settings a job cannot start with (the llm coder's endpoint, model
// and API key, the last of which only the extension knows).

import schemaJson from "./settings.schema.json";

/** One `stitchcuda.<name>` setting (stitchcuda/settings.py `Key`). */
export interface SettingSpec {
  name: string;
  type: "string" | "integer" | "number" | "boolean";
  default: string | number | boolean | null;
  description: string;
  /** The server's Settings attribute; null: the extension's own setting, never sent to the server. */
  attr: string | null;
  /** The `stitchcuda optimize` flag it maps to, if any. */
  cli: string | null;
  nullable: boolean;
  enum: string[] | null;
  enum_descriptions: string[] | null;
  minimum: number | null;
  maximum: number | null;
  pattern: string | null;
  pattern_error: string | null;
  markdown: boolean;
  /** `${workspaceFolder}` and `~` are expanded here. */
  path: boolean;
  scope: string;
}

export interface SettingsSchema {
  section: string;
  title: string;
  keys: SettingSpec[];
}

export const SCHEMA = schemaJson as SettingsSchema;
export const SECTION = SCHEMA.section;

/** The keys the server reads, in the schema's order. */
export const SERVER_KEYS: readonly string[] = SCHEMA.keys.filter((k) => k.attr !== null).map((k) => k.name);

/** What the server is sent: the server's keys and nothing else (the values are checked there). */
export type ServerSettings = Record<string, unknown>;

export const DEFAULTS: Readonly<ServerSettings> = Object.freeze(
  Object.fromEntries(SCHEMA.keys.filter((k) => k.attr !== null).map((k) => [k.name, k.default])),
);

function spec(name: string): SettingSpec {
  const s = SCHEMA.keys.find((k) => k.name === name);
  if (s === undefined) {
    // Renaming a key in the schema must not silently switch off the checks below.
    throw new Error(`settings.schema.json has no ${SECTION}.${name}`);
  }
  return s;
}

const CODER = spec("coder");
const ENDPOINT = spec("llmEndpoint");
const MODEL = spec("llmModel");

export interface Problem {
  /** error: a job with these settings cannot work (optimise is refused). The server reports bad values. */
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

/** What `vscode.workspace.getConfiguration(SECTION, scope)` gives, as far as settings go. */
export interface Configuration {
  get(key: string): unknown;
}

function text(v: unknown): string | null {
  return typeof v === "string" && v.trim() !== "" ? v.trim() : null;
}

function expand(v: string, ctx: ResolveContext): string {
  let s = v.trim();
  if (ctx.workspaceFolder !== undefined) {
    s = s.split("${workspaceFolder}").join(ctx.workspaceFolder);
  }
  if (ctx.home !== undefined && (s === "~" || s.startsWith("~/"))) {
    s = ctx.home + s.slice(1);
  }
  return s;
}

/** The server's view of a raw `stitchcuda` section: its keys, defaults for unset ones (undefined or
 * null), paths expanded; every other value as the user wrote it, false included, for the server to check. */
export function resolveSettings(raw: Record<string, unknown> | undefined | null, ctx: ResolveContext): Resolved {
  const r = raw ?? {};
  const settings: ServerSettings = {};
  for (const k of SCHEMA.keys) {
    if (k.attr === null) {
      continue;
    }
    const v = r[k.name];
    settings[k.name] = v === undefined || v === null ? k.default : k.path && typeof v === "string" ? expand(v, ctx) : v;
  }

  const problems: Problem[] = [];
  if (settings[CODER.name] === "llm") {
    const need = (key: SettingSpec, message: string) =>
      problems.push({ severity: "error", setting: `${SECTION}.${key.name}`, message });
    const endpoint = text(settings[ENDPOINT.name]);
    if (endpoint === null) {
      need(ENDPOINT, `the llm coder needs ${SECTION}.${ENDPOINT.name}`);
    } else if (ENDPOINT.pattern !== null && !new RegExp(ENDPOINT.pattern).test(endpoint)) {
      need(ENDPOINT, `${SECTION}.${ENDPOINT.name} must be ${ENDPOINT.pattern_error}, not ${JSON.stringify(endpoint)}`);
    }
    if (text(settings[MODEL.name]) === null) {
      need(MODEL, `the llm coder needs ${SECTION}.${MODEL.name}`);
    }
    if (!ctx.hasApiKey) {
      problems.push({
        severity: "error",
        setting: "apiKey",
        message: "the llm coder needs an API key: run 'StitchCUDA: Set LLM API Key'",
      });
    }
  }
  return { settings, problems };
}

/** resolveSettings over VS Code's configuration for a scope: what extension.ts sends the server and
 * checks before it starts a job. Reads every server key of the schema, so none can be left out. */
export function readSettings(cfg: Configuration, ctx: ResolveContext): Resolved {
  return resolveSettings(Object.fromEntries(SERVER_KEYS.map((k) => [k, cfg.get(k)])), ctx);
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
