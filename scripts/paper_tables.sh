#!/usr/bin/env bash
# paper_tables.sh: `make paper-tables`, the paper's language-modelling results (Tables 1-3,
# Appendices C and E) at the scale of two CPU cores, on the Austen + King James Bible corpus
# (scripts/get-corpus.sh; Persuasion held out and evaluated).
#
# Three stages, each resumable; run the script again and it goes on where it stopped:
#   train   five models, the same data, model size, seed and number of training tokens:
#           standard (window 512), landmark (F 50, window 512), landmark-cmt (+ context-miss
#           token), landmark-jump (+ positional jumps, p_jump 100) and xl (Transformer-XL: window
#           256, an XL cache of 256, BATCH segments of 512 a step: the same tokens and as many
#           independent passages per step as the others). A finished run leaves DONE in its
#           directory and is skipped; an interrupted one resumes from its last checkpoint.
#   eval    every row of the tables: one `landmark eval --tsv` per row into $OUT/eval/NAME.tsv
#           (written through a temporary file; a row that is there is skipped).
#   tables  docs/results.md and docs/results/table1.tsv from those rows (nothing typed by hand),
#           and Appendix C's histogram.
# Usage: bash scripts/paper_tables.sh [train] [eval] [tables]     (default: all three)
# Environment:
#   PAPER_QUICK=1   a small version (a tiny model, 24 steps, 2 windows per row) that exercises
#                   every stage in a few minutes; it writes to runs/paper_quick, never to docs/.
#   PAPER_DATA      a token directory made by `landmark prepare` (default data/tokens, built here
#                   from the corpus when missing)
#   PAPER_OUT       where runs, rows and (quick) tables go (default runs/paper or runs/paper_quick)
#   PAPER_DOCS      where results.md and results/ go (default docs, or $PAPER_OUT/docs when quick)
#   PAPER_STEPS     training steps (default 600: 2.5M tokens per model, the setting that fits two
#                   hours on two cores; docs/results.md says which it shows; quick: 24); a run
#                   left unfinished resumes up to this number; a finished run of another number
#                   stops the script with an error (move $PAPER_OUT away to train anew)
#   LANDMARK        the program (default build/apps/landmark)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
LANDMARK="${LANDMARK:-build/apps/landmark}"
QUICK="${PAPER_QUICK:-0}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
die() { echo "paper-tables: $*" >&2; exit 1; }
[ -x "$LANDMARK" ] || die "$LANDMARK is missing; run 'make' first (or set LANDMARK=...)"
case "$QUICK" in 0|1) ;; *) die "PAPER_QUICK must be 0 or 1, got '$QUICK'" ;; esac

if [ "$QUICK" = 1 ]; then
  OUT="${PAPER_OUT:-runs/paper_quick}"
  DOCS="${PAPER_DOCS:-$OUT/docs}"
  # A model small enough to train 24 steps of every kind in seconds; windows as in the full run.
  MODEL=(--layers 2 --embd 64 --heads 2)
  BATCH=4        # windows (XL: segments) of 512 per step
  STEPS="${PAPER_STEPS:-24}"
  EVAL_EVERY=12
  WINDOWS=(--windows 2)
  RESAMPLES=200
else
  OUT="${PAPER_OUT:-runs/paper}"
  DOCS="${PAPER_DOCS:-docs}"
  # The project's `tiny` GPT: 4 layers, d 256, 4 heads, trained at 512 tokens, 8 windows a step.
  MODEL=(--layers 4 --embd 256 --heads 4)
  BATCH=8
  DEFAULT_STEPS=600
  STEPS="${PAPER_STEPS:-$DEFAULT_STEPS}"   # 600 x 8 x 512 = 2.5M training tokens per model (1.1 epochs)
  EVAL_EVERY=100
  WINDOWS=()
  RESAMPLES=2000
fi
DATA="${PAPER_DATA:-data/tokens}"
TRAIN_COMMON=(--data "$DATA" --steps "$STEPS" --lr 2e-3 --seed 1 --eval-every "$EVAL_EVERY" --eval-batches 8
              --ckpt-every 50 --log-every 30)
LM=(--attention landmark --landmark-every 50)
RUNS=(standard landmark landmark-cmt landmark-jump xl)

