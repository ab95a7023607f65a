#!/usr/bin/env bash
# sparse_study.sh: `make sparse-study`, beyond the paper: does training with the
# cache (`train --train-top-k K`: each query attends to the tokens of only its K best-scored
# earlier landmark blocks) cost quality, and does the longer window the same compute buys help?
#
# Two lanes of trainings, each the same rows, run side by side on one thread each:
#   text   the corpus of `make paper-tables` (data/tokens, Austen + KJV, Persuasion held out):
#          a small landmark model (3 layers, d 128, 4 heads, F 50) trained from scratch
#   pk     pass-key documents written like `make demo`'s long ones but with the key up to
#          SPARSE_PK_FILLERS filler sentences (default 150, about 4,000 tokens) before each
#          question, in the demo's tokenizer (data/passkey/far150): the demo's own documents hold the
#          key within 18 fillers (~500 tokens) of its question, so a window past 512 would learn
#          no longer reach from them. `make demo`'s pretrained model (runs/demo/pretrain) is
#          continued with each row's recipe, as the demo continues it (lr 1e-3, --doc-starts).
# The rows (K 4, F 50; every row reads the same tokens per step, WINDOW x BATCH = 4096):
#   r1    dense at 512, batch 8 (today's recipe)
#   r2c   sparse K 4 at 512, --train-top-k-gates chosen      r2a   the same, gates all
#   r3a   sparse K 4 at 2048, batch 2                          r3b   at 4096, batch 1
#   r4    dense warm-up at 512 for half the steps (r4w), then sparse K 4 at 2048 for the other half
#         (--init-from r4w)
#   r5    dense at 2048, batch 2
# Equal compute: rows r1-r4 read the same tokens (STEPS x 4096: "tokens" in the budget column);
# r5 gets the wall time r1 took (--time-limit, at most r1's steps: "time", so it reads fewer
# tokens). Rows r3 at K 4 cost about what r1 does per token (a query reads ~T/F landmarks and
# (K+1) blocks of F+1 keys), so equal tokens is about equal compute there; the table gives each
# run's seconds and tokens/s so the reader can check.
# Seeds: every run uses seed 1, and the pk lane also trains r1, r3a and r3b with seeds 2..SEEDS
# (3 seeds in all); those seeds change the continuation's data order, not the shared pretraining
# (the demo's plateau lives in its pretraining: docs/demo.md section 5).
# Measured for each row: perplexity on Persuasion at 512, 2048 and 4096 tokens (landmark
# retrieval: chunk 250, k 4), each paired with r1 on the same windows (eval --windows-tsv /
# --paired-with: the ratio and its paired 95% interval, as `make scorers`); the pass key at 512,
# 2048, 8192 and 32768 tokens (chunk 200, k 4, the demo's reading) with stingy positions (the
# default) and, for seed 1, with exact positions (--positions exact); training tokens/s (tokens
# read over the training's seconds in metrics.jsonl).
#
# Budget (full run, 2 cores): about 75 minutes, the data and `make demo` aside. How it was made:
# a probe on the development machine (2 cores shared with another engineer's build), 6 steps of
# the 3-layer d 128 model, one thread, byte-level text: 7,300 tokens/s dense at 512 (batch 8),
# 3,900 sparse K 4 at 2048 (batch 2), 3,600 sparse K 4 at 4096 (batch 1), 3,300 dense at 2048.
# (So at this scale a sparse token at 2048 costs ~1.9x a dense one at 512: rows r3 read the same
# tokens but take longer; the table gives each run's seconds.) The text lane's vocabulary of 4096
# adds an output layer about as costly as the layers: ~4,400 / 2,900 / 2,800 / 2,600 tokens/s.
# With 300 steps of 4096 tokens (1.2M) a run: text worker ~41 min (r1 5 min, r2 x2 11, r3 14,
# r4 6, r5 5) + seeds 3's r1 and r3a on the pass key (8 min) = ~49 min; pk worker ~28 min (the
# 514-token vocabulary: ~7,000 / 3,800 / 3,500 tokens/s) + the other 4 seed runs (~20 min) =
# ~48 min. Then the evaluations, two workers: 21 perplexity rows of 65,536 tokens (~4 min) and
# 20 pass-key evaluations of ~1 min each (20 x 0.15 s at 512, 20 x 0.5 s at 2048, 10 x 2 s at
# 8192, 4 x 7 s at 32768: a 32k prompt reads in 6-8 s, docs/results/scorers.tsv) = ~13 min per
# worker. ~62 min in all, ~75 with a busier machine; SPARSE_TEXT_STEPS / SPARSE_PK_STEPS trade
# steps for time. Not yet checked by a full run.
#
# Stages, each resumable (run the script again and it goes on where it stopped):
#   train   every run into $OUT/{text,pk}/NAME: a finished run leaves DONE and is skipped, an
#           interrupted one resumes from its checkpoint. Each run writes NAME/settings (its flags,
#           data and budget): when the settings asked for now differ, the script stops and names
#           the settings that differ (a retraining is the user's choice: move the run away).
#   eval    one `landmark eval` / `landmark passkey` per row into $OUT/rows/NAME.txt, with
#           NAME.settings (the command and the fingerprint of the model read): a row whose
#           settings differ, or whose model was retrained, is measured again; others are skipped.
#   tables  docs/results/sparse.tsv, sparse.md and sparse_passkey.png from those rows. sparse.md
#           opens with $DOCS/results/sparse_answer.md (three sentences written by hand from a
#           finished run) when that file exists, else with a line saying it is still to write.
# Logs: $OUT/logs/ (one file per training and per lane), $OUT/rows/NAME.err per row.
# Usage: bash scripts/sparse_study.sh [train] [eval] [tables]     (default: all three)
# Environment:
#   SPARSE_QUICK=1      tiny models, a few steps, windows 128/256/512, a tiny grid: a smoke test
#                       (tests/cli/test_sparse_study.sh) whose numbers mean nothing; it writes to
#                       runs/sparse_quick, never to docs/
#   SPARSE_OUT, SPARSE_DOCS   where runs and rows go, where results/ goes
#   SPARSE_TEXT_DATA    token directory for the text lane (default data/tokens, built by
#                       scripts/get-tokens.sh when missing, as paper-tables builds it)
#   SPARSE_PK_DATA      pass-key token directory (default data/passkey/farN/tokens, N = SPARSE_PK_FILLERS, written by this
#                       script from `make demo`'s tokenizer when missing)
#   SPARSE_PK_FILLERS   at most this many filler sentences before each question in that data
#                       (default 150)
#   SPARSE_PK_INIT      the pretrained model the pk lane continues (default
#                       runs/demo/pretrain/checkpoint.safetensors: `make demo`)
#   SPARSE_K            blocks per query in training (default 4; quick 2)
#   SPARSE_GATES        the gate variant of rows r3 and r4 (chosen or all; default chosen)
#   SPARSE_TEXT_STEPS, SPARSE_PK_STEPS   training steps per lane (default 300 each; quick 6)
#   SPARSE_SEEDS        seeds of r1 and r3 on the pass key (default 3; quick 2)
#   SPARSE_PK_TRIALS    prompts per pass-key length, comma-separated, one per length
#                       (default 20,20,10,4 for 512,2048,8192,32768; quick 2,2 for 300,900)
#   SPARSE_EVAL_TOKENS  tokens per perplexity row (default 65536: 128 windows of 512, 32 of
#                       2048, 16 of 4096; quick 1024)
#   SPARSE_PARALLEL     auto (the lanes side by side when there are 2+ threads), 1 or 0
#   LANDMARK            the program (default build/apps/landmark)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
LANDMARK="${LANDMARK:-build/apps/landmark}"
QUICK="${SPARSE_QUICK:-0}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
die() { echo "sparse-study: $*" >&2; exit 1; }
posint() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "$1 must be a positive whole number, got '$2'"; }
[ -x "$LANDMARK" ] || die "$LANDMARK is missing; run 'make' first (or set LANDMARK=...)"
case "$QUICK" in 0|1) ;; *) die "SPARSE_QUICK must be 0 or 1, got '$QUICK'" ;; esac

