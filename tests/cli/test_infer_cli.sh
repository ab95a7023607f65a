#!/usr/bin/env bash
# test_infer_cli.sh: the inference commands as a user runs them, on two tiny models trained for a
# few steps (what they answer does not matter, only what the commands do): `eval --cmt-cutoff`
# prints drop_rate=0 at cutoff 0 and drop_rate=1 at cutoff 1 (each S(CMT) < 1), a model without a
# CMT refuses the flag with a clear message and a non-zero exit, `eval --granularity all` prints
# the three rows of Table 2, `passkey --recall` prints the layer x head table and writes its heat
# map, `passkey --scoring paper` says so in its header, and `passkey --block-dir` (block K/V on
# disk) runs, leaves nothing in its directory, keeps a file of the user's there intact and
# refuses a missing directory (that its logits equal RAM's bit for bit: tests/test_infer.cpp), and
# `eval --search approx` reports the rows it could not prove exact, and `eval --windows-tsv` /
# `--paired-with` compare two evaluations window for window, and `passkey --answers` writes one
# row per prompt whose `correct` column adds up to the printed count (RAM and disk: the same rows),
# and `passkey --search approx` reports its unproven rows as eval does, and eval notes a version-1
# token file (no CRC-32) as read unverified, as train does, and `--certify` reports the left-out
# weight per layer without changing what is scored (refused with stingy positions), `--left-out`
# prints adaptive k's mean k, and the CMT skip scores as `--no-cmt-skip` does, and `attn-map` notes
# on stderr that it read only the first --max-tokens tokens of a longer text, and only then.
# Usage: test_infer_cli.sh path/to/landmark
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # LANDMARK, WORK, fail, expect, passkey_tokens

passkey_tokens "$WORK/data" "$WORK/tok" --docs 200 --max-fillers 3 --seed 3
TINY=(--data "$WORK/tok" --layers 1 --embd 32 --heads 2 --block-size 128 --batch 2 --steps 3 --eval-every 0
      --attention landmark --landmark-every 10 --quiet)
"$LANDMARK" train "${TINY[@]}" --out "$WORK/cmt" --cmt > /dev/null
"$LANDMARK" train "${TINY[@]}" --out "$WORK/plain" > /dev/null
EVAL=(eval --tokens "$WORK/tok/val.tokens" --length 300 --windows 2 --chunk 50 --k 2)

"$LANDMARK" "${EVAL[@]}" --checkpoint "$WORK/cmt/checkpoint.safetensors" --cmt-cutoff 0 > "$WORK/out0" 2> "$WORK/err0"
expect "$WORK/out0" "drop_rate=0 "
grep -q "read unverified" "$WORK/err0" && fail "eval called a checksummed token file unverified"
# A version-1 copy of the token file (its header says 1 and has no CRC-32 field; such files are
# still read): eval notes that it was read unverified, in the words train uses.
V2="$WORK/tok/val.tokens" V1="$WORK/val_v1.tokens"
fp_len=$(od -An -tu4 -j32 -N4 "$V2" | tr -d ' ')
crc_at=$((36 + fp_len))  # magic 8, version 4, width 4, vocab 8, count 8, fingerprint 4 + its bytes
{ head -c 8 "$V2"; printf '\001\000\000\000'; head -c "$crc_at" "$V2" | tail -c +13
  tail -c +$((crc_at + 5)) "$V2"; } > "$V1"
"$LANDMARK" eval --tokens "$V1" --length 300 --windows 2 --chunk 50 --k 2 --cmt-cutoff 0 \
  --checkpoint "$WORK/cmt/checkpoint.safetensors" > "$WORK/out_v1" 2> "$WORK/err_v1"
expect "$WORK/err_v1" "note: $V1 has no CRC-32 (written before version 2): read unverified"
expect "$WORK/out_v1" "drop_rate=0 "
"$LANDMARK" "${EVAL[@]}" --checkpoint "$WORK/cmt/checkpoint.safetensors" --cmt-cutoff 1 > "$WORK/out1" 2> /dev/null
expect "$WORK/out1" "drop_rate=1 "
expect "$WORK/out1" "tokens scored: every position of each window"

