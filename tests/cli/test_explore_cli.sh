#!/usr/bin/env bash
# test_explore_cli.sh: `landmark explore` as a person uses it, on a tiny landmark model trained for
# a few steps here (what it answers does not matter, only what the page shows). Without a browser:
# the page and the retrieval TSV are written (nothing left behind under a temporary name), the page
# has one data-pos element per token, the pass key of the prompt is found, and bad input (a missing
# or empty file, a key not in the text, a standard model without --scorer, CUDA, a bad --select)
# ends in a clear error. With Debian's chromium: the page is opened headless at #pos=N, and the DOM
# it dumps must list, in the panel with id "retrieval", every layer and head with exactly the blocks the C++ side
# wrote to the TSV for that token; a page made with hostile names (a tokenizer special renamed
# "<!--<script>", a text file named so, a text that spells "</script>") must run its script just
# the same; then a screenshot is written to the second argument (default:
# a file in the temporary directory) for a reader to look at. Without chromium the test prints why
# and exits 77 (CTest: skipped) after the checks that need no browser.
# Usage: test_explore_cli.sh path/to/landmark [screenshot.png]
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # LANDMARK, WORK, fail, expect, passkey_tokens
SHOT="${2:-$WORK/explore.png}"

passkey_tokens "$WORK/data" "$WORK/tok" --docs 100 --max-fillers 3 --seed 5
TINY=(--data "$WORK/tok" --layers 2 --embd 32 --heads 2 --block-size 128 --batch 2 --steps 3 --eval-every 0 --quiet)
"$LANDMARK" train "${TINY[@]}" --attention landmark --landmark-every 10 --out "$WORK/lm" > /dev/null
"$LANDMARK" train "${TINY[@]}" --out "$WORK/std" > /dev/null
LM="$WORK/lm/checkpoint.safetensors"

# A pass-key prompt in the paper's words, the key 71432 after six fillers (bytes: ~1,150 tokens).
FILL="The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "
{
  printf 'There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. '
  printf 'I will quiz you about the important information there. '
  for _ in 1 2 3 4 5 6; do printf '%s' "$FILL"; done
  printf 'The pass key is 71432. Remember it. 71432 is the pass key. '
  for _ in 1 2 3 4; do printf '%s' "$FILL"; done
  printf 'What is the pass key? The pass key is'
} > "$WORK/prompt.txt"
N=$(wc -c < "$WORK/prompt.txt")  # byte tokens: one per byte

mkdir "$WORK/out"
"$LANDMARK" explore --checkpoint "$LM" --text-file "$WORK/prompt.txt" --out "$WORK/out/page.html" --k 2 --chunk 100 \
  --dump-retrieval "$WORK/out/retrieval.tsv" > "$WORK/explore.txt"
