#!/usr/bin/env bash
# test_paper_side.sh: `SIDE_QUICK=1 bash scripts/paper_side.sh` (issue 11's side experiments) end
# to end on a small byte-level text: the three trainings and ten rows run, the F 25 model is read
# with blocks of 25, summary.md holds every row (each perplexity inside its interval), both paired
# ratios and the target's verdict; a second run redoes nothing; bad settings are refused.
# Usage: test_paper_side.sh path/to/landmark
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
SCRIPT="$ROOT/scripts/paper_side.sh"
small_tokens "$WORK/tok"
export SIDE_QUICK=1 PAPER_DATA="$WORK/tok" SIDE_OUT="$WORK/out" LANDMARK
bash "$SCRIPT" > "$WORK/log1" 2>&1 || { cat "$WORK/log1" >&2; fail "the quick run failed"; }
expect "$WORK/log1" "wrote $WORK/out/summary.md"
S="$WORK/out/summary.md"
expect "$S" "SIDE_QUICK=1"
# Ten rows: the perplexity inside its interval, the model named in the row's name.
[ "$(grep -cE '^\| (standard|landmark|landmark25)_' "$S")" -eq 10 ] || { cat "$S" >&2; fail "summary.md should have 10 rows"; }
awk -F'|' '/^\| (standard|landmark|landmark25)_/ {
  name = $2; model = $3; gsub(/ /, "", name); gsub(/ /, "", model); ppl = $7 + 0; ci = $8; gsub(/[][ ]/, "", ci); split(ci, b, ",")
  if (index(name, model "_") != 1) { print name ": model " model; bad = 1 }
  if (!(b[1] <= ppl && ppl <= b[2]) || ppl <= 1) { print name ": ppl " ppl " outside [" b[1] ", " b[2] "]"; bad = 1 }
} END { exit bad }' "$S" || fail "summary.md rows are malformed"
# The F 25 model retrieves blocks of 25 + 1 positions: attention size 250 + 8 x 26; F 50's k 4: 250 + 4 x 51.
tsv() { awk -F'\t' -v c="$2" 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i == c) k = i } NR == 2 { print $k }' "$WORK/out/eval/$1.tsv"; }
[ "$(tsv landmark25_2048_c250_b80_k8 attention_size)" = 458 ] || fail "landmark25 at k 8: attention size $(tsv landmark25_2048_c250_b80_k8 attention_size), expected 458"
[ "$(tsv landmark_2048_c250_b40_k4 attention_size)" = 454 ] || fail "landmark at k 4: attention size $(tsv landmark_2048_c250_b40_k4 attention_size), expected 454"
grep -qE 'landmark_2048_c250_b40_k4 ratio [0-9.]+ \[[0-9.]+, [0-9.]+\] over 2 spans of 2048 tokens; landmark25_2048_c250_b80_k8 ratio [0-9.]+ \[[0-9.]+, [0-9.]+\] over 2 spans of 2048 tokens\.$' "$S" ||
  { cat "$S" >&2; fail "no paired ratios"; }
grep -qE '^Target: (holds|does not hold) \(' "$S" || fail "no verdict on the target"
grep -qE '^Validation loss at step 24 .*: standard [0-9.]+, landmark [0-9.]+, landmark25 [0-9.]+\.$' "$S" || fail "no validation losses"

# A second run trains and evaluates nothing.
bash "$SCRIPT" > "$WORK/log2" 2>&1 || { cat "$WORK/log2" >&2; fail "the second run failed"; }
[ "$(grep -c 'done earlier' "$WORK/log2")" -eq 3 ] && ! grep -q '^--- eval' "$WORK/log2" ||
  { cat "$WORK/log2" >&2; fail "the second run redid work"; }

# Bad settings: a clear error, non-zero exit.
SIDE_QUICK=2 bash "$SCRIPT" > "$WORK/bad1" 2>&1 && fail "SIDE_QUICK=2 accepted"
expect "$WORK/bad1" "SIDE_QUICK must be 0 or 1"
SIDE_STEPS=abc bash "$SCRIPT" > "$WORK/bad2" 2>&1 && fail "SIDE_STEPS=abc accepted"
expect "$WORK/bad2" "SIDE_STEPS must be a positive whole number"
SIDE_STEPS=12 bash "$SCRIPT" > "$WORK/bad4" 2>&1 && fail "runs of 24 steps accepted for 12"
expect "$WORK/bad4" "$WORK/out/train/standard finished at step 24, but the steps asked for are 12"
PAPER_DATA="$WORK/nothing" bash "$SCRIPT" > "$WORK/bad3" 2>&1 && fail "a missing token directory accepted"
expect "$WORK/bad3" "has no train.tokens and val.tokens"
echo "paper-side quick run: ok"
