#!/usr/bin/env bash
# long_tasks.sh: `make long-tasks`, evidence beyond the pass key: six RULER-style tasks
# (docs/tasks.md) hidden in real text, scored on a grid of prompt lengths x depths x tasks for a
# landmark model and a standard model trained alike.
#   data      tasks-data (byte-level tokens): short documents for pretraining, 512-token ones for
#             the continuations (the task mixture, --mix), and the evaluation prompts with their
#             gold answers (prompts.tsv)
#   pretrain  one standard model on short windows of the mixture, shared by both models (as make demo)
#   models    the pretrained model continued on 512-token windows with landmark attention and with
#             standard attention: the same data, steps, schedule and seed
#   rows      one `landmark tasks-eval` per row: the landmark model at each k of TASKS_KS, the
#             standard model in its own window, the standard model read in blocks with the best
#             training-free scorer of `make scorers`; heat maps per task and row
#   tables    docs/results/long_tasks.tsv (every cell of every row, with the seed and whether the
#             standard model learned the task in its window: a task it did not learn is void for
#             both), docs/results/long_tasks.png (mean score against length per row),
#             docs/results/long_tasks/ (per task: a chart against length, a heat map per row) and
#             the page long_tasks.md beside them (the answer from the rows, then a table per task); redone
#             on every run (it takes a second)
# Every stage is resumable: run the script again and it goes on where it stopped (a training marks
# itself done when it finished; a row or a file that is there is skipped).
# Usage: bash scripts/long_tasks.sh [data] [pretrain] [models] [rows] [tables]   (default: all)
# Environment (checked before the first stage):
#   TASKS_QUICK=1     a tiny model, few steps and a tiny grid (a minute or two, for tests); it writes
#                     to runs/long_tasks_quick, never to docs/
#   TASKS_SEED        the seed of the data, the trainings and the prompts (default 1)
#   TASKS_HAYSTACK    the real text (default data/corpus/train.txt, made by scripts/get-corpus.sh
#                     when missing; quick: tests/data/persuasion_opening.txt, bundled, offline)
#   TASKS_PRE_STEPS, TASKS_STEPS   pretraining and continuation steps
#   TASKS_PROMPTS     prompts per (task, length, depth) cell
#   TASKS_LENGTHS, TASKS_DEPTHS, TASKS_KS   comma-separated grid and k values
#   TASKS_SCORER      the standard model's block scorer (default: the standard model's best
#                     non-oracle scorer on the pass key in docs/results/scorers.tsv, else quest)
#   TASKS_OUT, TASKS_DOCS   where runs and tables go; LANDMARK: the program
# Budget (defaults, at most 90 minutes on 2 cores), estimated from timings of this model (make
# demo's: 3 layers, d 128, 4 heads) taken on the project's 2-core machine while two other jobs ran
# (load average 5), one thread per process:
#   training  0.21 s a step at 256 tokens (batch 8), 0.64 (landmark) and 0.54 (standard) at 512:
#             1500 pretraining steps on 2 threads about 4 min, the two 500-step continuations side
#             by side about 5.5 min
#   reading   a 32k-token prompt answered in 3-4 s at k 4 (chunk 200; docs/demo.md measured 3.4 s on
#             an idle machine), 7-8 s at k 8 (chunk 43), 3 s with a scorer, 0.5 s in a 512-token
#             window; the four lengths of a cell cost 1.33 times its 32k prompts, and a row reads
#             6 tasks x 5 depths x 10 prompts per length: k 2 and k 4 about 27-29 min each, k 8 about
#             53, the scorer 21, the window 10; two rows at a time, the slowest first, finish in
#             about 74 min
# Total: about 85 min under that load; less on an idle machine. TASKS_KS=2,4 saves about 20 min.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
LANDMARK="${LANDMARK:-build/apps/landmark}"
QUICK="${TASKS_QUICK:-0}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
die() { echo "long-tasks: $*" >&2; exit 1; }
[ -x "$LANDMARK" ] || die "$LANDMARK is missing; run 'make' first (or set LANDMARK=...)"
case "$QUICK" in 0|1) ;; *) die "TASKS_QUICK must be 0 or 1, got '$QUICK'" ;; esac
positive() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "$1 must be a positive integer, got '$2'"; }
list_of() {  # NAME VALUE PATTERN: a comma-separated list of values matching PATTERN
  [[ "$2" =~ ^($3)(,($3))*$ ]] || die "$1 must be a comma-separated list of $4, got '$2'"
}

