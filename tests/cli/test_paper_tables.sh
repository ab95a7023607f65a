#!/usr/bin/env bash
# test_paper_tables.sh: `PAPER_QUICK=1 make paper-tables` (scripts/paper_tables.sh) end to end on
# a small byte-level text: every stage runs, table1.tsv and results.md are well formed, a row of
# table1.tsv equals a direct `landmark eval` of the same setting, a second run skips everything,
# an interrupted evaluation is redone, runs of another number of steps are refused, and bad
# settings are refused.
# Usage: test_paper_tables.sh path/to/landmark
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
SCRIPT="$ROOT/scripts/paper_tables.sh"

# 30 kB to train on, the last 10 kB to evaluate: two windows of 4096 bytes (plus one token).
small_tokens "$WORK/tok"
export PAPER_QUICK=1 PAPER_DATA="$WORK/tok" PAPER_OUT="$WORK/out" LANDMARK
bash "$SCRIPT" > "$WORK/log1" 2>&1 || { cat "$WORK/log1" >&2; fail "the quick run failed"; }
expect "$WORK/log1" "wrote $WORK/out/docs/results.md"
T1="$WORK/out/docs/results/table1.tsv"
MD="$WORK/out/docs/results.md"

# table1.tsv: the issue's header, 17 rows (Table 1 and the CMT / jump rows), eleven columns, a
# perplexity inside its interval, k '-' exactly where it does not apply.
[ "$(head -n 1 "$T1")" = "$(printf 'model\ttrain_len\teval_len\tk\tppl\tci_low\tci_high\tl_local\txl_cache\tblocks\tattention_size')" ] ||
  fail "table1.tsv header: $(head -n 1 "$T1")"
[ "$(tail -n +2 "$T1" | wc -l)" -eq 17 ] || fail "table1.tsv has $(tail -n +2 "$T1" | wc -l) rows, expected 17"
awk -F'\t' 'NR > 1 {
  if (NF != 11) { print "row " NR ": " NF " columns"; bad = 1 }
  if ($1 !~ /^(standard|landmark|landmark-cmt|landmark-jump|xl)$/) { print "row " NR ": model " $1; bad = 1 }
  if (!($6 <= $5 && $5 <= $7) || $5 <= 1) { print "row " NR ": ppl " $5 " outside [" $6 ", " $7 "]"; bad = 1 }
  if (($1 ~ /^landmark/) != ($4 != "-")) { print "row " NR ": k " $4 " for " $1; bad = 1 }
} END { exit bad }' "$T1" || fail "table1.tsv is malformed"
for section in "## Table 1" "## Table 2" "## Table 3" "## Appendix E" "## Appendix C" "**Target**" "PAPER_QUICK=1" \
               "## What retrieval adds" "## The commands" "| d_landmark_2048_k0 | landmark | \`--length 2048 --chunk 250 --k 0\` |" \
               "## The paper's comparison: Transformer-XL against retrieval" \
               "| xl | \`--block-size 256 --xl-cache 256 --segment 512 --batch 4 --attention standard\` |"; do
  expect "$MD" "$section"
done
[ -s "$WORK/out/docs/results/appendix_c_hist.png" ] || fail "no Appendix C histogram"
# Appendix C's mean per layer, one entry for each of the quick model's two layers.
grep -qE '^The mean of those counts for each layer: layer 0 [0-9.]+, layer 1 [0-9.]+\.$' "$MD" ||
  fail "Appendix C has no mean per layer"
# Table 2: nine rows, three per granularity.
[ "$(grep -cE '^\| (yes|no) \| (yes|no) \| (2048|4096) \|' "$MD")" -eq 9 ] || fail "Table 2 should have 9 rows"

# The plumbing against a direct evaluation: the row of landmark at 2048, l_local 250, 40 blocks,
# k 4 must carry the perplexity `landmark eval` prints for that setting.
"$LANDMARK" eval --checkpoint "$WORK/out/train/landmark/checkpoint.safetensors" --tokens "$WORK/tok/val.tokens" \
  --length 2048 --chunk 250 --capacity 40 --k 4 --windows 2 > "$WORK/direct" 2>/dev/null
direct=$(sed -n 's/^2048 *250 *None *40 *4 *454 *\([0-9.]*\)$/\1/p' "$WORK/direct")
row=$(awk -F'\t' '$1 == "landmark" && $3 == 2048 && $8 == 250 && $10 == 40 && $4 == 4 { print $5 }' "$T1")
[ -n "$direct" ] && [ "$direct" = "$row" ] || { cat "$WORK/direct" >&2; fail "table1.tsv has '$row', landmark eval printed '$direct'"; }

