import assert from "node:assert/strict";
import { test } from "node:test";

import { JobUpdate, RoundVerdict, speedupOf, verdictLine } from "../src/events";
import {
  ACCEPT, DiffRequest, jobItems, LATER, parseProposalQuery, PickItem, Proposal, proposalQuery, REJECT,
  ReviewFlow, ReviewUi, statusText,
} from "../src/review";

function verdict(over: Partial<RoundVerdict> = {}): RoundVerdict {
  return {
    event: "verdict", round: 1, candidate: "r1-builtin-pointwise", status: "ok", accepted: true, median_ms: 0.168,
    speedup_eager: 5.22, speedup_compile: 1.17, precision: "tf32", speedup_compile_matched: null, compile_policy: "tf32",
    provisional: false, elapsed_s: 12.5, replayed: false, device: "NVIDIA H100", message: "",
    best: true, ...over,
  };
}

const BEST = verdict();
const BEST_LINE = "correct, 0.168 ms, 5.22x vs eager, 1.17x vs torch.compile, precision tf32";
const F1 = "file:///ws/gated_block_stitchcuda/model_new.py";
const F2 = "file:///ws/gated_block_stitchcuda/kernels.cu";

function update(over: Partial<JobUpdate> = {}): JobUpdate {
  return { jobId: "j1", file: "/ws/gated_block.py", className: "GatedBlock", state: "running", message: "starting", best: null, hasProposal: false, ...over };
}

const PROPOSAL: Proposal = {
  jobId: "j1", message: "correct, 5.22x vs eager", folder: "/ws/gated_block_stitchcuda", files: [F1, F2],
  contents: { [F1]: "class ModelNew: ...\n", [F2]: "__global__ void k() {}\n" }, diff: "--- /dev/null\n",
};

class FakeServer {
  calls: [string, unknown[]][] = [];
  replies: Record<string, unknown> = {
    "stitchcuda.showProposal": PROPOSAL,
    "stitchcuda.accept": { applied: true, files: [F1, F2] },
    "stitchcuda.reject": { rejected: true, jobId: "j1" },
    "stitchcuda.cancel": { jobId: "j1", state: "running", cancelling: true },
    "stitchcuda.jobs": [],
  };
  fail: Record<string, string> = {};
  async execute(command: string, args: unknown[]): Promise<unknown> {
    this.calls.push([command, args]);
    if (this.fail[command]) {
      throw new Error(this.fail[command]);
    }
    return this.replies[command];
  }
}

class FakeUi implements ReviewUi {
  log: string[] = [];
  answer: string | undefined = LATER;
  existing = new Set<string>([F1]);
  diffs: DiffRequest[] = [];
  errors: string[] = [];
  infos: string[] = [];
  opened: string[][] = [];
  statusText: string | undefined;
  shown = false;
  cancels: (() => void)[] = [];
  reports: string[] = [];
  ended = 0;
  picked: ((items: PickItem[]) => PickItem | undefined) = () => undefined;

  async fileExists(uri: string) { return this.existing.has(uri); }
  async showDiff(req: DiffRequest) { this.log.push(`diff ${req.index}`); this.diffs.push(req); }
  async closeDiffs(jobId: string) { this.log.push(`close ${jobId}`); }
  setProposalShown(shown: boolean) { this.shown = shown; }
  async ask(_kind: "info" | "warning", message: string, buttons: string[]) {
    this.log.push(`ask ${buttons.join("/")}: ${message}`);
    return this.answer;
  }
  error(m: string) { this.errors.push(m); }
  info(m: string) { this.infos.push(m); }
  async openFiles(uris: string[]) { this.log.push("open"); this.opened.push(uris); }
  status(text: string | undefined) { this.statusText = text; }
  startProgress(jobId: string, title: string, onCancel: () => void) {
    this.log.push(`progress ${jobId} ${title}`);
    this.cancels.push(onCancel);
    return { report: (m: string) => this.reports.push(m), end: () => { this.ended++; } };
  }
  async pick(items: PickItem[]) { return this.picked(items); }
  pages: [string, string][] = [];
  showHtml(title: string, html: string) { this.pages.push([title, html]); }
}

function setup() {
  const server = new FakeServer();
  const ui = new FakeUi();
  return { server, ui, flow: new ReviewFlow(server, ui) };
}

test("speedupOf reads the verdict's number; verdictLine says it as the server does", () => {
  assert.equal(speedupOf(BEST), 5.22);
  assert.equal(speedupOf(verdict({ speedup_eager: 12 })), 12);
  assert.equal(speedupOf(null), null);
  assert.equal(speedupOf(verdict({ status: "incorrect", accepted: false, median_ms: null, speedup_eager: null })), null);
  assert.equal(verdictLine(BEST), BEST_LINE);
  assert.equal(verdictLine(verdict({ replayed: true })), `${BEST_LINE}, REPLAYED from a run recorded on NVIDIA H100, not measured here`);
  assert.equal(verdictLine(verdict({ status: "incorrect", accepted: false, message: "output 0 differs" })), "incorrect: output 0 differs");
});