if [ "$QUICK" = 1 ]; then
  OUT="${SPARSE_OUT:-runs/sparse_quick}"
  DOCS="${SPARSE_DOCS:-$OUT/docs}"
  TEXT_MODEL=(--layers 1 --embd 32 --heads 2)
  F=10 W1=128 W2=256 W3=512 B1=4
  K="${SPARSE_K:-2}"
  TEXT_STEPS="${SPARSE_TEXT_STEPS:-6}" PK_STEPS="${SPARSE_PK_STEPS:-6}"
  SEEDS="${SPARSE_SEEDS:-2}"
  PK_LENGTHS=(300 900) PK_TRIALS_DEFAULT=2,2
  EVAL_TOKENS="${SPARSE_EVAL_TOKENS:-1024}"
  CHUNK_PPL=50 CHUNK_PK=50 RESAMPLES=200
else
  OUT="${SPARSE_OUT:-runs/sparse}"
  DOCS="${SPARSE_DOCS:-docs}"
  TEXT_MODEL=(--layers 3 --embd 128 --heads 4)  # the demo's size: ~5,000 tokens/s a thread at vocab 4096
  F=50 W1=512 W2=2048 W3=4096 B1=8
  K="${SPARSE_K:-4}"
  TEXT_STEPS="${SPARSE_TEXT_STEPS:-300}" PK_STEPS="${SPARSE_PK_STEPS:-300}"
  SEEDS="${SPARSE_SEEDS:-3}"
  PK_LENGTHS=(512 2048 8192 32768) PK_TRIALS_DEFAULT=20,20,10,4
  EVAL_TOKENS="${SPARSE_EVAL_TOKENS:-65536}"
  CHUNK_PPL=250 CHUNK_PK=200 RESAMPLES=2000  # Table 1's chunk; the demo's
