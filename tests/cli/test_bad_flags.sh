#!/usr/bin/env bash
# test_bad_flags.sh LANDMARK: every numeric flag of every subcommand, given bad values, must end in
# a usage error (exit 2), a clean error naming the flag or the value (exit 1, "error: ..."), or a
# clean run (exit 0) -- never a signal, a hang (20 s) or, outside sanitizer builds, more than
# 4 GB of address space. The flags come from each subcommand's --help (every option typed INT,
# UINT or FLOAT), so a new flag is covered the day it is added. Each trial starts from valid,
# tiny arguments (a one-layer model, a few tokens) with only the flag under test changed. An
# unsigned (UINT) flag must refuse -1 rather than wrap it. First, a table of flags and pairs of
# flags that must be refused with a given message instead of one of them silently losing.
source "$(dirname "$0")/lib.sh"
LANDMARK=$(readlink -f "$LANDMARK")  # the trials run inside $WORK

# ---- tiny valid inputs ----
passkey_tokens "$WORK/text" "$WORK/data" --docs 20 --max-fillers 2
"$LANDMARK" train --data "$WORK/data" --out "$WORK/lm" --layers 1 --embd 16 --heads 2 --block-size 32 --batch 2 \
  --steps 2 --attention landmark --landmark-every 7 --quiet > /dev/null
"$LANDMARK" train --data "$WORK/data" --out "$WORK/std" --layers 1 --embd 16 --heads 2 --block-size 32 --batch 2 \
  --steps 2 --quiet > /dev/null
head -c 600 "$WORK/text/val.txt" > "$WORK/prompt.txt"
printf 'length\ta\tb\n1\t2\t3\n2\t4\t-\n' > "$WORK/table.tsv"
LM="$WORK/lm/checkpoint.safetensors"
HAY="$(cd "$(dirname "$0")/../data" && pwd)/persuasion_opening.txt"
"$LANDMARK" tasks-data --out "$WORK/tp" --haystack "$HAY" --docs 0 --prompts 1 --task niah-single --length 300 > /dev/null

# Valid base arguments per subcommand, as "flag value" pairs (a flag with no value: "flag -").
declare -A BASE
BASE[prepare]="--train $WORK/text/train.txt --val $WORK/text/val.txt --out $WORK/p --tokenizer bpe --vocab 300"
BASE[passkey-data]="--out $WORK/pd --docs 5 --max-fillers 2"
BASE[train]="--data $WORK/data --out $WORK/t --layers 1 --embd 16 --heads 2 --block-size 32 --batch 2 --steps 2 --quiet -"
BASE[plot-table]="--out $WORK/t.png"
BASE[groups]="--out $WORK/g.png"
BASE[passkey]="--checkpoint $LM --lengths 300 --trials 1 --chunk 16"
BASE[eval]="--checkpoint $LM --tokens $WORK/data/val.tokens --length 64 --windows 1 --chunk 16"
BASE[generate]="--checkpoint $LM --prompt-file $WORK/prompt.txt --max-new 2 --chunk 16"
BASE[attn-map]="--checkpoint $LM --text-file $WORK/prompt.txt --out $WORK/a.png --max-tokens 40 --chunk 16"
BASE[explore]="--checkpoint $LM --text-file $WORK/prompt.txt --out $WORK/e.html --max-tokens 40 --chunk 16"
BASE[tasks-data]="--out $WORK/td --haystack $HAY --docs 5 --prompts 1 --task niah-single --length 600"
BASE[tasks-eval]="--checkpoint $LM --prompts $WORK/tp/prompts.tsv --chunk 16"
declare -A POSITIONAL
POSITIONAL[plot-table]="$WORK/table.tsv"

# Negative, zero, not a number, past int64, int64's largest; for FLOAT flags past double and NaN.
INT_VALUES=(-1 0 abc 99999999999999999999 9223372036854775807)
FLOAT_VALUES=(-1 0 abc 1e400 nan)
# ASan reserves terabytes of address space up front, so a sanitizer build gets no limit. (Not
# `ldd | grep -q`: under pipefail, grep's early exit makes ldd die of SIGPIPE and the test say no.)
linked=$(ldd "$LANDMARK" 2> /dev/null || true)
memory_limit="ulimit -v 4000000;"
case "$linked" in *libasan*) memory_limit="" ;; esac

trials=0 failures=0

