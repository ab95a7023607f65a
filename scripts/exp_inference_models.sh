#!/usr/bin/env bash
# exp_inference_models.sh: the two models behind the measured tables of docs/infer.md (stingy
# placement before/after, the context-miss token at cached inference, retrieval recall). Both have
# the demo's size (3 layers, d 128, 4 heads, window 512, a landmark every 50) and train on the
# demo's pass-key data (scripts/demo.sh makes the same data/passkey):
#   runs/infer_models/landmark   landmark attention, 3000 steps
#   runs/infer_models/cmt        the same with a context-miss token (--cmt, P_CMT 0.5)
# Each run checkpoints every 250 steps; run the script again and an interrupted run resumes where
# it stopped (a finished one is skipped: its DONE file). No time limit: a table is only made from
# finished runs. Usage: bash scripts/exp_inference_models.sh [path/to/landmark binary]
# (e.g. nohup bash scripts/exp_inference_models.sh > runs/infer_models.log 2>&1 &)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
LANDMARK="${1:-build/apps/landmark}"
[ -x "$LANDMARK" ] || { echo "exp: $LANDMARK is missing; run 'make' first" >&2; exit 1; }
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
OUT=runs/infer_models
mkdir -p "$OUT"
MODEL=(--layers 3 --embd 128 --heads 4 --block-size 512 --batch 8 --lr 2e-3 --attention landmark --landmark-every 50)

if [ ! -s data/passkey/tokens/train.tokens ]; then
  echo "=== pass-key documents + BPE tokenizer (as scripts/demo.sh) ==="
  "$LANDMARK" passkey-data --out data/passkey --docs 50000 --max-fillers 12 --filler-only 0.05
  "$LANDMARK" prepare --train data/passkey/train.txt --val data/passkey/val.txt --out data/passkey/tokens \
    --tokenizer bpe --vocab 512
fi

train() {  # name, extra flags...
  local name="$1"; shift
  local dir="$OUT/$name"
  if [ -f "$dir/DONE" ]; then echo "=== $name: finished earlier ==="; return; fi
  local resume=()
  [ -f "$dir/checkpoint.safetensors" ] && resume=(--resume "$dir/checkpoint.safetensors")
  echo "=== $name: 3000 steps ${resume[*]:+(resuming)} ==="
  "$LANDMARK" train --data data/passkey/tokens --out "$dir" "${MODEL[@]}" "$@" --steps 3000 \
    --eval-every 500 --ckpt-every 250 "${resume[@]}"
  touch "$dir/DONE"
}
train landmark
train cmt --cmt --cmt-prob 0.5
echo "=== done: $OUT/landmark, $OUT/cmt ==="
