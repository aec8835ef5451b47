// What the extension does with the server's job updates and proposals: which server commands it
// calls, in which order, and what it shows. Pure: VS Code is behind the ReviewUi interface and the
// server behind ServerCommands, so the flow is unit-tested without either. Job updates carry the
// run's typed events (events.ts): numbers are read from their fields.

import { JobState, JobUpdate, speedupOf, verdictLine } from "./events";

export const CMD = {
  optimize: "stitchcuda.optimize",
  cancel: "stitchcuda.cancel",
  jobs: "stitchcuda.jobs",
  show: "stitchcuda.showProposal",
  accept: "stitchcuda.accept",
  reject: "stitchcuda.reject",
  results: "stitchcuda.results",
} as const;

export const JOB_UPDATE = "stitchcuda/jobUpdate";
export const PROPOSAL_SCHEME = "stitchcuda-proposal";

/** Result of `stitchcuda.showProposal`. */
export interface Proposal {
  jobId: string;
  message: string;
  folder: string;
  files: string[];
  contents: Record<string, string>;
  diff: string;
}

/** A row of `stitchcuda.jobs`. */
export interface ServerJob {
  jobId: string;
  file: string;
  className: string;
  state: JobState;
  message: string;
  hasProposal: boolean;
}

export interface ServerCommands {
  execute(command: string, args: unknown[]): Promise<unknown>;
}

export interface ProgressHandle {
  report(message: string): void;
  end(): void;
}

export interface DiffRequest {
  jobId: string;
  index: number;
  /** The file the proposal writes (a file: uri, as the server sends it). */
  fileUri: string;
  /** Whether that file exists now: the left side is the file, else an empty document. */
  exists: boolean;
  title: string;
}

export interface PickItem {
  label: string;
  description: string;
  detail: string;
  jobId: string;
  action: "cancel" | "review" | "results" | "none";
}

export interface ReviewUi {
  fileExists(uri: string): Promise<boolean>;
  showDiff(req: DiffRequest): Promise<void>;
  closeDiffs(jobId: string): Promise<void>;
  /** Sets the `stitchcuda.proposalShown` context key. */
  setProposalShown(shown: boolean): void;
  /** A notification with buttons; undefined when dismissed. */
  ask(kind: "info" | "warning", message: string, buttons: string[]): Promise<string | undefined>;
  error(message: string): void;
  info(message: string): void;
  /** Opens (and saves, if the accepted edit left them dirty) the accepted files. */
  openFiles(uris: string[]): Promise<void>;
  status(text: string | undefined, tooltip: string): void;
  /** A cancellable notification for a running job; onCancel when the user cancels it. */
  startProgress(jobId: string, title: string, onCancel: () => void): ProgressHandle;
  pick(items: PickItem[], placeholder: string): Promise<PickItem | undefined>;
  /** A read-only view of server-made HTML (already under a strict content security policy). */
  showHtml(title: string, html: string): void;
}

/** The server's results page under a policy that allows no scripts and no remote content. */
export function withCsp(html: string): string {
  const csp = `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:;">`;
  return html.includes("<head>") ? html.replace("<head>", `<head>${csp}`) : `${csp}${html}`;
}

export const ACCEPT = "Accept";
export const REJECT = "Reject";
export const LATER = "Later";

export function basename(pathOrUri: string): string {
  const parts = pathOrUri.split(/[\\/]/);
  return decodeURIComponent(parts[parts.length - 1] ?? pathOrUri);
}

/** The query of a proposal document's uri: which job, which file, which side. */
export function proposalQuery(jobId: string, index: number, side: "proposed" | "empty"): string {
  return `job=${encodeURIComponent(jobId)}&i=${index}&side=${side}`;
}

export function parseProposalQuery(query: string): { jobId: string; index: number; side: string } | undefined {
  const q = new URLSearchParams(query);
  const jobId = q.get("job");
  const index = Number(q.get("i"));
  if (!jobId || !Number.isInteger(index) || index < 0) {
    return undefined;
  }
  return { jobId, index, side: q.get("side") ?? "proposed" };
}

/** Status-bar text: running jobs and the best speedup among them (or of the last finished job). */
export function statusText(jobs: JobUpdate[]): { text: string | undefined; tooltip: string } {
  if (jobs.length === 0) {
    return { text: undefined, tooltip: "" };
  }
  const running = jobs.filter((j) => j.state === "running");
  const pool = running.length > 0 ? running : jobs.slice(-1);
  const speedups = pool.map((j) => speedupOf(j.best)).filter((x): x is number => x !== null);
  const best = speedups.length > 0 ? ` · best ${Math.max(...speedups).toFixed(2)}x` : "";
  const text = running.length > 0
    ? `$(sync~spin) StitchCUDA: ${running.length} running${best}`
    : `$(zap) StitchCUDA${best}`;
  const tooltip = jobs
    .map((j) => `${j.className} (${basename(j.file)}): ${j.state}${j.best ? ` — ${verdictLine(j.best)}` : ""}${j.message ? ` — ${j.message}` : ""}`)
    .join("\n");
  return { text, tooltip };
}