run_flags() {  # the model and data flags of run $1 (the same number of training tokens per step)
  case "$1" in
    standard) echo "${MODEL[*]} --block-size 512 --batch $BATCH --attention standard" ;;
    landmark) echo "${MODEL[*]} --block-size 512 --batch $BATCH ${LM[*]}" ;;
    landmark-cmt) echo "${MODEL[*]} --block-size 512 --batch $BATCH ${LM[*]} --cmt" ;;
    landmark-jump) echo "${MODEL[*]} --block-size 512 --batch $BATCH ${LM[*]} --jump 100" ;;
    # Window 256 with an XL cache of 256 (effective context 512). Fair means: the same tokens per
    # step and the same number of independent passages per step as the others, so BATCH segments of
    # 512 (two windows each). With BATCH / 4 segments of 2048 (the same tokens, a quarter of the
    # passages) XL scored 22% worse at 600 steps: docs/results/training.md, scripts/exp_xl_passages.sh.
    xl) echo "${MODEL[*]} --block-size 256 --xl-cache 256 --segment 512 --batch $BATCH --attention standard" ;;
  esac
}

# ---- data --------------------------------------------------------------------------------------
data() {
  if [ -s "$DATA/train.tokens" ] && [ -s "$DATA/val.tokens" ]; then return; fi
  [ -z "${PAPER_DATA:-}" ] || die "PAPER_DATA=$DATA has no train.tokens and val.tokens"
  LANDMARK="$LANDMARK" bash scripts/get-tokens.sh "$DATA"
}

# ---- stage 1: the five trainings ------------------------------------------------------------------
train_one() {  # $1: the run's name, $2: its place in the list
  local name="$1" dir="$OUT/train/$1"
  if [ -f "$dir/DONE" ]; then echo "--- train $name ($2/${#RUNS[@]}): done earlier"; return; fi
  local resume=()
  if [ -f "$dir/checkpoint.safetensors" ]; then
    if grep -q "\"step\":$STEPS[,}]" "$dir/metrics.jsonl" 2>/dev/null; then  # finished, DONE not yet written
      echo "--- train $name ($2/${#RUNS[@]}): finished earlier at step $STEPS"
      date -u +%FT%TZ > "$dir/DONE"
      return
    fi
    resume=(--resume "$dir/checkpoint.safetensors")
  fi
  echo "--- train $name ($2/${#RUNS[@]}): $STEPS steps ${resume[*]:+(resuming)}"
  mkdir -p "$dir"
  # shellcheck disable=SC2046  # run_flags prints words meant to split
  "$LANDMARK" train $(run_flags "$name") "${TRAIN_COMMON[@]}" --out "$dir" "${resume[@]}"
  local last
  last=$(tail -n 1 "$dir/metrics.jsonl" | sed -n 's/.*"step":\([0-9]*\).*/\1/p')
  grep -q "\"step\":$STEPS[,}]" "$dir/metrics.jsonl" ||
    die "train $name stopped before step $STEPS (last metrics line: step ${last:-none}); run the script again to resume"
  date -u +%FT%TZ > "$dir/DONE"
}

check_finished_steps() {  # every finished run must have trained PAPER_STEPS steps, or the tables
  local name dir last                # would print one number of steps beside runs of another
  for name in "${RUNS[@]}"; do
    dir="$OUT/train/$name"
    [ -f "$dir/DONE" ] || continue
    last=$(sed -n 's/.*"step":\([0-9]*\).*/\1/p' "$dir/metrics.jsonl" 2>/dev/null | sort -n | tail -n 1)
    [ "${last:-none}" = "$STEPS" ] ||
      die "$dir finished at step ${last:-none}, but the steps asked for are $STEPS: set PAPER_STEPS=${last:-...} to use those runs, or move $OUT away (or set PAPER_OUT) to train anew"
  done
}

stage_train() {
  local i=0 start=$SECONDS
  for name in "${RUNS[@]}"; do
    i=$((i + 1))
    train_one "$name" "$i"
    echo "    (stage train: $i of ${#RUNS[@]} runs done, $((SECONDS - start)) s in this call)"
  done
}

