#!/usr/bin/env bash
# demo_corpus.sh: `make demo-corpus`, the language-modelling demo. On a fresh machine it builds the real
# corpus from Debian packages (five Austen novels + the King James Bible; Persuasion held out),
# trains a BPE tokenizer, trains the `tiny` GPT for about 10 minutes on the CPU and writes the
# loss curve. Everything lands in data/ and runs/demo_corpus/. Re-running skips finished steps.
#   DEMO_STEPS (default 500) and DEMO_MINUTES (default 10, a hard stop) tune the run.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
LANDMARK=build/apps/landmark
STEPS="${DEMO_STEPS:-500}"
MINUTES="${DEMO_MINUTES:-10}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"

[ -x "$LANDMARK" ] || { echo "demo: $LANDMARK is missing; run 'make' first" >&2; exit 1; }

if [ ! -s data/corpus/train.txt ] || [ ! -s data/corpus/val.txt ]; then
  echo "=== 1/3 corpus: Austen + KJV from Debian packages ==="
  LANDMARK="$LANDMARK" bash scripts/get-corpus.sh
else
  echo "=== 1/3 corpus: data/corpus already there ==="
fi

if [ ! -s data/tokens/train.tokens ]; then
  echo "=== 2/3 tokenizer + token files (BPE, 4096 tokens) ==="
  "$LANDMARK" prepare --train data/corpus/train.txt --val data/corpus/val.txt --out data/tokens --tokenizer bpe --vocab 4096
else
  echo "=== 2/3 tokens: data/tokens already there ==="
fi

echo "=== 3/3 training the tiny GPT (${STEPS} steps, at most ${MINUTES} minutes) ==="
"$LANDMARK" train --preset tiny --data data/tokens --out runs/demo_corpus --steps "$STEPS" --lr 2e-3 \
  --eval-every 50 --eval-batches 8 --ckpt-every 100 --time-limit "$MINUTES"
echo "demo done: loss curve in runs/demo_corpus/loss.png, metrics in runs/demo_corpus/metrics.jsonl"
