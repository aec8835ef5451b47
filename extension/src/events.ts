// The run's typed events, as the language server sends them on in `stitchcuda/jobUpdate`: one
// mirror of the Python dataclasses in stitchcuda/events.py (their `to_dict`, snake_case keys as
// written there). The extension reads numbers and codes from these, never from the sentences.

/** Where a run is (stitchcuda/events.py's Phase). */
export type Phase = "planning" | "budget" | "coding" | "verifying" | "coder-failed" | "nothing-new" | "profiling";

/** How exactly fp32 matmul and convolution ran: TF32 tensor cores (the default), 3xTF32 (split
 * operands) with convolution without TF32, or full fp32. */
export type Precision = "tf32" | "mixed" | "3xtf32" | "fp32";

export interface ProgressEvent {
  event: "progress";
  phase: Phase;
  /** For people. */
  detail: string;
  /** 1-based; null outside the rounds (planning, budget). */
  round: number | null;
  /** Phase "verifying": the Verifier's step (build, correctness, timing, profile, ...). */
  step: string | null;
}

export interface RoundVerdict {
  event: "verdict";
  round: number;
  candidate: string;
  /** The Verifier's status code: ok, incorrect, build-failed, hacked, crashed, timeout, oom, error, unverified. */
  status: string;
  accepted: boolean;
  median_ms: number | null;
  speedup_eager: number | null;
  speedup_compile: number | null;
  precision: Precision;
  speedup_compile_matched: number | null;
  compile_policy: string;
  /** Sent once the candidate is checked and timed against eager; the round's final verdict follows. */
  provisional: boolean;
  /** Seconds from the start of the run. */
  elapsed_s: number | null;
  /** GPU results from a recorded run, not measured on this machine. */
  replayed: boolean;
  device: string;
  message: string;
  /** The run's best candidate so far. */
  best: boolean;
}

export interface RunEnd {
  event: "result";
  message: string;
  summary: string | null;
  proposal: string | null;
  cancelled: boolean;
  best: RoundVerdict | null;
}

export type RunEvent = ProgressEvent | RoundVerdict | RunEnd;

/** The keys of each event as written by the Python side (extension/test/events.test.ts checks them
 * against stitchcuda/events.py). */
export const EVENT_KEYS: Record<RunEvent["event"], readonly string[]> = {
  progress: ["event", "phase", "detail", "round", "step"],
  verdict: ["event", "round", "candidate", "status", "accepted", "median_ms", "speedup_eager", "speedup_compile",
    "precision", "speedup_compile_matched", "compile_policy", "replayed", "device", "message", "best", "provisional",
    "elapsed_s"],
  result: ["event", "message", "summary", "proposal", "cancelled", "best"],
};

export type JobState = "running" | "done" | "failed" | "cancelled";

/** Params of the server's `stitchcuda/jobUpdate` notification (server/server.py `_job_state`). */
export interface JobUpdate {
  jobId: string;
  file: string;
  uri?: string;
  className: string;
  state: JobState;
  /** For people: the latest step or how the job ended. */
  message: string;
  /** The best verdict so far (the loop's choice), with its numbers. */
  best: RoundVerdict | null;
  /** The latest progress event. */
  progress?: ProgressEvent | null;
  /** The rounds the job was started with. */
  rounds?: number;
  hasProposal: boolean;
}

/** The speedup over eager PyTorch of a job's best verdict; null where it was not timed. */
export function speedupOf(best: RoundVerdict | null | undefined): number | null {
  return typeof best?.speedup_eager === "number" ? best.speedup_eager : null;
}

/** One line for people, as the server's progress messages say it ("correct, 0.168 ms, 5.22x vs eager, ..."). */
export function verdictLine(v: RoundVerdict): string {
  if (v.accepted && v.median_ms !== null) {
    const parts = [`correct, ${v.median_ms.toFixed(3)} ms`];
    if (v.speedup_eager) {
      parts.push(`${v.speedup_eager.toFixed(2)}x vs eager`);
    }
    if (v.speedup_compile) {
      parts.push(`${v.speedup_compile.toFixed(2)}x vs torch.compile`);
    }
    if (v.speedup_compile_matched) {
      parts.push(`${v.speedup_compile_matched.toFixed(2)}x vs torch.compile under ${v.compile_policy}`);
    }
    parts.push(`precision ${v.precision}`);
    if (v.replayed) {
      parts.push(`REPLAYED from a run recorded on ${v.device}, not measured here`);
    }
    if (v.provisional) {
      parts.push("torch.compile's timing and the profiles still to come");
    }
    return parts.join(", ");
  }
  return `${v.status}: ${v.message}`;
}