if [ "$QUICK" = 1 ]; then
  OUT="${TASKS_OUT:-runs/long_tasks_quick}"
  DOCS="${TASKS_DOCS:-$OUT/docs}"
  HAYSTACK="${TASKS_HAYSTACK:-tests/data/persuasion_opening.txt}"
  MODEL=(--layers 1 --embd 32 --heads 2)
  PRE_WINDOW=128 PRE_DOCS=200 LONG_DOCS=200
  PRE_STEPS="${TASKS_PRE_STEPS:-4}" STEPS="${TASKS_STEPS:-4}" PROMPTS="${TASKS_PROMPTS:-2}"
  LENGTHS="${TASKS_LENGTHS:-400,1200}" DEPTHS="${TASKS_DEPTHS:-0,100}" KS="${TASKS_KS:-2,4}"
else
  OUT="${TASKS_OUT:-runs/long_tasks}"
  DOCS="${TASKS_DOCS:-docs}"
  HAYSTACK="${TASKS_HAYSTACK:-data/corpus/train.txt}"
  MODEL=(--layers 3 --embd 128 --heads 4)  # make demo's model
  PRE_WINDOW=256 PRE_DOCS=40000 LONG_DOCS=20000
  PRE_STEPS="${TASKS_PRE_STEPS:-1500}" STEPS="${TASKS_STEPS:-500}" PROMPTS="${TASKS_PROMPTS:-10}"
  LENGTHS="${TASKS_LENGTHS:-512,2048,8192,32768}" DEPTHS="${TASKS_DEPTHS:-0,25,50,75,100}" KS="${TASKS_KS:-2,4,8}"
fi
SEED="${TASKS_SEED:-1}"
[[ "$SEED" =~ ^[0-9]+$ ]] || die "TASKS_SEED must be a whole number, got '$SEED'"
positive TASKS_PRE_STEPS "$PRE_STEPS"
positive TASKS_STEPS "$STEPS"
positive TASKS_PROMPTS "$PROMPTS"
list_of TASKS_LENGTHS "$LENGTHS" '[1-9][0-9]*' "positive integers"
list_of TASKS_DEPTHS "$DEPTHS" '100|[1-9]?[0-9]' "depths 0 to 100"
list_of TASKS_KS "$KS" '[1-9]' "k values 1 to 9"
best_scorer() {  # the standard model's best non-oracle scorer on the pass key in scorers.tsv
  [ -s docs/results/scorers.tsv ] || { echo quest; return; }
  awk -F'\t' '$1 == "demo-standard" && $3 != "oracle" && $7 != "-" { s[$3] += $7; n[$3]++ }
    END { b = "quest"; for (k in s) if (s[k] / n[k] > best) { best = s[k] / n[k]; b = k }; print b }' docs/results/scorers.tsv
}
SCORER="${TASKS_SCORER:-$(best_scorer)}"
case "$SCORER" in mean|quest|reps|oracle) ;; *) die "TASKS_SCORER must be mean, quest, reps or oracle, got '$SCORER'" ;; esac
if [ ! -s "$HAYSTACK" ]; then
  [ "$HAYSTACK" = data/corpus/train.txt ] || die "TASKS_HAYSTACK $HAYSTACK is missing"
  echo "=== the corpus: scripts/get-corpus.sh (Austen + KJV from Debian packages) ==="
  LANDMARK="$LANDMARK" bash scripts/get-corpus.sh || die "no corpus: set TASKS_HAYSTACK to a text file, e.g. tests/data/persuasion_opening.txt"
fi
STAGES=("$@")
[ ${#STAGES[@]} -gt 0 ] || STAGES=(data pretrain models rows tables)
for s in "${STAGES[@]}"; do
  case "$s" in data|pretrain|models|rows|tables) ;; *) die "unknown stage '$s' (data, pretrain, models, rows, tables)" ;; esac
done
cores=$(nproc 2>/dev/null || echo 1)
THREADS="${OMP_NUM_THREADS:-$cores}"
positive OMP_NUM_THREADS "$THREADS"
PAR=1  # two jobs side by side, one thread each, when there are two threads or more
[ "$THREADS" -ge 2 ] || PAR=0
DATA="$OUT/data" LOGS="$OUT/logs" ROWS="$OUT/rows" HEAT="$OUT/heat"
mkdir -p "$DATA" "$LOGS" "$ROWS" "$HEAT"
echo "long-tasks: seed $SEED, lengths $LENGTHS, depths $DEPTHS, k $KS, $PROMPTS prompts per cell, scorer $SCORER," \
  "haystack $HAYSTACK, logs in $LOGS"

