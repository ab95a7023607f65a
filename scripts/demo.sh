#!/usr/bin/env bash
# demo.sh: the project's main job, run by `make demo`: landmark attention reading far beyond its
# training window, against a standard model that knows the task inside its own window. On 2 CPU
# cores, about 10 minutes in all:
#   1. pass-key documents (the paper's task), short and long, and one BPE tokenizer
#   2. pretraining, shared by both models: a standard model (3 layers, d 128) on 128-token windows
#      of short documents learns to copy the key
#   3. the landmark model: the pretrained model continues on 512-token windows with landmark
#      attention (a landmark every 50 tokens), as the paper fine-tunes a pretrained model
#   4. the standard model (the baseline): the pretrained model continues on the same windows, the
#      same steps, with standard attention
#   5. both are asked for the pass key in prompts from 512 to 32k tokens: the landmark model reads
#      the whole prompt with cached chunks and top-k block retrieval; the standard model its window
#   6. a summary: the machine, the time taken, the steps of each stage, and a verdict that says
#      plainly when the comparison is void (a baseline that did not learn the task in its own
#      window shows nothing about retrieval)
# Each training has a time budget that drives its learning-rate schedule (`train --time-limit`):
# a slower machine (or OMP_NUM_THREADS=1) makes fewer steps but still ends annealed.
# Results: runs/demo/passkey.txt (table), runs/demo/passkey.tsv (the same for other tools),
# runs/demo/passkey.png, runs/demo/loss.png, runs/demo/summary.txt.
# Environment: DEMO_PRETRAIN_STEPS / DEMO_PRETRAIN_MINUTES (stage 2), DEMO_STEPS / DEMO_MINUTES
# (stages 3 and 4, each), DEMO_TRIALS (prompts per length), DEMO_LENGTHS (comma-separated),
# DEMO_DATA, DEMO_OUT (directories).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source scripts/demo_model.sh  # LANDMARK, MODEL, PRETRAIN, LONG, LM_FLAGS, DATA, *_FLAGS, EVAL_FLAGS, OUT
PRE_STEPS="${DEMO_PRETRAIN_STEPS:-2000}"
PRE_MINUTES="${DEMO_PRETRAIN_MINUTES:-4}"
STEPS="${DEMO_STEPS:-400}"
MINUTES="${DEMO_MINUTES:-3.25}"
TRIALS="${DEMO_TRIALS:-20}"
LENGTHS="${DEMO_LENGTHS:-512,1024,2048,4096,8192,16384,32768}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
[ -x "$LANDMARK" ] || { echo "demo: $LANDMARK is missing; run 'make' first" >&2; exit 1; }
mkdir -p "$OUT"
T0=$SECONDS
stamp() { local s=$((SECONDS - $1)); printf '%d:%02d' $((s / 60)) $((s % 60)); }

t=$SECONDS
if [ ! -s "$DATA/short/tokens/train.tokens" ] || [ ! -s "$DATA/long/tokens/train.tokens" ]; then
  echo "=== 1/5 pass-key documents (short and long) + BPE tokenizer ==="
  "$LANDMARK" passkey-data --out "$DATA/short" "${SHORT_FLAGS[@]}"
  "$LANDMARK" passkey-data --out "$DATA/long" "${LONG_FLAGS[@]}"
  "$LANDMARK" prepare --train "$DATA/short/train.txt" --val "$DATA/short/val.txt" --out "$DATA/short/tokens" \
    "${TOKENIZER_FLAGS[@]}"
  "$LANDMARK" prepare --train "$DATA/long/train.txt" --val "$DATA/long/val.txt" --out "$DATA/long/tokens" \
    --tokenizer-from "$DATA/short/tokens/tokenizer.json"
else
  echo "=== 1/5 data: $DATA/short and $DATA/long already there ==="
fi
T_DATA=$(stamp $t)

echo "=== 2/5 pretraining (shared): a standard model on 128-token windows, a ${PRE_STEPS}-step schedule in at most ${PRE_MINUTES} minutes ==="
t=$SECONDS
"$LANDMARK" train --data "$DATA/short/tokens" --out "$OUT/pretrain" "${MODEL[@]}" "${PRETRAIN[@]}" \
  --steps "$PRE_STEPS" --time-limit "$PRE_MINUTES" --eval-every 250 --ckpt-every 500 --log-every 10 \
  | tee "$OUT/pretrain.log"
T_PRE=$(stamp $t)
PRE="$OUT/pretrain/checkpoint.safetensors"

echo "=== 3/5 landmark model: the pretrained model on 512-token windows with landmark attention, ${STEPS} steps in at most ${MINUTES} minutes ==="
t=$SECONDS
"$LANDMARK" train --data "$DATA/long/tokens" --out "$OUT/landmark" --init-from "$PRE" "${MODEL[@]}" "${LONG[@]}" \
  "${LM_FLAGS[@]}" --steps "$STEPS" --time-limit "$MINUTES" --eval-every 100 --ckpt-every 200 --log-every 10 \
  | tee "$OUT/landmark.log"