# ---- stage 2: the evaluations ---------------------------------------------------------------------
# One row per line: NAME MODEL PAPER_PPL EVAL-FLAGS... (PAPER_PPL: the paper's PG19 perplexity for
# that setting, '-' where the paper has none). Persuasion, every window of each length scored.
ROWS=(
  # Table 1, eval length 512: the standard model at 512 and at l_local 360; landmark 250 + 2 blocks.
  "t1_standard_512 standard 16.12 --length 512"
  "t1_standard_512_l360 standard 16.76 --length 512 --local 360"
  "t1_landmark_512_c250_b10_k2 landmark 16.23 --length 512 --chunk 250 --capacity 10 --k 2"
  # Eval length 2048: Transformer-XL, and the landmark model's five settings.
  "t1_xl_2048 xl 14.72 --length 2048"
  "t1_landmark_2048_c250_b40_k2 landmark 15.14 --length 2048 --chunk 250 --capacity 40 --k 2"
  "t1_landmark_2048_c350_b40_k2 landmark 15.07 --length 2048 --chunk 350 --capacity 40 --k 2"
  "t1_landmark_2048_c300_b40_k3 landmark 14.97 --length 2048 --chunk 300 --capacity 40 --k 3"
  "t1_landmark_2048_c250_b20_k4 landmark 15.02 --length 2048 --chunk 250 --capacity 20 --k 4"
  "t1_landmark_2048_c250_b40_k4 landmark 14.92 --length 2048 --chunk 250 --capacity 40 --k 4"
  "t1_landmark-cmt_2048_c250_b40_k4 landmark-cmt - --length 2048 --chunk 250 --capacity 40 --k 4"
  "t1_landmark-jump_2048_c250_b40_k4 landmark-jump - --length 2048 --chunk 250 --capacity 40 --k 4"
  # Eval length 4096.
  "t1_xl_4096 xl 14.55 --length 4096"
  "t1_landmark_4096_c250_b40_k4 landmark 14.79 --length 4096 --chunk 250 --capacity 40 --k 4"
  "t1_landmark_4096_c250_b80_k2 landmark 15.00 --length 4096 --chunk 250 --capacity 80 --k 2"
  "t1_landmark_4096_c250_b80_k4 landmark 14.72 --length 4096 --chunk 250 --capacity 80 --k 4"
  "t1_landmark-cmt_4096_c250_b40_k4 landmark-cmt - --length 4096 --chunk 250 --capacity 40 --k 4"
  "t1_landmark-jump_4096_c250_b40_k4 landmark-jump - --length 4096 --chunk 250 --capacity 40 --k 4"
  # Table 2: the three retrieval granularities (one eval runs all three), every block kept.
  "t2_2048_k2 landmark - --length 2048 --chunk 250 --k 2 --granularity all"
  "t2_2048_k4 landmark - --length 2048 --chunk 250 --k 4 --granularity all"
  "t2_4096_k4 landmark - --length 4096 --chunk 250 --k 4 --granularity all"
  # Table 3: the context-miss token's cutoff at 2048, k 4 (baseline: the landmark model, no CMT).
  "t3_baseline landmark 16.28 --length 2048 --chunk 250 --k 4"
  "t3_cutoff_0 landmark-cmt 16.38 --length 2048 --chunk 250 --k 4 --cmt-cutoff 0"
  "t3_cutoff_0.1 landmark-cmt 16.38 --length 2048 --chunk 250 --k 4 --cmt-cutoff 0.1"
  "t3_cutoff_0.2 landmark-cmt - --length 2048 --chunk 250 --k 4 --cmt-cutoff 0.2"
  "t3_cutoff_0.3 landmark-cmt 16.43 --length 2048 --chunk 250 --k 4 --cmt-cutoff 0.3"
  "t3_cutoff_0.5 landmark-cmt 16.86 --length 2048 --chunk 250 --k 4 --cmt-cutoff 0.5"
  "t3_cutoff_1 landmark-cmt 19.49 --length 2048 --chunk 250 --k 4 --cmt-cutoff 1"
  # Appendix E: positional jumps against plain training, exact positions and the stingy mapping.
  "e_landmark_2048_exact landmark - --length 2048 --chunk 250 --k 4 --positions exact"
  "e_landmark_4096_exact landmark - --length 4096 --chunk 250 --k 4 --positions exact"
  "e_landmark_4096_stingy landmark - --length 4096 --chunk 250 --k 4 --positions stingy"
  "e_landmark-jump_2048_exact landmark-jump - --length 2048 --chunk 250 --k 4 --positions exact"
  "e_landmark-jump_2048_stingy landmark-jump - --length 2048 --chunk 250 --k 4 --positions stingy"
  "e_landmark-jump_4096_exact landmark-jump - --length 4096 --chunk 250 --k 4 --positions exact"
  "e_landmark-jump_4096_stingy landmark-jump - --length 4096 --chunk 250 --k 4 --positions stingy"
  # Appendix C: unique blocks retrieved in the penultimate chunk, 4096 tokens, k 4.
  "c_hist landmark - --length 4096 --chunk 250 --k 4 --hist HIST"
  # A diagnostic, not in the paper: the same chunks with retrieval off (k 0), so the difference to
  # t3_baseline is what the retrieved blocks add.
  "d_landmark_2048_k0 landmark - --length 2048 --chunk 250 --k 0"
  # Another diagnostic: Table 1's target pair compared window for window (eval --paired-with). The
  # standard model at 512 again, its per-window sums written (WINTSV), then the landmark row at
  # 2048 paired with them: the ratio of the two perplexities on the same tokens and its interval.
  "p_standard_512 standard - --length 512 --windows-tsv WINTSV"
  "p_landmark_2048_c250_b40_k4 landmark - --length 2048 --chunk 250 --capacity 40 --k 4 --paired-with PAIRED"
)
# (Appendix E's landmark row at 2048 with stingy positions is t3_baseline: the same evaluation.)

