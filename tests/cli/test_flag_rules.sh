#!/usr/bin/env bash
# test_flag_rules.sh: the rule every subcommand's flags follow, as a table. A flag a subcommand
# offers either acts and says what it did, or is refused there with a message naming it; a value
# is never silently read as something else. Each row of the table below is
#   row STATUS STRING COMMAND...
# COMMAND (the program's arguments) must exit with STATUS and print STRING (stdout and stderr
# together); `row_not` is the same with a STRING that must not be printed. The rows, by class:
#   - usage: an unknown subcommand names itself and lists the subcommands (exit 2, with or
#     without --help); `<subcommand> --help` is that subcommand's help; no help or error prints a
#     309-digit bound;
#   - empty numbers: `--seed ''` (and every numeric flag's empty value, as a script's unset
#     variable gives) is refused, exit 2;
#   - flags that act and report, or are refused: --mass-recall, --left-out, --no-cmt-skip,
#     --recall-plot, the retrieval flags on a standard model read by its window;
#   - limits known before the work: --scorer oracle past 32,768 tokens is refused before reading;
#   - pairing: --windows-tsv names its token file, --paired-with refuses another's, and losses no
#     model gives;
#   - train: --init-from inherits the attention kind and the XL cache (and says so), checks
#     --segment against the parent's T, refuses a window that holds no landmark and a parent that
#     the run would overwrite.
# Usage: test_flag_rules.sh path/to/landmark
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # LANDMARK, WORK, fail, expect, passkey_tokens

n=0
row() {  # status, string, arguments...
  local want=$1 str=$2
  shift 2
  n=$((n + 1))
  exits_with "$want" "$WORK/row$n" "$LANDMARK" "$@"
  expect "$WORK/row$n" "$str"
}
row_not() {  # status, string that must not appear, arguments...
  local want=$1 str=$2
  shift 2
  n=$((n + 1))
  exits_with "$want" "$WORK/row$n" "$LANDMARK" "$@"
  if grep -qF -- "$str" "$WORK/row$n"; then cat "$WORK/row$n" >&2; fail "'$str' printed by: $*"; fi
}

passkey_tokens "$WORK/data" "$WORK/tok" --docs 200 --max-fillers 3 --seed 3
TINY=(--data "$WORK/tok" --layers 1 --embd 32 --heads 2 --block-size 128 --batch 2 --steps 3 --eval-every 0 --quiet)
"$LANDMARK" train "${TINY[@]}" --attention landmark --landmark-every 10 --out "$WORK/lm" > /dev/null
"$LANDMARK" train "${TINY[@]}" --attention standard --landmark-every 10 --out "$WORK/std" > /dev/null
LM=$WORK/lm/checkpoint.safetensors STD=$WORK/std/checkpoint.safetensors VAL=$WORK/tok/val.tokens
printf 'The grass is green. %.0s' $(seq 10) > "$WORK/prompt.txt"

# ---- usage ----
row 2 "unknown subcommand 'foo'" foo
row 2 "  generate " foo
row 2 "unknown subcommand 'tasks-dat'" tasks-dat --help
row_not 0 "Subcommands:" generate --help
row 0 "--max-new" generate --help
for sub in prepare extract-austen passkey-data train plot plot-table info groups passkey eval generate attn-map explore; do
  "$LANDMARK" "$sub" --help > "$WORK/help_$sub" 2>&1 || fail "$sub --help failed"
  grep -qE '[0-9]{20}' "$WORK/help_$sub" && { grep -E '[0-9]{20}' "$WORK/help_$sub" >&2; fail "$sub --help prints a number of 20 digits or more"; }
done
row 2 "--top-k: must be an integer >= 0, got -1" generate --checkpoint "$LM" --prompt x --top-k -1
row 2 "--eval-every: must be an integer >= 0, got -3" train --data "$WORK/tok" --eval-every -3
row 2 "--docs: must be an integer >= 1, got 0" passkey-data --out "$WORK/pd" --docs 0

