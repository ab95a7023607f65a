#!/usr/bin/env bash
# test_tasks_cli.sh: `landmark tasks-data` and `landmark tasks-eval` as a user runs them
# (docs/tasks.md): the files written, the gold answers standing in their prompts, the same seed
# giving the same bytes and another seed other bytes, a tiny model's answers scored into per-prompt
# and per-cell TSVs and heat maps, and bad input refused with an error naming the flag.
# Usage: test_tasks_cli.sh path/to/landmark
source "$(dirname "$0")/lib.sh"
HAY="$(cd "$(dirname "$0")/../data" && pwd)/persuasion_opening.txt"
# shellcheck disable=SC2054  # the commas separate the values of --length and --depth
DATA=(--haystack "$HAY" --docs 60 --prompts 2 --length 500,1500 --depth 0,50,100)

"$LANDMARK" tasks-data --out "$WORK/a" "${DATA[@]}" --seed 4 > "$WORK/log"
expect "$WORK/log" "wrote $WORK/a/train.txt (60 documents"
expect "$WORK/log" "wrote $WORK/a/val.txt (50 documents"
expect "$WORK/log" "wrote $WORK/a/prompts.tsv (72 prompts"
"$LANDMARK" tasks-data --out "$WORK/b" "${DATA[@]}" --seed 4 > /dev/null
"$LANDMARK" tasks-data --out "$WORK/c" "${DATA[@]}" --seed 5 > /dev/null
for f in train.txt val.txt prompts.tsv; do
  cmp -s "$WORK/a/$f" "$WORK/b/$f" || fail "$f differs between two runs with seed 4"
  cmp -s "$WORK/a/$f" "$WORK/c/$f" && fail "$f is the same with seeds 4 and 5"
done
# prompts.tsv: 6 tasks x 2 lengths x 3 depths x 2 prompts, every prompt within its length (bytes
# here), every gold item standing in its prompt as the needles' wording has it, the question last.
awk -F'\t' 'NR == 1 { if ($0 != "task\tlength\tdepth_pct\ttrial\tscoring\ttokens\tanswer\tprompt") { print "header " $0; bad = 1 }; next }
  { n++; if (NF != 8 || $6 > $2 || length($8) != $6) { print "line " NR ": " NF " fields, " $6 " tokens of " $2; bad = 1 }
    split($7, gold, " ")
    for (i in gold) {
      g = gold[i]
      if ($1 ~ /^niah/) ok = index($8, " is " g ".") > 0
      else if ($1 == "vartrack") ok = index($8, "VAR " g " = ") > 0
      else ok = index($8, " " g) > 0
      if (!ok) { print "line " NR ": the gold item " g " is not in the prompt"; bad = 1 }
    }
    if ($8 !~ /\? (The special number for [a-z]+ is|They are)$/) { print "line " NR ": no question at the end"; bad = 1 }
    if (($5 == "exact") != ($1 == "niah-single" || $1 == "niah-multikey")) { print "line " NR ": scoring " $5; bad = 1 } }
  END { if (n != 72) { print n " prompts"; bad = 1 }; exit bad }' "$WORK/a/prompts.tsv" || fail "prompts.tsv is malformed"
# Training documents: the prompt, then its answer after the question.
bad_docs=$(grep -cvE '\? (The special number for [a-z]+ is|They are) [A-Za-z0-9 ]+\.$' "$WORK/a/train.txt" || true)
[ "$bad_docs" = 0 ] || fail "$bad_docs training documents do not end with a question and its answer"

# A tiny landmark model and a standard one answer the prompts (they are untrained: the scores are
# only checked for their form and their consistency).
small_tokens "$WORK/tok"
for kind in landmark standard; do
  "$LANDMARK" train --data "$WORK/tok" --layers 1 --embd 16 --heads 2 --block-size 64 --batch 2 --steps 2 --quiet \
    --attention "$kind" --landmark-every 10 --out "$WORK/$kind" > /dev/null
done
"$LANDMARK" tasks-data --out "$WORK/p" --haystack "$HAY" --docs 0 --prompts 2 --length 500 --depth 0,100 \
  --task niah-single,vartrack > /dev/null
"$LANDMARK" tasks-eval --checkpoint "$WORK/landmark/checkpoint.safetensors" --prompts "$WORK/p/prompts.tsv" --k 2 \
  --chunk 20 --answers "$WORK/ans.tsv" --cells "$WORK/cells.tsv" --heatmaps "$WORK/heat_" > "$WORK/eval.log" 2>&1
