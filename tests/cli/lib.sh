# shellcheck shell=bash
# lib.sh: what the CLI test scripts share, sourced by each (not a test of its own). Sets LANDMARK
# (the program, the script's first argument) and WORK (a fresh directory removed at exit), and
# defines fail MESSAGE, expect FILE STRING (FILE must contain STRING, else it is shown and the
# test fails) and small_tokens DIR (a byte-level token directory of tests/data's Persuasion
# opening: its first 30 kB to train on, its last 10 kB to evaluate). One OpenMP thread that
# sleeps when idle: the tests run beside each other.
set -euo pipefail
LANDMARK="$1"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
expect() {  # file, fixed string
  grep -qF -- "$2" "$1" || { cat "$1" >&2; fail "expected '$2' in the output above"; }
}
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
small_tokens() {  # directory
  local text
  text="$(dirname "${BASH_SOURCE[0]}")/../data/persuasion_opening.txt"
  head -c 30000 "$text" > "$WORK/small_train.txt"
  tail -c 10000 "$text" > "$WORK/small_val.txt"
  "$LANDMARK" prepare --train "$WORK/small_train.txt" --val "$WORK/small_val.txt" --out "$1" --tokenizer bytes > /dev/null
}
