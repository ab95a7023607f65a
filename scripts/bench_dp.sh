#!/usr/bin/env bash
# bench_dp.sh: data-parallel training speed (part of `make bench`): the `tiny` preset with the same
# global batch, 2 ranks x 1 thread (mpirun) against 1 rank x 2 threads, tokens per second measured
# in one run, the two alternated ROUNDS times, the best of each kept. Prints the CPU model first and
# the ratio last: `dp tiny_ranks2x1_vs_ranks1x2=X`.
# Usage: bash scripts/bench_dp.sh [path/to/landmark]     (env: ROUNDS=2, STEPS=8)
set -euo pipefail
LANDMARK="${1:-build/apps/landmark}"
ROUNDS="${ROUNDS:-2}"
STEPS="${STEPS:-8}"
die() { echo "bench_dp: $*" >&2; exit 1; }
[ -x "$LANDMARK" ] || die "no landmark program at $LANDMARK"
if ! command -v mpirun > /dev/null; then
  echo "dp: skipped (no mpirun; Debian: openmpi-bin libopenmpi-dev)"
  exit 0
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=PASSIVE
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
echo "dp cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) logical CPUs"

# Data: generated pass-key text, byte tokens (the speed does not depend on the text).
"$LANDMARK" passkey-data --out "$WORK/text" --docs 2000 --max-fillers 12 > /dev/null 2>&1
"$LANDMARK" prepare --train "$WORK/text/train.txt" --val "$WORK/text/val.txt" --out "$WORK/data" --tokenizer bytes > /dev/null 2>&1
ARGS=(train --preset tiny --data "$WORK/data" --steps "$STEPS" --eval-every 0 --quiet)

speed() {  # the median tokens/s over the steps after the first two (warm-up) of a metrics file
  grep -o '"tokens_per_s":[0-9.e+]*' "$1" | cut -d: -f2 | tail -n +3 | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}
best1=0 best2=0
for round in $(seq "$ROUNDS"); do
  rm -rf "$WORK/one" "$WORK/two"
  OMP_NUM_THREADS=2 "$LANDMARK" "${ARGS[@]}" --out "$WORK/one" > "$WORK/one.log" 2>&1 || { cat "$WORK/one.log" >&2; die "1 rank failed"; }
  if ! mpirun -np 2 --oversubscribe -x OMP_NUM_THREADS=1 -x OMP_WAIT_POLICY "$LANDMARK" "${ARGS[@]}" --out "$WORK/two" \
      > "$WORK/two.log" 2>&1; then
    if grep -q "has no MPI" "$WORK/two.log"; then echo "dp: skipped (this build has no MPI)"; exit 0; fi
    cat "$WORK/two.log" >&2
    die "2 ranks failed"
  fi
  s1=$(speed "$WORK/one/metrics.jsonl")
  s2=$(speed "$WORK/two/metrics.jsonl")
  echo "dp round $round: 1 rank x 2 threads $s1 tok/s, 2 ranks x 1 thread $s2 tok/s"
  best1=$(awk -v a="$best1" -v b="$s1" 'BEGIN { print (b > a ? b : a) }')
  best2=$(awk -v a="$best2" -v b="$s2" 'BEGIN { print (b > a ? b : a) }')
done
echo "dp tiny: global batch 8 x 512 tokens; best of $ROUNDS rounds: 1 rank x 2 threads $best1 tok/s, 2 ranks x 1 thread $best2 tok/s"
awk -v a="$best1" -v b="$best2" 'BEGIN { printf "dp tiny_ranks2x1_vs_ranks1x2=%.3f\n", b / a }'
