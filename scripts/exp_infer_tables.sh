#!/usr/bin/env bash
# exp_infer_tables.sh: the measured tables of docs/infer.md, from the models that
# scripts/exp_inference_models.sh trains: `landmark` (the demo's data until 2026-11-26, data/passkey_0to12) for the
# pass-key, recall and granularity tables; `landmark_them` and `cmt_them` (data/passkey_them) for
# the context-miss token, and `landmark_them` once more for the pass-key table of a model that did
# not learn to copy the key.
#   stingy   pass-key accuracy and perplexity with k 2, 4, 8, before and after the stingy
#            placement kept the blocks' order: two builds of the `landmark` program, given as
#            BEFORE_BIN (built at commit edcfe39) and AFTER_BIN (built at 0f618a3, the fix alone)
#   recall   retrieval recall per layer and head (passkey --recall) and both pass-key scorings
#   table2   perplexity at the three retrieval granularities (eval --granularity all), k 2 and 4
#   cmt      the context-miss token: perplexity and drop rate against the cutoff (Table 3)
# Every result goes to runs/infer_tables/NAME.txt through a temporary file, so an interrupted run
# loses nothing finished; run the script again and it skips what is there.
# Usage: bash scripts/exp_infer_tables.sh [stingy|recall|table2|cmt ...]   (default: all four)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
LANDMARK="${LANDMARK:-build/apps/landmark}"
OUT=runs/infer_tables
LM=runs/infer_models/landmark/checkpoint.safetensors
VAL=data/passkey_0to12/tokens/val.tokens
LM_THEM=runs/infer_models/landmark_them/checkpoint.safetensors
CMT=runs/infer_models/cmt_them/checkpoint.safetensors
VAL_THEM=data/passkey_them/tokens/val.tokens
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
mkdir -p "$OUT"
lscpu | grep -m1 'Model name' > "$OUT/cpu.txt" || true

run() {  # name, command...: the command's stdout into $OUT/name.txt unless it is there already
  local name="$1"; shift
  if [ -s "$OUT/$name.txt" ]; then echo "--- $name: done earlier"; return; fi
  echo "--- $name: $*"
  local start=$SECONDS
  "$@" > "$OUT/$name.txt.tmp"
  echo "(wall time $((SECONDS - start)) s)" >> "$OUT/$name.txt.tmp"
  mv "$OUT/$name.txt.tmp" "$OUT/$name.txt"
}

PK=(--lengths 2048,8192,32768 --trials 20 --chunk 200 --seed 2023)
PPL=(--tokens "$VAL" --length 2048 --chunk 250 --windows 100)
PPL_THEM=(--tokens "$VAL_THEM" --length 2048 --chunk 250 --windows 100)

stingy() {
  : "${BEFORE_BIN:?set BEFORE_BIN to a landmark program built at edcfe39}"
  : "${AFTER_BIN:?set AFTER_BIN to a landmark program built at 0f618a3}"
  for k in 2 4 8; do
    for side in before after; do
      local bin=$BEFORE_BIN
      [ "$side" = after ] && bin=$AFTER_BIN
      run "stingy_passkey_k${k}_${side}" "$bin" passkey --checkpoint "$LM" "${PK[@]}" --k "$k"
      run "stingy_ppl_k${k}_${side}" "$bin" eval --checkpoint "$LM" "${PPL[@]}" --k "$k"
    done
  done
}

recall() {
  run recall_k4 "$LANDMARK" passkey --checkpoint "$LM" "${PK[@]}" --k 4 --recall --recall-plot "$OUT/recall_k4.png"
  run passkey_paper_k4 "$LANDMARK" passkey --checkpoint "$LM" "${PK[@]}" --k 4 --scoring paper
  run them_passkey_k4 "$LANDMARK" passkey --checkpoint "$LM_THEM" "${PK[@]}" --k 4 --recall \
    --recall-plot "$OUT/them_recall_k4.png"
}

table2() {
  for k in 2 4; do
    run "table2_k${k}" "$LANDMARK" eval --checkpoint "$LM" "${PPL[@]}" --k "$k" --granularity all
  done
}

cmt() {
  run cmt_baseline_k4 "$LANDMARK" eval --checkpoint "$LM_THEM" "${PPL_THEM[@]}" --k 4
  for c in 0 0.1 0.2 0.3 0.5 1; do
    run "cmt_cutoff_${c}" "$LANDMARK" eval --checkpoint "$CMT" "${PPL_THEM[@]}" --k 4 --cmt-cutoff "$c"
  done
  run cmt_passkey_k4 "$LANDMARK" passkey --checkpoint "$CMT" "${PK[@]}" --k 4
}

parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(stingy recall table2 cmt)
for p in "${parts[@]}"; do
  case "$p" in
    stingy|recall|table2|cmt) "$p" ;;
    *) echo "exp_infer_tables: unknown part '$p' (stingy, recall, table2, cmt)" >&2; exit 2 ;;
  esac
done
echo "=== done: $OUT ==="
