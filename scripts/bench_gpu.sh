#!/usr/bin/env bash
# bench_gpu.sh: the GPU part of `make bench` (and of scripts/gpu-check.sh): bench_gpu (our CUDA
# path) and bench/pytorch_gpu.py (PyTorch eager on the same card), one after the other in this run,
# then their ratios (scripts/bench_gpu_ratios.sh). Without a CUDA device, or in a build without
# CUDA, it says that it skipped them and succeeds.
# Usage: bash scripts/bench_gpu.sh [build-dir] [out-dir]   (out-dir default: BUILD/bench_gpu)
set -uo pipefail
BUILD="${1:-build}"
OUTD="${2:-$BUILD/bench_gpu}"
here="$(cd "$(dirname "$0")/.." && pwd)"
B="$BUILD/bench/bench_gpu"
[ -x "$B" ] || { echo "bench_gpu: skipped ($B is not built)"; exit 0; }
mkdir -p "$OUTD"
"$B" > "$OUTD/ours.txt" 2>&1
rc=$?
cat "$OUTD/ours.txt"
[ $rc -eq 77 ] && exit 0  # it printed why (no device, or no CUDA in this build)
[ $rc -eq 0 ] || { echo "bench_gpu: failed (exit $rc)"; exit 1; }
PY=""
for p in python3 /usr/bin/python3; do
  if "$p" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then PY="$p"; break; fi
done
[ -n "$PY" ] || { echo "bench_gpu: the PyTorch side skipped: no python3 here has a PyTorch that sees the GPU"; exit 0; }
PYTHONUNBUFFERED=1 "$PY" "$here/bench/pytorch_gpu.py" > "$OUTD/torch.txt" 2>&1 ||
  { cat "$OUTD/torch.txt"; echo "bench_gpu: bench/pytorch_gpu.py failed"; exit 1; }
cat "$OUTD/torch.txt"
bash "$here/scripts/bench_gpu_ratios.sh" "$OUTD/ours.txt" "$OUTD/torch.txt"
