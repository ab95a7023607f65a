#!/usr/bin/env bash
# demo_finetune.sh: `make demo-finetune`, the paper's Section 4.2 at our scale. The paper takes a
# pretrained standard model, fine-tunes it briefly with landmark tokens at a short window, and
# then finds a pass key far beyond that window. Here the pretrained model is the demo's standard
# model (trained by `make demo`, which must have run first: pretraining on 128-token windows, then
# 512-token windows with standard attention; it knows the task inside its window):
#   1. fine-tune it with landmarks (`train --init-from`) for 5, 10 and 20% of the tokens it was
#      trained on (its two stages together), each a run with its own schedule, on the demo's long
#      documents with the demo's 512-token settings
#   2. pass-key retrieval at the demo's lengths (512 to 32k) for each fine-tune, with the demo's
#      prompts (same seed, trials and lengths)
#   3. one table, runs/demo/finetune.tsv: one row per length; columns: the base model in its own
#      window (0% fine-tuning), the three fine-tunes, and the demo's landmark model (the shared
#      pretraining continued with landmarks for as many steps as the base's second stage; the last
#      two taken from runs/demo/passkey.tsv), with runs/demo/finetune.png, and a closing line that
#      says whether the 20% fine-tune reaches 90% at every length
#   4. a summary: the machine, the time, the steps each fine-tune made, whether the run is
#      trustworthy (every fine-tune made all its steps; the time limit is a generous cap, not a
#      budget) and the verdict
# With two or more threads the fine-tunes run in two lanes side by side (scripts/demo.sh says why).
# Environment: FINETUNE_PCTS (default "5 10 20", ascending: the last is the one the verdict is
# about), FINETUNE_MINUTES (the cap per fine-tune, 10), DEMO_PARALLEL (auto, 1 or 0).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source scripts/demo_model.sh  # LANDMARK, MODEL, LONG, LM_FLAGS, DATA, EVAL_FLAGS, OUT: shared with demo.sh
PCTS="${FINETUNE_PCTS:-5 10 20}"
MINUTES="${FINETUNE_MINUTES:-10}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
BASE="$OUT/standard/checkpoint.safetensors"
[ -x "$LANDMARK" ] || { echo "demo-finetune: $LANDMARK is missing; run 'make' first" >&2; exit 1; }
demo_threads  # THREADS, PARALLEL, HALF (demo_model.sh)
for f in "$BASE" "$OUT/passkey.tsv" "$OUT/passkey.txt" "$OUT/pretrain.log" "$OUT/standard.log" "$DATA/long/tokens/train.tokens"; do
  [ -s "$f" ] || { echo "demo-finetune: $f is missing: run 'make demo' first (it trains the model fine-tuned here)" >&2; exit 1; }
done
T0=$SECONDS
stamp() { local s=$((SECONDS - $1)); printf '%d:%02d' $((s / 60)) $((s % 60)); }

# The demo's evaluation, repeated exactly: its lengths (from its table) and trials (from its header).
lengths=$(awk -F'\t' 'NR > 1 { printf "%s%s", sep, $1; sep = "," }' "$OUT/passkey.tsv")
trials=$(sed -n 's/^pass-key retrieval: \([0-9]*\) trials.*/\1/p' "$OUT/passkey.txt" | head -1)
# The tokens the base model was trained on: its pretraining and its 512-token stage, each
# "steps x batch x window" as the training logs state them ("... N tokens per step ...").
tokens_of() {  # a training log: steps done times tokens per step
  local steps per
  steps=$(sed -n 's/^stopped: [a-z -]* at step \([0-9]*\).*/\1/p' "$1" | tail -1)
  per=$(sed -n 's/.* \([0-9]*\) tokens per step.*/\1/p' "$1" | head -1)
  [ -n "$steps" ] && [ -n "$per" ] && echo $((steps * per))
}
pre_tokens=$(tokens_of "$OUT/pretrain.log") base_tokens=$(tokens_of "$OUT/standard.log")
[ -n "$lengths" ] && [ -n "$trials" ] && [ -n "$pre_tokens" ] && [ -n "$base_tokens" ] || {
  echo "demo-finetune: cannot read the demo's lengths, trials or the base model's training tokens" >&2; exit 1; }
trained=$((pre_tokens + base_tokens))
step_tokens=$(sed -n 's/.* \([0-9]*\) tokens per step.*/\1/p' "$OUT/standard.log" | head -1)
echo "=== base: $BASE, trained on $trained tokens ($pre_tokens pretraining + $base_tokens at 512); pass-key at $lengths, $trials prompts per length ==="

# One fine-tune: train, then the pass-key test (the landmark model alone: --checkpoint).
finetune() {  # PCT THREADS
  local pct=$1 threads=$2 steps dir
  steps=$(( trained * pct / 100 / step_tokens ))
  [ "$steps" -ge 2 ] || steps=2
  dir="$OUT/finetune_$pct"
  echo "=== fine-tune ${pct}%: $steps landmark steps of $step_tokens tokens from the standard model (cap $MINUTES min) ==="
  OMP_NUM_THREADS=$threads "$LANDMARK" train --data "$DATA/long/tokens" --out "$dir" --init-from "$BASE" \
    "${LM_FLAGS[@]}" "${MODEL[@]}" "${LONG[@]}" --steps "$steps" --time-limit "$MINUTES" --eval-every 0 --ckpt-every 0 \
    --log-every 10 | tee "$dir.log"
  OMP_NUM_THREADS=$threads "$LANDMARK" passkey --checkpoint "$dir/checkpoint.safetensors" --lengths "$lengths" \
    --trials "$trials" "${EVAL_FLAGS[@]}" --tsv "$dir/passkey.tsv" | tee "$dir/passkey.txt"
}
read -r -a pcts <<< "$PCTS"
[ "${#pcts[@]}" -ge 1 ] || { echo "demo-finetune: FINETUNE_PCTS is empty" >&2; exit 1; }
for pct in "${pcts[@]}"; do
  case "$pct" in '' | *[!0-9]* | 0) echo "demo-finetune: FINETUNE_PCTS holds '$pct', not a positive whole percentage" >&2; exit 1 ;; esac