expect "$WORK/explore.txt" "pass key 71432 in block"
expect "$WORK/explore.txt" "($N tokens,"
[ "$(ls "$WORK/out")" = "$(printf 'page.html\nretrieval.tsv')" ] || { ls -l "$WORK/out" >&2; fail "expected exactly page.html and retrieval.tsv"; }
[ "$(grep -o 'data-pos="' "$WORK/out/page.html" | wc -l)" -eq "$N" ] || fail "the page should hold $N data-pos elements"
LAYERS=2 HEADS=2
[ "$(($(wc -l < "$WORK/out/retrieval.tsv") - 1))" -eq $((N * LAYERS * HEADS)) ] || fail "the TSV should hold one line per token, layer and head"

# Bad input: each a non-zero exit with a message that says what is wrong.
bad() {  # expected message, then the explore arguments
  local want="$1"; shift
  if "$LANDMARK" explore "$@" > "$WORK/bad.txt" 2>&1; then fail "explore $* succeeded"; fi
  expect "$WORK/bad.txt" "$want"
}
: > "$WORK/empty.txt"
bad "--text-file" --checkpoint "$LM" --text-file "$WORK/missing.txt" --out "$WORK/x.html"
bad "the text is empty" --checkpoint "$LM" --text-file "$WORK/empty.txt" --out "$WORK/x.html"
bad "does not appear in the text" --checkpoint "$LM" --text-file "$WORK/prompt.txt" --passkey-key 99999 --out "$WORK/x.html"
bad "was trained with standard attention: read it in blocks with --scorer" --checkpoint "$WORK/std/checkpoint.safetensors" --text "some text" --out "$WORK/x.html"
bad "runs on the CPU" --checkpoint "$LM" --text "some text" --device cuda --out "$WORK/x.html"
bad "--select" --checkpoint "$LM" --text "short" --select 5 --out "$WORK/x.html"
bad "--k" --checkpoint "$LM" --text "short" --k -1 --out "$WORK/x.html"
[ ! -e "$WORK/x.html" ] || fail "a refused run left a page behind"

# ---- in a browser ----
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$CHROMIUM" ]; then
  echo "SKIP: $CHROMIUM not found, so the page was not opened in a browser (scripts/install-deps.sh installs Debian's chromium); the checks without a browser passed"
  exit 77
fi
POS=$((N - 1))  # the question's last token: the query that must find the key
browser() {  # extra chromium flags; the page at #pos=POS
  timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync --user-data-dir="$(mktemp -d -p "$WORK")" \
    --virtual-time-budget=5000 "$@" "file://$WORK/out/page.html#pos=$POS" 2> "$WORK/chromium.err"
}
browser --dump-dom > "$WORK/dom.html" || { tail -5 "$WORK/chromium.err" >&2; fail "chromium could not open the page"; }
expect "$WORK/dom.html" "id=\"retrieval\" data-selected=\"$POS\""
[ "$(grep -o 'data-pos="' "$WORK/dom.html" | wc -l)" -eq "$N" ] || fail "the rendered page should hold $N data-pos elements"
# The panel's cells, as the page drew them, against the TSV's lines for the token.
grep -oE 'data-layer="[0-9]+" data-head="[0-9]+" data-blocks="[0-9,]*"' "$WORK/dom.html" |
  sed -E 's/data-layer="([0-9]+)" data-head="([0-9]+)" data-blocks="([0-9,]*)"/\1 \2 \3/' > "$WORK/page_cells.txt"
awk -F'\t' -v pos="$POS" '$1 == pos { print $2, $3, ($4 == "-" ? "" : $4) }' "$WORK/out/retrieval.tsv" > "$WORK/cpp_cells.txt"
[ "$(wc -l < "$WORK/cpp_cells.txt")" -eq $((LAYERS * HEADS)) ] || fail "the TSV has no line per layer and head for token $POS"
diff "$WORK/cpp_cells.txt" "$WORK/page_cells.txt" > "$WORK/cells.diff" ||
  { cat "$WORK/cells.diff" >&2; fail "the page's retrieval panel (right) differs from what explore wrote (left)"; }
grep -qE ' [0-9]' "$WORK/cpp_cells.txt" || fail "no head retrieved a block for token $POS: the comparison proves nothing"
chips=$(awk -F'\t' -v pos="$POS" '$1 == pos && $4 != "-" { n += split($4, a, ",") } END { print n + 0 }' "$WORK/out/retrieval.tsv")
[ "$(grep -o 'class="chip' "$WORK/dom.html" | wc -l)" -ge "$chips" ] || fail "fewer block chips than retrieved blocks"

# Hostile names: a tokenizer special renamed "<!--<script>" (as long as "<|landmark|>", which
# prepare then adds back as a special of its own), a text file named after it and a text that
# spells "</script><!--<script>". The renamed special used to reach the page's JSON as it was,
# and inside the page's <script> element "<!--" then "<script" keeps the element's own end tag
# from closing it: the page's code never ran and Chromium showed a blank page.
sed 's/<|landmark|>/<!--<script>/' "$WORK/tok/tokenizer.json" > "$WORK/renamed.json"
grep -qF '"<!--<script>"' "$WORK/renamed.json" || fail "the tokenizer has no <|landmark|> special to rename"
"$LANDMARK" prepare --train "$WORK/data/train.txt" --val "$WORK/data/val.txt" --out "$WORK/tok2" \
  --tokenizer-from "$WORK/renamed.json" > /dev/null 2>&1
"$LANDMARK" train "${TINY[@]:2}" --data "$WORK/tok2" --attention landmark --landmark-every 10 --out "$WORK/lm2" \
  > /dev/null
HOSTILE_TEXT="$WORK/<!--<script>.txt"
{ cat "$WORK/prompt.txt"; printf ' </script><!--<script>alert(1)</script>'; } > "$HOSTILE_TEXT"
mkdir "$WORK/hostile"
"$LANDMARK" explore --checkpoint "$WORK/lm2/checkpoint.safetensors" --text-file "$HOSTILE_TEXT" --top 50 \
  --out "$WORK/hostile/page.html" --k 2 --chunk 100 --select "$POS" > /dev/null
# The renamed special must be among the names the page's data carries, or this proves nothing.
grep -qE '(<|\\u003c)!--(<|\\u003c)script' "$WORK/hostile/page.html" ||
  fail "the renamed special is not among the page's next-token candidates: the hostile-name check proves nothing"
HPAGE="file://$WORK/hostile/page.html#pos=$POS"
timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync --user-data-dir="$(mktemp -d -p "$WORK")" \
  --virtual-time-budget=5000 --dump-dom "$HPAGE" > "$WORK/hostile_dom.html" 2> "$WORK/chromium.err" ||
  { tail -5 "$WORK/chromium.err" >&2; fail "chromium could not open the page with hostile names"; }
expect "$WORK/hostile_dom.html" "id=\"retrieval\" data-selected=\"$POS\""
[ "$(grep -o '<script' "$WORK/hostile_dom.html" | wc -l)" -eq 2 ] || fail "the hostile names added a script element"

browser --window-size=1400,900 --screenshot="$SHOT" > /dev/null || { tail -5 "$WORK/chromium.err" >&2; fail "no screenshot"; }
[ "$(head -c 4 "$SHOT" | od -An -c | tr -d ' ')" = "211PNG" ] || fail "the screenshot $SHOT is not a PNG"
echo "screenshot of the page at #pos=$POS: $SHOT"
echo "explore CLI: all checks passed"
