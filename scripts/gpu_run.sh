#!/usr/bin/env bash
# Runs on the lent GPU machine (the device tool), from the repository root:
#   bash scripts/gpu_run.sh [tests] [tests:FILE,...] [devices:0,1] [example] [profiles] [llm] [bench:SECONDS:PATH[,PATH...][:FLAG[,FLAG...]]]
#                           [env:NAME=VALUE] [sandbox-tool] [verify:REF:CAND] [probe-host:TASK[,TASK...]] [probe-ab:VAR=OFF,ON:TASK[,TASK...]] [e2e-part] [e2e]
#                           [probe-launch] [py:SCRIPT[:TASK,...]] [deadline:SECS] [optimize:FILE[,FILE...]] [wait] ...
# e2e-part/e2e: the VS Code end-to-end test, live, from scripts/e2e_bundle.sh's parts carried one per
# call in .carry/e2e-send (with SHA256); the last call runs `e2e`.
# Makes the package importable without pip (that machine has torch but no network, and its
# setuptools may predate our pyproject), runs the chosen stages, and leaves logs and JSON in $OUT.
# KernelBench problems travel in .carry/kernelbench, shared libraries in .carry/libs (git-ignored; copy ../shared/kernelbench there),
# wheels in .carry/wheels (e.g. `pip download --no-deps -d .carry/wheels einops`);
# PROFILES="vec_matmul reference" limits the profiles stage to those cases;
# TESTS_M="gpu or not gpu" runs a tests: stage's CPU tests as well (default: GPU tests only);
# Its logs end packed in $OUT/logs.tgz (logs-2.tgz, ... where one is there already): a call's own
# log is best kept out of $OUT's *.log (e.g. $OUT/call.txt), since the pack removes what it packs;
# PARALLEL=1 runs bench and tests:FILE stages concurrently (devices:N before each gives it its own GPUs); a bench stage resumes from .carry/bench-in/bench_NAME.json when an earlier call left one.
set -u
OUT=${OUT:-/tmp/stitchcuda-out}
# The device machine's copy of .git can be older than the working tree it runs (seen 2026-11-26:
# `git rev-parse HEAD` there named the session's first commit), so results would carry a wrong
# commit: the commit must come from the calling side.
if [ -z "${STITCHCUDA_COMMIT:-}" ]; then
  echo "gpu_run.sh: set STITCHCUDA_COMMIT=<commit> from the calling machine (this machine's git may be stale)" >&2
  exit 2
fi
# `STITCHCUDA_COMMIT=$(git rev-parse --short HEAD)` in the device call's command runs here, on the stale
# .git: three calls on 2026-11-27 recorded the session's first commit for later code. Refuse a commit
# that is this machine's HEAD while the files differ from it.
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null | head -1)" ] && \
   [ "$(git rev-parse --short=7 HEAD 2>/dev/null)" = "${STITCHCUDA_COMMIT:0:7}" ]; then
  echo "gpu_run.sh: STITCHCUDA_COMMIT=$STITCHCUDA_COMMIT is this machine's stale HEAD, not the code here: pass the hash from the calling machine" >&2
  exit 2