fi
GATES="${SPARSE_GATES:-chosen}"
PARALLEL="${SPARSE_PARALLEL:-auto}"
TEXT_DATA="${SPARSE_TEXT_DATA:-data/tokens}"
PK_FILLERS="${SPARSE_PK_FILLERS:-150}"
PK_DATA="${SPARSE_PK_DATA:-data/passkey/far$PK_FILLERS/tokens}"  # the fillers in its name: another count, other data
PK_TOKENIZER="${SPARSE_PK_TOKENIZER:-data/passkey/short/tokens/tokenizer.json}"
PK_INIT="${SPARSE_PK_INIT:-runs/demo/pretrain/checkpoint.safetensors}"
IFS=, read -r -a PK_TRIALS <<< "${SPARSE_PK_TRIALS:-$PK_TRIALS_DEFAULT}"
# Every setting checked before the first stage.
posint SPARSE_K "$K"; posint SPARSE_TEXT_STEPS "$TEXT_STEPS"; posint SPARSE_PK_STEPS "$PK_STEPS"
posint SPARSE_SEEDS "$SEEDS"; posint SPARSE_EVAL_TOKENS "$EVAL_TOKENS"; posint SPARSE_PK_FILLERS "$PK_FILLERS"
[ "$TEXT_STEPS" -ge 2 ] && [ "$PK_STEPS" -ge 2 ] || die "the steps must be at least 2 (r4 trains half of them dense, half sparse)"
case "$GATES" in chosen|all) ;; *) die "SPARSE_GATES must be chosen or all, got '$GATES'" ;; esac
case "$PARALLEL" in auto|0|1) ;; *) die "SPARSE_PARALLEL must be auto, 0 or 1, got '$PARALLEL'" ;; esac
[ ${#PK_TRIALS[@]} -eq ${#PK_LENGTHS[@]} ] ||
  die "SPARSE_PK_TRIALS must give ${#PK_LENGTHS[@]} numbers (for lengths ${PK_LENGTHS[*]}), got '${SPARSE_PK_TRIALS:-}'"
for t in "${PK_TRIALS[@]}"; do posint SPARSE_PK_TRIALS "$t"; done
[ $((EVAL_TOKENS / W3)) -ge 2 ] || die "SPARSE_EVAL_TOKENS must hold at least two windows of $W3 tokens, got $EVAL_TOKENS"
if [ "$PARALLEL" = auto ]; then
  if [ "${OMP_NUM_THREADS:-$(nproc)}" -ge 2 ]; then PARALLEL=1; else PARALLEL=0; fi
fi
LANE_THREADS="${OMP_NUM_THREADS:-$(nproc)}"
[ "$PARALLEL" = 0 ] || LANE_THREADS=1
B2=$((B1 * W1 / W2)) B3=$((B1 * W1 / W3))
STAGES=("$@")
[ ${#STAGES[@]} -gt 0 ] || STAGES=(train eval tables)
for s in "${STAGES[@]}"; do case "$s" in train|eval|tables) ;; *) die "unknown stage '$s' (train, eval, tables)" ;; esac; done

# The data, with one message naming what to run.
if [ ! -s "$TEXT_DATA/train.tokens" ] || [ ! -s "$TEXT_DATA/val.tokens" ]; then
  [ -z "${SPARSE_TEXT_DATA:-}" ] || die "SPARSE_TEXT_DATA=$TEXT_DATA has no train.tokens and val.tokens"
  LANDMARK="$LANDMARK" bash scripts/get-tokens.sh "$TEXT_DATA"  # the corpus and tokens paper-tables trains on
fi
if [ ! -s "$PK_DATA/train.tokens" ] && [ -z "${SPARSE_PK_DATA:-}" ]; then  # far keys, the demo's tokenizer
  [ -s "$PK_TOKENIZER" ] || die "the demo's tokenizer $PK_TOKENIZER is missing: run 'make demo' first"
  PK_TEXT="$(dirname "$PK_DATA")/text"
  "$LANDMARK" passkey-data --out "$PK_TEXT" --docs 20000 --max-fillers "$PK_FILLERS" --uniform-distance --questions 3 \
    --filler-only 0.05 > /dev/null
  "$LANDMARK" prepare --train "$PK_TEXT/train.txt" --val "$PK_TEXT/val.txt" --out "$PK_DATA" \
    --tokenizer-from "$PK_TOKENIZER" > /dev/null
fi
[ -s "$PK_DATA/train.tokens" ] && [ -s "$PK_INIT" ] ||
  die "the pass-key data or pretrained model is missing ($PK_DATA/train.tokens, $PK_INIT): run 'make demo' first"

LOGS="$OUT/logs" ROWS="$OUT/rows"
mkdir -p "$LOGS" "$ROWS" "$OUT/text" "$OUT/pk"

# ---- the runs ---------------------------------------------------------------------------------------
# Rows in table order; r4w is r4's first half. Seeds of the pk lane: NAME_sN.
TEXT_RUNS=(r1 r2c r2a r3a r3b r4w r4 r5)
PK_RUNS=(r1 r2c r2a r3a r3b r4w r4 r5)
for s in $(seq 2 "$SEEDS"); do PK_RUNS+=("r1_s$s" "r3a_s$s" "r3b_s$s"); done
ROW_NAMES=(r1 r2c r2a r3a r3b r4 r5)
label_of() {
  case "$1" in
    r1) echo "1 dense $W1" ;; r2c) echo "2 sparse K $K at $W1, gates chosen" ;; r2a) echo "2 sparse K $K at $W1, gates all" ;;
    r3a) echo "3 sparse K $K at $W2 ($GATES)" ;; r3b) echo "3 sparse K $K at $W3 ($GATES)" ;;
    r4) echo "4 dense $W1 then sparse K $K at $W2 ($GATES)" ;; r5) echo "5 dense $W2" ;;
  esac
}
steps_of() { if [ "$1" = text ]; then echo "$TEXT_STEPS"; else echo "$PK_STEPS"; fi; }
seed_of() { case "$1" in *_s*) echo "${1##*_s}" ;; *) echo 1 ;; esac; }
base_of() { echo "${1%%_s*}"; }
budget_of() { if [ "$(base_of "$1")" = r5 ]; then echo "time of r1"; else echo tokens; fi; }

