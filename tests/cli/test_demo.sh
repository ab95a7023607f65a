#!/usr/bin/env bash
# test_demo.sh: scripts/demo.sh (make demo) and scripts/demo_finetune.sh (make demo-finetune) end
# to end with the demo's model but a few steps and small data, to check the plumbing, not the
# learning:
#   - side by side (DEMO_PARALLEL=1: the two continuations at once, the longest prompts read by a
#     second process) the table holds every length once, in order, and passkey.txt names the
#     final TSV;
#   - one after another on two threads (DEMO_PARALLEL=0) gives the same models, bit for bit, and
#     the same table: steps, not threads or lanes, decide what is learned;
#   - a time cap that ends a stage makes the summary say the run is not trustworthy and how to
#     rerun it; a full run says it is;
#   - demo-finetune runs its two lanes and writes one table with a column per fine-tune;
#   - a bad DEMO_PARALLEL or OMP_NUM_THREADS is refused with a message.
# Usage: test_demo.sh path/to/landmark
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # LANDMARK, WORK, fail, expect, exits_with
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export LANDMARK DEMO_DATA="$WORK/data" DEMO_PRETRAIN_STEPS=12 DEMO_STEPS=3 DEMO_TRIALS=1 DEMO_LENGTHS=300,600,1200
# Small data in the demo's layout (short/ and long/ token directories), so the demo skips step 1.
for kind in short long; do
  "$LANDMARK" passkey-data --out "$WORK/data/$kind" --docs 200 --max-fillers 4 --seed 3 > /dev/null
  "$LANDMARK" prepare --train "$WORK/data/$kind/train.txt" --val "$WORK/data/$kind/val.txt" --out "$WORK/data/$kind/tokens" \
    --tokenizer bytes > /dev/null
done

run_demo() {  # output directory, then environment assignments
  local out=$1
  shift
  env DEMO_OUT="$out" "$@" bash "$ROOT/scripts/demo.sh" > "$out.log" 2>&1 || { cat "$out.log" >&2; fail "demo.sh failed ($*)"; }
}
mkdir -p "$WORK/runs"
run_demo "$WORK/runs/side" DEMO_PARALLEL=1
expect "$WORK/runs/side.log" "the two continuations side by side"
expect "$WORK/runs/side/summary.txt" "trustworthy: yes"
[ "$(cut -f1 "$WORK/runs/side/passkey.tsv" | tr '\n' ' ')" = "length 300 600 1200 " ] ||
  { cat "$WORK/runs/side/passkey.tsv" >&2; fail "the merged TSV does not hold each length once, in order"; }
[ "$(grep -cE '^ *(300|600|1200) +[0-9.]+%' "$WORK/runs/side/passkey.txt")" -eq 3 ] ||
  { cat "$WORK/runs/side/passkey.txt" >&2; fail "passkey.txt does not hold the three rows"; }
expect "$WORK/runs/side/passkey.txt" "wrote $WORK/runs/side/passkey.tsv"
[ ! -e "$WORK/runs/side/.passkey_long.tsv" ] || fail "the second process's files were left behind"

run_demo "$WORK/runs/seq" DEMO_PARALLEL=0 OMP_NUM_THREADS=2
expect "$WORK/runs/seq/summary.txt" "one after another on 2 thread(s)"
weights() {  # a checkpoint's tensor bytes: what follows its 8-byte header length and JSON header (whose
  # metadata names the parent's path, which differs between the two runs)
  local n
  n=$(od -An -t u8 -N 8 "$1" | tr -d ' ')
  tail -c +$((9 + n)) "$1"
}
for model in pretrain landmark standard; do
  cmp -s <(weights "$WORK/runs/side/$model/checkpoint.safetensors") <(weights "$WORK/runs/seq/$model/checkpoint.safetensors") ||
    fail "the $model model differs between side by side (1 thread each) and one after another (2 threads)"
done
cmp -s "$WORK/runs/side/passkey.tsv" "$WORK/runs/seq/passkey.tsv" || fail "the two runs' tables differ"

# A cap far below what the steps need: the summary must say so, and how to rerun.
DEMO_STEPS=400 run_demo "$WORK/runs/cut" DEMO_PARALLEL=1 DEMO_MINUTES=0.05
expect "$WORK/runs/cut/summary.txt" "trustworthy: NO: the time cap ended landmark standard before its steps"
expect "$WORK/runs/cut/summary.txt" "DEMO_MINUTES="

DEMO_OUT="$WORK/runs/side" FINETUNE_PCTS="1 2" DEMO_PARALLEL=1 bash "$ROOT/scripts/demo_finetune.sh" > "$WORK/ft.log" 2>&1 ||
  { cat "$WORK/ft.log" >&2; fail "demo_finetune.sh failed"; }
expect "$WORK/ft.log" "two lanes side by side"
expect "$WORK/runs/side/finetune_summary.txt" "trustworthy: yes: every fine-tune made all its steps"
[ "$(head -n 1 "$WORK/runs/side/finetune.tsv")" = "$(printf 'length\tbase (standard, window)\tfine-tuned 1%%\tfine-tuned 2%%\tlandmark (demo)')" ] ||
  { cat "$WORK/runs/side/finetune.tsv" >&2; fail "finetune.tsv's header is not one column per fine-tune"; }
[ "$(wc -l < "$WORK/runs/side/finetune.tsv")" -eq 4 ] || fail "finetune.tsv does not hold a row per length"

exits_with 1 "$WORK/bad.log" env DEMO_OUT="$WORK/runs/bad" DEMO_PARALLEL=yes bash "$ROOT/scripts/demo.sh"
expect "$WORK/bad.log" "DEMO_PARALLEL must be auto, 1 or 0, got 'yes'"
exits_with 1 "$WORK/bad.log" env DEMO_OUT="$WORK/runs/bad" OMP_NUM_THREADS=two bash "$ROOT/scripts/demo.sh"
expect "$WORK/bad.log" "OMP_NUM_THREADS must be a positive number, got 'two'"
echo "demo: side by side and one after another agree, caps reported, fine-tune lanes, refusals as expected"
