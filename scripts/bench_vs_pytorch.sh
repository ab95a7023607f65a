#!/usr/bin/env bash
# bench_vs_pytorch.sh: our training step against PyTorch's on the same machine (part of `make
# bench`). The `tiny` preset (4 layers, d 256, 4 heads, T 512, batch 8, vocab 4096, AdamW) is
# timed by bench/bench_train --tiny and by bench/pytorch_train_step.py --tiny (the same model in
# Debian's PyTorch), alternately ROUNDS times in this one process tree with the same thread count,
# each run the best of 3 steps after a warm-up; the best run of each side is kept. Prints the CPU
# and threads first and the ratio last: `train tiny_speedup_vs_pytorch=X` (PyTorch's step time
# over ours; above 1 means ours is faster).
# Usage: bash scripts/bench_vs_pytorch.sh [build-dir]     (env: ROUNDS=3, OMP_NUM_THREADS)
set -euo pipefail
BUILD="${1:-build}"
ROUNDS="${ROUNDS:-3}"
THREADS="${OMP_NUM_THREADS:-$(nproc)}"
die() { echo "bench_vs_pytorch: $*" >&2; exit 1; }
[ -x "$BUILD/bench/bench_train" ] || die "no $BUILD/bench/bench_train (build it first: make bench)"
case "$ROUNDS" in '' | *[!0-9]* | 0) die "ROUNDS must be a positive integer, got '$ROUNDS'" ;; esac
here="$(cd "$(dirname "$0")/.." && pwd)"
echo "train vs pytorch: $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $THREADS threads, $ROUNDS rounds"
if ! /usr/bin/python3 -c "import torch" 2> /dev/null; then
  echo "train tiny_speedup_vs_pytorch=unavailable (no PyTorch for /usr/bin/python3; scripts/install-deps.sh bench installs python3-torch)"
  exit 0
fi

step_of() { sed -n 's/.*tiny_step_s=\([0-9.]*\).*/\1/p' | tail -n 1; }
best_ours="" best_torch=""
for round in $(seq "$ROUNDS"); do
  ours="$(OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS="$THREADS" "$BUILD/bench/bench_train" --tiny | step_of)"
  torch="$(OMP_NUM_THREADS="$THREADS" /usr/bin/python3 "$here/bench/pytorch_train_step.py" --tiny | step_of)"
  [ -n "$ours" ] && [ -n "$torch" ] || die "round $round: a side printed no tiny_step_s"
  echo "round $round: ours $ours s, pytorch $torch s per step"
  best_ours="$(printf '%s\n%s\n' "$ours" "${best_ours:-$ours}" | sort -g | head -n 1)"
  best_torch="$(printf '%s\n%s\n' "$torch" "${best_torch:-$torch}" | sort -g | head -n 1)"
done
echo "best: ours $best_ours s, pytorch $best_torch s ($(/usr/bin/python3 -c 'import torch; print("PyTorch", torch.__version__)'))"
awk -v o="$best_ours" -v t="$best_torch" 'BEGIN { printf "train tiny_speedup_vs_pytorch=%.2f\n", t / o }'
