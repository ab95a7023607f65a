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

echo "=== 1/2 corpus and tokens (scripts/get-tokens.sh: Austen + KJV from Debian packages, a BPE of 4096 tokens) ==="
LANDMARK="$LANDMARK" bash scripts/get-tokens.sh data/tokens

echo "=== 2/2 training the tiny GPT (${STEPS} steps, at most ${MINUTES} minutes) ==="
"$LANDMARK" train --preset tiny --data data/tokens --out runs/demo_corpus --steps "$STEPS" --lr 2e-3 \
  --eval-every 50 --eval-batches 8 --ckpt-every 100 --time-limit "$MINUTES"
echo "demo done: loss curve in runs/demo_corpus/loss.png, metrics in runs/demo_corpus/metrics.jsonl"