# ---- empty numbers ----
row 2 "--seed: an empty value" train "${TINY[@]}" --out "$WORK/t_empty" --seed ''
row 2 "--seed: an empty value" passkey-data --out "$WORK/pd" --seed ''
row 2 "--seed: an empty value" passkey --checkpoint "$LM" --lengths 300 --seed ''
row 2 "--seed: an empty value" generate --checkpoint "$LM" --prompt x --seed ''
row 2 "--controlled: an empty value" groups --controlled ''
row 2 "--k: an empty value" eval --checkpoint "$LM" --tokens "$VAL" --k ' '
row 2 "--lengths" passkey --checkpoint "$LM" --lengths ,
# A script passing an unset variable fails (without `set -u` too).
exits_with 2 "$WORK/unset" env -u SEED bash -c '"$0" passkey-data --out "$1" --seed "$SEED"' "$LANDMARK" "$WORK/pd"
expect "$WORK/unset" "--seed: an empty value"
[ ! -e "$WORK/pd" ] || fail "passkey-data wrote its output with an empty --seed"

# ---- flags that act and report, or are refused ----
GEN=(generate --checkpoint "$LM" --prompt-file "$WORK/prompt.txt" --max-new 5 --chunk 50 --k 2)
row 0 "mass recall against the oracle: " "${GEN[@]}" --mass-recall
row 0 "adaptive k (--left-out 0.05, --k 2): mean k" "${GEN[@]}" --left-out 0.05 --positions exact
row 0 "left-out weight M per (query, head) row in the prompt and the generation" "${GEN[@]}" --left-out 0.05 --positions exact
row_not 0 "adaptive k" "${GEN[@]}"
row 2 "--mass-recall" explore --checkpoint "$LM" --text x --out "$WORK/e.html" --mass-recall
row 2 "--mass-recall" attn-map --checkpoint "$LM" --text x --out "$WORK/m.png" --mass-recall
row 1 "--no-cmt-skip: this model was trained without a context-miss token" "${GEN[@]}" --no-cmt-skip
row 1 "--no-cmt-skip: this model was trained without a context-miss token" eval --checkpoint "$LM" --tokens "$VAL" --length 100 --windows 1 --no-cmt-skip
row 1 "--recall-plot draws the recall of --recall" passkey --checkpoint "$LM" --lengths 300 --trials 1 --recall-plot "$WORK/r.png"
row 1 "--k: this is a standard model, read by its own window" generate --checkpoint "$STD" --prompt x --k 2
row 1 "--chunk: this is a standard model" eval --checkpoint "$STD" --tokens "$VAL" --length 100 --windows 1 --chunk 50
row 1 "--capacity: this is a standard model" passkey --checkpoint "$STD" --lengths 300 --trials 1 --capacity 3
row 0 "perplexity" eval --checkpoint "$STD" --tokens "$VAL" --length 100 --windows 1
row 0 "mass recall against the oracle: n/a" eval --checkpoint "$LM" --tokens "$VAL" --length 300 --windows 1 --chunk 50 --k 0 --mass-recall
row_not 0 "0.0000 of the cached blocks" eval --checkpoint "$LM" --tokens "$VAL" --length 300 --windows 1 --chunk 50 --k 0 --mass-recall

# ---- limits known before the work (each refused before a token is read: no progress line) ----
row_not 1 "prompt:" generate --checkpoint "$STD" --scorer oracle --chunk 50 --prompt-file "$WORK/prompt.txt" --max-new 40000
row 1 "this run reaches 40199 (200 prompt tokens and --max-new 40000)" generate --checkpoint "$STD" --scorer oracle --chunk 50 --prompt-file "$WORK/prompt.txt" --max-new 40000
row 1 "this run reaches 32867" passkey --checkpoint "$STD" --scorer oracle --chunk 50 --lengths 32768 --scoring paper --trials 1
row 1 "this run reaches 40000 (windows of --length 40000)" eval --checkpoint "$STD" --scorer oracle --chunk 50 --tokens "$VAL" --length 40000
head -c 40000 /dev/zero | tr '\0' 'a' > "$WORK/long.txt"
row 1 "this run reaches 40000 (the text's tokens" explore --checkpoint "$STD" --scorer oracle --chunk 50 --text-file "$WORK/long.txt" --max-tokens 40000 --out "$WORK/long.html"

# ---- pairing ----
EV=(eval --checkpoint "$LM" --length 100 --windows 2 --chunk 50 --k 2)
row 0 "wrote $WORK/w.tsv" "${EV[@]}" --tokens "$VAL" --windows-tsv "$WORK/w.tsv"
head -1 "$WORK/w.tsv" | grep -qE "$(printf '^# tokens\t[0-9]+\tcrc32\t[0-9a-f]{8}$')" ||
  { head -2 "$WORK/w.tsv" >&2; fail "--windows-tsv: the first line does not name the token file"; }
