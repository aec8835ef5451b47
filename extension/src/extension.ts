// The VS Code side of StitchCUDA: find the Python interpreter, start the language server, pass
// settings and the API key, show UI. Everything else (code actions, jobs, proposals, diagnostics)
// is the Python server's; the flow decisions are in review.ts, settings in settings.ts and
// interpreter discovery in interpreter.ts, all unit-tested without VS Code.

import { execFile } from "node:child_process";
import * as os from "node:os";
import * as vscode from "vscode";
import {
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  Middleware,
  RevealOutputChannelOn,
  ServerOptions,
} from "vscode-languageclient/node";

import { JobUpdate } from "./events";
import { checkServer, Exec, findInterpreter, PythonEnvironmentsApi } from "./interpreter";
import {
  CMD,
  DiffRequest,
  JOB_UPDATE,
  parseProposalQuery,
  PickItem,
  ProgressHandle,
  PROPOSAL_SCHEME,
  proposalQuery,
  ReviewFlow,
  ReviewUi,
} from "./review";
import { readSettings, redact, SECTION, serverEnv } from "./settings";

const SECRET_KEY = "stitchcuda.llmApiKey";
const CHECK_TIMEOUT_MS = 60_000;

let client: LanguageClient | undefined;
let flow: ReviewFlow;
let output: vscode.LogOutputChannel;
let trace: vscode.OutputChannel;
let context: vscode.ExtensionContext;
let starting: Promise<void> | undefined;

const execCheck: Exec = (command, args) =>
  new Promise((resolve) => {
    execFile(command, args, { timeout: CHECK_TIMEOUT_MS, windowsHide: true }, (err, stdout, stderr) => {
      if (err && typeof (err as NodeJS.ErrnoException).code === "string") {
        resolve({ code: null, stdout, stderr, error: err.message }); // ENOENT, EACCES: did not start
      } else {
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
      }
    });
  });

function workspaceFolder(): vscode.WorkspaceFolder | undefined {
  const active = vscode.window.activeTextEditor?.document.uri;
  return (active && vscode.workspace.getWorkspaceFolder(active)) ?? vscode.workspace.workspaceFolders?.[0];
}

async function pythonApi(): Promise<PythonEnvironmentsApi | undefined> {
  const ext = vscode.extensions.getExtension("ms-python.python");
  if (!ext) {
    return undefined;
  }
  try {
    const api = ext.isActive ? ext.exports : await ext.activate();
    return api?.environments as PythonEnvironmentsApi | undefined;
  } catch (e) {
    output.warn(`Python extension did not activate: ${e instanceof Error ? e.message : String(e)}`);
    return undefined;
  }
}

async function apiKey(): Promise<string | undefined> {
  return (await context.secrets.get(SECRET_KEY)) || undefined;
}

function resolved(scope: vscode.Uri | undefined, hasApiKey: boolean) {
  const folder = (scope && vscode.workspace.getWorkspaceFolder(scope)) ?? workspaceFolder();
  return readSettings(vscode.workspace.getConfiguration(SECTION, scope),
    { hasApiKey, workspaceFolder: folder?.uri.fsPath, home: os.homedir() });
}

const middleware: Middleware = {
  workspace: {
    // The server asks for the `stitchcuda` section; it gets exactly its keys, validated.
    configuration: async (params, token, next) => {
      const hasKey = (await apiKey()) !== undefined;
      const fallback = await next(params, token);
      if (!Array.isArray(fallback)) {
        return fallback;
      }
      return params.items.map((item, i) => {
        if (item.section !== SECTION) {
          return fallback[i];
        }
        const r = resolved(item.scopeUri ? vscode.Uri.parse(item.scopeUri) : undefined, hasKey);
        for (const p of r.problems) {
          output.warn(`${p.setting}: ${p.message}`);
        }
        return r.settings;
      });
    },
  },
  // The code action's command: refuse settings that cannot work, save the file first (the server
  // optimises the file as saved).
  executeCommand: async (command, args, next) => {
    if (command === CMD.optimize && typeof args[0] === "string") {
      const uri = vscode.Uri.parse(args[0]);
      const errors = resolved(uri, (await apiKey()) !== undefined).problems.filter((p) => p.severity === "error");
      if (errors.length > 0) {
        const pick = await vscode.window.showErrorMessage(
          `StitchCUDA: ${errors.map((p) => p.message).join("; ")}`, "Open Settings", "Set LLM API Key");
        if (pick === "Open Settings") {
          void vscode.commands.executeCommand("workbench.action.openSettings", SECTION);
        } else if (pick === "Set LLM API Key") {
          void vscode.commands.executeCommand("stitchcuda.setApiKey");
        }
        return undefined;
      }
      const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri.toString());
      if (doc?.isDirty) {
        await doc.save();
      }
    }
    return next(command, args);
  },
};