expect "$WORK/eval.log" "(landmark-k2)"
expect "$WORK/eval.log" "wrote $WORK/heat_vartrack.png"
[ -s "$WORK/heat_niah-single.png" ] || fail "no heat map for niah-single"
[ "$(tail -n +2 "$WORK/ans.tsv" | wc -l)" = 8 ] || fail "ans.tsv: $(tail -n +2 "$WORK/ans.tsv" | wc -l) rows, expected 8"
[ "$(tail -n +2 "$WORK/cells.tsv" | wc -l)" = 4 ] || fail "cells.tsv: $(tail -n +2 "$WORK/cells.tsv" | wc -l) rows, expected 4"
# Each cell's score is the mean of its prompts' scores.
awk -F'\t' 'FNR == 1 { next } FILENAME == ARGV[1] { s[$2, $3, $4] += $7; n[$2, $3, $4]++; next }
  { if ($1 != "landmark-k2" || $5 != 2 || $6 < 0 || $6 > 1 || ($6 - s[$2, $3, $4] / n[$2, $3, $4]) ^ 2 > 1e-9) { print; bad = 1 } }
  END { exit bad }' "$WORK/ans.tsv" "$WORK/cells.tsv" || fail "cells.tsv does not average ans.tsv"
"$LANDMARK" tasks-eval --checkpoint "$WORK/standard/checkpoint.safetensors" --prompts "$WORK/p/prompts.tsv" \
  > "$WORK/std.log" 2>&1
expect "$WORK/std.log" "(standard-window)"
"$LANDMARK" tasks-eval --checkpoint "$WORK/standard/checkpoint.safetensors" --prompts "$WORK/p/prompts.tsv" \
  --scorer mean --k 2 --chunk 20 > "$WORK/mean.log" 2>&1
expect "$WORK/mean.log" "(standard-mean-k2)"

# Prompts counted in another tokenizer (a BPE: more bytes per token) are longer under the byte-level
# model's: the evaluation says so.
small_text "$WORK/bpe_text"
"$LANDMARK" prepare --train "$WORK/bpe_text/train.txt" --val "$WORK/bpe_text/val.txt" --out "$WORK/bpe" --tokenizer bpe \
  --vocab 300 > /dev/null 2>&1
"$LANDMARK" tasks-data --out "$WORK/pb" --haystack "$HAY" --docs 0 --prompts 1 --length 500 --task niah-single \
  --tokenizer "$WORK/bpe/tokenizer.json" > /dev/null
"$LANDMARK" tasks-eval --checkpoint "$WORK/standard/checkpoint.safetensors" --prompts "$WORK/pb/prompts.tsv" \
  > "$WORK/bpe.log" 2>&1
expect "$WORK/bpe.log" "note: 1 of 1 prompts are longer than their length under this model's tokenizer"
grep -q "^note:" "$WORK/std.log" && fail "a note on prompts of the model's own tokenizer"

# Bad input: an error naming the flag, a non-zero exit.
T=(tasks-data --out "$WORK/bad" --haystack "$HAY" --docs 5 --prompts 1)
exits_with 1 "$WORK/e1" "$LANDMARK" "${T[@]}" --task niah-double
expect "$WORK/e1" "--task: unknown task 'niah-double'"
exits_with 1 "$WORK/e2" "$LANDMARK" "${T[@]}" --task ""
expect "$WORK/e2" "--task: unknown task ''"
exits_with 1 "$WORK/e3" "$LANDMARK" "${T[@]}" --task niah-multikey --length 100
expect "$WORK/e3" "--length 100 is below what the needles and the question of niah-multikey take"
exits_with 2 "$WORK/e4" "$LANDMARK" "${T[@]}" --depth 150
expect "$WORK/e4" "--depth"
exits_with 2 "$WORK/e5" "$LANDMARK" "${T[@]}" --depth -1
expect "$WORK/e5" "--depth"
exits_with 1 "$WORK/e6" "$LANDMARK" "${T[@]}" --mix ""
expect "$WORK/e6" "--mix: an empty mixture"
exits_with 1 "$WORK/e7" "$LANDMARK" "${T[@]}" --mix "all@500-100"
expect "$WORK/e7" "--mix all@500-100: the length range '500-100' needs whole numbers"
exits_with 1 "$WORK/e8" "$LANDMARK" tasks-data --out "$WORK/bad" --haystack "$WORK/none.txt"
expect "$WORK/e8" "--haystack $WORK/none.txt: no such file"
exits_with 2 "$WORK/e9" "$LANDMARK" "${T[@]}" --length ""
expect "$WORK/e9" "--length"
exits_with 1 "$WORK/e11" "$LANDMARK" tasks-data --out "$WORK/bad" --haystack "$HAY" --docs 16000000 --mix all@64-60000000
expect "$WORK/e11" "GB of text; lower --docs, --prompts or the lengths (at most 8 GB)"
[ ! -e "$WORK/bad/train.txt" ] || fail "a refused call wrote files"
printf 'task\tlength\n' > "$WORK/bad.tsv"
exits_with 1 "$WORK/e10" "$LANDMARK" tasks-eval --checkpoint "$WORK/landmark/checkpoint.safetensors" --prompts "$WORK/bad.tsv"
expect "$WORK/e10" "$WORK/bad.tsv: the first line is not the prompts header"
echo "tasks cli: all checks passed"
