#!/usr/bin/env bash
# demo.sh: the project's main job, run by `make demo`: landmark attention reading far beyond its
# training window. On the 2 CPU cores, in about 15 minutes of training in total:
#   1. generate pass-key documents (the paper's prompt) mixed with filler text, and a BPE tokenizer
#   2. train a small landmark model (3 layers, d 128, window 512, a landmark every 50) (<= 11 min)
#   3. train a standard model of the same size on the same data                        (<= 4 min)
#   4. ask both for the pass key at prompt lengths from 512 to 32k tokens: the landmark model
#      reads the whole prompt with cached chunks and top-k block retrieval; the standard model
#      sees its own 512-token window
# Results: runs/demo/passkey.txt (table), runs/demo/passkey.png, runs/demo/loss.png.
# Environment: DEMO_STEPS / DEMO_MINUTES (landmark run), DEMO_BASELINE_STEPS / _MINUTES,
# DEMO_TRIALS (prompts per length), DEMO_LENGTHS (comma-separated).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
LANDMARK=build/apps/landmark
STEPS="${DEMO_STEPS:-3000}"
MINUTES="${DEMO_MINUTES:-11}"
BASE_STEPS="${DEMO_BASELINE_STEPS:-1200}"
BASE_MINUTES="${DEMO_BASELINE_MINUTES:-4}"
TRIALS="${DEMO_TRIALS:-20}"
LENGTHS="${DEMO_LENGTHS:-512,1024,2048,4096,8192,16384,32768}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
[ -x "$LANDMARK" ] || { echo "demo: $LANDMARK is missing; run 'make' first" >&2; exit 1; }
MODEL=(--layers 3 --embd 128 --heads 4 --block-size 512 --batch 8 --lr 2e-3)
mkdir -p runs/demo

if [ ! -s data/passkey/tokens/train.tokens ]; then
  echo "=== 1/4 pass-key documents + BPE tokenizer ==="
  "$LANDMARK" passkey-data --out data/passkey --docs 50000 --max-fillers 12 --filler-only 0.05
  "$LANDMARK" prepare --train data/passkey/train.txt --val data/passkey/val.txt --out data/passkey/tokens \
    --tokenizer bpe --vocab 512
else
  echo "=== 1/4 data: data/passkey already there ==="
fi

echo "=== 2/4 landmark model: ${STEPS} steps, at most ${MINUTES} minutes ==="
"$LANDMARK" train --data data/passkey/tokens --out runs/demo/landmark --attention landmark --landmark-every 50 \
  "${MODEL[@]}" --steps "$STEPS" --time-limit "$MINUTES" --eval-every 500 --ckpt-every 500 --quiet
echo "=== 3/4 standard model (the baseline): ${BASE_STEPS} steps, at most ${BASE_MINUTES} minutes ==="
"$LANDMARK" train --data data/passkey/tokens --out runs/demo/standard "${MODEL[@]}" --steps "$BASE_STEPS" \
  --time-limit "$BASE_MINUTES" --eval-every 500 --ckpt-every 500 --quiet
"$LANDMARK" plot runs/demo/landmark/metrics.jsonl runs/demo/standard/metrics.jsonl --labels landmark standard \
  --out runs/demo/loss.png --title "pass-key data: training loss"

echo "=== 4/4 pass-key retrieval from 512 to 32k tokens (${TRIALS} prompts per length) ==="
"$LANDMARK" passkey --checkpoint runs/demo/landmark/checkpoint.safetensors \
  --baseline runs/demo/standard/checkpoint.safetensors --lengths "$LENGTHS" --trials "$TRIALS" \
  --chunk 200 --k 4 --plot runs/demo/passkey.png | tee runs/demo/passkey.txt
echo "demo done: runs/demo/passkey.txt, runs/demo/passkey.png, runs/demo/loss.png (walkthrough: docs/demo.md)"
