# demo_model.sh: what `make demo` (scripts/demo.sh), `make demo-finetune` (scripts/demo_finetune.sh)
# and `make demo-long` (scripts/demo_long.sh) share, sourced by each: the program, the model, the
# data, the steps and the pass-key settings. Not a program of its own. LANDMARK (the program) may
# be given in the environment, as the tests do.
LANDMARK="${LANDMARK:-build/apps/landmark}"
# The model: 3 layers, d 128, 4 heads of 32 (the width and depth stay the same in every stage).
MODEL=(--layers 3 --embd 128 --heads 4)
# Stage 1, pretraining (one run, shared by both models): a standard model on 128-token windows of
# short pass-key documents learns to copy the key. Four times cheaper per step than 512-token
# windows, and copying is learned in steps, not in tokens (docs/demo.md section 5).
# 3000 steps: the copy emerges after a plateau whose length depends on the seed; at 2000 steps two
# of four seeds had not left it, at 3000 four of five had (docs/demo.md section 5, eighth round).
PRETRAIN=(--block-size 128 --batch 8 --lr 2e-3)
DEMO_PRE_STEPS=3000
# Stage 2: the pretrained model continues on 512-token windows of long documents, once with
# landmark attention (a landmark after every 50 tokens, the paper's F) and once with standard
# attention (the baseline): the same data, steps and schedule for both. Every window opens a
# document (--doc-starts), so it holds one key, asked three times.
LONG=(--block-size 512 --batch 8 --lr 1e-3 --doc-starts)
LM_FLAGS=(--attention landmark --landmark-every 50)
DEMO_CONT_STEPS=400
# The data. Short documents: 0..2 filler sentences, so key and question fit a 128-token window;
# 30% of them number lists asked back ("The list is 4821 30177. ... What is the list? The list is
# 4821 30177."), more copying per document. Long documents: the fillers between key and question
# uniform in 0..18 (a 512-token prompt holds 18), the question asked three times, each after its
# own 0..18 fillers. One BPE tokenizer of 512 tokens, trained on the short text, serves both
# (`prepare --tokenizer-from`).
DATA="${DEMO_DATA:-data/passkey}"
SHORT_FLAGS=(--docs 50000 --max-fillers 2 --filler-only 0.05 --list-docs 0.3 --list-fillers 2)
LONG_FLAGS=(--docs 20000 --max-fillers 18 --uniform-distance --questions 3 --filler-only 0.05)
TOKENIZER_FLAGS=(--tokenizer bpe --vocab 512)
# Reading a prompt: chunks of 200 tokens, the top 4 blocks retrieved per query.
EVAL_FLAGS=(--chunk 200 --k 4)
OUT="${DEMO_OUT:-runs/demo}"

# demo_threads: THREADS (OMP_NUM_THREADS, or every core when it is unset), PARALLEL (1: run two
# independent jobs side by side, each on HALF of the threads; 0: one after the other) from
# DEMO_PARALLEL (auto: side by side when THREADS >= 2). Two processes of this small model on one
# thread each do about twice the work of one process on two threads (docs/demo.md section 3).
demo_threads() {
  local cores
  cores=$(nproc 2>/dev/null || echo 1)
  THREADS="${OMP_NUM_THREADS:-$cores}"
  case "$THREADS" in
    '' | *[!0-9]* | 0) echo "demo: OMP_NUM_THREADS must be a positive number, got '$THREADS'" >&2; exit 1 ;;
  esac
  PARALLEL="${DEMO_PARALLEL:-auto}"
  case "$PARALLEL" in
    auto) if [ "$THREADS" -ge 2 ]; then PARALLEL=1; else PARALLEL=0; fi ;;
    0 | 1) ;;
    *) echo "demo: DEMO_PARALLEL must be auto, 1 or 0, got '$PARALLEL'" >&2; exit 1 ;;
  esac
  HALF=$((THREADS / 2))
  [ "$HALF" -ge 1 ] || HALF=1
}
times3() { awk -v m="$1" 'BEGIN { printf "%g", 3 * m }'; }  # a cap three times as long, for the rerun advice
