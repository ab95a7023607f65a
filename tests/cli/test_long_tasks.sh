#!/usr/bin/env bash
# test_long_tasks.sh: `TASKS_QUICK=1 make long-tasks` (scripts/long_tasks.sh) end to end on a tiny
# model and a tiny grid: bad settings refused before any stage, the rows stage refused without its
# models, every stage run, long_tasks.tsv with one line per row, task, length and depth, its
# columns well formed and its seed, a row equal to a direct `landmark tasks-eval` of the same
# model and flags, the pictures written, and a second run that redoes nothing.
# Usage: test_long_tasks.sh path/to/landmark
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
SCRIPT="$ROOT/scripts/long_tasks.sh"
export TASKS_QUICK=1 TASKS_OUT="$WORK/out" TASKS_SEED=3 TASKS_SCORER=mean LANDMARK

for bad in "TASKS_SEED=x:TASKS_SEED must be a whole number, got 'x'" \
           "TASKS_DEPTHS=0,150:TASKS_DEPTHS must be a comma-separated list of depths 0 to 100, got '0,150'" \
           "TASKS_LENGTHS=512,x:TASKS_LENGTHS must be a comma-separated list of positive integers, got '512,x'" \
           "TASKS_QUICK=2:TASKS_QUICK must be 0 or 1, got '2'" \
           "TASKS_SCORER=landmark:TASKS_SCORER must be mean, quest, reps or oracle" \
           "TASKS_PROMPTS=0:TASKS_PROMPTS must be a positive integer" \
           "TASKS_HAYSTACK=$WORK/none.txt:TASKS_HAYSTACK $WORK/none.txt is missing"; do
  exits_with 1 "$WORK/bad" env "${bad%%:*}" bash "$SCRIPT"
  expect "$WORK/bad" "${bad#*:}"
done
exits_with 1 "$WORK/bad" bash "$SCRIPT" tabels
expect "$WORK/bad" "unknown stage 'tabels'"
[ ! -e "$WORK/out" ] || fail "a refused run left $WORK/out"
exits_with 1 "$WORK/norows" bash "$SCRIPT" rows
expect "$WORK/norows" "no landmark model: run the models stage"

bash "$SCRIPT" > "$WORK/log1" 2>&1 || { cat "$WORK/log1" >&2; fail "the quick run failed"; }
RES="$WORK/out/docs/results" TSV="$WORK/out/docs/results/long_tasks.tsv"
expect "$WORK/log1" "long-tasks: seed 3, lengths 400,1200, depths 0,100, k 2,4, 2 prompts per cell, scorer mean"
expect "$WORK/log1" "wrote $TSV"
[ "$(head -1 "$TSV")" = "$(printf 'model\ttask\tlength\tdepth_pct\tprompts\tscore\tseed\ttask_void')" ] ||
  fail "long_tasks.tsv header: $(head -1 "$TSV")"
# 4 rows (landmark k 2 and 4, standard with mean, standard in its window) x 6 tasks x 2 lengths x 2 depths.
awk -F'\t' 'NR > 1 { n++; key = $1 " " $2 " " $3 " " $4
    if (NF != 8 || $5 != 2 || $6 < 0 || $6 > 1 || $7 != 3 || ($8 != "yes" && $8 != "no") || seen[key]++) { print "line " NR ": " $0; bad = 1 }
    rows[$1] = 1 }
  END { if (n != 96) { print n " lines"; bad = 1 }
        if (!("landmark-k2" in rows && "landmark-k4" in rows && "standard-mean-k4" in rows && "standard-window" in rows)) { print "rows missing"; bad = 1 }
        exit bad }' "$TSV" || fail "long_tasks.tsv is malformed"
# A row is what a direct evaluation gives.
"$LANDMARK" tasks-eval --checkpoint "$WORK/out/landmark/checkpoint.safetensors" --prompts "$WORK/out/data/prompts/prompts.tsv" \
  --k 2 --chunk 200 --cells "$WORK/direct.tsv" > /dev/null 2>&1
want="$(tail -n +2 "$WORK/direct.tsv" | cut -f2-6)"
got="$(awk -F'\t' -v OFS='\t' '$1 == "landmark-k2" { print $2, $3, $4, $5, $6 }' "$TSV")"
[ "$got" = "$want" ] || fail "long_tasks.tsv's landmark-k2 row is not a direct tasks-eval's"
[ -s "$RES/long_tasks.png" ] || fail "no summary chart"
for t in niah-single niah-multikey niah-multivalue niah-multiquery vartrack freqwords; do
  for f in "$t" landmark-k2_"$t" landmark-k4_"$t" standard-mean-k4_"$t" standard-window_"$t"; do
    [ -s "$RES/long_tasks/$f.png" ] || fail "no picture $f.png"
  done
done
for f in pretrain landmark standard row_landmark-k2 times; do [ -s "$WORK/out/logs/$f.log" ] || fail "no log $f.log"; done
for s in "# Long-context tasks: where retrieval by landmarks works and where it fails" "**The answer, at 1200 tokens.**" \
         "seed 3; 2 prompts per (task, length, depth) cell" "## freqwords" "| standard-window | 0" \
         "![vartrack, landmark-k4](long_tasks/landmark-k4_vartrack.png)"; do
  expect "$RES/long_tasks.md" "$s"
done
# Resumable: a second run trains and evaluates nothing again.
bash "$SCRIPT" > "$WORK/log2" 2>&1 || { cat "$WORK/log2" >&2; fail "the second run failed"; }
grep -E "^row |: training" "$WORK/log2" && fail "the second run redid work"
expect "$WORK/log2" "landmark: done before"
# The answer comes from the rows: with scores planted in the rows' cells (niah-single solved by k 2,
# vartrack learned in the window but not retrieved, the rest not learned), the tables say so.
R="$WORK/out/rows"
plant() {  # ROW TASKS SCORE
  awk -F'\t' -v OFS='\t' -v tasks=",$2," -v v="$3" 'NR > 1 && index(tasks, "," $2 ",") { $6 = v } { print }' \
    "$R/$1.cells.tsv" > "$R/x" && mv "$R/x" "$R/$1.cells.tsv"
}
plant landmark-k2 niah-single 1
plant standard-window niah-single,vartrack 0.95
plant standard-window niah-multikey 0.5
bash "$SCRIPT" tables > "$WORK/log3" 2>&1 || { cat "$WORK/log3" >&2; fail "the tables stage failed"; }
expect "$RES/long_tasks.md" "(mean score >= 0.8 over depths at its best k): niah-single (k 2 1.00, k 4 0.00; standard in its window 0.95). It does not solve: vartrack (k 2 0.00, k 4 0.00; standard in its window 0.95). Void"
expect "$RES/long_tasks.md" "nothing is shown about retrieval): niah-multikey niah-multivalue niah-multiquery freqwords."
[ "$(awk -F'\t' '$2 == "niah-single" && $8 != "no"' "$TSV" | wc -l)" = 0 ] || fail "niah-single is void in long_tasks.tsv"
echo "long tasks: all checks passed"
