#!/usr/bin/env bash
# test_sparse_study.sh: `SPARSE_QUICK=1 make sparse-study` (scripts/sparse_study.sh) end to end on
# tiny models (a byte-level text and pass-key documents, a tiny standard model standing in for
# make demo's pretraining): a missing pretrained model is refused naming `make demo`; every stage
# runs; sparse.tsv has its header, one line per row, measure and length, each with numbers;
# sparse.md and the picture are written; a second run re-measures and retrains nothing; a changed
# evaluation setting (the pass-key trials) is measured again and shows in the table; a changed
# training setting (the steps) stops the run naming it; a bad setting is refused before any stage.
# Usage: test_sparse_study.sh path/to/landmark
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
SCRIPT="$ROOT/scripts/sparse_study.sh"
export SPARSE_QUICK=1 SPARSE_OUT="$WORK/out" SPARSE_TEXT_DATA="$WORK/tok" SPARSE_PK_DATA="$WORK/pktok" \
  SPARSE_PK_INIT="$WORK/pre/checkpoint.safetensors" SPARSE_PARALLEL=1 LANDMARK

small_tokens "$WORK/tok"
passkey_tokens "$WORK/pk" "$WORK/pktok" --docs 200 --max-fillers 3 --seed 3
exits_with 1 "$WORK/none" bash "$SCRIPT"
expect "$WORK/none" "run 'make demo' first"
"$LANDMARK" train --data "$WORK/pktok" --layers 1 --embd 32 --heads 2 --block-size 64 --batch 2 --steps 2 \
  --eval-every 0 --quiet --out "$WORK/pre" > /dev/null
# Bad settings, refused before any stage.
exits_with 1 "$WORK/bad1" env SPARSE_GATES=some bash "$SCRIPT"
expect "$WORK/bad1" "SPARSE_GATES must be chosen or all"
exits_with 1 "$WORK/bad2" env SPARSE_PK_TRIALS=2 bash "$SCRIPT"
expect "$WORK/bad2" "SPARSE_PK_TRIALS must give 2 numbers"
[ ! -d "$WORK/out/text/r1" ] || fail "a bad setting started the train stage"

t0=$SECONDS
bash "$SCRIPT" > "$WORK/log1" 2>&1 || { cat "$WORK/log1" >&2; fail "the quick run failed"; }
echo "first run: $((SECONDS - t0)) s"
TSV="$WORK/out/docs/results/sparse.tsv" MD="$WORK/out/docs/results/sparse.md"
expect "$WORK/log1" "wrote $TSV"
[ "$(head -1 "$TSV")" = "$(printf 'row\tlabel\tdata\tseed\twindow\ttrain_top_k\tgates\tbudget\tsteps\ttokens\ttrain_seconds\ttokens_per_s\tmeasure\tlength\tvalue\tci_low\tci_high\tratio\tratio_low\tratio_high\ttrials\tseconds')" ] ||
  fail "sparse.tsv header: $(head -1 "$TSV")"