test("proposal uri queries round-trip", () => {
  assert.deepEqual(parseProposalQuery(proposalQuery("a b&c", 2, "empty")), { jobId: "a b&c", index: 2, side: "empty" });
  assert.equal(parseProposalQuery("i=1"), undefined);
  assert.equal(parseProposalQuery("job=x&i=-1"), undefined);
});

test("status bar: running count and best speedup; hidden without jobs", () => {
  assert.equal(statusText([]).text, undefined);
  const s = statusText([update({ best: BEST }), update({ jobId: "j2", best: verdict({ speedup_eager: 2 }) }), update({ jobId: "j3", state: "done" })]);
  assert.equal(s.text, "$(sync~spin) StitchCUDA: 2 running · best 5.22x");
  assert.match(s.tooltip, /GatedBlock \(gated_block.py\): running — correct, 0.168 ms/);
  assert.equal(statusText([update({ state: "done", best: BEST })]).text, "$(zap) StitchCUDA · best 5.22x");
});

test("a running job gets one cancellable progress; cancel calls stitchcuda.cancel", async () => {
  const { server, ui, flow } = setup();
  await flow.onJobUpdate(update());
  await flow.onJobUpdate(update({ message: "round 1: verdict correct", best: BEST }));
  await flow.onJobUpdate(update({ message: "round 2: build" })); // best is kept
  assert.deepEqual(ui.log, ["progress j1 StitchCUDA: GatedBlock"]);
  assert.deepEqual(ui.reports, ["starting", `round 1: verdict correct | best so far: ${BEST_LINE}`, `round 2: build | best so far: ${BEST_LINE}`]);
  assert.equal(ui.statusText, "$(sync~spin) StitchCUDA: 1 running · best 5.22x");
  ui.cancels[0]!();
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(server.calls, [["stitchcuda.cancel", ["j1"]]]);
  await flow.onJobUpdate(update({ state: "cancelled", message: "cancelled" }));
  assert.equal(ui.ended, 1);
  assert.equal(ui.statusText, "$(zap) StitchCUDA · best 5.22x");
  assert.deepEqual(server.calls.map((c) => c[0]), ["stitchcuda.cancel"], "no review without a proposal");
});

test("done with a proposal: showProposal, one diff per file (empty left side for new files), then Accept", async () => {
  const { server, ui, flow } = setup();
  ui.answer = ACCEPT;
  await flow.onJobUpdate(update());
  await flow.onJobUpdate(update({ state: "done", message: "correct", best: BEST, hasProposal: true }));
  assert.deepEqual(server.calls, [["stitchcuda.showProposal", ["j1"]], ["stitchcuda.accept", ["j1"]]]);
  assert.deepEqual(ui.diffs.map((d) => [d.index, d.fileUri, d.exists]), [[0, F1, true], [1, F2, false]]);
  assert.match(ui.diffs[1]!.title, /kernels.cu \(new\) StitchCUDA proposal for GatedBlock/);
  assert.deepEqual(ui.log, [
    "progress j1 StitchCUDA: GatedBlock", "diff 0", "diff 1",
    "ask Accept/Reject/Later: StitchCUDA GatedBlock: correct, 5.22x vs eager. Apply model_new.py, kernels.cu?",
    "close j1", "open",
  ]);
  assert.deepEqual(ui.opened, [[F1, F2]]);
  assert.equal(ui.shown, false);
  assert.equal(flow.proposals.size, 0);
});

test("the diff's right side is the proposed text; an empty left side is empty", async () => {
  const { flow } = setup();
  await flow.onJobUpdate(update({ state: "done", hasProposal: true }));
  assert.equal(flow.content("j1", 0, "proposed"), "class ModelNew: ...\n");
  assert.equal(flow.content("j1", 1, "proposed"), "__global__ void k() {}\n");
  assert.equal(flow.content("j1", 1, "empty"), "");
  assert.equal(flow.content("j1", 7, "proposed"), undefined);
  assert.equal(flow.content("nope", 0, "proposed"), undefined);
});

test("Reject calls stitchcuda.reject and closes the diffs; nothing is accepted", async () => {
  const { server, ui, flow } = setup();
  ui.answer = REJECT;
  await flow.onJobUpdate(update({ state: "done", hasProposal: true }));
  assert.deepEqual(server.calls.map((c) => c[0]), ["stitchcuda.showProposal", "stitchcuda.reject"]);
  assert.ok(ui.log.includes("close j1"));
  assert.deepEqual(ui.opened, []);
});

test("Later keeps the proposal; the editor-title action accepts it afterwards (once)", async () => {
  const { server, ui, flow } = setup();
  await flow.onJobUpdate(update({ state: "done", hasProposal: true }));
  assert.equal(ui.shown, true);
  assert.equal(flow.target(), "j1");
  await Promise.all([flow.accept("j1"), flow.accept(undefined)]);
  assert.deepEqual(server.calls.map((c) => c[0]), ["stitchcuda.showProposal", "stitchcuda.accept"]);
  // a repeated done update does not review again
  await flow.onJobUpdate(update({ state: "done", hasProposal: true }));
  assert.equal(server.calls.length, 2);
});