stage_data() {
  local kind mix docs
  for kind in short long; do
    [ -s "$DATA/$kind/tokens/train.tokens" ] && continue
    if [ "$kind" = short ]; then mix="all@48-$((PRE_WINDOW - 8))" docs=$PRE_DOCS; else mix="all@128-500" docs=$LONG_DOCS; fi
    "$LANDMARK" tasks-data --out "$DATA/$kind" --haystack "$HAYSTACK" --mix "$mix" --docs "$docs" --prompts 0 \
      --seed "$SEED" > "$LOGS/data_$kind.log"
    "$LANDMARK" prepare --train "$DATA/$kind/train.txt" --val "$DATA/$kind/val.txt" --out "$DATA/$kind/tokens" \
      --tokenizer bytes >> "$LOGS/data_$kind.log" 2>&1
  done
  [ -s "$DATA/prompts/prompts.tsv" ] && return 0
  "$LANDMARK" tasks-data --out "$DATA/prompts" --haystack "$HAYSTACK" --task all --length "$LENGTHS" \
    --depth "$DEPTHS" --prompts "$PROMPTS" --docs 0 --seed "$SEED" > "$LOGS/data_prompts.log"
  echo "data: $(tail -n +2 "$DATA/prompts/prompts.tsv" | wc -l) prompts in $DATA/prompts/prompts.tsv"
}

train_once() {  # NAME THREADS FLAGS...: one training, skipped when it finished before
  local name=$1 threads=$2
  shift 2
  [ -e "$OUT/$name/.done" ] && { echo "$name: done before"; return 0; }
  rm -rf "${OUT:?}/$name"
  echo "$name: training ($*; log $LOGS/$name.log)"
  OMP_NUM_THREADS=$threads "$LANDMARK" train --out "$OUT/$name" "${MODEL[@]}" --seed "$SEED" --eval-every 0 \
    --log-every 20 "$@" > "$LOGS/$name.log" 2>&1 || { tail -5 "$LOGS/$name.log" >&2; die "$name: training failed"; }
  touch "$OUT/$name/.done"
}

stage_pretrain() {
  train_once pretrain "$THREADS" --data "$DATA/short/tokens" --block-size "$PRE_WINDOW" --batch 8 --lr 2e-3 \
    --steps "$PRE_STEPS"
}

stage_models() {
  [ -s "$OUT/pretrain/checkpoint.safetensors" ] || die "no pretrained model: run the pretrain stage"
  local common=(--data "$DATA/long/tokens" --init-from "$OUT/pretrain/checkpoint.safetensors" --block-size 512
                --batch 8 --lr 1e-3 --doc-starts --steps "$STEPS")
  if [ "$PAR" = 1 ]; then
    train_once landmark 1 "${common[@]}" --attention landmark --landmark-every 50 & local a=$!
    train_once standard 1 "${common[@]}" & local b=$!
    wait $a || die "the landmark model's training failed"
    wait $b || die "the standard model's training failed"
  else
    train_once landmark "$THREADS" "${common[@]}" --attention landmark --landmark-every 50
    train_once standard "$THREADS" "${common[@]}"
  fi
}

chunk_for() {  # K: the largest chunk keeping (k + 1)(F + 1) + chunk + 10 under the 512-token window
  local c=$((512 - ($1 + 1) * 51 - 10))
  [ "$c" -le 200 ] || c=200
  echo "$c"
}

row() {  # NAME THREADS CHECKPOINT FLAGS...: one row, skipped when its cells are there
  local name=$1 threads=$2 ckpt=$3
  shift 3
  [ -s "$ROWS/$name.cells.tsv" ] && return 0
  echo "row $name: tasks-eval $*"
  local t0=$SECONDS
  OMP_NUM_THREADS=$threads "$LANDMARK" tasks-eval --checkpoint "$ckpt" --prompts "$DATA/prompts/prompts.tsv" \
    --label "$name" --answers "$ROWS/$name.answers.tsv" --cells "$ROWS/$name.tmp" --heatmaps "$HEAT/${name}_" "$@" \
    > "$LOGS/row_$name.log" 2>&1 || { tail -5 "$LOGS/row_$name.log" >&2; die "row $name failed (log $LOGS/row_$name.log)"; }
  echo "row $name: $((SECONDS - t0)) s"
  mv "$ROWS/$name.tmp" "$ROWS/$name.cells.tsv"
}