if "$LANDMARK" "${EVAL[@]}" --checkpoint "$WORK/plain/checkpoint.safetensors" --cmt-cutoff 0.5 > "$WORK/out2" 2>&1; then
  fail "eval --cmt-cutoff on a model without a CMT succeeded"
fi
expect "$WORK/out2" "trained without a context-miss token"

# --blocks-on-device is for a CUDA session only, and never with files or f16 (checked before any
# model work, so also in a build without CUDA).
if "$LANDMARK" "${EVAL[@]}" --checkpoint "$WORK/plain/checkpoint.safetensors" --blocks-on-device > "$WORK/out4" 2>&1; then
  fail "eval --blocks-on-device on the CPU succeeded"
fi
expect "$WORK/out4" "--blocks-on-device: block K/V can be kept on the device only with --device cuda"
if "$LANDMARK" "${EVAL[@]}" --checkpoint "$WORK/plain/checkpoint.safetensors" --blocks-on-device --device cuda \
  --kv-dtype f16 > "$WORK/out5" 2>&1; then
  fail "eval --blocks-on-device --kv-dtype f16 succeeded"
fi
expect "$WORK/out5" "are neither in files (--block-dir) nor f16"

"$LANDMARK" "${EVAL[@]}" --checkpoint "$WORK/plain/checkpoint.safetensors" --granularity all > "$WORK/out3" 2> /dev/null
expect "$WORK/out3" "Per Head"
[ "$(grep -cE '^(yes|no) ' "$WORK/out3")" -eq 3 ] || { cat "$WORK/out3" >&2; fail "expected three granularity rows"; }

# --search approx: it says how many rows it could not prove exact; 300 tokens at F 10 are 30 blocks,
# one tile of 64, so a budget of one tile scores every key: none, and the scan's perplexity.
"$LANDMARK" "${EVAL[@]}" --checkpoint "$WORK/plain/checkpoint.safetensors" > "$WORK/scan.txt" 2> /dev/null
"$LANDMARK" "${EVAL[@]}" --checkpoint "$WORK/plain/checkpoint.safetensors" --search approx --search-tiles 1 \
  > "$WORK/approx.txt" 2> /dev/null
expect "$WORK/approx.txt" "approx search (1 tiles): 0 of "
[ "$(grep -E '^ *300 ' "$WORK/scan.txt")" = "$(grep -E '^ *300 ' "$WORK/approx.txt")" ] && [ -n "$(grep -E '^ *300 ' "$WORK/scan.txt")" ] ||
  { paste "$WORK/scan.txt" "$WORK/approx.txt" >&2; fail "eval --search approx over one tile differs from the scan"; }

# --windows-tsv and --paired-with: a model paired with its own windows is exactly even (ratio 1, an
# interval of one point); windows of 150 pair with the 300s (two per span); lengths that do not
# divide, and a file that is not a window table, are refused before any evaluation.
"$LANDMARK" "${EVAL[@]}" --checkpoint "$WORK/plain/checkpoint.safetensors" --windows-tsv "$WORK/w300.tsv" > /dev/null 2>&1
[ "$(sed -n 2p "$WORK/w300.tsv")" = "$(printf 'window\tfirst_token\ttokens\tnats')" ] && [ "$(wc -l < "$WORK/w300.tsv")" -eq 4 ] ||
  { cat "$WORK/w300.tsv" >&2; fail "eval --windows-tsv: expected the token file's line, a header and two windows"; }
"$LANDMARK" "${EVAL[@]}" --checkpoint "$WORK/plain/checkpoint.safetensors" --paired-with "$WORK/w300.tsv" > "$WORK/self.txt" 2> /dev/null
expect "$WORK/self.txt" "paired ratio=1.0000 ci_low=1.0000 ci_high=1.0000 "
"$LANDMARK" eval --tokens "$WORK/tok/val.tokens" --length 150 --windows 4 --chunk 50 --k 2 \
  --checkpoint "$WORK/cmt/checkpoint.safetensors" --paired-with "$WORK/w300.tsv" > "$WORK/pair.txt" 2> /dev/null
