#!/usr/bin/env bash
# exp_demo_recipes.sh: candidate training recipes for the demo (issue 10), each a short run of
# the demo-sized model followed by a small pass-key check, so recipes can be compared by what
# they reach in a fixed number of steps. Each recipe is a line in the RECIPES table below:
#   name | data directory (made if missing: "passkey" or "passkey_fN" with N max fillers) | train flags
# Results: runs/demo_recipes/NAME/{train.log, passkey.txt, DONE}; a finished recipe is skipped,
# an interrupted one starts again. Usage: bash scripts/exp_demo_recipes.sh [name ...] (default: all)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
LANDMARK="${LANDMARK:-build/apps/landmark}"
OUT=runs/demo_recipes
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
mkdir -p "$OUT"
BASE=(--layers 3 --embd 128 --heads 4 --eval-every 0 --ckpt-every 0 --quiet)
W512=(--block-size 512 --batch 8)
LM=(--attention landmark --landmark-every 50)

RECIPES=(
  "lm1200_v384|passkey_v384|${LM[*]} ${W512[*]} --steps 1200 --lr 2e-3"
  "std1200_v384|passkey_v384|${W512[*]} --steps 1200 --lr 2e-3"
  "lm1200|passkey|${LM[*]} ${W512[*]} --steps 1200 --lr 2e-3"
  "lm1200_lr4|passkey|${LM[*]} ${W512[*]} --steps 1200 --lr 4e-3"
  "lm1200_f6|passkey_f6|${LM[*]} ${W512[*]} --steps 1200 --lr 2e-3"
  "lm1200_t256|passkey|${LM[*]} --block-size 256 --batch 16 --steps 1200 --lr 2e-3"
  "std1200|passkey|${W512[*]} --steps 1200 --lr 2e-3"
)

make_data() {  # directory name
  local d="data/$1"
  [ -s "$d/tokens/train.tokens" ] && return
  local fillers=12
  [[ "$1" =~ _f([0-9]+)$ ]] && fillers="${BASH_REMATCH[1]}"
  "$LANDMARK" passkey-data --out "$d" --docs 50000 --max-fillers "$fillers" --filler-only 0.05
  local vocab=512
  [[ "$1" =~ _v([0-9]+)$ ]] && vocab="${BASH_REMATCH[1]}"
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
  "$LANDMARK" train --data "data/$data/tokens" --out "$dir" "${BASE[@]}" $flags > "$dir/train.log" 2>&1
  echo "train_seconds $((SECONDS - start))" >> "$dir/train.log"
  ckpt="$dir/checkpoint.safetensors"
  # The passkey command needs a landmark model beside a baseline; any with the same tokenizer.
  LMREF=$(ls runs/demo_recipes/lm*/checkpoint.safetensors 2> /dev/null | while read -r c; do
    d2=$(dirname "$c"); grep -q "data/$data/tokens" "$d2/cmdline" 2> /dev/null && echo "$c"; done | head -1)
  if grep -q -- "--attention landmark" <<< "$flags"; then
    "$LANDMARK" passkey --checkpoint "$ckpt" --lengths 512,2048,8192 --trials 10 --chunk 200 --k 4 > "$dir/passkey.txt" 2> /dev/null
  else
    "$LANDMARK" passkey --checkpoint "$LMREF" --baseline "$ckpt" --lengths 512 --trials 20 --chunk 200 --k 4 \
      > "$dir/passkey.txt" 2> /dev/null
  fi
  touch "$dir/DONE"
  tail -4 "$dir/passkey.txt"
done
