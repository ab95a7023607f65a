#!/usr/bin/env bash
# test_train_cli.sh: the training-side commands as a user runs them, on tiny models trained for a
# few steps (what they learn does not matter, only what the commands do):
#   - `train --doc-starts` says how many documents its windows start at;
#   - `train --init-from` a standard model into a landmark one logs what it copied and records the
#     parent (path and CRC-32, checked against Python's zlib when python3 is there) in the
#     checkpoint; with --resume it is a usage error; --layers, --embd or --heads other than the
#     parent's are errors naming the key and both values; the block size and landmark_every not
#     given are the parent's, and the log says so;
#   - `train --resume` with a model or training flag (or --seed) that contradicts the checkpoint is an
#     error naming the key and both values; flags that agree with it are accepted;
#   - `prepare --tokenizer-from` makes token files of other text with the same tokenizer (byte for
#     byte), so a model trained on one set can go on with `--init-from` on the other; a BPE trained
#     on that other text is refused by name;
#   - `passkey --checkpoint` takes a standard model alone and writes `length standard_pct`;
#   - `plot-table` draws that table, and refuses a table with a word in a number's place;
#   - SIGTERM makes `train` checkpoint and exit with 143 (128 + 15), like Ctrl-C does with 130;
#   - a run stopped at step 10 of 20 and resumed without --steps ends at 20 with the same losses as
#     one run straight through, and every step is in metrics.jsonl once, even when lines past the
#     checkpoint were written before it died.
#   - `train --xl-cache --segment` (Transformer-XL) says how it reads its segments and counts its
#     tokens per step; `eval` of that model prints Table 1's XL row at lengths past the window; the
#     bad combinations are errors naming the flags.
#   - metrics.jsonl as a symbolic link, a FIFO or a directory is refused at once, naming it, and
#     the link's target is left as it was.
# Usage: test_train_cli.sh path/to/landmark
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # LANDMARK, WORK, fail, expect, passkey_tokens

passkey_tokens "$WORK/data" "$WORK/tok" --docs 300 --max-fillers 4 --uniform-distance --seed 3
TINY=(--data "$WORK/tok" --layers 1 --embd 32 --heads 2 --block-size 128 --batch 2 --eval-every 0)

"$LANDMARK" train "${TINY[@]}" --steps 3 --out "$WORK/std" --doc-starts > "$WORK/std.log"
expect "$WORK/std.log" "windows start at one of"
PARENT="$WORK/std/checkpoint.safetensors"

"$LANDMARK" train "${TINY[@]}" --steps 3 --out "$WORK/ft" --init-from "$PARENT" --attention landmark \
  --landmark-every 10 > "$WORK/ft.log"
expect "$WORK/ft.log" "init from $PARENT (step 3, standard attention, crc32 "
expect "$WORK/ft.log" "<|landmark|> row"
"$LANDMARK" info "$WORK/ft/checkpoint.safetensors" > "$WORK/ft.info"
expect "$WORK/ft.info" "\"parent\""
if command -v python3 > /dev/null; then
  crc=$(python3 -c "import sys, zlib; print('%08x' % zlib.crc32(open(sys.argv[1], 'rb').read()))" "$PARENT")
  expect "$WORK/ft.info" "\"crc32\": \"$crc\""
fi
if "$LANDMARK" train "${TINY[@]}" --steps 3 --out "$WORK/bad" --init-from "$PARENT" --resume "$PARENT" > "$WORK/bad.log" 2>&1; then
  fail "train --init-from with --resume succeeded"
fi
expect "$WORK/bad.log" "excludes"

# A child's flags that contradict the parent's architecture are errors naming the key and both
# values: 4 heads would read the parent's 2 heads of 16 as 4 of 8, a second layer would start fresh.
for bad in "--heads 4|n_head is 4 on the command line but 2 in the parent" \
           "--layers 2|n_layer is 2 on the command line but 1 in the parent" \
           "--embd 64|n_embd is 64 on the command line but 32 in the parent"; do
  read -r -a flags <<< "${bad%%|*}"
  exits_with 1 "$WORK/contra.log" "$LANDMARK" train --data "$WORK/tok" --batch 2 --eval-every 0 --steps 2 \
    --out "$WORK/contra" --init-from "$PARENT" "${flags[@]}"
  expect "$WORK/contra.log" "--init-from $PARENT: ${bad#*|}"
done
# Not given, the landmark parent's block size and landmark_every are the child's, and the log says so.
"$LANDMARK" train --data "$WORK/tok" --batch 2 --eval-every 0 --steps 2 --out "$WORK/ft2" \
  --init-from "$WORK/ft/checkpoint.safetensors" --attention landmark > "$WORK/ft2.log"
