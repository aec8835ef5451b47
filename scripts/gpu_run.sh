#!/usr/bin/env bash
# Runs on the lent GPU machine (the device tool), from the repository root:
#   bash scripts/gpu_run.sh [tests] [example] [bench:SECONDS:PATH[,PATH...]] ...
# Makes the package importable without pip (that machine has torch but no network, and its
# setuptools may predate our pyproject), runs the chosen stages, and leaves logs and JSON in $OUT.
# KernelBench problems travel in .carry/kernelbench (git-ignored; copy ../shared/kernelbench there);
# a bench stage resumes from .carry/bench-in/bench_NAME.json when an earlier call left one.
set -u
OUT=${OUT:-/tmp/stitchcuda-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
repo=$(pwd)
pkg=/tmp/stitchcuda-path/stitchcuda
rm -rf /tmp/stitchcuda-path && mkdir -p "$pkg"
for f in "$repo"/stitchcuda/*; do ln -s "$f" "$pkg/"; done
for sub in agents profiling server; do ln -s "$repo/$sub" "$pkg/$sub"; done
export PYTHONPATH=/tmp/stitchcuda-path${PYTHONPATH:+:$PYTHONPATH}
export STITCHCUDA_CACHE=/tmp/stitchcuda-cache
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; python3 -c "import torch,sys;print('python',sys.version.split()[0],'torch',torch.__version__,'cuda',torch.version.cuda)"; nvcc --version | tail -1; } | tee "$OUT/machine.txt"

for stage in "$@"; do
  case "$stage" in
    tests)
      timeout 300 python3 -m pytest -q -rs -m "gpu or nvcc" tests -p no:cacheprovider 2>&1 | tee "$OUT/gpu_tests.log" | tail -40 ;;
    example)
      timeout 300 python3 -m stitchcuda.cli optimize examples/gated_block.py --out /tmp/example-run 2>&1 | tee "$OUT/example.log" | tail -40
      cp /tmp/example-run/summary.json "$OUT/example_summary.json" 2>/dev/null ;;
    bench:*)
      IFS=: read -r _ secs paths <<<"$stage"
      name=$(echo "$paths" | tr ',/' '__' | tr -cd 'A-Za-z0-9_.-' | tail -c 40)
      IFS=, read -ra plist <<<"$paths"
      resume=""; [ -f ".carry/bench-in/bench_$name.json" ] && { mkdir -p "/tmp/bench-$name"; cp ".carry/bench-in/bench_$name.json" "/tmp/bench-$name/bench.json"; resume=--resume; }
      timeout $((secs + 240)) python3 -m stitchcuda.cli bench "${plist[@]}" --out "/tmp/bench-$name" --jobs "${JOBS:-4}" \
        --timeout "${CAND_TIMEOUT:-240}" --deadline "$secs" $resume 2>&1 | tee "$OUT/bench_$name.log" | tail -25
      cp "/tmp/bench-$name/bench.json" "$OUT/bench_$name.json" 2>/dev/null
      (cd /tmp && tar czf "$OUT/runs_$name.tgz" --exclude='*.so' --exclude='*.tmp' "bench-$name/runs" 2>/dev/null) ;;
    *) echo "unknown stage $stage" ;;
  esac
done
(cd "$OUT" && tar czf logs.tgz --remove-files ./*.log 2>/dev/null)
ls -la "$OUT"