row_names() {  # every row as "NAME CHECKPOINT-KIND FLAGS...", the slowest first (k 8's small chunk)
  local k
  for k in $(tr ',' '\n' <<< "$KS" | sort -rn); do echo "landmark-k$k landmark --k $k --chunk $(chunk_for "$k")"; done
  echo "standard-$SCORER-k4 standard --k 4 --chunk 200 --scorer $SCORER"
  echo "standard-window standard"
}

stage_rows() {
  for m in landmark standard; do
    [ -e "$OUT/$m/.done" ] || die "no $m model: run the models stage"
  done
  local name kind flags running=0 rows=() line
  mapfile -t rows < <(row_names)  # read first: the loop's waits are for the rows alone
  for line in "${rows[@]}"; do
    read -r name kind flags <<< "$line"
    # shellcheck disable=SC2086  # the flags are words
    if [ "$PAR" = 1 ]; then  # two rows at a time; the next starts when either ends
      if [ "$running" -ge 2 ]; then wait -n || die "a row failed"; running=$((running - 1)); fi
      row "$name" 1 "$OUT/$kind/checkpoint.safetensors" $flags &
      running=$((running + 1))
    else
      row "$name" "$THREADS" "$OUT/$kind/checkpoint.safetensors" $flags
    fi
  done
  for ((; running > 0; running--)); do wait -n || die "a row failed"; done
}

