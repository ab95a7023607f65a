#!/usr/bin/env bash
# get-tokens.sh: the token directory that make demo-corpus, make paper-tables and make paper-side
# train on: the real corpus (scripts/get-corpus.sh, into CORPUS, default data/corpus/) tokenized
# with a BPE of 4096 tokens by `landmark prepare` into OUT (default data/tokens: tokenizer.json,
# train.tokens, val.tokens). Each step is skipped when its output is already there, so calling it
# again costs nothing; an interrupted prepare leaves no half-written token file (prepare writes
# each through a temp name), so the next call redoes it.
#
# Usage: scripts/get-tokens.sh [OUT]      (env: LANDMARK=path/to/landmark, CORPUS=data/corpus)
set -euo pipefail
# Relative paths are the caller's; the defaults are in the repository.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LANDMARK="${LANDMARK:-$ROOT/build/apps/landmark}"
OUT="${1:-$ROOT/data/tokens}"
CORPUS="${CORPUS:-$ROOT/data/corpus}"
case "$CORPUS" in /*) ;; *) CORPUS="$PWD/$CORPUS" ;; esac  # get-corpus.sh changes directory
die() { echo "get-tokens: $*" >&2; exit 1; }
[ $# -le 1 ] || die "one argument at most, the output directory (got $#)"
[ -x "$LANDMARK" ] || die "no landmark program at $LANDMARK (build it first: make, or set LANDMARK=...)"

if [ -s "$OUT/train.tokens" ] && [ -s "$OUT/val.tokens" ]; then
  echo "=== tokens: $OUT already there ==="
  exit 0
fi
if [ -s "$CORPUS/train.txt" ] && [ -s "$CORPUS/val.txt" ]; then
  echo "=== corpus: $CORPUS already there ==="
else
  echo "=== corpus: Austen + KJV from Debian packages into $CORPUS (scripts/get-corpus.sh) ==="
  LANDMARK="$LANDMARK" OUT_DIR="$CORPUS" bash "$ROOT/scripts/get-corpus.sh"
fi
echo "=== tokens: BPE of 4096 tokens into $OUT (landmark prepare) ==="
"$LANDMARK" prepare --train "$CORPUS/train.txt" --val "$CORPUS/val.txt" --out "$OUT" --tokenizer bpe --vocab 4096
