#!/usr/bin/env bash
# test_check_layers.sh: scripts/check-layers.sh on the tree (it must pass) and on copies of it with
# one forbidden include planted: landmark/ including infer/, the core of infer/ including beyond/,
# infer/ including evals/. Each must fail naming the including file and the included one. Also a
# stale "pending" line and a listed extension that is not in the tree must fail, and a pending
# include must pass, printed as pending. Needs no build: `bash tests/cli/test_check_layers.sh`.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

bash "$ROOT/scripts/check-layers.sh" > "$WORK/tree.txt" || { cat "$WORK/tree.txt" >&2; fail "the tree breaks its layers"; }

# A copy of the library folders and the script, to plant includes in.
copy() {
  rm -rf "$WORK/t" && mkdir -p "$WORK/t/scripts"
  cp "$ROOT/scripts/check-layers.sh" "$ROOT/scripts/layers.txt" "$WORK/t/scripts/"
  for d in tensor autograd nn plot landmark sparse train infer beyond evals apps; do cp -r "$ROOT/$d" "$WORK/t/"; done
}
# plant FILE INCLUDE: adds #include "INCLUDE" to FILE of the copy; the check must fail naming both.
plant() {
  copy
  printf '#include "%s"\n' "$2" >> "$WORK/t/$1"
  if bash "$WORK/t/scripts/check-layers.sh" > "$WORK/out.txt" 2>&1; then
    cat "$WORK/out.txt" >&2
    fail "$1 including $2 passed"
  fi
  grep -qF "$1 -> $2" "$WORK/out.txt" || { cat "$WORK/out.txt" >&2; fail "no line names $1 -> $2"; }
}
plant landmark/tokens.h infer/session.h
plant infer/chunk_attention.cpp beyond/certificate.h
plant infer/session.cpp evals/eval.h
plant tensor/tensor.h autograd/var.h

# The table's own lists: a core file including a file the table calls an extension is an error,
# unless that include is listed as pending; a pending line no longer true is an error.
copy
printf 'extension infer/virtual_row.h\n' >> "$WORK/t/scripts/layers.txt"
bash "$WORK/t/scripts/check-layers.sh" > "$WORK/out.txt" 2>&1 && fail "a core include of an extension passed"
grep -qF "infer/cpu_rows.cpp -> infer/virtual_row.h: the core of infer/ includes an extension" "$WORK/out.txt" ||
  { cat "$WORK/out.txt" >&2; fail "no extension offence named"; }
for f in $(cd "$WORK/t" && grep -rl '"infer/virtual_row.h"' infer | grep -v '^infer/virtual_row.h$'); do
  printf 'pending   %s  infer/virtual_row.h\n' "$f" >> "$WORK/t/scripts/layers.txt"
done
bash "$WORK/t/scripts/check-layers.sh" > "$WORK/out.txt" 2>&1 || { cat "$WORK/out.txt" >&2; fail "pending includes failed"; }
grep -qF "pending: infer/cpu_rows.cpp -> infer/virtual_row.h" "$WORK/out.txt" || fail "a pending include not printed"
printf 'pending   infer/config.h  infer/virtual_row.h\n' >> "$WORK/t/scripts/layers.txt"
bash "$WORK/t/scripts/check-layers.sh" > "$WORK/out.txt" 2>&1 && fail "a stale pending line passed"
grep -qF "infer/config.h -> infer/virtual_row.h: listed as pending but no longer included" "$WORK/out.txt" ||
  { cat "$WORK/out.txt" >&2; fail "no stale pending line named"; }
copy
printf 'extension infer/no_such_file.h\n' >> "$WORK/t/scripts/layers.txt"
bash "$WORK/t/scripts/check-layers.sh" > "$WORK/out.txt" 2>&1 && fail "an extension missing from the tree passed"
grep -qF "infer/no_such_file.h: listed as an extension but not in the tree" "$WORK/out.txt" || fail "missing extension not named"
echo "check-layers: all checks passed"