export function jobItems(serverJobs: ServerJob[], known: Map<string, JobUpdate>): PickItem[] {
  return serverJobs.map((j) => {
    const best = known.get(j.jobId)?.best;
    const action = j.state === "running" ? "cancel" : j.hasProposal ? "review" : "none";
    return {
      label: `${j.className} — ${j.state}`,
      description: basename(j.file) + (action === "cancel" ? " (select to cancel)" : action === "review" ? " (select to review)" : ""),
      detail: [best ? verdictLine(best) : "", j.message].filter(Boolean).join(" | "),
      jobId: j.jobId,
      action,
    };
  });
}

function messageOf(e: unknown): string {
  if (e instanceof Error) {
    return e.message;
  }
  if (e && typeof e === "object" && "message" in e) {
    return String((e as { message: unknown }).message);
  }
  return String(e);
}

export class ReviewFlow {
  /** Latest update per job, in start order. */
  readonly jobs = new Map<string, JobUpdate>();
  /** Proposals shown (or being shown) now, by job. */
  readonly proposals = new Map<string, Proposal>();
  private readonly progress = new Map<string, ProgressHandle>();
  private readonly reviewed = new Set<string>();
  private readonly busy = new Set<string>();

  constructor(private readonly server: ServerCommands, private readonly ui: ReviewUi) {}

  async onJobUpdate(u: JobUpdate): Promise<void> {
    const prev = this.jobs.get(u.jobId);
    // A late update never loses the best result already reported.
    const merged: JobUpdate = { ...u, best: u.best ?? prev?.best ?? null };
    this.jobs.set(u.jobId, merged);
    if (u.state === "running") {
      let handle = this.progress.get(u.jobId);
      if (!handle && !prev) {
        handle = this.ui.startProgress(u.jobId, `StitchCUDA: ${u.className}`, () => void this.cancel(u.jobId));
        this.progress.set(u.jobId, handle);
      }
      handle?.report(merged.best ? `${u.message} | best so far: ${verdictLine(merged.best)}` : u.message);
    } else {
      this.progress.get(u.jobId)?.end();
      this.progress.delete(u.jobId);
    }
    this.refreshStatus();
    if (u.state === "done" && u.hasProposal && !this.reviewed.has(u.jobId)) {
      this.reviewed.add(u.jobId);
      await this.review(u.jobId);
    } else if (u.state !== "running" && !this.reviewed.has(u.jobId)) {
      // The server leaves end-of-job messages to this UI: a job that ends without a proposal says
      // why (failed, cancelled, or nothing correct and faster), once.
      this.reviewed.add(u.jobId);
      const text = `StitchCUDA ${u.className}: ${u.message || u.state}`;
      if (u.state === "failed") {
        this.ui.error(text);
      } else if (u.state !== "cancelled") {
        void this.ui.ask("warning", text, []);
      }
    }
  }

  refreshStatus(): void {
    const s = statusText([...this.jobs.values()]);
    this.ui.status(s.text, s.tooltip);
  }

  async cancel(jobId: string): Promise<void> {
    try {
      await this.server.execute(CMD.cancel, [jobId]);
    } catch (e) {
      this.ui.error(`StitchCUDA: could not cancel job ${jobId}: ${messageOf(e)}`);
    }
  }

  /** Shows the proposal's diffs and asks Accept / Reject / Later. */
  async review(jobId: string): Promise<void> {
    let p: Proposal;
    try {
      p = (await this.server.execute(CMD.show, [jobId])) as Proposal;
    } catch (e) {
      this.ui.error(`StitchCUDA: could not show the proposal of job ${jobId}: ${messageOf(e)}`);
      return;
    }
    this.proposals.set(jobId, p);
    this.ui.setProposalShown(true);
    const name = this.jobs.get(jobId)?.className ?? jobId;
    for (const [index, fileUri] of p.files.entries()) {
      const exists = await this.ui.fileExists(fileUri);
      await this.ui.showDiff({
        jobId,
        index,
        fileUri,
        exists,
        title: `${basename(fileUri)} ${exists ? "↔" : "(new)"} StitchCUDA proposal for ${name}`,
      });
    }
    const files = p.files.map(basename).join(", ");
    const choice = await this.ui.ask("info", `StitchCUDA ${name}: ${p.message}. Apply ${files}?`, [ACCEPT, REJECT, LATER]);
    if (choice === ACCEPT) {
      await this.accept(jobId);
    } else if (choice === REJECT) {
      await this.reject(jobId);
    }
  }

