#!/usr/bin/env bash
# exp_inference_models.sh: the models behind the measured tables of docs/infer.md. All have the
# demo's size and settings (3 layers, d 128, 4 heads, window 512, a landmark every 50, 3000
# steps, seed 1337) and train on pass-key documents:
#   runs/infer_models/landmark        on data/passkey_0to12, the demo's data until 2026-11-26
#                                     (0..12 fillers per document; the demo now pretrains on short
#                                     documents instead, docs/demo.md), whose documents say "Find
#                                     it and memorize it."
#   runs/infer_models/landmark_them   on data/passkey_them: the same documents with the paper's
#                                     "Find it and memorize them." (train/passkey.h says why the
#                                     training text keeps the other wording)
#   runs/infer_models/cmt_them        as landmark_them, with a context-miss token (--cmt, P_CMT 0.5)
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

if [ ! -s data/passkey_0to12/tokens/train.tokens ]; then
  echo "=== pass-key documents + BPE tokenizer (as scripts/demo.sh made them until 2026-11-26) ==="
  "$LANDMARK" passkey-data --out data/passkey_0to12 --docs 50000 --max-fillers 12 --filler-only 0.05
  "$LANDMARK" prepare --train data/passkey_0to12/train.txt --val data/passkey_0to12/val.txt --out data/passkey_0to12/tokens \
    --tokenizer bpe --vocab 512
fi
if [ ! -s data/passkey_them/tokens/train.tokens ]; then
  echo "=== the same documents with the paper's task wording, and their BPE tokenizer ==="
  mkdir -p data/passkey_them
  for f in train val; do
    sed 's/Find it and memorize it\./Find it and memorize them./' "data/passkey_0to12/$f.txt" > "data/passkey_them/$f.txt"
  done
  "$LANDMARK" prepare --train data/passkey_them/train.txt --val data/passkey_them/val.txt \
    --out data/passkey_them/tokens --tokenizer bpe --vocab 512
fi

train() {  # name, data directory, extra flags...
  local name="$1" data="$2"; shift 2
  local dir="$OUT/$name"
  if [ -f "$dir/DONE" ]; then echo "=== $name: finished earlier ==="; return; fi
  local resume=()
  [ -f "$dir/checkpoint.safetensors" ] && resume=(--resume "$dir/checkpoint.safetensors")
  echo "=== $name: 3000 steps ${resume[*]:+(resuming)} ==="
  "$LANDMARK" train --data "$data" --out "$dir" "${MODEL[@]}" "$@" --steps 3000 \
    --eval-every 500 --ckpt-every 250 "${resume[@]}"
  touch "$dir/DONE"
}
train landmark data/passkey_0to12/tokens
train landmark_them data/passkey_them/tokens
train cmt_them data/passkey_them/tokens --cmt --cmt-prob 0.5
echo "=== done: $OUT/landmark, $OUT/landmark_them, $OUT/cmt_them ==="