expect "$WORK/pair.txt" "(2 spans of 300)"
expect "$WORK/pair.txt" " spans=2 span_length=300"
if "$LANDMARK" eval --tokens "$WORK/tok/val.tokens" --length 200 --windows 2 --chunk 50 --k 2 \
  --checkpoint "$WORK/plain/checkpoint.safetensors" --paired-with "$WORK/w300.tsv" > "$WORK/bad_pair" 2>&1; then
  fail "eval --paired-with accepted windows of 300 against 200"
fi
expect "$WORK/bad_pair" "to be a multiple of the other"
grep -q "window 1/" "$WORK/bad_pair" && fail "eval --paired-with refused its file only after evaluating"
if "$LANDMARK" "${EVAL[@]}" --checkpoint "$WORK/plain/checkpoint.safetensors" --paired-with "$WORK/scan.txt" > "$WORK/bad_pair2" 2>&1; then
  fail "eval --paired-with accepted a file that is not a window table"
fi
expect "$WORK/bad_pair2" "does not start with the line naming its token file"

"$LANDMARK" passkey --checkpoint "$WORK/cmt/checkpoint.safetensors" --lengths 400 --trials 2 --chunk 50 --k 2 \
  --recall --recall-plot "$WORK/recall.png" --scoring paper > "$WORK/out4"
expect "$WORK/out4" "scoring: paper"
expect "$WORK/out4" "retrieval recall, all lengths"
[ -s "$WORK/recall.png" ] || fail "no recall heat map written"
PK=(passkey --checkpoint "$WORK/plain/checkpoint.safetensors" --lengths 400 --trials 3 --chunk 50 --k 2)
"$LANDMARK" "${PK[@]}" --answers "$WORK/ram_answers.tsv" > "$WORK/ram.txt" 2> /dev/null
# --answers: a header, one row per trial, and a `correct` column that adds up to the printed count.
[ "$(head -n 1 "$WORK/ram_answers.tsv")" = "$(printf 'length\ttrial\tkey\tcorrect\tanswer')" ] ||
  fail "passkey --answers: unexpected header: $(head -n 1 "$WORK/ram_answers.tsv")"
[ "$(awk -F'\t' 'NR > 1 && $1 == 400' "$WORK/ram_answers.tsv" | wc -l)" -eq 3 ] || fail "passkey --answers: not 3 rows at 400"
printed=$(sed -n 's/^ *400 .*(\( *[0-9]*\)\/ *3).*/\1/p' "$WORK/ram.txt" | tr -d ' ')
[ -n "$printed" ] && [ "$(awk -F'\t' 'NR > 1 { s += $4 } END { print s + 0 }' "$WORK/ram_answers.tsv")" = "$printed" ] ||
  fail "passkey --answers: the correct column does not add up to the printed count ($printed)"
# --search approx: passkey too says how many rows it could not prove exact. 400 tokens at F 10 are
# 40 blocks, one tile of 64, so a budget of one tile proves every row (0 of N, N > 0 counted over
# the prefill and the answer) and the answers are the scan's; the scan prints no such line.
"$LANDMARK" "${PK[@]}" --search approx --search-tiles 1 --answers "$WORK/approx_answers.tsv" > "$WORK/pk_approx.txt" 2> /dev/null
rows=$(sed -n 's/^approx search (1 tiles): 0 of \([0-9]*\) (query, layer, head) rows.*/\1/p' "$WORK/pk_approx.txt")
[ -n "$rows" ] && [ "$rows" -gt 0 ] || { cat "$WORK/pk_approx.txt" >&2; fail "passkey --search approx: no '0 of N' line with N > 0"; }
cmp -s "$WORK/ram_answers.tsv" "$WORK/approx_answers.tsv" ||
  { paste "$WORK/ram_answers.tsv" "$WORK/approx_answers.tsv" >&2; fail "passkey --search approx over one tile answered differently"; }
