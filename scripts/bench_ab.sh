#!/usr/bin/env bash
# bench_ab.sh OLD_BUILD NEW_BUILD [ROUNDS]: the same benchmarks from two builds (for example the
# tree before a change, built in its own clone, and the tree after it), alternated round by round
# in one run, so that both see the same machine and the same neighbours. Prints, per round and
# build: the 32k-token decode row and speedup_at_32k (bench_decode), tiny_step_s (bench_train
# --tiny) and overhead_vs_causal (bench_landmark). Read the spread across rounds, not one figure.
# Each build needs the targets bench_decode, bench_train and bench_landmark.
set -euo pipefail
if [ $# -lt 2 ] || [ "${1:-}" = --help ]; then
  echo "usage: scripts/bench_ab.sh OLD_BUILD NEW_BUILD [ROUNDS (default 3)]" >&2
  exit 2
fi
OLD="$1" NEW="$2" ROUNDS="${3:-3}"
[[ "$ROUNDS" =~ ^[1-9][0-9]?$ ]] || { echo "bench_ab: ROUNDS must be 1 to 99, got '$ROUNDS'" >&2; exit 2; }
for b in "$OLD" "$NEW"; do
  for t in bench_decode bench_train bench_landmark; do
    [ -x "$b/bench/$t" ] || { echo "bench_ab: no $b/bench/$t (build the target first)" >&2; exit 1; }
  done
done
echo "bench_ab: $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) logical CPUs, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "old: $OLD   new: $NEW"
for ((r = 1; r <= ROUNDS; r++)); do
  for which in old new; do
    b="$OLD"
    [ "$which" = new ] && b="$NEW"
    dec=$(GOMP_SPINCOUNT=10000 "$b/bench/bench_decode" --context 32768 2>&1 | grep -E '^ *32768 ' | tr -s ' ')
    tiny=$(OMP_WAIT_POLICY=PASSIVE "$b/bench/bench_train" --tiny 2>&1 | grep -o 'tiny_step_s=[0-9.]*')
    lmk=$(OMP_WAIT_POLICY=PASSIVE "$b/bench/bench_landmark" 2>&1 | grep -o 'overhead_vs_causal=[0-9.]*')
    echo "round $r $which | decode 32k:$dec | $tiny | $lmk"
  done
done
