#!/usr/bin/env bash
# test_scorers.sh: `SCORERS_QUICK=1 make scorers` (scripts/scorers.sh) end to end on tiny models
# (a landmark and a standard model on pass-key text, the same pair on byte-level prose): missing
# models are refused with one message naming the commands to run, every row runs, scorers.tsv has
# one row per model, scorer and length with its columns well formed, a row equals a direct
# `landmark eval` of the same setting, scorers.md opens with the answer and has its tables and
# picture, and a second run skips every row.
# Usage: test_scorers.sh path/to/landmark
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
SCRIPT="$ROOT/scripts/scorers.sh"
export SCORERS_QUICK=1 SCORERS_DEMO="$WORK/demo" SCORERS_PAPER="$WORK/paper" SCORERS_DATA="$WORK/tok" \
  SCORERS_OUT="$WORK/out" LANDMARK

# Nothing trained yet: one error naming both commands.
exits_with 1 "$WORK/none" bash "$SCRIPT"
expect "$WORK/none" "scorers: the models are missing: run 'make demo' (for $WORK/demo/landmark and $WORK/demo/standard) and 'make paper-tables'"

TINY=(--layers 1 --embd 32 --heads 2 --block-size 128 --batch 2 --steps 3 --eval-every 0 --landmark-every 10 --quiet)
passkey_tokens "$WORK/pk" "$WORK/pktok" --docs 200 --max-fillers 3 --seed 3
small_tokens "$WORK/tok"
for kind in landmark standard; do
  "$LANDMARK" train --data "$WORK/pktok" "${TINY[@]}" --attention "$kind" --out "$WORK/demo/$kind" > /dev/null
done
# Only the demo's pair: the message names paper-tables alone.
exits_with 1 "$WORK/half" bash "$SCRIPT"
expect "$WORK/half" "run 'make paper-tables' (for $WORK/paper/landmark, $WORK/paper/standard and $WORK/tok/val.tokens) first"
for kind in landmark standard; do
  "$LANDMARK" train --data "$WORK/tok" "${TINY[@]}" --attention "$kind" --out "$WORK/paper/$kind" > /dev/null
done

bash "$SCRIPT" > "$WORK/log1" 2>&1 || { cat "$WORK/log1" >&2; fail "the quick run failed"; }
TSV="$WORK/out/docs/results/scorers.tsv" MD="$WORK/out/docs/results/scorers.md"
expect "$WORK/log1" "wrote $TSV"
[ "$(head -1 "$TSV")" = "$(printf 'model\tkind\tscorer\tk\tlength\ttrials\tpasskey_pct\tppl\tci_low\tci_high\tmass_recall\tiou\tkeys_per_query\tbytes_per_block\tms_per_token\tseconds\tratio\tratio_low\tratio_high')" ] ||
  fail "scorers.tsv header: $(head -1 "$TSV")"