async function startServer(): Promise<void> {
  const folder = workspaceFolder();
  const interp = await findInterpreter({
    pythonApi: await pythonApi(),
    resource: folder?.uri,
    setting: vscode.workspace.getConfiguration(SECTION, folder?.uri).get<string>("interpreter", ""),
    workspaceFolder: folder?.uri.fsPath,
    home: os.homedir(),
    fallback: process.platform === "win32" ? "python" : "python3",
    log: (l) => output.info(l),
  });
  output.info(`Python interpreter (${interp.source}): ${interp.command}`);
  const check = await checkServer(interp.command, execCheck);
  if (!check.ok) {
    output.error(check.message);
    const copy = "Copy Install Command";
    void vscode.window.showErrorMessage(check.message, copy, "Select Interpreter", "Show Output").then(async (pick) => {
      if (pick === copy) {
        await vscode.env.clipboard.writeText(check.install);
        void vscode.window.showInformationMessage(`Copied: ${check.install} (run it, then 'StitchCUDA: Restart Server')`);
      } else if (pick === "Select Interpreter") {
        void vscode.commands.executeCommand("python.setInterpreter");
      } else if (pick === "Show Output") {
        output.show();
      }
    });
    return;
  }

  const key = await apiKey();
  const serverOptions: ServerOptions = {
    command: interp.command,
    args: ["-m", "stitchcuda.cli", "serve"],
    options: { env: serverEnv(process.env, key), cwd: folder?.uri.fsPath },
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [
      { scheme: "file", language: "python" },
      { scheme: "file", language: "cuda-cpp" },
      { scheme: "file", language: "cuda" },
      { scheme: "file", language: "cpp", pattern: "**/*.{cu,cuh}" },
    ],
    outputChannel: output,
    traceOutputChannel: trace,
    revealOutputChannelOn: RevealOutputChannelOn.Never,
    // Tells the server this client shows jobs and proposals itself (from stitchcuda/jobUpdate).
    initializationOptions: { client: "stitchcuda-vscode", jobUi: true },
    middleware,
  };
  output.info(`Starting: ${interp.command} -m stitchcuda.cli serve${key ? " (with the stored LLM API key in its environment)" : ""}`);
  const c = new LanguageClient("stitchcuda", "StitchCUDA", serverOptions, clientOptions);
  c.onNotification(JOB_UPDATE, (u: JobUpdate) => {
    void flow.onJobUpdate(u);
  });
  client = c;
  try {
    await c.start();
  } catch (e) {
    const msg = redact(e instanceof Error ? e.message : String(e), key);
    output.error(`The language server did not start: ${msg}`);
    void vscode.window.showErrorMessage(`StitchCUDA: the language server did not start: ${msg}`, "Show Output").then((p) => {
      if (p) {
        output.show();
      }
    });
  }
}