# The paired diagnostic: the landmark side is the same evaluation as its Table 1 row, and the
# standard side covers exactly the 8 windows of 512 that p_standard_512 evaluated (two spans of
# 2048), so the two perplexities it prints are those rows' perplexities.
expect "$MD" "## Table 1's target pair, window for window"
pl=$(grep -m1 '^paired ratio=' "$WORK/out/eval/p_landmark_2048_c250_b40_k4.txt") || fail "no paired line"
pv() { tr ' ' '\n' <<< "$pl" | sed -n "s/^$1=//p"; }
[ "$(pv spans)" = 2 ] && [ "$(pv span_length)" = 2048 ] || fail "paired over the wrong spans: $pl"
[ "$(pv ppl)" = "$(awk -F'\t' 'NR == 2 { print $5 }' "$WORK/out/eval/t1_landmark_2048_c250_b40_k4.tsv")" ] ||
  fail "the paired landmark perplexity differs from its Table 1 row: $pl"
[ "$(pv ppl_other)" = "$(awk -F'\t' 'NR == 2 { print $5 }' "$WORK/out/eval/p_standard_512.tsv")" ] ||
  fail "the paired standard perplexity differs from p_standard_512: $pl"
awk -v r="$(pv ratio)" -v a="$(pv ppl)" -v b="$(pv ppl_other)" 'BEGIN { exit !(r / (a / b) > 0.9995 && r / (a / b) < 1.0005) }' ||
  fail "the ratio is not ppl / ppl_other (to the 4 printed decimals): $pl"

# A second run redoes nothing; a row whose file is gone (an interrupted evaluation) is redone.
bash "$SCRIPT" > "$WORK/log2" 2>&1 || { cat "$WORK/log2" >&2; fail "the second run failed"; }
[ "$(grep -c 'done earlier' "$WORK/log2")" -eq 43 ] || { cat "$WORK/log2" >&2; fail "expected 5 runs + 38 rows done earlier"; }
rm "$WORK/out/eval/t3_cutoff_0.3.tsv"
bash "$SCRIPT" eval tables > "$WORK/log3" 2>&1 || { cat "$WORK/log3" >&2; fail "the third run failed"; }
expect "$WORK/log3" "--- eval t3_cutoff_0.3 (25/38): landmark-cmt"
[ "$(grep -c 'done earlier' "$WORK/log3")" -eq 37 ] || fail "only the missing row should run"

# Finished runs of another number of steps stop the script (the tables would print the wrong
# number): 12 steps, then 24 asked for with every run DONE at 12.
PAPER_OUT="$WORK/out2" PAPER_STEPS=12 bash "$SCRIPT" train > "$WORK/log4" 2>&1 || { cat "$WORK/log4" >&2; fail "12 steps failed"; }
PAPER_OUT="$WORK/out2" PAPER_STEPS=24 bash "$SCRIPT" tables > "$WORK/log4b" 2>&1 && fail "runs of 12 steps accepted for 24"
expect "$WORK/log4b" "$WORK/out2/train/standard finished at step 12, but the steps asked for are 24"
# A run without DONE resumes from its checkpoint: with the DONE marks gone, the same runs asked for
# 24 steps continue at step 12; a finished run whose DONE is missing is marked.
rm "$WORK"/out2/train/*/DONE
PAPER_OUT="$WORK/out2" PAPER_STEPS=24 bash "$SCRIPT" train > "$WORK/log5" 2>&1 || { cat "$WORK/log5" >&2; fail "the resumed training failed"; }
expect "$WORK/log5" "--- train standard (1/5): 24 steps (resuming)"
expect "$WORK/log5" "resuming at step 12"
expect "$WORK/log5" "--- train landmark (2/5): 24 steps (resuming)"
for run in standard landmark landmark-cmt landmark-jump xl; do
  grep -q '"step":24[,}]' "$WORK/out2/train/$run/metrics.jsonl" || fail "the resumed run $run did not reach step 24"
done
rm "$WORK/out2/train/xl/DONE"
PAPER_OUT="$WORK/out2" PAPER_STEPS=24 bash "$SCRIPT" train > "$WORK/log6" 2>&1 || { cat "$WORK/log6" >&2; fail "the last run failed"; }
expect "$WORK/log6" "--- train xl (5/5): finished earlier at step 24"
expect "$WORK/log6" "--- train landmark (2/5): done earlier"
[ -f "$WORK/out2/train/xl/DONE" ] || fail "a finished run was not marked DONE"

# Bad settings: a clear error, non-zero exit.
PAPER_QUICK=2 bash "$SCRIPT" > "$WORK/bad1" 2>&1 && fail "PAPER_QUICK=2 accepted"
expect "$WORK/bad1" "PAPER_QUICK must be 0 or 1"
bash "$SCRIPT" evaluate > "$WORK/bad2" 2>&1 && fail "an unknown stage accepted"
expect "$WORK/bad2" "unknown stage 'evaluate'"
PAPER_DATA="$WORK/nothing" bash "$SCRIPT" > "$WORK/bad3" 2>&1 && fail "a missing token directory accepted"
expect "$WORK/bad3" "has no train.tokens and val.tokens"
rm "$WORK/out/train/xl/DONE" "$WORK/out/eval/t1_xl_2048.tsv"
bash "$SCRIPT" eval > "$WORK/bad4" 2>&1 && fail "an evaluation of an unfinished run accepted"
expect "$WORK/bad4" "needs the finished run xl"
echo "paper-tables quick run: ok"