run_flags() {  # LANE NAME: the run's flags, one flag and its value per line (its settings file too)
  local lane=$1 name=$2 steps half sparse=(--train-top-k "$K" --train-top-k-gates "$GATES")
  steps=$(steps_of "$lane"); half=$((steps / 2))
  if [ "$lane" = text ]; then
    echo "--data $TEXT_DATA"; printf -- '%s %s\n' "${TEXT_MODEL[@]}"; echo "--lr 2e-3"
  else
    echo "--data $PK_DATA"; echo "--lr 1e-3"; echo "--doc-starts"
  fi
  echo "--attention landmark"; echo "--landmark-every $F"; echo "--seed $(seed_of "$name")"
  case "$(base_of "$name")" in
    r1) echo "--block-size $W1"; echo "--batch $B1"; echo "--steps $steps" ;;
    r2c) echo "--block-size $W1"; echo "--batch $B1"; echo "--steps $steps"; echo "--train-top-k $K"; echo "--train-top-k-gates chosen" ;;
    r2a) echo "--block-size $W1"; echo "--batch $B1"; echo "--steps $steps"; echo "--train-top-k $K"; echo "--train-top-k-gates all" ;;
    r3a) echo "--block-size $W2"; echo "--batch $B2"; echo "--steps $steps"; printf -- '%s %s\n' "${sparse[@]}" ;;
    r3b) echo "--block-size $W3"; echo "--batch $B3"; echo "--steps $steps"; printf -- '%s %s\n' "${sparse[@]}" ;;
    r4w) echo "--block-size $W1"; echo "--batch $B1"; echo "--steps $half" ;;
    r4) echo "--block-size $W2"; echo "--batch $B2"; echo "--steps $((steps - half))"; printf -- '%s %s\n' "${sparse[@]}" ;;
    r5) echo "--block-size $W2"; echo "--batch $B2"; echo "--steps $steps" ;;
    *) die "no run named $name" ;;
  esac
  # The parent: the pk lane continues make demo's pretrained model; r4 continues its warm-up r4w.
  if [ "$(base_of "$name")" = r4 ]; then echo "--init-from $OUT/$lane/r4w/checkpoint.safetensors"
  elif [ "$lane" = pk ]; then echo "--init-from $PK_INIT"; fi
  echo "--eval-every 0"; echo "--ckpt-every 50"; echo "--log-every 30"
  echo "# budget $(budget_of "$name")"
}

last_step() { grep -o '"step":[0-9]*' "$1" 2>/dev/null | tail -n 1 | cut -d: -f2; }
train_seconds() {  # elapsed_s restarts at 0 when a run resumes: the sum of each process's last one
  grep -o '"elapsed_s":[-0-9.e+]*' "$1" | cut -d: -f2 |
    awk '{ if ($1 < prev) total += prev; prev = $1 } END { printf "%.3f", total + prev }'
}