T_LM=$(stamp $t)
echo "=== 4/5 standard model (the baseline): the pretrained model on the same windows with standard attention, ${STEPS} steps in at most ${MINUTES} minutes ==="
t=$SECONDS
"$LANDMARK" train --data "$DATA/long/tokens" --out "$OUT/standard" --init-from "$PRE" "${MODEL[@]}" "${LONG[@]}" \
  --steps "$STEPS" --time-limit "$MINUTES" --eval-every 100 --ckpt-every 200 --log-every 10 | tee "$OUT/standard.log"
T_STD=$(stamp $t)
steps_done() { sed -n 's/^stopped: [a-z -]* at step \([0-9]*\).*/\1/p' "$1" | tail -1; }
pre_done=$(steps_done "$OUT/pretrain.log")
"$LANDMARK" plot "$OUT/pretrain/metrics.jsonl" "$OUT/landmark/metrics.jsonl" "$OUT/standard/metrics.jsonl" \
  --labels "pretrain (T 128)" "landmark (T 512)" "standard (T 512)" --offsets 0 "${pre_done:-0}" "${pre_done:-0}" \
  --out "$OUT/loss.png" --title "training loss: shared pretraining, then two models" --log-y

echo "=== 5/5 pass-key retrieval from 512 to 32k tokens (${TRIALS} prompts per length) ==="
t=$SECONDS
"$LANDMARK" passkey --checkpoint "$OUT/landmark/checkpoint.safetensors" \
  --baseline "$OUT/standard/checkpoint.safetensors" --lengths "$LENGTHS" --trials "$TRIALS" \
  "${EVAL_FLAGS[@]}" --plot "$OUT/passkey.png" --tsv "$OUT/passkey.tsv" | tee "$OUT/passkey.txt"
T_EVAL=$(stamp $t)

# --- the summary and the verdict, from the logs and the TSV ---
steps_of() { sed -n 's/^stopped: \([a-z -]*\) at step \([0-9]*\).*/\2 steps (\1)/p' "$1" | tail -1; }
cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
threads=$(sed -n 's/.* \([0-9]*\) CPU thread(s).*/\1/p' "$OUT/landmark.log" | head -1)
verdict=$(awk -F'\t' 'NR > 1 {
    n++; if ($1 == 512) base512 = $3
    if ($2 < 95) lm_short = lm_short " " $1 " (" $2 "%)"
    if (n == 1 || $2 < lm_min) lm_min = $2
    last = $1; base_last = $3 }
  END {
    if (base512 == "") { print "void: no 512-token row, so the baseline was not checked inside its own window"; exit }
    if (base512 < 90) {
      printf "void: the standard model found the key in only %s%% of 512-token prompts, inside its own window: it did not learn the task, so the table shows nothing about retrieval\n", base512; exit }
    if (lm_short != "") {
      printf "partial: the baseline learned the task in its window (%s%% at 512) but the landmark model fell below 95%% at:%s\n", base512, lm_short; exit }
    printf "landmark attention wins: the landmark model found the key in at least %s%% of prompts at every length up to %s tokens; the standard model, %s%% inside its window at 512, found %s%% at %s\n", lm_min, last, base512, base_last, last }' "$OUT/passkey.tsv")
cut_note=""
grep -q '^stopped: time limit' "$OUT/pretrain.log" "$OUT/landmark.log" "$OUT/standard.log" &&
  cut_note=" (a time limit ended a stage before its steps: this machine was slower than the budget assumes; the schedule still ended annealed)"
{
  echo "=== summary ==="
  echo "machine: ${cpu:-unknown CPU}, ${threads:-?} OpenMP thread(s) (OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset})"
  echo "time: $(stamp $T0) in all (data $T_DATA, pretraining $T_PRE, landmark $T_LM, standard $T_STD, evaluation $T_EVAL)"
  echo "pretraining (shared, 128-token windows): $(steps_of "$OUT/pretrain.log") of a ${PRE_STEPS}-step schedule, budget ${PRE_MINUTES} min"
  echo "landmark model (512-token windows): $(steps_of "$OUT/landmark.log") of a ${STEPS}-step schedule, budget ${MINUTES} min"
  echo "standard model (512-token windows): $(steps_of "$OUT/standard.log") of a ${STEPS}-step schedule, budget ${MINUTES} min"
  echo "verdict: $verdict$cut_note"
} | tee "$OUT/summary.txt"
echo "demo done: $OUT/passkey.txt, passkey.tsv, passkey.png, loss.png, summary.txt (walkthrough: docs/demo.md)"