inherited="from the parent (not given here): n_layer 1, n_embd 32, n_head 2, block_size 128, landmark_every 10"
expect "$WORK/ft2.log" "$inherited"
"$LANDMARK" info "$WORK/ft2/checkpoint.safetensors" > "$WORK/ft2.info"
expect "$WORK/ft2.info" '"block_size": 128,'
expect "$WORK/ft2.info" '"landmark_every": 10,'
# --resume continues the run as it was: a model or training flag that contradicts the checkpoint is
# an error naming the key and both values; flags that agree with it are accepted.
cp -r "$WORK/ft" "$WORK/ft_resume"
for bad in "--landmark-every 20|landmark_every is 20 on the command line but 10 in the checkpoint" \
           "--heads 1|n_head is 1 on the command line but 2 in the checkpoint" \
           "--lr 0.5|lr is 0.5 on the command line but 0.002 in the checkpoint" \
           "--seed 7|seed is 7 on the command line but 1337 in the checkpoint"; do
  read -r -a flags <<< "${bad%%|*}"
  exits_with 1 "$WORK/contra.log" "$LANDMARK" train --data "$WORK/tok" --steps 5 --out "$WORK/ft_resume" \
    --resume "$WORK/ft_resume/checkpoint.safetensors" "${flags[@]}"
  expect "$WORK/contra.log" "--resume $WORK/ft_resume/checkpoint.safetensors: ${bad#*|}"
done
"$LANDMARK" train "${TINY[@]}" --steps 5 --out "$WORK/ft_resume" --resume "$WORK/ft_resume/checkpoint.safetensors" \
  --attention landmark --landmark-every 10 > "$WORK/ft_resume.log"
expect "$WORK/ft_resume.log" "stopped: done at step 5"

# A curriculum over two texts with one tokenizer: BPE on the first, reused for the second.
"$LANDMARK" passkey-data --out "$WORK/lists" --docs 200 --max-fillers 2 --list-docs 0.5 --seed 4 > /dev/null
"$LANDMARK" prepare --train "$WORK/data/train.txt" --val "$WORK/data/val.txt" --out "$WORK/bpe_a" --tokenizer bpe \
  --vocab 300 > /dev/null 2>&1
"$LANDMARK" prepare --train "$WORK/lists/train.txt" --val "$WORK/lists/val.txt" --out "$WORK/bpe_b" \
  --tokenizer-from "$WORK/bpe_a/tokenizer.json" > /dev/null 2>&1
cmp -s "$WORK/bpe_a/tokenizer.json" "$WORK/bpe_b/tokenizer.json" || fail "prepare --tokenizer-from wrote another tokenizer"
"$LANDMARK" prepare --train "$WORK/lists/train.txt" --val "$WORK/lists/val.txt" --out "$WORK/bpe_c" --tokenizer bpe \
  --vocab 300 > /dev/null 2>&1
cmp -s "$WORK/bpe_a/tokenizer.json" "$WORK/bpe_c/tokenizer.json" && fail "two texts gave the same BPE: the check below proves nothing"
BPE=(--layers 1 --embd 32 --heads 2 --block-size 64 --batch 2 --eval-every 0 --steps 2)
"$LANDMARK" train "${BPE[@]}" --data "$WORK/bpe_a" --out "$WORK/cur_a" > /dev/null
"$LANDMARK" train "${BPE[@]}" --data "$WORK/bpe_b" --out "$WORK/cur_b" --init-from "$WORK/cur_a/checkpoint.safetensors" \
  > "$WORK/cur_b.log" 2>&1 || { cat "$WORK/cur_b.log" >&2; fail "--init-from on data prepared with --tokenizer-from"; }
if "$LANDMARK" train "${BPE[@]}" --data "$WORK/bpe_c" --out "$WORK/cur_c" --init-from "$WORK/cur_a/checkpoint.safetensors" \
  > "$WORK/cur_c.log" 2>&1; then
  fail "--init-from accepted data made with another tokenizer"
fi
expect "$WORK/cur_c.log" "tokenizer"

"$LANDMARK" passkey --checkpoint "$PARENT" --lengths 300,600 --trials 2 --tsv "$WORK/std.tsv" > "$WORK/pk.log" 2> /dev/null
expect "$WORK/pk.log" "a standard model reading the last 128 tokens"
[ "$(head -1 "$WORK/std.tsv")" = "$(printf 'length\tstandard_pct')" ] || { cat "$WORK/std.tsv" >&2; fail "standard passkey TSV header"; }
"$LANDMARK" plot-table "$WORK/std.tsv" --out "$WORK/std.png" --log-x --y-range 0,100 > /dev/null
[ -s "$WORK/std.png" ] || fail "plot-table wrote no PNG"
printf 'length\tx\n512\tabc\n' > "$WORK/bad.tsv"
if "$LANDMARK" plot-table "$WORK/bad.tsv" --out "$WORK/bad.png" > "$WORK/bad_table.log" 2>&1; then
  fail "plot-table accepted a word as a number"
fi
expect "$WORK/bad_table.log" "'abc' is not a number"