  /** The text of a proposal document (the right side of a diff), or "" for an empty left side. */
  content(jobId: string, index: number, side: string): string | undefined {
    if (side === "empty") {
      return "";
    }
    const p = this.proposals.get(jobId);
    const uri = p?.files[index];
    return uri === undefined ? undefined : p?.contents[uri];
  }

  /** The job whose proposal a command acts on: the one named, else the only (or latest) one shown. */
  target(jobId?: string): string | undefined {
    if (jobId && this.proposals.has(jobId)) {
      return jobId;
    }
    const shown = [...this.proposals.keys()];
    return shown[shown.length - 1];
  }

  async accept(jobId?: string): Promise<void> {
    await this.onProposal(jobId, "accept", async (id) => {
      const r = (await this.server.execute(CMD.accept, [id])) as { applied: boolean; files?: string[]; reason?: string };
      if (!r?.applied) {
        this.ui.error(`StitchCUDA: the proposal was not applied: ${r?.reason ?? "the editor did not apply the edit"}`);
        return;
      }
      await this.drop(id);
      await this.ui.openFiles(r.files ?? []);
    });
  }

  async reject(jobId?: string): Promise<void> {
    await this.onProposal(jobId, "reject", async (id) => {
      await this.server.execute(CMD.reject, [id]);
      await this.drop(id);
    });
  }

  /** Runs `act` on the targeted proposal, once at a time per job; failures become error messages. */
  private async onProposal(jobId: string | undefined, verb: string, act: (id: string) => Promise<void>): Promise<void> {
    const id = this.target(jobId);
    if (id === undefined) {
      this.ui.info("StitchCUDA: no proposal is shown");
      return;
    }
    if (this.busy.has(id)) {
      return;
    }
    this.busy.add(id);
    try {
      await act(id);
    } catch (e) {
      this.ui.error(`StitchCUDA: could not ${verb} the proposal: ${messageOf(e)}`);
    } finally {
      this.busy.delete(id);
    }
  }

  private async drop(jobId: string): Promise<void> {
    const j = this.jobs.get(jobId);
    if (j) {
      this.jobs.set(jobId, { ...j, hasProposal: false });
    }
    await this.ui.closeDiffs(jobId);
    this.proposals.delete(jobId);
    this.ui.setProposalShown(this.proposals.size > 0);
  }

  async showJobs(): Promise<void> {
    let list: ServerJob[];
    try {
      list = ((await this.server.execute(CMD.jobs, [])) as ServerJob[]) ?? [];
    } catch (e) {
      this.ui.error(`StitchCUDA: could not list jobs: ${messageOf(e)}`);
      return;
    }
    if (list.length === 0) {
      this.ui.info("StitchCUDA: no jobs yet (use the code action 'Optimise <Module> end-to-end with StitchCUDA' on an nn.Module)");
      return;
    }
    const item = await this.ui.pick(jobItems(list, this.jobs), "StitchCUDA jobs");
    if (item?.action === "cancel") {
      await this.cancel(item.jobId);
    } else if (item?.action === "review") {
      await this.review(item.jobId);
    }
  }

  /** The verdict table and kernel roofline of a finished job (picked when not named). */
  async showResults(jobId?: string): Promise<void> {
    let id = jobId;
    if (!id) {
      let list: ServerJob[];
      try {
        list = ((await this.server.execute(CMD.jobs, [])) as ServerJob[]) ?? [];
      } catch (e) {
        this.ui.error(`StitchCUDA: could not list jobs: ${messageOf(e)}`);
        return;
      }
      const done = jobItems(list.filter((j) => j.state !== "running"), this.jobs).map((i) => ({ ...i, action: "results" as const }));
      if (done.length === 0) {
        this.ui.info("StitchCUDA: no finished job to show");
        return;
      }
      id = (await this.ui.pick(done, "Results of which job?"))?.jobId;
      if (!id) {
        return;
      }
    }
    try {
      const r = (await this.server.execute(CMD.results, [id])) as { html: string };
      const cls = this.jobs.get(id)?.className ?? id;
      this.ui.showHtml(`StitchCUDA results: ${cls}`, withCsp(r.html));
    } catch (e) {
      this.ui.error(`StitchCUDA: could not show the results of job ${id}: ${messageOf(e)}`);
    }
  }

  /** The server went away (restart): its jobs and proposals with it. */
  reset(): void {
    for (const h of this.progress.values()) {
      h.end();
    }
    this.progress.clear();
    this.jobs.clear();
    this.reviewed.clear();
    const shown = [...this.proposals.keys()];
    this.proposals.clear();
    for (const id of shown) {
      void this.ui.closeDiffs(id);
    }
    this.ui.setProposalShown(false);
    this.refreshStatus();
  }
}