done
if [ "$PARALLEL" = 1 ] && [ "${#pcts[@]}" -ge 2 ]; then
  # Two lanes side by side, each on half the threads: the largest fine-tune alone in one, the
  # others in turn in the other (5% + 10% take about as long as 20%, evaluations included).
  last_pct="${pcts[${#pcts[@]}-1]}"
  echo "=== fine-tunes side by side on $HALF thread(s) each: ${last_pct}% in one lane, ${pcts[*]:0:${#pcts[@]}-1}% in the other ==="
  set +e
  (set -o pipefail; finetune "$last_pct" "$HALF" 2>&1 | sed -u "s/^/[${last_pct}%] /") &
  big_pid=$!
  (set -o pipefail; for pct in "${pcts[@]:0:${#pcts[@]}-1}"; do finetune "$pct" "$HALF" || exit 1; done 2>&1 |
     sed -u 's/^/[lane 2] /') &
  small_pid=$!
  wait $big_pid; big_rc=$?
  wait $small_pid; small_rc=$?
  set -e
  [ $big_rc = 0 ] && [ $small_rc = 0 ] || { echo "demo-finetune: a fine-tune failed (exits $big_rc, $small_rc); see $OUT/finetune_*.log" >&2; exit 1; }
else
  for pct in "${pcts[@]}"; do finetune "$pct" "$THREADS"; done
fi
cols=("${pcts[@]}")

# One table: length, base (the demo's baseline column), each fine-tune, the demo's landmark model.
{
  printf 'length\tbase (standard, window)'
  for pct in "${cols[@]}"; do printf '\tfine-tuned %s%%' "$pct"; done
  printf '\tlandmark (demo)\n'
  awk -F'\t' 'NR > 1 { print $1 "\t" $3 }' "$OUT/passkey.tsv" > "$OUT/.ft_base"
  awk -F'\t' 'NR > 1 { print $2 }' "$OUT/passkey.tsv" > "$OUT/.ft_demo"
  files=("$OUT/.ft_base")
  for pct in "${cols[@]}"; do
    awk -F'\t' 'NR > 1 { print $2 }' "$OUT/finetune_$pct/passkey.tsv" > "$OUT/.ft_$pct"
    files+=("$OUT/.ft_$pct")
  done
  paste "${files[@]}" "$OUT/.ft_demo"
} > "$OUT/finetune.tsv.tmp"
mv "$OUT/finetune.tsv.tmp" "$OUT/finetune.tsv"
rm -f "$OUT"/.ft_*
"$LANDMARK" plot-table "$OUT/finetune.tsv" --out "$OUT/finetune.png" --log-x --y-range 0,100 \
  --title "pass key: a standard model fine-tuned with landmarks" --x-label "prompt length (tokens)" \
  --y-label "accuracy (%)"
echo "=== $OUT/finetune.tsv ==="
column -t -s $'\t' "$OUT/finetune.tsv" 2>/dev/null || cat "$OUT/finetune.tsv"
last="${cols[${#cols[@]}-1]}"
verdict=$(awk -F'\t' -v pct="$last" 'NR > 1 { if ($2 + 0 < 90) low = low " " $1 " (" $2 "%)" }
  END { if (low == "") printf "the %s%% fine-tune found the key in at least 90%% of prompts at every length", pct
        else printf "the %s%% fine-tune stayed below 90%% at:%s", pct, low }' "$OUT/finetune_$last/passkey.tsv")
cut="" steps_line=""
for pct in "${cols[@]}"; do
  stop=$(sed -n 's/^stopped: \([a-z -]*\) at step \([0-9]*\).*/\2 steps (\1)/p' "$OUT/finetune_$pct.log" | tail -1)
  steps_line+="${pct}%: ${stop:-unknown}; "
  grep -q '^stopped: time limit' "$OUT/finetune_$pct.log" && cut+=" ${pct}%"
done
if [ -z "$cut" ]; then
  trust="yes: every fine-tune made all its steps"
else
  trust="NO: the time cap ended the fine-tune(s)$cut before their steps, so they are less trained than the recipe defines. This machine was slower than the cap allows: rerun with FINETUNE_MINUTES=$(times3 "$MINUTES") make demo-finetune"
fi
mode="one after another on $THREADS thread(s)"
[ "$PARALLEL" = 1 ] && [ "${#cols[@]}" -ge 2 ] && mode="two lanes side by side, $HALF thread(s) each"
{
  echo "=== summary ==="
  echo "machine: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), $(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) core(s); $mode (OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset})"
  echo "time: $(stamp $T0) in all"
  echo "fine-tunes: ${steps_line%; }"
  echo "trustworthy: $trust"
  echo "verdict: $verdict"
} | tee "$OUT/finetune_summary.txt"
