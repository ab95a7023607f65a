#!/usr/bin/env bash
# test_demo_long.sh: scripts/demo_long.sh (make demo-long) end to end on a tiny landmark model and
# prompts of 1,500 tokens instead of the demo's model and a million: it prints one result line per
# prompt and the final `long-context tokens=N correct=C/T seconds=S max_rss_mb=M` line, searches
# with the approximate search by default and reports its unproven rows, takes the scan from
# DEMO_LONG_SEARCH or from a --search in DEMO_LONG_FLAGS (not both), and refuses bad settings and
# a missing model with a message. Whether the tiny model finds the key does not matter here.
# Usage: test_demo_long.sh path/to/landmark
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # LANDMARK, WORK, fail, expect, exits_with, passkey_tokens
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export LANDMARK DEMO_OUT="$WORK/demo" DEMO_LONG_TOKENS=1500
passkey_tokens "$WORK/data" "$WORK/tok" --docs 100 --max-fillers 3 --seed 5
"$LANDMARK" train --data "$WORK/tok" --layers 1 --embd 32 --heads 2 --block-size 128 --batch 2 --steps 2 --eval-every 0 \
  --attention landmark --landmark-every 10 --quiet --out "$DEMO_OUT/landmark" > /dev/null

final_line() {  # log, tokens, prompts
  grep -Eq "^long-context tokens=$2 correct=[0-9]+/$3 seconds=[0-9]+ max_rss_mb=[0-9]+$" "$1" ||
    { cat "$1" >&2; fail "no well-formed final line for $2 tokens and $3 prompts"; }
  [ "$(grep -c '^ *1500 ' "$1")" -eq "$3" ] || { cat "$1" >&2; fail "expected $3 result rows"; }
}
# Default: three depths, the approximate search, its unproven rows reported per prompt.
bash "$ROOT/scripts/demo_long.sh" > "$WORK/default.log" 2>&1 || { cat "$WORK/default.log" >&2; fail "the default run failed"; }
final_line "$WORK/default.log" 1500 3
[ "$(grep -c 'approx top-k search (16 tiles)' "$WORK/default.log")" -eq 3 ] || fail "the default is not the approximate search"
[ "$(grep -c '^approx search (16 tiles): [0-9]* of [0-9]* (query, layer, head) rows' "$WORK/default.log")" -eq 3 ] ||
  { cat "$WORK/default.log" >&2; fail "the unproven rows are not reported for each prompt"; }
[ "$(cat "$DEMO_OUT/long.txt")" = "$(tail -n 1 "$WORK/default.log")" ] || fail "long.txt differs from the final line"
# The scan, either way; one depth.
DEMO_LONG_DEPTHS=0.5 DEMO_LONG_SEARCH=scan bash "$ROOT/scripts/demo_long.sh" > "$WORK/scan.log" 2>&1 ||
  { cat "$WORK/scan.log" >&2; fail "DEMO_LONG_SEARCH=scan failed"; }
final_line "$WORK/scan.log" 1500 1
if grep -q "approx" "$WORK/scan.log"; then cat "$WORK/scan.log" >&2; fail "DEMO_LONG_SEARCH=scan still searched approximately"; fi
DEMO_LONG_DEPTHS=0.5 DEMO_LONG_FLAGS="--search scan --kv-dtype f16" bash "$ROOT/scripts/demo_long.sh" > "$WORK/flags.log" 2>&1 ||
  { cat "$WORK/flags.log" >&2; fail "--search scan in DEMO_LONG_FLAGS failed"; }
final_line "$WORK/flags.log" 1500 1
expect "$WORK/flags.log" "block K/V in f16"
if grep -q "approx" "$WORK/flags.log"; then cat "$WORK/flags.log" >&2; fail "--search scan in DEMO_LONG_FLAGS did not replace the default"; fi

refused() {  # status, message, then the environment settings
  local want=$1 msg=$2
  shift 2
  exits_with "$want" "$WORK/bad.log" env "$@" bash "$ROOT/scripts/demo_long.sh"
  expect "$WORK/bad.log" "$msg"
}
refused 2 "DEMO_LONG_SEARCH must be scan, bounded or approx, got 'fast'" DEMO_LONG_SEARCH=fast
refused 2 "give the search once" DEMO_LONG_SEARCH=scan DEMO_LONG_FLAGS="--search approx"
refused 2 "DEMO_LONG_TOKENS must be a whole number, got '1e6'" DEMO_LONG_TOKENS=1e6
refused 1 "run 'make demo' first" DEMO_OUT="$WORK/nothing"
echo "demo_long: default, scan, flags and refusals as expected"
