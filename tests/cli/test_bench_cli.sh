#!/usr/bin/env bash
# test_bench_cli.sh: the benchmark programs refuse bad command lines and report failures with one
# clear line and an exit status (2 for a usage error, 1 for a failure), never an abort from an
# uncaught exception (exit 134) as they once did. Nothing is benchmarked: every run here stops
# at its flags, or at the first thing it builds.
# Usage: test_bench_cli.sh bench_train bench_decode bench_gemm bench_landmark bench_topk
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$1"  # LANDMARK (unused here), WORK, fail, expect
TRAIN="$1" DECODE="$2" GEMM="$3" LANDMARK_BENCH="$4" TOPK="$5"

run() {  # expected status, output file, command...
  local want=$1 out=$2
  shift 2
  set +e
  "$@" > "$out" 2>&1
  local got=$?
  set -e
  [ "$got" -eq "$want" ] || { cat "$out" >&2; fail "'$*' exited with $got, expected $want"; }
}
run 2 "$WORK/1" "$TRAIN" --vocab abc
expect "$WORK/1" "--vocab needs an integer"
run 2 "$WORK/2" "$TRAIN" --vocab 99999999999999999999
expect "$WORK/2" "got '99999999999999999999'"
run 2 "$WORK/3" "$GEMM" --bogus
expect "$WORK/3" "unknown flag '--bogus'"
run 2 "$WORK/4" "$LANDMARK_BENCH" --slow
expect "$WORK/4" "usage: bench_landmark"
run 1 "$WORK/5" "$DECODE" --quick --block-dir "$WORK/missing"
expect "$WORK/5" "bench_decode: error: block store: $WORK/missing is not a directory"
run 0 "$WORK/6" "$DECODE" --help
expect "$WORK/6" "usage: bench_decode"
run 2 "$WORK/7" "$TOPK" --max-blocks 10
expect "$WORK/7" "--max-blocks needs an integer in [1000, 10000000], got '10'"
run 2 "$WORK/8" "$TOPK" --out
expect "$WORK/8" "unknown or incomplete flag '--out'"
echo "bench CLI: all checks passed"