grep -q '^approx search' "$WORK/ram.txt" && fail "passkey with the scan printed an approx search line"
# --certify (beyond the paper): one line per layer with the left-out weight, the same perplexity and
# answers as without it; every block retrieved (k 100 >= 30 blocks) leaves nothing out; stingy
# positions and a standard reading are refused before anything is printed.
"$LANDMARK" "${EVAL[@]}" --checkpoint "$WORK/plain/checkpoint.safetensors" --positions exact > "$WORK/exact.txt" 2> /dev/null
"$LANDMARK" "${EVAL[@]}" --checkpoint "$WORK/plain/checkpoint.safetensors" --positions exact --certify \
  > "$WORK/cert.txt" 2> /dev/null
grep -qE '^  layer 0: [0-9]+ rows, M mean [0-9.e+-]+, 99th percentile [0-9.e+-]+, max [0-9.e+-]+; worst bound ' "$WORK/cert.txt" ||
  { cat "$WORK/cert.txt" >&2; fail "eval --certify printed no per-layer line"; }
[ "$(grep -E '^ *300 ' "$WORK/exact.txt")" = "$(grep -E '^ *300 ' "$WORK/cert.txt")" ] ||
  { paste "$WORK/exact.txt" "$WORK/cert.txt" >&2; fail "eval --certify changed the perplexity"; }
"$LANDMARK" "${EVAL[@]:0:9}" --k 100 --checkpoint "$WORK/plain/checkpoint.safetensors" --positions exact --certify \
  > "$WORK/cert_all.txt" 2> /dev/null
expect "$WORK/cert_all.txt" "M mean 0, 99th percentile 0, max 0; worst bound 0"
if "$LANDMARK" "${EVAL[@]}" --checkpoint "$WORK/plain/checkpoint.safetensors" --certify > "$WORK/cert_stingy.txt" 2>&1; then
  fail "eval --certify with stingy positions succeeded"
fi
expect "$WORK/cert_stingy.txt" "--certify needs --positions exact"
grep -qE '^ *300 ' "$WORK/cert_stingy.txt" && fail "eval --certify was refused only after the evaluation"
"$LANDMARK" "${PK[@]}" --positions exact --answers "$WORK/exact_answers.tsv" > /dev/null 2>&1
"$LANDMARK" "${PK[@]}" --positions exact --certify --answers "$WORK/cert_answers.tsv" > "$WORK/pk_cert.txt" 2> /dev/null
expect "$WORK/pk_cert.txt" "left-out weight M per (query, head) row, length 400"
cmp -s "$WORK/exact_answers.tsv" "$WORK/cert_answers.tsv" || fail "passkey --certify answered differently"
# --left-out (adaptive k) prints its mean k and the certificate, refuses stingy positions; the CMT
# skip reads fewer blocks at a cutoff and scores the same as --no-cmt-skip.
"$LANDMARK" "${EVAL[@]}" --checkpoint "$WORK/plain/checkpoint.safetensors" --positions exact --left-out 0.05 \
  > "$WORK/adapt.txt" 2> /dev/null
grep -qE '^adaptive k \(--left-out 0.05, --k 2\): mean k [0-9.]+ over [0-9]+ \(query, layer, head\) rows' "$WORK/adapt.txt" ||
  { cat "$WORK/adapt.txt" >&2; fail "eval --left-out printed no adaptive k line"; }
expect "$WORK/adapt.txt" "left-out weight M per (query, head) row"
if "$LANDMARK" "${EVAL[@]}" --checkpoint "$WORK/plain/checkpoint.safetensors" --left-out 0.05 > "$WORK/adapt_bad.txt" 2>&1; then
  fail "eval --left-out with stingy positions succeeded"
fi
expect "$WORK/adapt_bad.txt" "--left-out needs --positions exact"
if "$LANDMARK" "${EVAL[@]}" --checkpoint "$WORK/plain/checkpoint.safetensors" --positions exact --certify \
  --granularity all > "$WORK/cert_all_gran.txt" 2>&1; then
  fail "eval --certify --granularity all succeeded"