# 7 rows x 3 perplexity lengths; pass key stingy: 7 rows + 3 runs x 1 more seed, x 2 lengths;
# exact: 7 rows x 2 lengths. 21 + 20 + 14 = 55 lines of 22 columns.
[ "$(tail -n +2 "$TSV" | wc -l)" -eq 55 ] || { cat "$TSV" >&2; fail "sparse.tsv has $(tail -n +2 "$TSV" | wc -l) lines, expected 55"; }
awk -F'\t' 'function num(x) { return x ~ /^-?[0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?$/ }
  NR > 1 {
  if (NF != 22) { print "line " NR ": " NF " columns"; bad = 1 }
  for (c = 9; c <= 12; c++) if (!num($c) || $c <= 0) { print "line " NR ": column " c " is " $c; bad = 1 }
  if (!num($15)) { print "line " NR ": value " $15; bad = 1 }
  if ($13 == "ppl") {
    if (!($16 <= $15 && $15 <= $17)) { print "line " NR ": ppl " $15 " outside [" $16 ", " $17 "]"; bad = 1 }
    if ($1 != "r1" && !(num($18) && $19 <= $18 && $18 <= $20)) { print "line " NR ": ratio " $18 " [" $19 ", " $20 "]"; bad = 1 }
    if ($1 == "r1" && $18 != 1) { print "line " NR ": the reference ratio " $18; bad = 1 }
    n["ppl", $1]++
  } else if ($13 ~ /^passkey_(stingy|exact)$/) {
    if (!($15 >= 0 && $15 <= 100 && $21 == 2)) { print "line " NR ": pass key " $15 " of " $21; bad = 1 }
    n[$13, $1]++
  } else { print "line " NR ": measure " $13; bad = 1 }
  # The settings each row was trained with.
  if ($1 == "r1" && !($6 == 0 && $5 == 128 && $8 == "tokens")) { print "line " NR ": r1 " $5 " " $6 " " $8; bad = 1 }
  if ($1 == "r2a" && !($6 == 2 && $7 == "all" && $5 == 128)) { print "line " NR ": r2a " $5 " " $6 " " $7; bad = 1 }
  if ($1 == "r3b" && !($6 == 2 && $5 == 512 && $10 == 6 * 512)) { print "line " NR ": r3b " $5 " " $6 " " $10; bad = 1 }
  if ($1 == "r4" && !($9 == 6 && $10 == 3 * 512 + 3 * 512)) { print "line " NR ": r4 " $9 " steps, " $10 " tokens"; bad = 1 }
  if ($1 == "r5" && $8 != "time of r1") { print "line " NR ": r5 budget " $8; bad = 1 }
} END {
  split("r1 r2c r2a r3a r3b r4 r5", rows, " ")
  for (i = 1; i <= 7; i++) {
    if (n["ppl", rows[i]] != 3 || n["passkey_exact", rows[i]] != 2) { print rows[i] ": " n["ppl", rows[i]] " ppl, " n["passkey_exact", rows[i]] " exact"; bad = 1 }
    want = (rows[i] ~ /^r(1|3a|3b)$/) ? 4 : 2
    if (n["passkey_stingy", rows[i]] != want) { print rows[i] ": " n["passkey_stingy", rows[i]] " stingy, expected " want; bad = 1 }
  }
  exit bad }' "$TSV" || fail "sparse.tsv is malformed"
for s in "# Training with the cache" "SPARSE_QUICK=1" "**The answer** is still to write" "## Perplexity on Persuasion" \
         "## The pass key" "![pass key by length and training recipe](sparse_passkey.png)" "make sparse-study"; do
  expect "$MD" "$s"
done
[ -s "$WORK/out/docs/results/sparse_passkey.png" ] || fail "no picture"

# Resumable: a second run trains and measures nothing again.
cp "$TSV" "$WORK/tsv1"
bash "$SCRIPT" > "$WORK/log2" 2>&1 || { cat "$WORK/log2" >&2; fail "the second run failed"; }
grep -E "row [a-z0-9_]+: landmark|--- train [a-z]+/[a-z0-9_]+: [0-9]" "$WORK/log2" &&
  fail "the second run measured or trained again (above)"
diff <(cut -f1-10,13-21 "$WORK/tsv1") <(cut -f1-10,13-21 "$TSV") > /dev/null || fail "the second run changed the table"
# One evaluation setting changed: those rows are measured again and the table shows them.
SPARSE_PK_TRIALS=3,2 bash "$SCRIPT" > "$WORK/log3" 2>&1 || { cat "$WORK/log3" >&2; fail "the run with 3 trials failed"; }
expect "$WORK/log3" "row pk_stingy_r1_300: its settings changed, measuring again"
grep -q "row ppl_" "$WORK/log3" && fail "a pass-key setting re-measured perplexity"
[ "$(awk -F'\t' '$13 ~ /^passkey/ && $14 == 300 && $21 != 3' "$TSV" | wc -l)" -eq 0 ] || fail "the table still shows 2 trials at 300"
[ "$(awk -F'\t' '$13 ~ /^passkey/ && $14 == 300 && $21 == 3' "$TSV" | wc -l)" -eq 17 ] || fail "the table lacks the 3-trial rows"
# One training setting changed: the run stops, naming it.
exits_with 1 "$WORK/log4" env SPARSE_TEXT_STEPS=8 bash "$SCRIPT"
expect "$WORK/log4" "was trained with other settings (was: --steps 6; now: --steps 8)"
echo "sparse study: all checks passed"
