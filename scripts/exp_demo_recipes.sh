#!/usr/bin/env bash
# exp_demo_recipes.sh: candidate training recipes for the demo (issue 10), each a short run
# followed by a small pass-key check, so recipes can be compared by what they reach in a fixed
# number of steps (not by the clock: two recipes may run side by side, one thread each).
# Each recipe is a line in the RECIPES table below:
#   name | data directory | train flags (model, schedule; a landmark model has --attention landmark)
# Data directories are made when missing, named by what they hold:
#   passkey            the demo's data: 0..12 filler sentences per document, BPE vocab 512
#   passkey_fN         0..N fillers          passkey_xN   exactly N fillers
#   passkey_vN         0..12 fillers, BPE vocab N
#   passkey_lNN        0..12 fillers, NN% of the documents number lists (`passkey-data --list-docs`)
#   passkey_fN_lNN     0..N fillers and NN% lists
#   passkey_uN_qM      uniform distance 0..N fillers, the question asked M times per document
#                      (`passkey-data --uniform-distance --questions M`), 20,000 documents
# Checks: a landmark model, 10 prompts at 512, 2048 and 8192 tokens; a standard model, 20 prompts
# at 512 tokens and a depth sweep (`passkey --depth`, 5 prompts per depth, 512 tokens: depth 1
# puts the key right before the question, depth 0 at the far end of the window), which shows how
# far back it has learned to copy from (the landmark model it is paired with: the first column).
# Results: runs/demo_recipes/NAME/{cmdline, train.log, passkey.txt, depth.txt, DONE}; a finished
# recipe is skipped, an interrupted one starts again.
# Usage: bash scripts/exp_demo_recipes.sh [name ...]   (default: all; OMP_NUM_THREADS as given)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
LANDMARK="${LANDMARK:-build/apps/landmark}"
OUT=runs/demo_recipes
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
mkdir -p "$OUT"
RUN=(--eval-every 0 --ckpt-every 0 --quiet)
D128=(--layers 3 --embd 128 --heads 4 --block-size 512 --batch 8)  # the demo's model until now
S64=(--layers 2 --embd 64 --heads 2 --block-size 512 --batch 8)     # about 3x the tokens/s
LM=(--attention landmark --landmark-every 50)

RECIPES=(
  "lm1200|passkey|${LM[*]} ${D128[*]} --steps 1200 --lr 2e-3"
  "lm1200_lr4|passkey|${LM[*]} ${D128[*]} --steps 1200 --lr 4e-3"
  "lm1200_f6|passkey_f6|${LM[*]} ${D128[*]} --steps 1200 --lr 2e-3"
  "lm1200_v384|passkey_v384|${LM[*]} ${D128[*]} --steps 1200 --lr 2e-3"
  "s64_lm1500|passkey|${LM[*]} ${S64[*]} --steps 1500 --lr 3e-3"
  "s64_std1500|passkey|${S64[*]} --steps 1500 --lr 3e-3"
  "s64_lm1500_f18|passkey_f18|${LM[*]} ${S64[*]} --steps 1500 --lr 3e-3"
  "s64_std1500_f18|passkey_f18|${S64[*]} --steps 1500 --lr 3e-3"
  "s64_std4000_f18|passkey_f18|${S64[*]} --steps 4000 --lr 3e-3"
  "d128_std3000_f18|passkey_f18|${D128[*]} --steps 3000 --lr 2e-3"
  # sixth round: number-list documents (many copies per document, at every distance a window holds)
  "l30_std900|passkey_l30|${D128[*]} --steps 900 --lr 2e-3"
  "l30_lm900|passkey_l30|${LM[*]} ${D128[*]} --steps 900 --lr 2e-3"
  # seventh round: one key per window, asked several times (documents longer than a window, each
  # window opening one)
  "u18q3_std900|passkey_u18_q3|${D128[*]} --doc-starts --steps 900 --lr 2e-3"
  "u18q3_lm900|passkey_u18_q3|${LM[*]} ${D128[*]} --doc-starts --steps 900 --lr 2e-3"
)

make_data() {  # directory name
  local d="data/$1"
  [ -s "$d/tokens/train.tokens" ] && return
  local lo=0 hi=12 vocab=512
  [[ "$1" =~ _f([0-9]+)$ ]] && hi="${BASH_REMATCH[1]}"
  [[ "$1" =~ _x([0-9]+)$ ]] && lo="${BASH_REMATCH[1]}" && hi="$lo"
  [[ "$1" =~ _v([0-9]+)$ ]] && vocab="${BASH_REMATCH[1]}"
  local lists=0 extra=(--docs 50000)
  [[ "$1" =~ _u([0-9]+)_q([0-9]+)$ ]] && hi="${BASH_REMATCH[1]}" &&
    extra=(--docs 20000 --uniform-distance --questions "${BASH_REMATCH[2]}")
  [[ "$1" =~ _f([0-9]+)_l[0-9]+$ ]] && hi="${BASH_REMATCH[1]}"
  [[ "$1" =~ _l([0-9]+)$ ]] && lists="0.${BASH_REMATCH[1]}"
  "$LANDMARK" passkey-data --out "$d" "${extra[@]}" --min-fillers "$lo" --max-fillers "$hi" --filler-only 0.05 \
    --list-docs "$lists"
  "$LANDMARK" prepare --train "$d/train.txt" --val "$d/val.txt" --out "$d/tokens" --tokenizer bpe --vocab "$vocab" 2> /dev/null
}

want=("$@")
for line in "${RECIPES[@]}"; do
  IFS='|' read -r name data flags <<< "$line"
  if [ ${#want[@]} -gt 0 ] && [[ ! " ${want[*]} " =~ " $name " ]]; then continue; fi
  dir="$OUT/$name"
  if [ -f "$dir/DONE" ]; then echo "--- $name: done earlier"; continue; fi
  make_data "$data"
  rm -rf "$dir"; mkdir -p "$dir"
  echo "--- $name: train $flags"
  echo "data/$data/tokens $flags" > "$dir/cmdline"
  start=$SECONDS
  # shellcheck disable=SC2086
  "$LANDMARK" train --data "data/$data/tokens" --out "$dir" "${RUN[@]}" $flags > "$dir/train.log" 2>&1
  echo "train_seconds $((SECONDS - start)) threads ${OMP_NUM_THREADS:-all}" >> "$dir/train.log"
  ckpt="$dir/checkpoint.safetensors"
  if grep -q -- "--attention landmark" <<< "$flags"; then
    "$LANDMARK" passkey --checkpoint "$ckpt" --lengths 512,2048,8192 --trials 10 --chunk 200 --k 4 > "$dir/passkey.txt" 2> /dev/null
  else
    # A standard model as --checkpoint is read with its own window.
    "$LANDMARK" passkey --checkpoint "$ckpt" --lengths 512 --trials 20 > "$dir/passkey.txt" 2> /dev/null
    for depth in 0 0.25 0.5 0.75 0.9 1; do
      printf 'depth %-5s ' "$depth"
      "$LANDMARK" passkey --checkpoint "$ckpt" --lengths 512 --trials 5 --depth "$depth" 2> /dev/null | grep "^ *512 "
    done > "$dir/depth.txt"
    cat "$dir/depth.txt"
  fi
  touch "$dir/DONE"
  tail -4 "$dir/passkey.txt"
done