row 0 "paired" "${EV[@]}" --tokens "$VAL" --paired-with "$WORK/w.tsv"
row 1 "was made from a token file of" "${EV[@]}" --tokens "$WORK/tok/train.tokens" --paired-with "$WORK/w.tsv"
row 1 "but --tokens $WORK/tok/train.tokens has" "${EV[@]}" --tokens "$WORK/tok/train.tokens" --paired-with "$WORK/w.tsv"
sed '3s/\t[^\t]*$/\t1e30/' "$WORK/w.tsv" > "$WORK/w_1e30.tsv"
row 1 "per token" "${EV[@]}" --tokens "$VAL" --paired-with "$WORK/w_1e30.tsv"
sed '3s/\t[^\t]*$/\t1e308/' "$WORK/w.tsv" > "$WORK/w_1e308.tsv"
row 1 "per token" "${EV[@]}" --tokens "$VAL" --paired-with "$WORK/w_1e308.tsv"
tail -n +2 "$WORK/w.tsv" > "$WORK/w_old.tsv"  # as written before the identity was recorded
row 1 "does not start with the line naming its token file" "${EV[@]}" --tokens "$VAL" --paired-with "$WORK/w_old.tsv"

# ---- train ----
FT=(train --data "$WORK/tok" --steps 3 --batch 2 --eval-every 0 --quiet)
row 0 "attention landmark" "${FT[@]}" --init-from "$LM" --out "$WORK/ft_lm"
"$LANDMARK" info "$WORK/ft_lm/checkpoint.safetensors" | grep -q '"attention": "landmark"' ||
  fail "train --init-from a landmark parent without --attention trained a standard child"
row 0 "xl_cache 0" "${FT[@]}" --init-from "$LM" --out "$WORK/ft_lm2"
row 1 "--landmark-every 200 must be less than --block-size 128" train "${TINY[@]}" --attention landmark --landmark-every 200 --out "$WORK/t_f"
row 1 "--landmark-every 200 must be less than --block-size 128" "${FT[@]}" --init-from "$STD" --attention landmark --landmark-every 200 --out "$WORK/ft_f"
"$LANDMARK" train --data "$WORK/tok" --layers 1 --embd 32 --heads 2 --block-size 64 --batch 2 --steps 3 --eval-every 0 --quiet \
  --xl-cache 64 --segment 128 --out "$WORK/xl" > /dev/null
row 0 "xl_cache 64, rotary_base" "${FT[@]}" --init-from "$WORK/xl/checkpoint.safetensors" --out "$WORK/ft_xl"
row 0 "segment 128" "${FT[@]}" --init-from "$WORK/xl/checkpoint.safetensors" --out "$WORK/ft_xl2"
"$LANDMARK" info "$WORK/ft_xl/checkpoint.safetensors" | grep -q '"xl_cache": 64' || fail "an XL parent gave a non-XL child"
row 0 "rows are segments of 192 tokens" "${FT[@]}" --init-from "$WORK/xl/checkpoint.safetensors" --segment 192 --out "$WORK/ft_xl3"
row 1 "would be replaced by its child" "${FT[@]}" --init-from "$LM" --out "$WORK/lm"
# ---- scripts check their variables before the first stage (scripts/demo.sh) ----
for bad in "DEMO_LENGTHS=," "DEMO_LENGTHS=512,,1024" "DEMO_STEPS=abc" "DEMO_STEPS=1" "DEMO_MINUTES=-1" "DEMO_TRIALS=0"; do
  n=$((n + 1))
  exits_with 2 "$WORK/row$n" env "$bad" DEMO_OUT="$WORK/demo_out" DEMO_DATA="$WORK/demo_data" \
    bash "$(dirname "${BASH_SOURCE[0]}")/../../scripts/demo.sh"
  expect "$WORK/row$n" "${bad%%=*}"
  [ ! -e "$WORK/demo_out" ] && [ ! -e "$WORK/demo_data" ] || fail "demo.sh with $bad started a stage"
done
echo "flag rules: $n rows passed"