# Transformer-XL: windows of 32, a cache of 32, segments of 128; eval at 64 and 256 tokens.
XL=(--data "$WORK/tok" --layers 1 --embd 32 --heads 2 --block-size 32 --batch 2 --eval-every 0 --steps 2)
"$LANDMARK" train "${XL[@]}" --xl-cache 32 --segment 128 --out "$WORK/xl" > "$WORK/xl.log"
expect "$WORK/xl.log" "with an XL cache of 32"
expect "$WORK/xl.log" "rows are segments of 128 tokens read as 4 windows, the cache carried across; 256 tokens per step"
expect "$WORK/xl.log" "xl step      2/2"
for len in 64 256; do
  "$LANDMARK" eval --checkpoint "$WORK/xl/checkpoint.safetensors" --tokens "$WORK/tok/val.tokens" --length $len \
    --windows 2 > "$WORK/xl_eval.log" 2> /dev/null
  expect "$WORK/xl_eval.log" "Eval. Length l_local  XL cache  Blocks  k   Attention Size  Perplexity"
  grep -qE "^$len +32 +32 +None +- +64 +[0-9.]+$" "$WORK/xl_eval.log" || { cat "$WORK/xl_eval.log" >&2; fail "no XL row at length $len"; }
done
for bad in "--xl-cache 32|needs --segment S" "--segment 128|give --xl-cache M too" \
           "--xl-cache 32 --segment 48|must be a multiple of --block-size 32" \
           "--xl-cache 32 --segment 128 --attention landmark|--attention standard"; do
  read -r -a flags <<< "${bad%%|*}"
  if "$LANDMARK" train "${XL[@]}" "${flags[@]}" --out "$WORK/xl_bad" > "$WORK/xl_bad.log" 2>&1; then
    fail "train ${bad%%|*} succeeded"
  fi
  expect "$WORK/xl_bad.log" "error: train: "
  expect "$WORK/xl_bad.log" "${bad#*|}"
done

# SIGTERM during a long run: the step finishes, a checkpoint is written, exit status 143.
"$LANDMARK" train "${TINY[@]}" --steps 100000 --out "$WORK/term" --log-every 0 > "$WORK/term.log" 2>&1 &
pid=$!
for _ in $(seq 300); do
  grep -q "step      2/" "$WORK/term.log" 2> /dev/null && break
  sleep 0.1
done
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
[ "$status" -eq 143 ] || { cat "$WORK/term.log" >&2; fail "train exited with $status after SIGTERM, expected 143"; }
expect "$WORK/term.log" "stopped: interrupted at step"
[ -s "$WORK/term/checkpoint.safetensors" ] || fail "no checkpoint after SIGTERM"

# Resume: stopped at 10 of 20, a line for step 12 left behind as by a kill after the checkpoint,
# then resumed without --steps. The losses must equal an uninterrupted run's, step for step.
"$LANDMARK" train "${TINY[@]}" --steps 20 --out "$WORK/whole" > /dev/null
"$LANDMARK" train "${TINY[@]}" --steps 20 --stop-at 10 --out "$WORK/cut" > /dev/null
echo '{"step":12,"loss":9.99}' >> "$WORK/cut/metrics.jsonl"
"$LANDMARK" train --resume "$WORK/cut/checkpoint.safetensors" --data "$WORK/tok" --out "$WORK/cut" > "$WORK/resume.log"
expect "$WORK/resume.log" "stopped: done at step 20"
losses() { grep -o '"step":[0-9]*,"loss":[-0-9.e]*' "$1/metrics.jsonl"; }
[ "$(losses "$WORK/cut")" = "$(losses "$WORK/whole")" ] || {
  diff <(losses "$WORK/whole") <(losses "$WORK/cut") >&2; fail "a resumed run differs from the uninterrupted one"; }
[ "$(losses "$WORK/cut" | wc -l)" -eq 20 ] || fail "expected 20 step lines after the resume"
# metrics.jsonl is written through the checked open (tensor/files.h AppendFile): a symbolic link
# there is refused and its target left as it was; a FIFO is refused at once, not waited on (the
# timeout would kill a train blocked in open); a directory is refused; each names the path.
for kind in link fifo dir; do
  rm -rf "$WORK/m_$kind" && mkdir -p "$WORK/m_$kind"
  case $kind in
    link) echo "precious" > "$WORK/target.txt"; ln -s "$WORK/target.txt" "$WORK/m_$kind/metrics.jsonl" ;;
    fifo) mkfifo "$WORK/m_$kind/metrics.jsonl" ;;
    dir) mkdir "$WORK/m_$kind/metrics.jsonl" ;;
  esac
  set +e
  timeout 60 "$LANDMARK" train "${TINY[@]}" --steps 2 --out "$WORK/m_$kind" > "$WORK/m_$kind.log" 2>&1
  rc=$?
  set -e
  [ "$rc" -eq 1 ] || { cat "$WORK/m_$kind.log" >&2; fail "train with metrics.jsonl a $kind exited $rc, expected 1"; }
  expect "$WORK/m_$kind.log" "train: the metrics log: $WORK/m_$kind/metrics.jsonl is"
done
expect "$WORK/m_link.log" "symbolic link"
expect "$WORK/m_fifo.log" "FIFO"
expect "$WORK/m_dir.log" "directory"
[ "$(cat "$WORK/target.txt")" = "precious" ] || fail "the link's target was written"
echo "test_train_cli: all checks passed"