fi
expect "$WORK/cert_all_gran.txt" "--certify and --left-out read one granularity"
"$LANDMARK" "${EVAL[@]}" --checkpoint "$WORK/cmt/checkpoint.safetensors" --cmt-cutoff 0.5 > "$WORK/skip_on.txt" 2> /dev/null
"$LANDMARK" "${EVAL[@]}" --checkpoint "$WORK/cmt/checkpoint.safetensors" --cmt-cutoff 0.5 --no-cmt-skip \
  > "$WORK/skip_off.txt" 2> /dev/null
expect "$WORK/skip_on.txt" "CMT skip on: "
expect "$WORK/skip_off.txt" "CMT skip off (--no-cmt-skip): "
[ "$(grep -E '^ *300 ' "$WORK/skip_on.txt")" = "$(grep -E '^ *300 ' "$WORK/skip_off.txt")" ] ||
  { paste "$WORK/skip_on.txt" "$WORK/skip_off.txt" >&2; fail "the CMT skip changed the perplexity"; }
# An output whose directory is missing is refused before any prompt is read.
if "$LANDMARK" "${PK[@]}" --answers "$WORK/missing/a.tsv" > "$WORK/bad_answers" 2>&1; then
  fail "passkey --answers into a missing directory succeeded"
fi
expect "$WORK/bad_answers" "passkey: --answers $WORK/missing/a.tsv: the directory $WORK/missing does not exist"
grep -q "^ *400 " "$WORK/bad_answers" && fail "passkey --answers refused its file only after the prompts"
mkdir "$WORK/blocks"
echo "the user's file" > "$WORK/blocks/layer0.blocks"  # the name the old store used (and truncated)
"$LANDMARK" "${PK[@]}" --block-dir "$WORK/blocks" --answers "$WORK/disk_answers.tsv" > "$WORK/disk.txt" 2> /dev/null
cmp -s "$WORK/ram_answers.tsv" "$WORK/disk_answers.tsv" ||
  { paste "$WORK/ram_answers.tsv" "$WORK/disk_answers.tsv" >&2; fail "passkey on disk answered differently from RAM"; }
[ "$(ls "$WORK/blocks")" = "layer0.blocks" ] || { ls -l "$WORK/blocks" >&2; fail "block files left behind"; }
[ "$(cat "$WORK/blocks/layer0.blocks")" = "the user's file" ] || fail "a file of the user's was changed"
if "$LANDMARK" "${PK[@]}" --block-dir "$WORK/missing" > "$WORK/out5" 2>&1; then
  fail "passkey --block-dir with a missing directory succeeded"
fi
expect "$WORK/out5" "--block-dir"
# --scorer (beyond the paper): a standard model is read in blocks by a training-free scorer, the
# cost line and --mass-recall's agreement line printed, its tsv row says so; --scorer landmark on
# it, and the oracle past its length limit, are refused naming the flag, before any reading.
"$LANDMARK" train "${TINY[@]:0:16}" --attention standard --landmark-every 10 --quiet --out "$WORK/std" > /dev/null
"$LANDMARK" "${EVAL[@]}" --checkpoint "$WORK/std/checkpoint.safetensors" --scorer quest --mass-recall \
  --tsv "$WORK/std_quest.tsv" > "$WORK/std_quest.txt" 2> /dev/null
expect "$WORK/std_quest.txt" "a standard model read in blocks of F; attention size = chunk + k F"
grep -qE '^block scorer quest \(beyond the paper\): [0-9.]+ summary rows scored per \(query, head\) row with a cache; [0-9]+ bytes per block' "$WORK/std_quest.txt" ||
  { cat "$WORK/std_quest.txt" >&2; fail "eval --scorer quest printed no cost line"; }
grep -qE '^mass recall against the oracle: 0\.[0-9]+ of the cached blocks. attention mass in the chosen blocks, IoU [01]\.[0-9]+' "$WORK/std_quest.txt" ||
  { cat "$WORK/std_quest.txt" >&2; fail "eval --mass-recall printed no agreement line"; }
[ "$(tail -1 "$WORK/std_quest.tsv" | cut -f1,21)" = "$(printf 'standard\tquest')" ] ||
  { cat "$WORK/std_quest.tsv" >&2; fail "eval --tsv: no standard row with scorer quest"; }
