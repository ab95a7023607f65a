#!/usr/bin/env bash
# exp_cmt_skip.sh: beyond the paper. What skipping the blocks of rows the context-miss token gates
# off saves: the paper-tables CMT model (make paper-tables) on val.tokens at 4096 and 16384 tokens,
# chunks of 250, k 4, cutoff 0.3, block K/V in files (--block-dir, a fresh temporary directory),
# with the skip (the default) and without it (--no-cmt-skip), alternated twice. Each run's output
# goes to runs/cmt_skip/NAME.txt (a run that is there is skipped).
# Usage: bash scripts/exp_cmt_skip.sh   (env LANDMARK, CMT_MODEL, DATA, OUT)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
LANDMARK="${LANDMARK:-build/apps/landmark}"
CMT_MODEL="${CMT_MODEL:-runs/paper/train/landmark-cmt/checkpoint.safetensors}"
DATA="${DATA:-data/tokens}"
OUT="${OUT:-runs/cmt_skip}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
die() { echo "exp_cmt_skip: $*" >&2; exit 1; }
[ -x "$LANDMARK" ] || die "$LANDMARK is missing; run 'make' first"
[ -f "$CMT_MODEL" ] || die "$CMT_MODEL is missing: run 'make paper-tables' first (or set CMT_MODEL=...)"
mkdir -p "$OUT"
BLOCKS=$(mktemp -d)
trap 'rm -rf "$BLOCKS"' EXIT
for round in 1 2; do
  for len in 4096 16384; do
    for mode in on off; do
      name="${len}_${mode}_${round}"
      [ -s "$OUT/$name.txt" ] && { echo "--- $name: done earlier"; continue; }
      echo "--- $name"
      extra=()
      [ "$mode" = off ] && extra=(--no-cmt-skip)
      "$LANDMARK" eval --checkpoint "$CMT_MODEL" --tokens "$DATA/val.tokens" --length "$len" --chunk 250 --k 4 \
        --cmt-cutoff 0.3 --block-dir "$BLOCKS" --bootstrap 200 "${extra[@]}" > "$OUT/$name.txt.tmp" 2> /dev/null
      mv "$OUT/$name.txt.tmp" "$OUT/$name.txt"
    done
  done
done
for f in "$OUT"/*.txt; do
  printf '%s: %s | %s | %s\n' "$(basename "$f" .txt)" "$(grep -o 'CMT skip [^:]*: [0-9]* distinct blocks attended of [0-9]* chosen' "$f")" \
    "$(grep -o '[0-9.]* s; attention' "$f" | cut -d' ' -f1) s" "$(grep -o 'perplexity=[0-9.]* drop_rate=[0-9.e-]*' "$f")"
done