# ---- flags that must be refused, not silently lose ----
# refused STATUS MESSAGE SUB ARGS...: SUB's base arguments plus ARGS must exit with STATUS, with
# MESSAGE in what it prints on stderr (left in $WORK/err).
refused() {
  local want=$1 message=$2 sub=$3 i rc=0
  shift 3
  read -r -a base <<< "${BASE[$sub]}"
  args=()
  for ((i = 0; i < ${#base[@]}; i += 2)); do
    args+=("${base[i]}")
    [ "${base[i + 1]}" != "-" ] && args+=("${base[i + 1]}")
  done
  trials=$((trials + 1))
  (cd "$WORK" && exec timeout -s KILL 20 "$LANDMARK" "$sub" "${args[@]}" "$@" > "$WORK/out" 2> "$WORK/err") || rc=$?
  if [ "$rc" -ne "$want" ] || ! grep -qF -- "$message" "$WORK/err"; then
    failures=$((failures + 1))
    echo "FAIL: landmark $sub ... $*: exit $rc (expected $want with \"$message\")" >&2
    head -c 400 "$WORK/err" | sed 's/^/    /' >&2
    return 1
  fi
}
# Before these were refused, the first of each pair was dropped without a word (the base gives
# --prompt-file or --text-file; explore refused the pair, but only when run, as exit 1), and a
# negative landmark index or one past the window controlled nothing. (`--seed -1`, which wrapped
# to 2^64-1, is covered below for every UINT flag.)
refused 2 "--prompt excludes --prompt-file" generate --prompt hello || true
refused 2 "--text excludes --text-file" attn-map --text hello || true
refused 2 "--text excludes --text-file" explore --text hello || true
refused 2 "--controlled: must be >= 0, got -1" groups --controlled 1 -1 || true
refused 2 "--seed: must be >= 0, got  -1" passkey-data --seed " -1" || true  # strtoull skips the space
refused 1 "--controlled 99 is past the window's 5 landmarks" groups --controlled 99 || true
# An output that is a FIFO is refused before the evaluation, not after it, and left a FIFO (the
# writer used to rename its file over it).
mkfifo "$WORK/fifo.tsv"
if refused 1 "eval --tsv: $WORK/fifo.tsv is a FIFO (named pipe), not a regular file" eval --tsv "$WORK/fifo.tsv"; then
  if grep -q "window 1/" "$WORK/err" || [ ! -p "$WORK/fifo.tsv" ]; then
    failures=$((failures + 1))
    echo "FAIL: eval --tsv FIFO: refused only after the evaluation, or the FIFO was replaced" >&2
  fi
fi

# ---- every numeric flag with bad values ----
for sub in "${!BASE[@]}"; do
  flags=$("$LANDMARK" "$sub" --help | grep -oE '^ +--[a-z0-9-]+ (INT|UINT|FLOAT)' | awk '{print $1 ":" $2}' | sort -u)
  for flag_type in $flags --no-such-flag:-; do
    flag=${flag_type%%:*}
    # The base arguments without the flag under test (and its value).
    read -r -a base <<< "${BASE[$sub]}"
    args=()
    for ((i = 0; i < ${#base[@]}; i += 2)); do
      [ "${base[i]}" = "$flag" ] && continue
      args+=("${base[i]}")
      [ "${base[i + 1]}" != "-" ] && args+=("${base[i + 1]}")
    done
    [ -n "${POSITIONAL[$sub]:-}" ] && args+=("${POSITIONAL[$sub]}")
    case ${flag_type#*:} in
      FLOAT) values=("${FLOAT_VALUES[@]}") ;;
      -) values=(1) ;;
      *) values=("${INT_VALUES[@]}") ;;
    esac
    for value in "${values[@]}"; do
      trials=$((trials + 1))
      rc=0
      (cd "$WORK" && bash -c "$memory_limit exec timeout -s KILL 20 \"\$0\" \"\$@\"" "$LANDMARK" "$sub" "${args[@]}" "$flag" "$value" \
         > "$WORK/out" 2> "$WORK/err") || rc=$?
      verdict=ok
      case $rc in
        0) # An unsigned flag that took -1 would hold 2^64-1 (CLI11 parses it with strtoull).
           [ "$value" = -1 ] && [ "${flag_type#*:}" = UINT ] && verdict="-1 accepted by an unsigned flag" ;;
        2) ;;
        1) grep -q '^error: ' "$WORK/err" || verdict="exit 1 without an error line"
           name=${flag#--}
           if [ "$verdict" = ok ] && ! grep -qiF -e "$name" -e "${name//-/_}" -e "$value" "$WORK/err"; then
             verdict="an error that names neither the flag nor the value"
           fi ;;
        137) verdict="killed: no answer in 20 s (or out of memory)" ;;
        *) verdict="exit $rc (a signal or an unexpected status)" ;;
      esac
      if [ "$verdict" != ok ]; then
        failures=$((failures + 1))
        echo "FAIL: landmark $sub ... $flag $value: $verdict" >&2
        head -c 400 "$WORK/err" | sed 's/^/    /' >&2
      fi
    done
  done
done
echo "bad flags: $trials trials, $failures failures"
[ "$failures" -eq 0 ] || fail "$failures of $trials bad-flag trials did not end cleanly"
