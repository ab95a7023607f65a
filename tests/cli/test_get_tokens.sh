#!/usr/bin/env bash
# test_get_tokens.sh: scripts/get-tokens.sh, the token directory of make demo-corpus, paper-tables
# and paper-side. From a small corpus already in place (CORPUS; the real one needs a download) it
# writes a BPE tokenizer and both token files; a second call leaves them untouched; a directory
# with only train.tokens (an interrupted prepare) is rebuilt; bad calls are refused by name.
# Usage: test_get_tokens.sh path/to/landmark
source "$(dirname "$0")/lib.sh"
SCRIPT="$(cd "$(dirname "$0")/../.." && pwd)/scripts/get-tokens.sh"
small_text "$WORK/corpus"
export LANDMARK CORPUS="$WORK/corpus"

bash "$SCRIPT" "$WORK/tok" > "$WORK/log1" 2>&1 || { cat "$WORK/log1" >&2; fail "the first call failed"; }
expect "$WORK/log1" "corpus: $WORK/corpus already there"
expect "$WORK/log1" "tokens: BPE of 4096 tokens into $WORK/tok"
for f in tokenizer.json train.tokens val.tokens; do [ -s "$WORK/tok/$f" ] || fail "$f not written"; done
# A BPE tokenizer, not the byte one: it has merges, learned from this text.
grep -q '"merges":\[\[' "$WORK/tok/tokenizer.json" || fail "tokenizer.json holds no merges"
# The token file's header (train/token_file.cpp: magic, version, width at 8..15; vocabulary at 16,
# token count at 24, little-endian u64): more than the 256 bytes, and fewer tokens than the 30,000
# bytes of text, which a BPE with merges must give.
vocab=$(od -An -t u8 -j 16 -N 8 "$WORK/tok/train.tokens" | tr -d ' ')
count=$(od -An -t u8 -j 24 -N 8 "$WORK/tok/train.tokens" | tr -d ' ')
[ "$vocab" -gt 256 ] || fail "train.tokens has a vocabulary of $vocab, not a BPE's"
if [ "$count" -le 0 ] || [ "$count" -ge 30000 ]; then fail "train.tokens holds $count tokens for 30,000 bytes"; fi

# Again: nothing is redone.
before=$(stat -c %Y.%s "$WORK/tok/train.tokens" "$WORK/tok/val.tokens")
sleep 1
bash "$SCRIPT" "$WORK/tok" > "$WORK/log2" 2>&1 || { cat "$WORK/log2" >&2; fail "the second call failed"; }
expect "$WORK/log2" "tokens: $WORK/tok already there"
[ "$(stat -c %Y.%s "$WORK/tok/train.tokens" "$WORK/tok/val.tokens")" = "$before" ] || fail "the second call rewrote the token files"

# Only train.tokens (prepare stopped between the two files): both are written again.
rm "$WORK/tok/val.tokens"
bash "$SCRIPT" "$WORK/tok" > "$WORK/log3" 2>&1 || { cat "$WORK/log3" >&2; fail "the third call failed"; }
expect "$WORK/log3" "tokens: BPE of 4096 tokens"
[ -s "$WORK/tok/val.tokens" ] || fail "val.tokens not rebuilt"

# Refused: two arguments; no program.
bash "$SCRIPT" "$WORK/a" "$WORK/b" > "$WORK/bad1" 2>&1 && fail "two arguments accepted"
expect "$WORK/bad1" "one argument at most"
LANDMARK="$WORK/nothing" bash "$SCRIPT" "$WORK/c" > "$WORK/bad2" 2>&1 && fail "a missing program accepted"
expect "$WORK/bad2" "no landmark program at $WORK/nothing"
[ ! -e "$WORK/c" ] || fail "a refused call created its output directory"
echo "get-tokens: all checks passed"
