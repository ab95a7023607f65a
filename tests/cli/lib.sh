# shellcheck shell=bash
# lib.sh: what the CLI test scripts share, sourced by each (not a test of its own). Sets LANDMARK
# (the program, the script's first argument) and WORK (a fresh directory removed at exit), and
# defines fail MESSAGE, expect FILE STRING (FILE must contain STRING, else it is shown and the
# test fails), exits_with STATUS OUT CMD... (CMD's output goes to OUT; another exit status shows
# it and fails), small_text DIR (train.txt and val.txt: the first 30 kB and the last 10 kB of
# tests/data's Persuasion opening), small_tokens DIR (their byte-level token directory) and
# passkey_tokens TEXT TOKENS FLAGS... (`passkey-data --out TEXT FLAGS...`, then its byte-level
# token directory in TOKENS). One OpenMP thread that sleeps when idle: the tests run beside each
# other.
set -euo pipefail
LANDMARK="$1"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
expect() {  # file, fixed string
  grep -qF -- "$2" "$1" || { cat "$1" >&2; fail "expected '$2' in the output above"; }
}
exits_with() {  # expected status, output file, command...
  local want=$1 out=$2
  shift 2
  set +e
  "$@" > "$out" 2>&1
  local got=$?
  set -e
  [ "$got" -eq "$want" ] || { cat "$out" >&2; fail "'$*' exited with $got, expected $want"; }
}
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
small_text() {  # directory: train.txt and val.txt cut from tests/data's Persuasion opening
  local text
  text="$(dirname "${BASH_SOURCE[0]}")/../data/persuasion_opening.txt"
  mkdir -p "$1"
  head -c 30000 "$text" > "$1/train.txt"
  tail -c 10000 "$text" > "$1/val.txt"
}
small_tokens() {  # directory
  small_text "$WORK/small_text"
  "$LANDMARK" prepare --train "$WORK/small_text/train.txt" --val "$WORK/small_text/val.txt" --out "$1" --tokenizer bytes > /dev/null
}
passkey_tokens() {  # text directory, token directory, then passkey-data's flags
  local text=$1 tokens=$2
  shift 2
  "$LANDMARK" passkey-data --out "$text" "$@" > /dev/null
  "$LANDMARK" prepare --train "$text/train.txt" --val "$text/val.txt" --out "$tokens" --tokenizer bytes > /dev/null
}