# 9 (model, scorer) pairs x (2 perplexity + 2 pass-key lengths), and both models without retrieval
# (k 0) at the 2 perplexity lengths: 40 rows, 19 columns each.
[ "$(tail -n +2 "$TSV" | wc -l)" -eq 40 ] || { cat "$TSV" >&2; fail "scorers.tsv has $(tail -n +2 "$TSV" | wc -l) rows, expected 40"; }
awk -F'\t' 'NR > 1 {
  if (NF != 19) { print "row " NR ": " NF " columns"; bad = 1 }
  # A perplexity row other than the reference (the landmark model with its landmarks) has its
  # ratio inside its paired interval, and that ratio is its perplexity over the reference row'"'"'s
  # (the same windows) to the 4 decimals eval prints; pass-key rows have none.
  if ($8 != "-") ppl[$2, $3, $5] = $8
  ref = ($2 == "landmark" && $3 == "landmark")
  if (($8 == "-" || ref) != ($17 == "-")) { print "row " NR ": ratio " $17; bad = 1 }
  if ($17 != "-" && !($18 <= $17 && $17 <= $19)) { print "row " NR ": ratio " $17 " outside [" $18 ", " $19 "]"; bad = 1 }
  if ($17 != "-") want[NR] = $2 SUBSEP $5 SUBSEP $8 SUBSEP $17
  if ($2 == "standard" && $3 == "landmark") { print "row " NR ": a standard model with the landmark scorer"; bad = 1 }
  if ($8 != "-" && !($9 <= $8 && $8 <= $10)) { print "row " NR ": ppl " $8 " outside [" $9 ", " $10 "]"; bad = 1 }
  if ($3 == "none" && !($4 == 0 && $11 == "-" && $13 == 0)) { print "row " NR ": k 0 with k " $4 ", recall " $11; bad = 1 }
  if ($3 == "none") next
  # Mass recall at the longest length (400) only.
  if ($8 != "-" && ($5 == 400) != ($11 != "-")) { print "row " NR ": mass recall " $11 " at " $5; bad = 1 }
  if ($8 != "-" && $5 == 400 && !($11 > 0 && $11 <= 1 && $12 >= 0 && $12 <= 1)) { print "row " NR ": mass recall " $11 ", IoU " $12; bad = 1 }
  if ($8 != "-" && $5 == 400 && $3 == "oracle" && $12 != 1) { print "row " NR ": the oracle IoU " $12 " with itself"; bad = 1 }
  if ($7 != "-" && !($7 >= 0 && $7 <= 100 && $15 > 0)) { print "row " NR ": pass key " $7 ", ms " $15; bad = 1 }
  if (($7 == "-") == ($8 == "-")) { print "row " NR ": neither or both of pass key and perplexity"; bad = 1 }
  if (!($13 > 0 && $14 > 0)) { print "row " NR ": keys " $13 ", bytes " $14; bad = 1 }
} END {
  for (i in want) { split(want[i], w, SUBSEP); d = w[3] / ppl["landmark", "landmark", w[2]] - w[4]
    if (d > 2e-4 || d < -2e-4) { print "row " i ": ratio " w[4] " but perplexities give " w[3] / ppl["landmark", "landmark", w[2]]; bad = 1 } }
  exit bad }' "$TSV" || fail "scorers.tsv is malformed"
# A row equals a direct evaluation of the same setting.
"$LANDMARK" eval --checkpoint "$WORK/paper/standard/checkpoint.safetensors" --tokens "$WORK/tok/val.tokens" --length 400 \
  --chunk 50 --k 4 --scorer quest --mass-recall --windows 2 --bootstrap 200 --tsv "$WORK/direct.tsv" > /dev/null 2>&1
want="$(tail -1 "$WORK/direct.tsv" | cut -f5,22,23)"
got="$(awk -F'\t' '$1 == "paper-standard" && $3 == "quest" && $5 == 400 { print $8 "\t" $11 "\t" $12 }' "$TSV")"
[ "$got" = "$want" ] || fail "scorers.tsv's standard quest row at 400 ($got) is not the direct eval's ($want)"
for s in "# Learned landmarks against training-free block scorers" "**The answer.**" "## Perplexity on the held-out book" \
         "## The pass key" "## Cost at 900 tokens" "![pass key by length and scorer](scorers_passkey.png)" \
         "| standard | reps | 400 |" "make scorers"; do
  expect "$MD" "$s"
done
[ -s "$WORK/out/docs/results/scorers_passkey.png" ] || fail "no picture"
# Resumable: a second run reads every row from disk.
bash "$SCRIPT" > "$WORK/log2" 2>&1 || { cat "$WORK/log2" >&2; fail "the second run failed"; }
grep -q "^row " "$WORK/log2" && { grep "^row " "$WORK/log2" >&2; fail "the second run redid rows"; }
exits_with 1 "$WORK/bad" env SCORERS_K=0 bash "$SCRIPT"
expect "$WORK/bad" "SCORERS_K must be a positive integer"
echo "scorers: all checks passed"