fi
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
repo=$(pwd)
pkg=/tmp/stitchcuda-path/stitchcuda
rm -rf /tmp/stitchcuda-path && mkdir -p "$pkg"
for f in "$repo"/stitchcuda/*; do ln -s "$f" "$pkg/"; done
for sub in agents profiling server; do ln -s "$repo/$sub" "$pkg/$sub"; done
# Pure-Python wheels the machine lacks (einops for some KernelBench problems; pygls and friends
# later) travel in .carry/wheels and are unpacked beside the package (no network there).
if compgen -G ".carry/wheels/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/stitchcuda-path .carry/wheels/*.whl 2>&1 | tail -3
fi
# Shared libraries the machine lacks (elfutils' libdw for Nsight Systems' importer), from scripts/carry.sh.
[ -d .carry/libs ] && export LD_LIBRARY_PATH=$repo/.carry/libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONPATH=/tmp/stitchcuda-path${PYTHONPATH:+:$PYTHONPATH}
export STITCHCUDA_CACHE=/tmp/stitchcuda-cache
# Run from outside the checkout: `python -m` puts the working directory first on sys.path, where
# the bare stitchcuda/ folder would shadow the assembled package.
mkdir -p /tmp/stitchcuda-bin && printf '#!/bin/bash\ncd /tmp && exec python3 -m stitchcuda.cli "$@"\n' >/tmp/stitchcuda-bin/sc
chmod +x /tmp/stitchcuda-bin/sc && export PATH=/tmp/stitchcuda-bin:$PATH
abs() { local out=() p; for p in "$@"; do out+=("$(realpath "$p")"); done; echo "${out[@]}"; }
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; python3 -c "import torch,sys;print('python',sys.version.split()[0],'torch',torch.__version__,'cuda',torch.version.cuda)"; nvcc --version | tail -1; sc doctor 2>&1; } | tee "$OUT/machine.txt"

run_bench() {
  local stage=$1 secs paths flags name plist dest resume
  IFS=: read -r _ secs paths flags <<<"$stage"
  # BENCH_UNTIL=S: the device call ends S s after this script starts; a bench after slower earlier
  # stages gets what is left, less one candidate's timeout to finish the problems in flight.
  if [ -n "${BENCH_UNTIL:-}" ]; then
    local left=$(( BENCH_UNTIL - SECONDS - ${CAND_TIMEOUT:-150} - 40 ))
    [ "$left" -lt "$secs" ] && secs=$left
    [ "$secs" -lt 30 ] && { echo "gpu_run.sh: skipped $stage (${secs} s left before BENCH_UNTIL)" | tee -a "$OUT/skipped.txt"; return; }
    echo "gpu_run.sh: bench deadline ${secs} s (BENCH_UNTIL=$BENCH_UNTIL, at ${SECONDS} s)"
  fi
  name=${BENCH_NAME:-$(basename "${paths%%,*}" .py)}
  IFS=, read -ra plist <<<"$paths"
  read -ra plist <<<"$(abs "${plist[@]}")"
  # The bench writes straight into $OUT: if the device call's own limit kills it, every
  # problem finished so far still comes back (bench.json is rewritten after each one).
  dest="$OUT/bench-$name"; mkdir -p "$dest"
  resume=""; [ -f ".carry/bench-in/bench_$name.json" ] && { cp ".carry/bench-in/bench_$name.json" "$dest/bench.json"; resume=--resume; }
  # Each bench stage builds into its own cache (BENCH_CACHE names a shared one): two runs of one call
  # compared for throughput must both build (seen 2026-11-26: a 1-GPU run after a 2-GPU run on the
  # same machine found every library built, median build 0.006 s against 3.4 s).
  # sc runs from /tmp: a flag naming a file here (--longest-first .carry/l3-durations.json) is made
  # absolute (a relative one failed the bench at once, 2026-12-01).
  local fl=() f
  for f in ${flags//,/ }; do if [ -e "$f" ]; then fl+=("$(realpath "$f")"); else fl+=("$f"); fi; done
  STITCHCUDA_CACHE=${BENCH_CACHE:-$STITCHCUDA_CACHE-$name} timeout $((secs + ${CAND_TIMEOUT:-150} + 30)) sc bench "${plist[@]}" --out "$dest" --jobs "${JOBS:-4}" \
    --timeout "${CAND_TIMEOUT:-150}" --deadline "$secs" $resume ${BENCH_FLAGS:-} "${fl[@]}" 2>&1 | tee "$OUT/bench_$name.log" | tail -25
  # How long each blind check held the GPU's lock (its steps' logs), before the run folders are packed.
  python3 "$repo/scripts/blind_lock_times.py" "$OUT/blind_lock_$name.json" "$dest/runs" 2>&1 | tail -3
  # The run folders of problems not solved, or solved only after a first attempt failed, apart: small
  # enough to keep when a call drops runs_$name.tgz (2026-12-02: level 3's 1_MLP missed one set at
  # TF32, and with its folder dropped which elements missed was lost).
  local kept
  kept=$(python3 - "$dest" <<'PY'
import json, sys
from pathlib import Path
dest = Path(sys.argv[1])
try:
    problems = json.loads((dest / "bench.json").read_text())["problems"]
except (OSError, ValueError, KeyError):
    problems = []
for p in problems:
    folder = Path("runs") / Path(p["name"]).stem
    if (not p.get("solved") or (p.get("attempt") or 1) > 1) and (dest / folder).is_dir():
        print(folder)
PY
)
  [ -n "$kept" ] && (cd "$dest" && tar czf "$OUT/kept_$name.tgz" --exclude='*.so' --exclude='*.tmp' $kept 2>/dev/null)
  # Every run's verdict (its notes say what each check did: 2026-12-07's mixed timing sets and blind
  # pairs went unconfirmed, the accepted runs' folders all in the runs archive, too large to return).
  (cd "$dest" && find runs -name verdict.json -print0 | tar czf "$OUT/verdicts_$name.tgz" --null -T - 2>/dev/null)
  (cd "$dest" && tar czf "$OUT/runs_$name.tgz" --exclude='*.so' --exclude='*.tmp' runs 2>/dev/null && rm -rf runs)
}

run_tests() {
  # $1: test files under tests/, comma-separated ("" = all); $2: the log's tag.
  local files=() f plugins=""
  IFS=, read -ra files <<<"$1"
  [ ${#files[@]} -eq 0 ] && files=(tests) || for i in "${!files[@]}"; do files[$i]="$repo/tests/${files[$i]}"; done
  [ "${files[0]}" = tests ] && files=("$repo/tests")
  # pytest-asyncio (carried, for the LSP tests) needs pytest >= 8.4: where the machine's pytest
  # is older, the plugins stay off and only the LSP tests fail, not the whole stage.
  python3 -c "import pytest, sys; sys.exit(tuple(map(int, pytest.__version__.split('.')[:2])) < (8, 4))" \
    || { plugins="-p no:asyncio -p no:pytest-lsp"; echo "pytest $(python3 -m pytest --version 2>&1 | tail -1): LSP test plugins off"; }
  # -v: one line a test as it ends, so a stage cut off by TESTS_TIMEOUT still names its failures
  # (a -q log is only dots until the summary, which a killed run never writes).
  (cd /tmp && timeout ${TESTS_TIMEOUT:-560} python3 -m pytest -v -rs --durations=15 -m "${TESTS_M:-gpu}" $plugins ${TESTS_K:+-k "$TESTS_K"} "${files[@]}" -p no:cacheprovider --rootdir "$repo" -c "$repo/pyproject.toml") 2>&1 | tee "$OUT/gpu_tests$2.log" | tail -40
}

deadline=""
for stage in "$@"; do
  # deadline:SECS: stages that would start SECS seconds or more after this one are skipped (said in
  # the log) instead of run (2026-11-27: tests that took 400 s and two probes ran into the call's
  # 600 s limit). A stage already running is not cut short: give it its own timeout.
  if [ -n "$deadline" ] && [ "$SECONDS" -ge "$deadline" ] && [[ "$stage" != env:* && "$stage" != devices:* && "$stage" != deadline:* ]]; then
    echo "gpu_run.sh: skipped $stage (deadline reached at ${SECONDS} s)" | tee -a "$OUT/skipped.txt"; continue
  fi
  case "$stage" in
    deadline:*)
      # Whole seconds only (10#: a leading zero is not octal); anything else is said and ignored.
      if [[ "${stage#deadline:}" =~ ^[0-9]+$ ]]; then deadline=$((SECONDS + 10#${stage#deadline:}))
      else echo "gpu_run.sh: $stage: expected whole seconds, ignored"; fi ;;
    tests) run_tests "" "" ;;
    wait)
      # The PARALLEL=1 stages started so far end before the next one starts (an example timed alone).
      wait ;;
    tests:*)
      # tests:FILE,FILE: those files' GPU tests; with PARALLEL=1 beside the stages that follow
      # (devices:N first gives each group its own GPU).
      files=${stage#tests:}; tag=-$(basename "${files%%,*}" .py)
      if [ -n "${PARALLEL:-}" ]; then run_tests "$files" "$tag" & else run_tests "$files" "$tag"; fi ;;
    env:*)
      # env:NAME=VALUE: set for the stages after it (e.g. env:STITCHCUDA_PROLOGUES=0 env:BENCH_NAME=l2-off
      # before a second bench stage, so two configurations run side by side in one call).
      kv=${stage#env:}; export "${kv%%=*}=${kv#*=}" ;;
    sandbox-tool)
      # bubblewrap for the stages after it, from .carry/bwrap (scripts/carry.sh): that machine has none.
      # The wrapper loads its libraries through the dynamic loader's --library-path, so they reach
      # bwrap alone, not the worker it starts (nor ls, cp, ... which load libselinux too).
      [ -x .carry/bwrap/bwrap ] && export PATH=$repo/.carry/bwrap/bin:$PATH && bwrap --version ;;
    devices:*)
      # The GPUs the stages after it see (CUDA_VISIBLE_DEVICES); devices: alone shows them all again.
      if [ -n "${stage#devices:}" ]; then export CUDA_VISIBLE_DEVICES=${stage#devices:}; else unset CUDA_VISIBLE_DEVICES; fi ;;
    profiles)
      (cd /tmp && KERNELBENCH="$repo/.carry/kernelbench" timeout 420 python3 "$repo/scripts/record_profiles.py" ${PROFILES:-}) 2>&1 | tee "$OUT/profiles.log" | tail -60
      # The device tool returns at most 8 files, two folders down: the fixtures come back as one archive.
      (cd "$OUT" && tar czf profiles.tgz --remove-files profiles) ;;
    llm)
      (cd /tmp && KERNELBENCH="$repo/.carry/kernelbench" timeout 480 python3 "$repo/scripts/llm_scripted_gpu.py") 2>&1 | tee "$OUT/llm.log" | tail -60 ;;
    probe-host:*)
      # Where a forward's time goes outside its kernels (scripts/probe_host_overhead.py), for the tasks named;
    # env:PROBE_TAG=-x before a second probe stage keeps the first one's files.
      IFS=, read -ra plist <<<"${stage#probe-host:}"
      read -ra plist <<<"$(abs "${plist[@]}")"
      (cd /tmp && timeout ${PROBE_TIMEOUT:-400} python3 "$repo/scripts/probe_host_overhead.py" "$OUT/probe_host${PROBE_TAG:-}.json" "${plist[@]}") 2>&1 | tee "$OUT/probe_host${PROBE_TAG:-}.log" | tail -30 ;;
    probe-ab:*)
      # One code-generation switch off against on (scripts/probe_ab.py): probe-ab:VAR=OFF,ON:TASK[,TASK...].
      rest=${stage#probe-ab:}; setting=${rest%%:*}
      IFS=, read -ra plist <<<"${rest#*:}"
      read -ra plist <<<"$(abs "${plist[@]}")"
      (cd /tmp && timeout ${PROBE_TIMEOUT:-400} python3 "$repo/scripts/probe_ab.py" "$OUT/probe_ab${PROBE_TAG:-}.json" "$setting" "${plist[@]}") 2>&1 | tee "$OUT/probe_ab${PROBE_TAG:-}.log" | tail -40 ;;
    probe-graph:*)
      # Whether each task's candidate replays as one CUDA graph, and its host time a call (scripts/probe_graph_replay.py).
      IFS=, read -ra plist <<<"${stage#probe-graph:}"
      read -ra plist <<<"$(abs "${plist[@]}")"
      (cd /tmp && timeout ${PROBE_TIMEOUT:-400} python3 "$repo/scripts/probe_graph_replay.py" "$OUT/probe_graph.json" "${plist[@]}") 2>&1 | tee "$OUT/probe_graph.log" | tail -30 ;;
    py:*)
      # py:scripts/NAME.py[:TASK,...]: a standalone probe given $OUT/NAME.json to write (e.g.
      # scripts/probe_stream_hints.py), and the tasks named, as absolute paths, after it.
      rest=${stage#py:}; script=${rest%%:*}; plist=()
      if [ "$rest" != "$script" ]; then IFS=, read -ra plist <<<"${rest#*:}"; read -ra plist <<<"$(abs "${plist[@]}")"; fi
      (cd /tmp && timeout ${PROBE_TIMEOUT:-400} python3 "$repo/$script" "$OUT/$(basename "$script" .py).json" "${plist[@]}") 2>&1 | tee "$OUT/$(basename "$script" .py).log" | tail -30 ;;
    probe-launch)
      # What makes one minimal launch time 20 us in the Verifier's worker (scripts/probe_launch_floor.py).
      (cd /tmp && timeout ${PROBE_TIMEOUT:-300} python3 "$repo/scripts/probe_launch_floor.py" "$OUT/probe_launch.json") 2>&1 | tee "$OUT/probe_launch.log" | tail -20 ;;
    example)
      # env:EXAMPLE_TAG=-x before a second example stage keeps the first one's files.
      timeout 300 sc optimize "$repo/examples/gated_block.py" --out /tmp/example-run${EXAMPLE_TAG:-} 2>&1 | tee "$OUT/example${EXAMPLE_TAG:-}.log" | tail -40
      cp /tmp/example-run${EXAMPLE_TAG:-}/summary.json "$OUT/example_summary${EXAMPLE_TAG:-}.json" 2>/dev/null ;;
    bench:*)
      # PARALLEL=1 runs the bench stages side by side: the Verifier's GPU lock keeps correctness
      # and timing one at a time, while the other bench builds and traces.
      if [ -n "${PARALLEL:-}" ]; then run_bench "$stage" & else run_bench "$stage"; fi ;;
    e2e-part)
      # One part of scripts/e2e_bundle.sh's bundle per call (64 MiB carry limit), kept on the warm
      # machine in /tmp/e2e-parts until the e2e stage joins them.
      mkdir -p /tmp/e2e-parts && cp .carry/e2e-send/* /tmp/e2e-parts/ && ls -l /tmp/e2e-parts ;;
    e2e)
      mkdir -p /tmp/e2e-parts && cp .carry/e2e-send/* /tmp/e2e-parts/ 2>/dev/null
      if [ "$(cat /tmp/e2e-parts/part-* 2>/dev/null | sha256sum | cut -d' ' -f1)" != "$(cat /tmp/e2e-parts/SHA256 2>/dev/null)" ]; then
        echo "e2e: bundle parts missing or damaged"; ls -l /tmp/e2e-parts; continue
      fi
      rm -rf /tmp/e2e && cat /tmp/e2e-parts/part-* | xz -d | tar -x -C /tmp
      (cd /tmp && E2E_DIR=/tmp/e2e E2E_LIVE=${E2E_LIVE:-1} STITCHCUDA_PYTHON="$(command -v python3)" E2E_ARTIFACTS="$OUT/e2e-artifacts" \
        timeout 560 bash "$repo/scripts/e2e_run_bundled.sh") 2>&1 | tee "$OUT/e2e.log" | tail -40
      (cd "$OUT" && tar czf e2e-artifacts.tgz e2e-artifacts && rm -rf e2e-artifacts) ;;
    optimize:*)
      # optimize:FILE[,FILE...]: the optimize flow on each (every round's verdict, each checked set's
      # message, in its summary.json), for why a bench problem was rejected; summaries come back as one archive.
      IFS=, read -ra plist <<<"${stage#optimize:}"
      mkdir -p "$OUT/optimize"
      for f in "${plist[@]}"; do
        n=$(basename "$f" .py)
        timeout ${OPT_TIMEOUT:-240} sc optimize "$(realpath "$f")" --rounds ${OPT_ROUNDS:-6} --no-profile --no-timeline ${OPT_FLAGS:-} \
          --out "/tmp/opt-$n" 2>&1 | tee -a "$OUT/optimize.log" | tail -8
        cp "/tmp/opt-$n/summary.json" "$OUT/optimize/$n.json" 2>/dev/null
      done
      (cd "$OUT" && tar czf optimize.tgz --remove-files optimize) ;;
    verify:*)
      IFS=: read -r _ ref cand <<<"$stage"
      timeout 300 sc verify "$(realpath "$ref")" "$(realpath "$cand")" --out "/tmp/verify-$(basename "$cand" .py)" 2>&1 \
        | tee -a "$OUT/verify.log" | tail -30 ;;
    *) echo "unknown stage $stage" ;;
  esac
done
wait
# A second gpu_run.sh in the same call (or the call's own tar) must not overwrite the first one's
# logs: 2026-12-02 lost a call's test logs that way, each invocation writing logs.tgz afresh.
logs=logs.tgz; i=2
while [ -e "$OUT/$logs" ]; do logs=logs-$i.tgz; i=$((i + 1)); done
(cd "$OUT" && tar czf "$logs" --remove-files ./*.log 2>/dev/null)
# The device tool returns at most 8 files (2026-12-04: a call with two bench stages lost level 3's
# bench.json, the ninth): every result but the call's own text, the machine's and the archives too
# large to return goes into one archive beside the logs.
res=results.tgz; i=2
while [ -e "$OUT/$res" ]; do res=results-$i.tgz; i=$((i + 1)); done
(cd "$OUT" && mapfile -t keep < <(ls -A | grep -vE '^(call\.txt|machine\.txt|logs(-[0-9]+)?\.tgz|results(-[0-9]+)?\.tgz|runs_.*\.tgz)$') \
  && [ ${#keep[@]} -gt 0 ] && tar czf "$res" --remove-files "${keep[@]}")
ls -la "$OUT"