test("accept not applied by the editor: error, diffs stay", async () => {
  const { server, ui, flow } = setup();
  server.replies["stitchcuda.accept"] = { applied: false, reason: "file is read-only" };
  await flow.onJobUpdate(update({ state: "done", hasProposal: true }));
  await flow.accept();
  assert.deepEqual(ui.errors, ["StitchCUDA: the proposal was not applied: file is read-only"]);
  assert.equal(flow.proposals.size, 1);
  assert.equal(ui.log.includes("close j1"), false);
});

test("server errors become error messages, never exceptions", async () => {
  const { server, ui, flow } = setup();
  server.fail["stitchcuda.showProposal"] = "job j1 has no proposal";
  await flow.onJobUpdate(update({ state: "done", hasProposal: true }));
  assert.deepEqual(ui.errors, ["StitchCUDA: could not show the proposal of job j1: job j1 has no proposal"]);
  await flow.accept();
  assert.deepEqual(ui.infos, ["StitchCUDA: no proposal is shown"]);
});

test("failed and done-without-proposal jobs end the progress, say why once, and show no review", async () => {
  const { server, ui, flow } = setup();
  await flow.onJobUpdate(update());
  await flow.onJobUpdate(update({ state: "failed", message: "boom" }));
  await flow.onJobUpdate(update({ jobId: "j2", state: "done", message: "no faster candidate" }));
  await flow.onJobUpdate(update({ jobId: "j2", state: "done", message: "no faster candidate" }));  // repeated
  await flow.onJobUpdate(update({ jobId: "j3", state: "cancelled", message: "cancelled" }));
  assert.equal(ui.ended, 1);
  assert.deepEqual(server.calls, []);
  assert.deepEqual(ui.errors, ["StitchCUDA GatedBlock: boom"]);
  assert.deepEqual(ui.log.filter((l) => l.startsWith("ask")), ["ask : StitchCUDA GatedBlock: no faster candidate"]);
});

test("Show Jobs: cancel a running job, review a finished one", async () => {
  const { server, ui, flow } = setup();
  server.replies["stitchcuda.jobs"] = [
    { jobId: "j1", file: "/ws/a.py", className: "A", state: "running", message: "", hasProposal: false },
    { jobId: "j2", file: "/ws/b.py", className: "B", state: "done", message: "correct", hasProposal: true },
  ];
  ui.picked = (items) => items[0];
  await flow.showJobs();
  ui.picked = (items) => items[1];
  await flow.showJobs();
  assert.deepEqual(server.calls.map((c) => c.join(" ")), [
    "stitchcuda.jobs ", "stitchcuda.cancel j1", "stitchcuda.jobs ", "stitchcuda.showProposal j2",
  ]);
});

test("jobItems: actions by state, best from updates", () => {
  const items = jobItems(
    [{ jobId: "j1", file: "/ws/a.py", className: "A", state: "done", message: "correct", hasProposal: false }],
    new Map([["j1", update({ best: BEST })]]),
  );
  assert.deepEqual(items, [{ label: "A — done", description: "a.py", detail: `${BEST_LINE} | correct`, jobId: "j1", action: "none" }]);
});

test("no jobs: a hint instead of an empty list", async () => {
  const { ui, flow } = setup();
  await flow.showJobs();
  assert.match(ui.infos[0] ?? "", /no jobs yet/);
});

test("reset (server restart) ends progress, closes diffs, clears the status", async () => {
  const { ui, flow } = setup();
  await flow.onJobUpdate(update({ jobId: "j0" }));
  await flow.onJobUpdate(update({ state: "done", hasProposal: true }));
  flow.reset();
  assert.equal(ui.ended, 1);
  assert.ok(ui.log.includes("close j1"));
  assert.equal(ui.shown, false);
  assert.equal(ui.statusText, undefined);
});

test("Show Results: picks a finished job, shows the server's page under a no-script policy", async () => {
  const { server, ui, flow } = setup();
  server.replies["stitchcuda.jobs"] = [
    { jobId: "j1", file: "/ws/a.py", className: "A", state: "running", message: "", hasProposal: false },
    { jobId: "j2", file: "/ws/b.py", className: "B", state: "done", message: "proposal", hasProposal: true },
  ];
  server.replies["stitchcuda.results"] = { jobId: "j2", html: "<html><head><title>t</title></head><body><svg></svg></body></html>" };
  let offered: PickItem[] = [];
  ui.picked = (items) => { offered = items; return items[0]; };
  await flow.showResults();
  assert.deepEqual(offered.map((i) => [i.jobId, i.action]), [["j2", "results"]]);  // running jobs are not offered
  assert.deepEqual(server.calls.at(-1), ["stitchcuda.results", ["j2"]]);
  const [title, html] = ui.pages[0];
  assert.equal(title, "StitchCUDA results: j2");
  assert.match(html, /^<html><head><meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:;">/);
  server.fail["stitchcuda.results"] = "job j9 is still running";
  await flow.showResults("j9");
  assert.match(ui.errors.at(-1) ?? "", /could not show the results of job j9: job j9 is still running/);
});