async function stopServer(): Promise<void> {
  const c = client;
  client = undefined;
  flow.reset();
  if (c) {
    try {
      await c.stop(5000);
    } catch (e) {
      output.warn(`stopping the server: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
}

async function restart(): Promise<void> {
  if (starting) {
    await starting;
  }
  starting = (async () => {
    await stopServer();
    await startServer();
  })();
  try {
    await starting;
  } finally {
    starting = undefined;
  }
}

function proposalUri(fileUri: string, jobId: string, index: number, side: "proposed" | "empty"): vscode.Uri {
  return vscode.Uri.parse(fileUri).with({ scheme: PROPOSAL_SCHEME, query: proposalQuery(jobId, index, side) });
}

function jobOfUri(uri: unknown): string | undefined {
  return uri instanceof vscode.Uri && uri.scheme === PROPOSAL_SCHEME ? parseProposalQuery(uri.query)?.jobId : undefined;
}

class VsCodeUi implements ReviewUi {
  constructor(private readonly statusItem: vscode.StatusBarItem) {}

  async fileExists(uri: string): Promise<boolean> {
    try {
      await vscode.workspace.fs.stat(vscode.Uri.parse(uri));
      return true;
    } catch {
      return false;
    }
  }

  async showDiff(req: DiffRequest): Promise<void> {
    const right = proposalUri(req.fileUri, req.jobId, req.index, "proposed");
    const left = req.exists ? vscode.Uri.parse(req.fileUri) : proposalUri(req.fileUri, req.jobId, req.index, "empty");
    await vscode.commands.executeCommand("vscode.diff", left, right, req.title, { preview: false });
  }

  async closeDiffs(jobId: string): Promise<void> {
    const tabs = vscode.window.tabGroups.all.flatMap((g) => g.tabs).filter((t) => {
      const input = t.input;
      return input instanceof vscode.TabInputTextDiff && jobOfUri(input.modified) === jobId;
    });
    if (tabs.length > 0) {
      await vscode.window.tabGroups.close(tabs);
    }
  }

  setProposalShown(shown: boolean): void {
    void vscode.commands.executeCommand("setContext", "stitchcuda.proposalShown", shown);
  }

  ask(kind: "info" | "warning", message: string, buttons: string[]): Promise<string | undefined> {
    const shown = kind === "info"
      ? vscode.window.showInformationMessage(message, ...buttons)
      : vscode.window.showWarningMessage(message, ...buttons);
    return Promise.resolve(shown);
  }

  error(message: string): void {
    output.error(message);
    void vscode.window.showErrorMessage(message);
  }

  info(message: string): void {
    void vscode.window.showInformationMessage(message);
  }

  async openFiles(uris: string[]): Promise<void> {
    for (const u of uris) {
      const doc = await vscode.workspace.openTextDocument(vscode.Uri.parse(u));
      if (doc.isDirty) {
        await doc.save(); // the generated ModelNew loads its .cu files from disk
      }
      await vscode.window.showTextDocument(doc, { preview: false });
    }
  }

  status(text: string | undefined, tooltip: string): void {
    if (text === undefined) {
      this.statusItem.hide();
      return;
    }
    this.statusItem.text = text;
    this.statusItem.tooltip = tooltip;
    this.statusItem.show();
  }

  startProgress(_jobId: string, title: string, onCancel: () => void): ProgressHandle {
    let report: (m: string) => void = () => undefined;
    let last: string | undefined;
    let end: () => void = () => undefined;
    let ended = false;
    void vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title, cancellable: true },
      (progress, token) =>
        new Promise<void>((resolve) => {
          token.onCancellationRequested(onCancel);
          report = (m) => progress.report({ message: m });
          end = resolve;
          if (ended) {
            resolve();
          } else if (last !== undefined) {
            report(last);
          }
        }),
    );
    return {
      report: (m) => {
        last = m;
        report(m);
      },
      end: () => {
        ended = true;
        end();
      },
    };
  }

  async pick(items: PickItem[], placeholder: string): Promise<PickItem | undefined> {
    return vscode.window.showQuickPick(items, { placeHolder: placeholder, matchOnDescription: true, matchOnDetail: true });
  }

  showHtml(title: string, html: string): void {
    const panel = vscode.window.createWebviewPanel("stitchcuda.results", title, vscode.ViewColumn.Beside, {
      enableScripts: false,
    });
    panel.webview.html = html;
  }
}

export async function activate(ctx: vscode.ExtensionContext): Promise<void> {
  context = ctx;
  output = vscode.window.createOutputChannel("StitchCUDA", { log: true });
  trace = vscode.window.createOutputChannel("StitchCUDA Trace");
  const statusItem = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 10);
  statusItem.command = "stitchcuda.showJobs";
  statusItem.name = "StitchCUDA jobs";
  ctx.subscriptions.push(output, trace, statusItem);

  flow = new ReviewFlow(
    {
      execute: async (command, args) => {
        if (!client || !client.isRunning()) {
          throw new Error("the StitchCUDA language server is not running ('StitchCUDA: Restart Server')");
        }
        return client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args });
      },
    },
    new VsCodeUi(statusItem),
  );

  ctx.subscriptions.push(
    // Read-only documents with a proposal's text (the right side of its diffs).
    vscode.workspace.registerTextDocumentContentProvider(PROPOSAL_SCHEME, {
      provideTextDocumentContent(uri) {
        const q = parseProposalQuery(uri.query);
        return (q && flow.content(q.jobId, q.index, q.side)) ?? "";
      },
    }),
    vscode.commands.registerCommand("stitchcuda.restart", () => restart()),
    vscode.commands.registerCommand("stitchcuda.setApiKey", async () => {
      const value = await vscode.window.showInputBox({
        title: "StitchCUDA: LLM API key",
        prompt: "Kept in VS Code's secret storage and given to the server process only. Leave empty to remove the stored key.",
        password: true,
        ignoreFocusOut: true,
      });
      if (value === undefined) {
        return;
      }
      if (value.trim() === "") {
        await ctx.secrets.delete(SECRET_KEY);
        void vscode.window.showInformationMessage("StitchCUDA: API key removed; restarting the server");
      } else {
        await ctx.secrets.store(SECRET_KEY, value.trim());
        void vscode.window.showInformationMessage("StitchCUDA: API key stored; restarting the server");
      }
      await restart();
    }),
    vscode.commands.registerCommand("stitchcuda.acceptProposal", (uri?: unknown) => flow.accept(jobOfUri(uri))),
    vscode.commands.registerCommand("stitchcuda.rejectProposal", (uri?: unknown) => flow.reject(jobOfUri(uri))),
    vscode.commands.registerCommand("stitchcuda.showJobs", () => flow.showJobs()),
    vscode.commands.registerCommand("stitchcuda.showResults", (jobId?: unknown) =>
      flow.showResults(typeof jobId === "string" ? jobId : undefined)),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration(`${SECTION}.interpreter`)) {
        output.info("stitchcuda.interpreter changed: restarting the server");
        void restart();
      }
    }),
  );

  const api = await pythonApi();
  const onEnv = (api as unknown as { onDidChangeActiveEnvironmentPath?: vscode.Event<unknown> } | undefined)
    ?.onDidChangeActiveEnvironmentPath;
  if (onEnv) {
    ctx.subscriptions.push(onEnv(() => {
      output.info("the Python extension's interpreter changed: restarting the server");
      void restart();
    }));
  }

  // Not awaited: activation does not wait for the interpreter check and the server's start.
  starting = startServer().finally(() => {
    starting = undefined;
  });
}

export async function deactivate(): Promise<void> {
  const c = client;
  client = undefined;
  if (c) {
    try {
      await c.stop(2000);
    } catch {
      // already stopped or never started
    }
  }
}
