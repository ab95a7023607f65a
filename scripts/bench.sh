#!/usr/bin/env bash
# bench.sh: every benchmark of `make bench`, in order, into one log. Each program prints the CPU,
# thread count and cache sizes first and its ratios last (lines `NAME key=value`); the log is
# BUILD/bench.log and a summary of those lines, naming the machine, BUILD/bench-summary.md
# (scripts/bench_summary.sh). `make bench-results` copies the summary into docs/results/bench.md.
# Usage: bash scripts/bench.sh [build-dir]     (the benchmarks must be built: make bench does it)
set -euo pipefail
BUILD="${1:-build}"
here="$(cd "$(dirname "$0")/.." && pwd)"
for b in bench_gemm bench_train bench_landmark bench_decode bench_topk; do
  [ -x "$BUILD/bench/$b" ] || { echo "bench: no $BUILD/bench/$b (build first: make bench)" >&2; exit 1; }
done
LOG="$BUILD/bench.log"
run_all() {
  echo "bench run: $(date -u '+%Y-%m-%d %H:%M UTC'), $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) logical CPUs, OMP_NUM_THREADS=${OMP_NUM_THREADS:-(unset)}"
  OMP_WAIT_POLICY=PASSIVE OPENBLAS_THREAD_TIMEOUT=4 "$BUILD/bench/bench_gemm"
  echo
  OMP_WAIT_POLICY=PASSIVE "$BUILD/bench/bench_train"
  echo
  bash "$here/scripts/bench_vs_pytorch.sh" "$BUILD"
  echo
  OMP_WAIT_POLICY=PASSIVE "$BUILD/bench/bench_landmark"
  echo
  GOMP_SPINCOUNT=10000 "$BUILD/bench/bench_decode"  # a short spin, as the landmark program uses
  echo
  OMP_WAIT_POLICY=PASSIVE "$BUILD/bench/bench_topk" --out "$BUILD/bench_topk"
  echo
  bash "$here/scripts/bench_dp.sh" "$BUILD/apps/landmark"
  echo
  bash "$here/scripts/bench_gpu.sh" "$BUILD"  # says it skipped without a GPU
}
run_all 2>&1 | tee "$LOG.tmp"
mv "$LOG.tmp" "$LOG"
bash "$here/scripts/bench_summary.sh" "$LOG" > "$BUILD/bench-summary.md.tmp"
mv "$BUILD/bench-summary.md.tmp" "$BUILD/bench-summary.md"
echo "bench: log in $LOG, summary in $BUILD/bench-summary.md (make bench-results puts it in docs/results/bench.md)"