# --- tables ---------------------------------------------------------------------------------------
# long_tasks.tsv: model task length depth_pct prompts score seed task_void (void: the standard model
# scored below 0.9 in its own window at the shortest length, over every depth: the task was not
# learned, so the row shows nothing about retrieval)
stage_tables() {
  local res="$DOCS/results" name tsv first task
  mkdir -p "$res/long_tasks"
  tsv="$res/long_tasks.tsv"
  first="${LENGTHS%%,*}"
  while read -r name _; do
    [ -s "$ROWS/$name.cells.tsv" ] || die "row $name is missing: run the rows stage"
  done < <(row_names)
  while read -r name _; do tail -n +2 "$ROWS/$name.cells.tsv"; done < <(row_names) |
    awk -F'\t' -v seed="$SEED" -v first="$first" 'BEGIN { OFS = "\t" }
      { line[NR] = $0; task[NR] = $2
        if ($1 == "standard-window" && $3 == first) { s[$2] += $6; n[$2]++ } }
      END { print "model", "task", "length", "depth_pct", "prompts", "score", "seed", "task_void"
            for (i = 1; i <= NR; ++i) print line[i], seed, (n[task[i]] && s[task[i]] / n[task[i]] >= 0.9) ? "no" : "yes" }' \
    > "$tsv.tmp"
  mv "$tsv.tmp" "$tsv"
  echo "wrote $tsv"
  by_length "$tsv" "" > "$OUT/mean_by_length.tsv"
  "$LANDMARK" plot-table "$OUT/mean_by_length.tsv" --out "$res/long_tasks.png" --log-x --y-range 0,1 \
    --x-label "prompt length (tokens)" --y-label "mean score (all tasks and depths)" \
    --title "long-context tasks: score against length per model (seed $SEED)" > /dev/null
  echo "wrote $res/long_tasks.png"
  for task in $(tail -n +2 "$tsv" | cut -f2 | awk '!seen[$0]++'); do
    by_length "$tsv" "$task" > "$OUT/by_length_$task.tsv"
    "$LANDMARK" plot-table "$OUT/by_length_$task.tsv" --out "$res/long_tasks/$task.png" --log-x --y-range 0,1 \
      --x-label "prompt length (tokens)" --y-label "score (mean over depths)" --title "$task by model (seed $SEED)" \
      > /dev/null
    cp "$HEAT"/*_"$task".png "$res/long_tasks/"
  done
  echo "wrote $res/long_tasks/ (a chart per task, a heat map per task and model)"
  write_md "$tsv" > "$res/long_tasks.md.tmp"
  mv "$res/long_tasks.md.tmp" "$res/long_tasks.md"
  echo "wrote $res/long_tasks.md"
}

# long_tasks.md from long_tasks.tsv: per task, whether the landmark model solves it at the longest
# length (mean score >= 0.8 over depths at its best k), the scores per k there, and per task a
# table of every row's mean score by length; the pictures. Computed from the rows, nothing typed.
write_md() {
  local tsv="$1" cpu last="${LENGTHS##*,}"
  cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
  echo "# Long-context tasks: where retrieval by landmarks works and where it fails"
  echo
  awk -F'\t' -v last="$last" 'NR > 1 { key = $2 SUBSEP $1; if (!($2 in ts)) { ts[$2] = 1; tasks[++nt] = $2 }
      void[$2] = $8; if ($3 == last) { s[key] += $6; n[key]++ } }
    END {
      for (i = 1; i <= nt; ++i) { t = tasks[i]; best = -1; ks = ""
        for (k = 1; k <= 9; ++k) { if (!((t, "landmark-k" k) in n)) continue
          v = s[t, "landmark-k" k] / n[t, "landmark-k" k]; ks = ks sprintf("%sk %d %.2f", ks == "" ? "" : ", ", k, v)
          if (v > best) best = v }
        w = (n[t, "standard-window"]) ? s[t, "standard-window"] / n[t, "standard-window"] : -1
        if (void[t] == "yes") { voids = voids " " t; continue }
        line = sprintf("%s (%s; standard in its window %.2f)", t, ks, w)
        if (best >= 0.8) solved = solved "; " line; else failed = failed "; " line }
      printf "**The answer, at %d tokens.** Landmark retrieval solves (mean score >= 0.8 over depths at its best k): %s. ", last, solved == "" ? "none" : substr(solved, 3)
      printf "It does not solve: %s. ", failed == "" ? "none" : substr(failed, 3)
      printf "Void (the standard model did not learn the task in its own window, so nothing is shown about retrieval): %s.\n", voids == "" ? "none" : substr(voids, 2) }' "$tsv"
  echo
  echo "Measured by \`make long-tasks\` (scripts/long_tasks.sh) on $(date -u +%Y-%m-%d), ${cpu:-unknown CPU}, $THREADS"
  echo "thread(s); seed $SEED; $PROMPTS prompts per (task, length, depth) cell; lengths $LENGTHS; depths $DEPTHS;"
  echo "the standard model's scorer $SCORER. Tasks and scoring: [tasks.md](../tasks.md). Every cell: [long_tasks.tsv](long_tasks.tsv)."
  echo
  echo "![mean score against length per row](long_tasks.png)"
  for task in $(tail -n +2 "$tsv" | cut -f2 | awk '!seen[$0]++'); do
    echo
    echo "## $task"
    echo
    awk -F'\t' -v want="$task" 'NR > 1 && $2 == want {
        if (!($1 in rs)) { rs[$1] = 1; rows[++nr] = $1 }; if (!($3 in ls)) { ls[$3] = 1; lens[++nl] = $3 }
        s[$1, $3] += $6; n[$1, $3]++; void = $8 }
      END { printf "Mean score over depths%s.\n\n| row |", (void == "yes") ? " (void: not learned in the window)" : ""
            for (l = 1; l <= nl; ++l) printf " %s |", lens[l]; printf "\n| --- |"
            for (l = 1; l <= nl; ++l) printf " ---: |"; printf "\n"
            for (r = 1; r <= nr; ++r) { printf "| %s |", rows[r]
              for (l = 1; l <= nl; ++l) printf " %.2f |", s[rows[r], lens[l]] / n[rows[r], lens[l]]; printf "\n" } }' "$tsv"
    echo
    echo "![$task by row](long_tasks/$task.png)"
    while read -r name _; do echo "![$task, $name](long_tasks/${name}_$task.png)"; done < <(row_names)
  done
}

by_length() {  # TSV TASK: length, then one column per model: the mean score (TASK empty: every task)
  awk -F'\t' -v want="$2" 'NR > 1 && (want == "" || $2 == want) {
      if (!($1 in seen)) { seen[$1] = 1; cols[++nc] = $1 }
      if (!($3 in ls)) { ls[$3] = 1; lens[++nl] = $3 }
      s[$3, $1] += $6; n[$3, $1]++ }
    END { printf "length"; for (c = 1; c <= nc; ++c) printf "\t%s", cols[c]; printf "\n"
          for (l = 1; l <= nl; ++l) { printf "%s", lens[l]
            for (c = 1; c <= nc; ++c) printf "\t%.4f", s[lens[l], cols[c]] / n[lens[l], cols[c]]
            printf "\n" } }' "$1"
}

T0=$SECONDS
for s in "${STAGES[@]}"; do
  t0=$SECONDS
  "stage_$s"
  echo "stage $s: $((SECONDS - t0)) s" | tee -a "$LOGS/times.log"
done
echo "long-tasks: done in $((SECONDS - T0)) s (seed $SEED); stage times in $LOGS/times.log"
