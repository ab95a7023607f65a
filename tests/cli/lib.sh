# lib.sh: what the CLI test scripts share, sourced by each (not a test of its own). Sets LANDMARK
# (the program, the script's first argument) and WORK (a fresh directory removed at exit), and
# defines fail MESSAGE and expect FILE STRING (FILE must contain STRING, else it is shown and the
# test fails). One OpenMP thread that sleeps when idle: the tests run beside each other.
set -euo pipefail
LANDMARK="$1"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
expect() {  # file, fixed string
  grep -qF -- "$2" "$1" || { cat "$1" >&2; fail "expected '$2' in the output above"; }
}
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
