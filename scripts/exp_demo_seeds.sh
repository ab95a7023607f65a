#!/usr/bin/env bash
# exp_demo_seeds.sh: does the demo's recipe hold with other seeds? For each seed, the demo's three
# trainings (scripts/demo_model.sh: the shared pretraining, then the landmark and the standard
# continuation) with `train --seed S` (other initial weights, other batches; the data and the
# evaluation prompts stay the demo's), then the pass key at 512, 2048 and 8192 tokens, 20 prompts
# each. Needs the demo's data (run `make demo` first). Steps, not the clock, end each run, so one
# thread per seed side by side gives the same numbers as a run alone.
# Results: runs/demo_seeds/sS/{pretrain,landmark,standard}/, passkey.txt, DONE (a finished seed is
# skipped; an unfinished one starts again). Usage: bash scripts/exp_demo_seeds.sh SEED...
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source scripts/demo_model.sh
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
[ $# -gt 0 ] || { echo "usage: $0 SEED..." >&2; exit 2; }
for f in "$DATA/short/tokens/train.tokens" "$DATA/long/tokens/train.tokens"; do
  [ -s "$f" ] || { echo "exp_demo_seeds: $f is missing: run 'make demo' first" >&2; exit 1; }
done
RUN=(--eval-every 0 --ckpt-every 0 --quiet)
for seed in "$@"; do
  dir="runs/demo_seeds/s$seed"
  if [ -f "$dir/DONE" ]; then echo "--- seed $seed: done earlier"; cat "$dir/passkey.txt"; continue; fi
  rm -rf "$dir"; mkdir -p "$dir"
  echo "--- seed $seed: pretraining"
  "$LANDMARK" train --data "$DATA/short/tokens" --out "$dir/pretrain" "${MODEL[@]}" "${PRETRAIN[@]}" --steps "$DEMO_PRE_STEPS" \
    --seed "$seed" "${RUN[@]}" > "$dir/pretrain.log"
  echo "--- seed $seed: landmark and standard continuations"
  "$LANDMARK" train --data "$DATA/long/tokens" --out "$dir/landmark" --init-from "$dir/pretrain/checkpoint.safetensors" \
    "${MODEL[@]}" "${LONG[@]}" "${LM_FLAGS[@]}" --steps "$DEMO_CONT_STEPS" --seed "$seed" "${RUN[@]}" > "$dir/landmark.log"
  "$LANDMARK" train --data "$DATA/long/tokens" --out "$dir/standard" --init-from "$dir/pretrain/checkpoint.safetensors" \
    "${MODEL[@]}" "${LONG[@]}" --steps "$DEMO_CONT_STEPS" --seed "$seed" "${RUN[@]}" > "$dir/standard.log"
  "$LANDMARK" passkey --checkpoint "$dir/landmark/checkpoint.safetensors" --baseline "$dir/standard/checkpoint.safetensors" \
    --lengths 512,2048,8192 --trials 20 "${EVAL_FLAGS[@]}" > "$dir/passkey.txt" 2> /dev/null
  touch "$dir/DONE"
  echo "--- seed $seed:"; cat "$dir/passkey.txt"
done