eval_one() {  # $1: a ROWS entry, $2: its place, $3: the count
  local name model paper flags
  read -r name model paper flags <<< "$1"
  local tsv="$OUT/eval/$name.tsv"
  if [ -s "$tsv" ]; then echo "--- eval $name ($2/$3): done earlier"; return; fi
  local ckpt="$OUT/train/$model/checkpoint.safetensors"
  [ -f "$OUT/train/$model/DONE" ] || die "eval $name needs the finished run $model ($OUT/train/$model/DONE); run the train stage"
  flags="${flags//HIST/$OUT/eval/appendix_c_hist.png}"
  flags="${flags//WINTSV/$OUT/eval/$name.windows.tsv}"
  flags="${flags//PAIRED/$OUT/eval/p_standard_512.windows.tsv}"
  # The standard side of the pairing needs four windows of 512 for each landmark window of 2048.
  local win=("${WINDOWS[@]}")
  [ "$name" = p_standard_512 ] && [ ${#win[@]} -eq 2 ] && win=(--windows $((win[1] * 4)))
  echo "--- eval $name ($2/$3): $model $flags"
  # shellcheck disable=SC2086  # flags are words
  "$LANDMARK" eval --checkpoint "$ckpt" --tokens "$DATA/val.tokens" $flags "${win[@]}" --label "$model" \
    --bootstrap "$RESAMPLES" --tsv "$tsv.tmp" > "$OUT/eval/$name.txt.tmp"
  mv "$OUT/eval/$name.txt.tmp" "$OUT/eval/$name.txt"
  mv "$tsv.tmp" "$tsv"
  grep -i "perplexity" "$OUT/eval/$name.txt" | tail -n 3 | sed 's/^/    /'
}

stage_eval() {
  mkdir -p "$OUT/eval"
  { lscpu | grep -m1 'Model name' | sed 's/  */ /g'; echo "threads: ${OMP_NUM_THREADS:-$(nproc)}"; } > "$OUT/eval/machine.txt" || true
  local i=0 start=$SECONDS n=${#ROWS[@]}
  for row in "${ROWS[@]}"; do
    i=$((i + 1))
    eval_one "$row" "$i" "$n"
    local spent=$((SECONDS - start))
    echo "    (stage eval: $i of $n rows, $spent s in this call, about $(( spent * (n - i) / i )) s to go)"
  done
}

# ---- stage 3: the tables -----------------------------------------------------------------------------
get() {  # get COLUMN FILE [ROW]: a column of a row (default the first) of a TSV written by eval --tsv
  awk -F'\t' -v c="$1" -v r="${3:-1}" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i; next }
    NR == r + 1 { if (!k) exit 1; print $k; found = 1 } END { if (!found) exit 1 }' "$2" ||
    die "no column '$1' in row ${3:-1} of $2"
}
ppl_ci() {  # "ppl [low, high]" of row $2 (default 1) of eval row file $1
  echo "$(get ppl "$1" "${2:-1}") [$(get ci_low "$1" "${2:-1}"), $(get ci_high "$1" "${2:-1}")]"
}
last_val() {  # the last validation loss in a metrics.jsonl
  grep -o '"val_loss":[-0-9.e+]*' "$1" | tail -n 1 | cut -d: -f2
}
train_seconds() {  # a run's training time from its metrics.jsonl: elapsed_s restarts at 0 when a
  # run resumes, so the time is the sum of each process's last elapsed_s
  grep -o '"elapsed_s":[-0-9.e+]*' "$1" | cut -d: -f2 |
    awk '{ if ($1 < prev) total += prev; prev = $1 } END { printf "%.0f", total + prev }'
}

stage_tables() {
  local e="$OUT/eval" missing=()
  for row in "${ROWS[@]}"; do
    local name=${row%% *}
    [ -s "$e/$name.tsv" ] || missing+=("$name")
  done
  [ ${#missing[@]} -eq 0 ] || die "the tables need every evaluation; missing: ${missing[*]} (run the eval stage)"
  mkdir -p "$DOCS/results"
  # table1.tsv: the Table 1 rows, the first eleven columns of eval --tsv.
  {
    head -n 1 "$e/t1_standard_512.tsv" | cut -f1-11
    for row in "${ROWS[@]}"; do
      local name=${row%% *}
      case "$name" in t1_*) tail -n +2 "$e/$name.tsv" | cut -f1-11 ;; esac
    done
  } > "$DOCS/results/table1.tsv.tmp"
  mv "$DOCS/results/table1.tsv.tmp" "$DOCS/results/table1.tsv"
  cp "$e/appendix_c_hist.png" "$DOCS/results/appendix_c_hist.png.tmp"
  mv "$DOCS/results/appendix_c_hist.png.tmp" "$DOCS/results/appendix_c_hist.png"

  local md="$DOCS/results.md.tmp" train_s=0 eval_s=0
  for name in "${RUNS[@]}"; do
    local t
    t=$(train_seconds "$OUT/train/$name/metrics.jsonl")
    train_s=$(awk -v a="$train_s" -v b="${t:-0}" 'BEGIN { printf "%.0f", a + b }')
  done
  for row in "${ROWS[@]}"; do
    local name=${row%% *} n r
    n=$(($(wc -l < "$e/$name.tsv") - 1))
    for r in $(seq 1 "$n"); do eval_s=$(awk -v a="$eval_s" -v b="$(get seconds "$e/$name.tsv" "$r")" 'BEGIN { printf "%.0f", a + b }'); done
  done
  local cpu threads
  cpu=$(sed -n 's/^Model name: *//p' "$e/machine.txt" 2>/dev/null || true)
  threads=$(sed -n 's/^threads: *//p' "$e/machine.txt" 2>/dev/null || true)
  {
    echo "# Results: the paper's language-modelling tables at two-core scale"
    echo
    if [ "$QUICK" = 1 ]; then
      echo "**PAPER_QUICK=1: a smoke test of the pipeline (a 2-layer model, $STEPS steps, ${WINDOWS[*]} per row). These numbers mean nothing.**"
      echo
    fi
    echo "Written by \`scripts/paper_tables.sh\` (\`make paper-tables\`) from the rows in \`$OUT/eval/\`; nothing here is typed in by hand"
    echo "except the discussion at the end. Machine: ${cpu:-unknown CPU}, ${threads:-?} threads. Training: $train_s s"
    echo "for the five runs; evaluation: $eval_s s for the ${#ROWS[@]} rows (wall times measured by the programs)."
    if [ "$QUICK" = 0 ] && [ "$STEPS" != "$DEFAULT_STEPS" ]; then
      echo "This run trained $STEPS steps per model (\`PAPER_STEPS=$STEPS make paper-tables\`); the default is $DEFAULT_STEPS."
    fi
    echo
    echo "Data: \`$DATA\` (train.tokens for training, val.tokens for every evaluation: Persuasion in the full run)."
    echo "Each perplexity is over every window of the given length in val.tokens, every position scored; the"
    echo "interval is a 95% percentile bootstrap over windows ($RESAMPLES resamples, \`bootstrap_perplexity_interval\`)."
    echo "\"Paper\" is the paper's PG19 number for the same setting (a far larger model and data set: compare"
    echo "the ordering of the rows, not the values)."
    echo
    echo "## The five training runs"
    echo
    echo "Common flags: \`${MODEL[*]} ${TRAIN_COMMON[*]}\`; every step reads $((BATCH * 512)) training tokens."
    echo "The comparison is fair in this sense: every run reads the same tokens in the same order of batches"
    echo "(seed 1), the same number of tokens per step and the same number of independent passages per step,"
    echo "$BATCH, for the same number of steps. Transformer-XL's passages are segments of 512 read as two windows"
    echo "of 256, the second with the first as its cache. (The paper trained XL on segments of 2048 with 4x the"
    echo "tokens per step for a quarter of the steps; at this scale a quarter of the passages per step cost XL"
    echo "22%: [results/training.md](results/training.md).)"
    echo
    echo "| run | flags | steps | tokens seen | final validation loss | validation perplexity | training time (s) |"
    echo "|---|---|---|---|---|---|---|"
    for name in "${RUNS[@]}"; do
      local m="$OUT/train/$name/metrics.jsonl" v
      v=$(last_val "$m")
      echo "| $name | \`$(run_flags "$name" | sed 's/--layers [0-9]* --embd [0-9]* --heads [0-9]* //')\` | $STEPS | $((STEPS * BATCH * 512)) | $v | $(awk -v v="$v" 'BEGIN { printf "%.3f", exp(v) }') | $(train_seconds "$m") |"
    done
    echo
    echo "(The validation loss here is the trainer's, on 8 random training-length windows of val.tokens;"
    echo "the tables below read every window.)"
    echo
    echo "## Table 1: perplexity on Persuasion"
    echo
    echo "| Eval. length | l_local | XL cache | Blocks | k | Attention size | Model | Perplexity [95% CI] | Paper (PG19) |"
    echo "|---|---|---|---|---|---|---|---|---|"
    for row in "${ROWS[@]}"; do
      local name model paper rest
      read -r name model paper rest <<< "$row"
      case "$name" in t1_*) ;; *) continue ;; esac
      local f="$e/$name.tsv"
      echo "| $(get eval_len "$f") | $(get l_local "$f") | $(get xl_cache "$f") | $(get blocks "$f") | $(get k "$f") | $(get attention_size "$f") | $model | $(ppl_ci "$f") | $paper |"
    done
    echo
    local a="$e/t1_landmark_2048_c250_b40_k4.tsv" b="$e/t1_standard_512.tsv"
    local verdict
    verdict=$(awk -v p="$(get ppl "$a")" -v hi="$(get ci_high "$a")" -v q="$(get ppl "$b")" -v lo="$(get ci_low "$b")" \
      'BEGIN { if (hi < lo) print "holds: the landmark interval lies wholly below the standard one";
               else if (p < q) print "does not hold: the landmark model is lower, but the intervals overlap";
               else print "does not hold: the landmark model is not lower" }')
    echo "**Target** (landmark at 2048 with k 4 below the standard model at 512, intervals apart): landmark"
    echo "$(ppl_ci "$a") against standard $(ppl_ci "$b"): $verdict."
    echo
    echo "## The paper's comparison: Transformer-XL against retrieval"
    echo
    echo "The paper's claim: landmark retrieval comes close to Transformer-XL while each token reads fewer"
    echo "tokens from memory. Per token, from Table 1's rows: the keys it attends to at most (its window, or"
    echo "its chunk and k retrieved blocks of F + 1), of those the ones from memory (XL: its cache; landmark:"
    echo "the k blocks), and the landmark keys it scores to choose them (at most the blocks kept)."
    echo
    echo "| Eval. length | Model | Keys attended | From memory | Landmark keys scored | Perplexity [95% CI] | Paper (PG19) |"
    echo "|---|---|---|---|---|---|---|"
    local row
    for row in t1_xl_2048 t1_landmark_2048_c250_b40_k4 t1_xl_4096 t1_landmark_4096_c250_b40_k4 t1_landmark_4096_c250_b80_k4; do
      local f="$e/$row.tsv" mem scored
      if [ "$(get model "$f")" = xl ]; then
        mem=$(get xl_cache "$f"); scored=-
      else
        mem=$(( $(get k "$f") * 51 )); scored="up to $(get blocks "$f")"
      fi
      local paper_row
      paper_row=$(printf '%s\n' "${ROWS[@]}" | awk -v n="$row" '$1 == n { print $3 }')
      echo "| $(get eval_len "$f") | $(get model "$f") | $(get attention_size "$f") | $mem | $scored | $(ppl_ci "$f") | $paper_row |"
    done
    echo
    local xl="$e/t1_xl_2048.tsv" s512="$e/t1_standard_512.tsv"
    echo "Transformer-XL at 2048 against the standard model at 512: $(ppl_ci "$xl") against $(ppl_ci "$s512"),"
    echo "$(awk -v a="$(get ppl "$xl")" -v b="$(get ppl "$s512")" 'BEGIN { printf "a ratio of %.3f", a / b }')"
    echo "(the paper: 14.72 against 16.12, 0.913)."
    echo
    echo "## Table 2: retrieval granularity (landmark model, l_local 250, every block kept)"
    echo
    echo "| Per head | Per token | Eval. length | k | Blocks per chunk and layer | Unique blocks per token | Perplexity [95% CI] | Paper (PG19) |"
    echo "|---|---|---|---|---|---|---|---|"
    local -A paper2=([token-head_2048_2]=15.14 [token-head_2048_4]=14.92 [token-head_4096_4]=14.72
                     [head_2048_2]=15.48 [head_2048_4]=15.10 [head_4096_4]=14.95
                     [token_2048_2]=15.44 [token_2048_4]=15.04 [token_4096_4]=14.89)
    for g in token-head head token; do
      for t in t2_2048_k2 t2_2048_k4 t2_4096_k4; do
        local f="$e/$t.tsv" r=0 i
        for i in 1 2 3; do [ "$(get granularity "$f" $i)" = "$g" ] && r=$i; done
        [ "$r" -gt 0 ] || die "$f has no $g row"
        local ph=yes pt=yes
        [ "$g" = token ] && ph=no
        [ "$g" = head ] && pt=no
        local len k
        len=$(get eval_len "$f" $r); k=$(get k "$f" $r)
        echo "| $ph | $pt | $len | $k | $(get blocks_per_step "$f" $r) | $(get unique_per_token "$f" $r) | $(ppl_ci "$f" $r) | ${paper2[${g}_${len}_${k}]} |"
      done
    done
    echo
    echo "## Table 3: the context-miss token's cutoff (eval length 2048, k 4, l_local 250)"
    echo
    echo "| Cutoff | Model | Perplexity [95% CI] | Drop rate | Paper (PG19): perplexity, drop rate |"
    echo "|---|---|---|---|---|"
    local -A drop3=([t3_baseline]="0%" [t3_cutoff_0]="0%" [t3_cutoff_0.1]="23%" [t3_cutoff_0.3]="57%" [t3_cutoff_0.5]="84%" [t3_cutoff_1]="100%")
    for row in "${ROWS[@]}"; do
      local name model paper rest
      read -r name model paper rest <<< "$row"
      case "$name" in t3_*) ;; *) continue ;; esac
      local f="$e/$name.tsv" cut drop
      cut=$(get cmt_cutoff "$f"); drop=$(get drop_rate "$f")
      [ "$name" = t3_baseline ] && cut="baseline (no CMT)"
      [ "$drop" = - ] || drop=$(awk -v d="$drop" 'BEGIN { printf "%.1f%%", 100 * d }')
      local pp="-"
      [ "$paper" = - ] || pp="$paper, ${drop3[$name]}"
      echo "| $cut | $model | $(ppl_ci "$f") | $drop | $pp |"
    done
    echo
    echo "## Appendix E: positional jumps (k 4, l_local 250, every block kept)"
    echo
    echo "| Model | Eval. length | Positions | Perplexity [95% CI] |"
    echo "|---|---|---|---|"
    for name in t3_baseline e_landmark_2048_exact e_landmark_4096_stingy e_landmark_4096_exact \
                e_landmark-jump_2048_stingy e_landmark-jump_2048_exact e_landmark-jump_4096_stingy e_landmark-jump_4096_exact; do
      local f="$e/$name.tsv"
      echo "| $(get model "$f") | $(get eval_len "$f") | $(get positions "$f") | $(ppl_ci "$f") |"
    done
    echo
    echo "## Appendix C: how many distinct blocks a chunk retrieves"
    echo
    echo "$(grep -m1 '^unique blocks retrieved' "$e/c_hist.txt" || echo 'no histogram line') (landmark model, eval length 4096,"
    echo "k 4, l_local 250; one count per window and layer)."
    local by_layer
    by_layer=$(grep -m1 '^  by layer:' "$e/c_hist.txt" | sed 's/^  by layer: *//' || true)  # older outputs have none
    [ -z "$by_layer" ] || { echo; echo "The mean of those counts for each layer: $by_layer."; }
    echo
    echo "![unique retrieved blocks](results/appendix_c_hist.png)"
    echo
    echo "## What retrieval adds (a diagnostic, not in the paper)"
    echo
    echo "The landmark model at eval length 2048, l_local 250, every block kept: with k 4 (as Table 3's baseline)"
    echo "$(ppl_ci "$e/t3_baseline.tsv"); with retrieval off (k 0: each chunk sees only itself)"
    echo "$(ppl_ci "$e/d_landmark_2048_k0.tsv")."
    echo
    echo "## Table 1's target pair, window for window (a diagnostic, not in the paper)"
    echo
    local pl pr
    pl=$(grep -m1 '^paired ratio=' "$e/p_landmark_2048_c250_b40_k4.txt") || die "no 'paired ratio=' line in $e/p_landmark_2048_c250_b40_k4.txt"
    pr=$(awk '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
                printf "landmark %s against standard %s on the same %d tokens (%d windows of %d): ratio %s, 95%% paired interval [%s, %s]",
                v["ppl"], v["ppl_other"], v["spans"] * v["span_length"], v["spans"], v["span_length"], v["ratio"], v["ci_low"], v["ci_high"];
                if (v["ci_high"] < 1) printf " (wholly below 1)"; else if (v["ci_low"] > 1) printf " (wholly above 1)"; else printf " (it contains 1)" }' <<< "$pl")
    echo "The two models of the target read the same passages, so much of the width of their intervals is the"
    echo "passages' own difficulty, shared by both. Paired (each 2048-token window of the landmark model against"
    echo "the four 512-token windows of the standard model over the same tokens, resampled together:"
    echo "\`eval --paired-with\`, \`paired_bootstrap_ratio\`): $pr."
    echo "This is not the target's test (separate intervals), and it speaks of Persuasion only."
    echo
    echo "## The commands"
    echo
    echo "Every run: \`landmark train <flags of the runs table> ${TRAIN_COMMON[*]} --out $OUT/train/<run>\`."
    echo "Every row: \`landmark eval --checkpoint $OUT/train/<model>/checkpoint.safetensors --tokens $DATA/val.tokens"
    echo "<flags> ${WINDOWS[*]} --label <model> --bootstrap $RESAMPLES --tsv $OUT/eval/<row>.tsv\`, with these flags:"
    echo
    echo "| row | model | flags | seconds |"
    echo "|---|---|---|---|"
    for row in "${ROWS[@]}"; do
      local name model paper flags secs=0 n r
      read -r name model paper flags <<< "$row"
      n=$(($(wc -l < "$e/$name.tsv") - 1))
      for r in $(seq 1 "$n"); do secs=$(awk -v a="$secs" -v b="$(get seconds "$e/$name.tsv" "$r")" 'BEGIN { printf "%.0f", a + b }'); done
      flags="${flags//HIST/<png>}"; flags="${flags//WINTSV/<row>.windows.tsv}"
      echo "| $name | $model | \`${flags//PAIRED/p_standard_512.windows.tsv}\` | $secs |"
    done
    echo
    if [ "$QUICK" = 0 ] && [ -s "$DOCS/results/discussion.md" ]; then
      cat "$DOCS/results/discussion.md"
    fi
  } > "$md"
  mv "$md" "$DOCS/results.md"
  echo "wrote $DOCS/results.md and $DOCS/results/table1.tsv"
}

main() {
  local stage=("$@") s
  [ ${#stage[@]} -eq 0 ] && stage=(train eval tables)
  for s in "${stage[@]}"; do
    case "$s" in train|eval|tables) ;; *) die "unknown stage '$s' (train, eval or tables)" ;; esac
  done
  data
  check_finished_steps
  for s in "${stage[@]}"; do "stage_$s"; done
}
# One line that calls main and exits: bash has then read the whole script, so editing the file
# while a long run is going cannot change what that run executes.
main "$@"; exit $?