# The oracle's own choice is its top k: IoU 1.
"$LANDMARK" "${EVAL[@]}" --checkpoint "$WORK/std/checkpoint.safetensors" --scorer oracle --mass-recall \
  > "$WORK/std_oracle.txt" 2> /dev/null
expect "$WORK/std_oracle.txt" "IoU 1.0000 with the oracle's top k"
# explore reads it too: every token, layer and head has a row, those after the first block chose blocks.
"$LANDMARK" explore --checkpoint "$WORK/std/checkpoint.safetensors" --scorer mean --chunk 50 --k 2 --max-tokens 200 \
  --text-file "$WORK/data/val.txt" --out "$WORK/std.html" --dump-retrieval "$WORK/std_r.tsv" > /dev/null 2>&1 ||
  fail "explore --scorer mean on a standard model failed"
[ "$(tail -n +2 "$WORK/std_r.tsv" | wc -l)" -eq 400 ] || fail "explore: $(tail -n +2 "$WORK/std_r.tsv" | wc -l) rows, expected 200 x 2 heads"
awk -F'\t' 'NR > 1 && $1 >= 60 && $4 == "-" { bad = 1 } END { exit bad }' "$WORK/std_r.tsv" ||
  fail "explore: a token past the first chunk retrieved nothing"
# attn-map reads at most --max-tokens tokens: it says so on stderr when it cuts the text (in
# explore's words), and says nothing when the text fits, here exactly --max-tokens bytes (the byte
# tokenizer: one token a byte).
MAP=(attn-map --checkpoint "$WORK/plain/checkpoint.safetensors" --chunk 50 --k 2 --max-tokens 120)
"$LANDMARK" "${MAP[@]}" --text-file "$WORK/data/val.txt" --out "$WORK/map_cut.png" > /dev/null 2> "$WORK/map_cut.err"
expect "$WORK/map_cut.err" "note: reading the first 120 of $(wc -c < "$WORK/data/val.txt" | tr -d ' ') tokens (--max-tokens)"
[ -s "$WORK/map_cut.png" ] || fail "attn-map wrote no map"
fits=$(printf 'The grass is green. %.0s' 1 2 3 4 5 6)  # 6 x 20 = 120 bytes
[ "${#fits}" -eq 120 ] || fail "the fitting text is ${#fits} bytes, not 120"
"$LANDMARK" "${MAP[@]}" --text "$fits" --out "$WORK/map_fits.png" > "$WORK/map_fits.txt" 2> "$WORK/map_fits.err"
expect "$WORK/map_fits.txt" "wrote $WORK/map_fits.png"
grep -q "note: reading the first" "$WORK/map_fits.err" && { cat "$WORK/map_fits.err" >&2; fail "attn-map noted a cut in a text that fits"; }
if "$LANDMARK" passkey --trials 3 --chunk 50 --k 2 --checkpoint "$WORK/std/checkpoint.safetensors" --lengths 400 --scorer landmark > "$WORK/std_lm.txt" 2>&1; then
  fail "passkey --scorer landmark on a standard model succeeded"
fi
expect "$WORK/std_lm.txt" "--scorer landmark: this is a standard model, it has no landmark keys"
if "$LANDMARK" passkey --trials 3 --chunk 50 --k 2 --checkpoint "$WORK/std/checkpoint.safetensors" --scorer oracle --lengths 40000 \
  > "$WORK/std_long.txt" 2>&1; then
  fail "passkey --scorer oracle past 32768 tokens succeeded"
fi
expect "$WORK/std_long.txt" "--scorer oracle: the oracle scores every cached key (dense), for texts up to 32768 tokens"
if "$LANDMARK" passkey --trials 3 --chunk 50 --k 2 --checkpoint "$WORK/std/checkpoint.safetensors" --lengths 400 \
  --scorer mean --reps 2 > "$WORK/std_reps.txt" 2>&1; then
  fail "passkey --reps with --scorer mean succeeded (the flag would be ignored)"
fi
expect "$WORK/std_reps.txt" "--reps: only --scorer reps keeps representative keys (the scorer here is mean)"
echo "inference CLI: all checks passed"