train_one() {  # LANE NAME
  local lane=$1 name=$2 dir="$OUT/$1/$2" want
  want="$(run_flags "$lane" "$name")"
  if [ -f "$dir/settings" ] && [ "$(cat "$dir/settings")" != "$want" ]; then
    die "$dir was trained with other settings (was: $(diff <(cat "$dir/settings") <(echo "$want") | sed -n 's/^< //p' | paste -sd';' -); now: $(diff <(cat "$dir/settings") <(echo "$want") | sed -n 's/^> //p' | paste -sd';' -)): move $OUT away (or set SPARSE_OUT) to train anew, or go back to those settings"
  fi
  if [ -f "$dir/DONE" ]; then echo "--- train $lane/$name: done earlier"; return; fi
  mkdir -p "$dir"
  echo "$want" > "$dir/settings"
  local flags=() line w resume=0
  while read -r line; do
    [[ "$line" == \#* ]] && continue
    read -r -a w <<< "$line"; flags+=("${w[@]}")
  done <<< "$want"
  if [ -f "$dir/checkpoint.safetensors" ]; then  # resume: --init-from excludes --resume
    resume=1
    local kept=() i
    for ((i = 0; i < ${#flags[@]}; i++)); do
      if [ "${flags[$i]}" = --init-from ]; then i=$((i + 1)); else kept+=("${flags[$i]}"); fi
    done
    flags=("${kept[@]}" --resume "$dir/checkpoint.safetensors")
  fi
  if [ "$(budget_of "$name")" != tokens ]; then  # the wall time r1 of this lane took, in minutes
    local r1s
    r1s=$(train_seconds "$OUT/$lane/r1/metrics.jsonl")
    flags+=(--time-limit "$(awk -v s="$r1s" 'BEGIN { m = s / 60; printf "%.6f", (m > 1e-5) ? m : 1e-5 }')")
  fi
  echo "--- train $lane/$name: $(date -u +%T)$([ $resume = 1 ] && echo ' (resuming)') (log: $LOGS/train_${lane}_$name.log)"
  OMP_NUM_THREADS=$LANE_THREADS "$LANDMARK" train "${flags[@]}" --out "$dir" >> "$LOGS/train_${lane}_$name.log" 2>&1 ||
    { tail -n 5 "$LOGS/train_${lane}_$name.log" >&2; die "train $lane/$name failed (its log: $LOGS/train_${lane}_$name.log)"; }
  local steps last
  steps=$(grep -- '^--steps ' <<< "$want" | cut -d' ' -f2); last=$(last_step "$dir/metrics.jsonl")
  if [ "$(budget_of "$name")" = tokens ] && [ "${last:-0}" != "$steps" ]; then
    die "train $lane/$name stopped at step ${last:-none} of $steps; run the script again to resume"
  fi
  date -u +%FT%TZ > "$dir/DONE"
}

# Two workers, one thread each: the text runs, then the odd seeds' r1 and r3a on the pass key (the
# pk lane has more runs); the pk runs, then the other seed runs. r4 follows r4w and r5 follows r1
# in the same worker, as they need.
TEXT_WORK=() PK_WORK=()
for n in "${TEXT_RUNS[@]}"; do TEXT_WORK+=("text $n"); done
for n in "${PK_RUNS[@]}"; do
  case "$n" in
    r1_s*|r3a_s*) if [ $(( $(seed_of "$n") % 2 )) = 1 ]; then TEXT_WORK+=("pk $n"); else PK_WORK+=("pk $n"); fi ;;
    *) PK_WORK+=("pk $n") ;;
  esac
done
work() {  # "LANE NAME"...: trainings in order
  local item
  for item in "$@"; do train_one ${item% *} ${item#* }; done
}

side_by_side() {  # FUNCTION_A FUNCTION_B: both, side by side when PARALLEL, each logged
  if [ "$PARALLEL" = 1 ]; then
    local a b ra rb
    ( set -o pipefail; "$1" 2>&1 | tee "$LOGS/$1.log" | sed -u "s/^/[$1] /" ) & a=$!
    ( set -o pipefail; "$2" 2>&1 | tee "$LOGS/$2.log" | sed -u "s/^/[$2] /" ) & b=$!
    set +e; wait $a; ra=$?; wait $b; rb=$?; set -e
    [ $ra = 0 ] && [ $rb = 0 ] || die "a lane failed ($1: exit $ra, $2: exit $rb); see $LOGS/$1.log and $LOGS/$2.log"
  else
    "$1" 2>&1 | tee "$LOGS/$1.log"; "$2" 2>&1 | tee "$LOGS/$2.log"
  fi
}
train_text() { work "${TEXT_WORK[@]}"; }
train_pk() { work "${PK_WORK[@]}"; }
stage_train() { local t0=$SECONDS; side_by_side train_text train_pk; echo "stage train: $((SECONDS - t0)) s"; }

# ---- the rows -----------------------------------------------------------------------------------------
model_id() {  # a run's fingerprint: its settings and when it finished (a retrained run differs)
  [ -f "$OUT/$1/DONE" ] || die "the run $OUT/$1 is not finished: run the train stage"
  cat "$OUT/$1/settings" "$OUT/$1/DONE" | cksum | cut -d' ' -f1
}
row() {  # NAME FINGERPRINT COMMAND...: one row, skipped when its output is there with the same settings
  local name=$1 fp=$2; shift 2
  local want f="$ROWS/$name"
  want="$(printf '%s\n' "model $fp" "$*")"
  if [ -s "$f.txt" ] && [ -f "$f.settings" ]; then
    [ "$(cat "$f.settings")" != "$want" ] || return 0
    echo "row $name: its settings changed, measuring again (was: $(diff "$f.settings" <(echo "$want") | sed -n 's/^< //p' | paste -sd';' -))"
  fi
  rm -f "$f.txt" "$f.tsv" "$f.windows.tsv" "$f.settings"
  echo "row $name: landmark $*"
  local t0=$SECONDS
  OMP_NUM_THREADS=$LANE_THREADS "$LANDMARK" "$@" > "$f.tmp" 2> "$f.err" ||
    { tail -n 5 "$f.err" >&2; die "row $name failed (its log: $f.err)"; }
  echo "wall_seconds $((SECONDS - t0))" >> "$f.tmp"
  echo "$want" > "$f.settings"
  mv "$f.tmp" "$f.txt"
}
ppl_rows() {  # perplexity of the text lane's rows, each paired with r1 at the same length
  local len r ref
  for len in "$W1" "$W2" "$W3"; do
    ref="$ROWS/ppl_r1_$len.windows.tsv"
    local common=(--tokens "$TEXT_DATA/val.tokens" --length "$len" --chunk "$CHUNK_PPL" --k "$K"
                  --windows $((EVAL_TOKENS / len)) --bootstrap "$RESAMPLES")
    for r in "${ROW_NAMES[@]}"; do
      local name="ppl_${r}_$len" fp
      fp=$(model_id "text/$r")
      if [ "$r" = r1 ]; then
        row "$name" "$fp" eval --checkpoint "$OUT/text/$r/checkpoint.safetensors" "${common[@]}" --windows-tsv "$ref" --tsv "$ROWS/$name.tsv"
      else  # the reference's fingerprint too: a new reference means new pairs
        row "$name" "$fp $(cksum < "$ref" | cut -d' ' -f1)" eval --checkpoint "$OUT/text/$r/checkpoint.safetensors" "${common[@]}" \
          --paired-with "$ref" --tsv "$ROWS/$name.tsv"
      fi
    done
  done
}
pk_rows() {  # POSITIONS RUNS...: the pass key, one row per run and length
  local pos=$1 n i; shift
  for n in "$@"; do
    for i in "${!PK_LENGTHS[@]}"; do
      local len="${PK_LENGTHS[$i]}" name="pk_${pos}_${n}_${PK_LENGTHS[$i]}"
      row "$name" "$(model_id "pk/$n")" passkey --checkpoint "$OUT/pk/$n/checkpoint.safetensors" --lengths "$len" \
        --trials "${PK_TRIALS[$i]}" --chunk "$CHUNK_PK" --k "$K" --positions "$pos" --tsv "$ROWS/$name.tsv"
    done
  done
}
PK_EVAL_RUNS=()
for n in "${PK_RUNS[@]}"; do [ "$n" = r4w ] || PK_EVAL_RUNS+=("$n"); done
eval_a() { ppl_rows; pk_rows exact "${ROW_NAMES[@]}"; }
eval_b() { pk_rows stingy "${PK_EVAL_RUNS[@]}"; }
stage_eval() { local t0=$SECONDS; side_by_side eval_a eval_b; echo "stage eval: $((SECONDS - t0)) s"; }

# ---- the tables ---------------------------------------------------------------------------------------
HEADER="row	label	data	seed	window	train_top_k	gates	budget	steps	tokens	train_seconds	tokens_per_s	measure	length	value	ci_low	ci_high	ratio	ratio_low	ratio_high	trials	seconds"
col() {  # COLUMN FILE: the column of the first data row of a TSV with a header
  awk -F'\t' -v c="$1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i; next }
    NR == 2 { if (!k) exit 1; print $k; found = 1 } END { if (!found) exit 1 }' "$2" || die "no column '$1' in $2"
}
train_cols() {  # LANE NAME: row .. tokens_per_s (12 columns) for a run (r4: its two halves together)
  local lane=$1 name=$2 base parts=("$2") p steps=0 tokens=0 secs=0
  base=$(base_of "$name")
  [ "$base" != r4 ] || parts=(r4w r4)
  for p in "${parts[@]}"; do
    local d="$OUT/$lane/$p" s w b
    [ -f "$d/DONE" ] || die "the run $d is not finished: run the train stage"
    s=$(last_step "$d/metrics.jsonl"); w=$(sed -n 's/^--block-size //p' "$d/settings"); b=$(sed -n 's/^--batch //p' "$d/settings")
    steps=$((steps + s)); tokens=$((tokens + s * w * b))
    secs=$(awk -v a="$secs" -v b="$(train_seconds "$d/metrics.jsonl")" 'BEGIN { printf "%.3f", a + b }')
  done
  local set="$OUT/$lane/$name/settings" topk gates
  topk=$(sed -n 's/^--train-top-k //p' "$set"); gates=$(sed -n 's/^--train-top-k-gates //p' "$set")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s' "$base" "$(label_of "$base")" "$lane" "$(seed_of "$name")" \
    "$(sed -n 's/^--block-size //p' "$set")" "${topk:-0}" "${gates:--}" "$(budget_of "$name")" "$steps" "$tokens" "$secs" \
    "$(awk -v t="$tokens" -v s="$secs" 'BEGIN { if (s > 0) printf "%.0f", t / s; else print "-" }')"
}
tsv_lines() {
  local r len n pos i
  for r in "${ROW_NAMES[@]}"; do
    local tc; tc=$(train_cols text "$r")
    for len in "$W1" "$W2" "$W3"; do
      local f="$ROWS/ppl_${r}_$len" ratio
      [ -s "$f.txt" ] || die "row ppl_${r}_$len is missing: run the eval stage"
      ratio=$(sed -n 's/^paired ratio=\([0-9.]*\) ci_low=\([0-9.]*\) ci_high=\([0-9.]*\).*/\1\t\2\t\3/p' "$f.txt" | head -1)
      [ "$r" = r1 ] && ratio="1	-	-"
      [ -n "$ratio" ] || die "row ppl_${r}_$len has no 'paired ratio=' line ($f.txt)"
      printf '%s\tppl\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$tc" "$len" "$(col ppl "$f.tsv")" "$(col ci_low "$f.tsv")" \
        "$(col ci_high "$f.tsv")" "$ratio" "$(col windows "$f.tsv")" "$(sed -n 's/^wall_seconds //p' "$f.txt")"
    done
  done
  for pos in stingy exact; do
    local runs=("${PK_EVAL_RUNS[@]}")
    [ "$pos" = stingy ] || runs=("${ROW_NAMES[@]}")
    for n in "${runs[@]}"; do
      local tc; tc=$(train_cols pk "$n")
      for i in "${!PK_LENGTHS[@]}"; do
        local f="$ROWS/pk_${pos}_${n}_${PK_LENGTHS[$i]}"
        [ -s "$f.txt" ] || die "row pk_${pos}_${n}_${PK_LENGTHS[$i]} is missing: run the eval stage"
        printf '%s\tpasskey_%s\t%s\t%s\t-\t-\t-\t-\t-\t%s\t%s\n' "$tc" "$pos" "${PK_LENGTHS[$i]}" \
          "$(col landmark_pct "$f.tsv")" "${PK_TRIALS[$i]}" "$(sed -n 's/^wall_seconds //p' "$f.txt")"
      done
    done
  done
}

stage_tables() {
  local tsv="$DOCS/results/sparse.tsv" md="$DOCS/results/sparse.md" png="$DOCS/results/sparse_passkey.png"
  mkdir -p "$DOCS/results"
  { echo "$HEADER"; tsv_lines; } > "$tsv.tmp"
  mv "$tsv.tmp" "$tsv"
  echo "wrote $tsv"
  # The picture: pass-key accuracy (stingy positions, seed 1) against length, one column per row.
  local pk="$OUT/passkey_by_length.tsv"
  awk -F'\t' 'NR > 1 && $13 == "passkey_stingy" && $4 == 1 { col = $1; if (!(col in seen)) { seen[col] = 1; cols[++nc] = col }
                if (!($14 in ls)) { ls[$14] = 1; lens[++nl] = $14 }; v[$14, col] = $15 }
              END { printf "length"; for (c = 1; c <= nc; ++c) printf "\t%s", cols[c]; printf "\n"
                    for (l = 1; l <= nl; ++l) { printf "%s", lens[l]
                      for (c = 1; c <= nc; ++c) printf "\t%s", v[lens[l], cols[c]]; printf "\n" } }' "$tsv" > "$pk"
  "$LANDMARK" plot-table "$pk" --out "$png.tmp.png" --log-x --y-range 0,100 --x-label "prompt length (tokens)" \
    --y-label "pass key found (%)" --title "pass key by training recipe (stingy positions, seed 1)" > /dev/null
  mv "$png.tmp.png" "$png"
  echo "wrote $png"
  write_md "$tsv" > "$md.tmp"
  mv "$md.tmp" "$md"
  echo "wrote $md"
}

write_md() {  # sparse.md from sparse.tsv
  local tsv=$1 cpu answer="$DOCS/results/sparse_answer.md"
  cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
  echo "# Training with the cache: sparse top-k landmark training (beyond the paper)"
  echo
  if [ "$QUICK" = 1 ]; then
    echo "**SPARSE_QUICK=1: a smoke test of the pipeline (tiny models, a few steps). These numbers mean nothing.**"
    echo
  fi
  if [ -s "$answer" ]; then cat "$answer"; else
    echo "**The answer** is still to write, by hand from the numbers below, in three sentences (does training"
    echo "with the cache cost quality at $W1? does the longer window the same compute buys help long-range use?"
    echo "which gate variant is better?), into $DOCS/results/sparse_answer.md; the script puts it here."
  fi
  echo
  echo "Measured by \`make sparse-study\` (scripts/sparse_study.sh) on $(date -u +%Y-%m-%d), $cpu, $LANE_THREADS thread(s)"
  echo "per lane, the two lanes $([ "$PARALLEL" = 1 ] && echo "side by side" || echo "one after the other"). K $K, F $F; rows r3 and r4 use gates $GATES."
  echo "Every run of rows 1-4 reads the same training tokens ($W1 x $B1 = $((W1 * B1)) a step; budget \"tokens\");"
  echo "row 5 gets the wall time row 1 took (budget \"time of r1\": fewer tokens). Every row: [sparse.tsv](sparse.tsv)."
  echo "The text lane trains a ${TEXT_MODEL[*]} model from scratch on $TEXT_DATA ($TEXT_STEPS steps); the pass-key"
  echo "lane continues \`make demo\`'s pretrained model on its long documents ($PK_STEPS steps), as the demo does."
  echo
  echo "## Training"
  echo
  echo "| row | data | seed | window | K | gates | budget | steps | tokens | seconds | tokens/s |"
  echo "| --- | --- | ---: | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: |"
  awk -F'\t' 'NR > 1 && !seen[$1, $3, $4]++ { printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12 }' "$tsv"
  echo
  echo "## Perplexity on Persuasion (text lane)"
  echo
  echo "\`landmark eval --length L --chunk $CHUNK_PPL --k $K --windows $EVAL_TOKENS/L\`. Ratio: the row's perplexity over"
  echo "row 1's on the same windows, with the paired bootstrap interval (\`--paired-with\` row 1's \`--windows-tsv\`)."
  echo
  echo "| row | length | perplexity [95%] | ratio to row 1 [paired 95%] |"
  echo "| --- | ---: | --- | --- |"
  awk -F'\t' 'NR > 1 && $13 == "ppl" { printf "| %s | %s | %.2f [%.2f, %.2f] | %s |\n", $2, $14, $15, $16, $17,
                ($19 == "-") ? "1 (the reference)" : sprintf("%.3f [%.3f, %.3f]", $18, $19, $20) }' "$tsv"
  echo
  echo "## The pass key (pass-key lane)"
  echo
  echo "\`landmark passkey --lengths L --chunk $CHUNK_PK --k $K --positions stingy|exact\`; found (%), of $(IFS=,; echo "${PK_TRIALS[*]}") prompts"
  echo "at lengths $(IFS=,; echo "${PK_LENGTHS[*]}")."
  echo
  echo "![pass key by length and training recipe](sparse_passkey.png)"
  echo
  awk -F'\t' 'NR > 1 && $13 ~ /^passkey/ { key = $2 " | " $4 " | " substr($13, 9); if (!(key in seen)) { seen[key] = 1; keys[++n] = key }
                if (!($14 in ls)) { ls[$14] = 1; lens[++m] = $14 }; v[key, $14] = $15 }
              END { printf "| row | seed | positions |"; for (j = 1; j <= m; ++j) printf " %s |", lens[j]; printf "\n| --- | ---: | --- |"
                    for (j = 1; j <= m; ++j) printf " ---: |"; printf "\n"
                    for (i = 1; i <= n; ++i) { printf "| %s |", keys[i]; for (j = 1; j <= m; ++j) printf " %s |", v[keys[i], lens[j]]; printf "\n" } }' "$tsv"
  echo
  echo "Seeds 2 to $SEEDS of rows 1 and 3 change the continuation (data order), not \`make demo\`'s shared pretraining."
}

main() {
  local s
  for s in "${STAGES[@]}"; do "stage_$s"; done
}
# One line that calls main and exits: bash has then read the whole script, so editing the file
# while a long run is going cannot change what that run executes.
main; exit $?
