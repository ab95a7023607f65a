#!/usr/bin/env bash
# demo_long.sh, run by `make demo-long` after `make demo`: the demo's landmark model (trained on
# 512-token windows) reads pass-key prompts of about a million tokens, the key near the start, in
# the middle and near the end (depth 0.05, 0.5, 0.95 of the filler), with block K/V on disk
# (`--block-dir`, a scratch directory removed at the end) and progress on stderr. Each prompt is
# one `passkey` process; the last line sums them up:
#   long-context tokens=N correct=C/T seconds=S max_rss_mb=M
# (M: the largest peak resident memory of the three processes). What it measured is in the
# notebook, docs/results/inference.md#demo-long-quiet. The top k of landmarks is found by the
# approximate search (`--search approx`, 16 tiles: 1.5 times faster than the scan at this
# length), which is not exact: each prompt's output says how many (query, layer, head) rows ran
# out of tiles before their top k was proven; its recall against the scan is measured in
# docs/results/inference.md#topk-bench. DEMO_LONG_SEARCH=scan gives the exact scan.
# Environment: DEMO_LONG_TOKENS (default 1000000), DEMO_LONG_DEPTHS (default
# "0.05 0.5 0.95"), DEMO_LONG_SEARCH (scan, bounded or approx; default approx), DEMO_LONG_FLAGS
# (more passkey flags, e.g. "--kv-dtype f16"; a --search there replaces the default), DEMO_OUT,
# LANDMARK.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source scripts/demo_model.sh  # LANDMARK, EVAL_FLAGS, OUT
TOKENS="${DEMO_LONG_TOKENS:-1000000}"
read -r -a DEPTHS <<< "${DEMO_LONG_DEPTHS:-0.05 0.5 0.95}"
read -r -a EXTRA <<< "${DEMO_LONG_FLAGS:-}"
CKPT="$OUT/landmark/checkpoint.safetensors"
[ -x "$LANDMARK" ] || { echo "demo-long: $LANDMARK is missing; run 'make' first" >&2; exit 1; }
[ -f "$CKPT" ] || { echo "demo-long: $CKPT is missing; run 'make demo' first (it trains the model)" >&2; exit 1; }
case "$TOKENS" in ''|*[!0-9]*) echo "demo-long: DEMO_LONG_TOKENS must be a whole number, got '$TOKENS'" >&2; exit 2;; esac
SEARCH=(--search "${DEMO_LONG_SEARCH:-approx}")
case "${DEMO_LONG_SEARCH:-approx}" in scan|bounded|approx) ;;
  *) echo "demo-long: DEMO_LONG_SEARCH must be scan, bounded or approx, got '$DEMO_LONG_SEARCH'" >&2; exit 2;; esac
for f in "${EXTRA[@]}"; do
  case "$f" in --search|--search=*)
    [ -z "${DEMO_LONG_SEARCH:-}" ] || { echo "demo-long: give the search once: DEMO_LONG_SEARCH or --search in DEMO_LONG_FLAGS" >&2; exit 2; }
    SEARCH=();;
  esac
done
# OpenMP as the environment says; unset, the program's own short spin (apps/landmark.cpp), which
# used both cores best here (a 131k prompt: 12.1 s, against 13.8 s with OMP_WAIT_POLICY=PASSIVE
# and 15.0 s on one thread).
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/landmark_long.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
mkdir -p "$OUT"
T0=$SECONDS
correct=0 trials=0 rss=0
for depth in "${DEPTHS[@]}"; do
  echo "=== a ${TOKENS}-token prompt, the key at depth $depth ==="
  log="$OUT/long_depth_$depth.txt"
  "$LANDMARK" passkey --checkpoint "$CKPT" --lengths "$TOKENS" --trials 1 --depth "$depth" "${EVAL_FLAGS[@]}" \
    --block-dir "$SCRATCH" "${SEARCH[@]}" "${EXTRA[@]}" | tee "$log"
  # The table row: "<length>  100.0% ( 1/ 1) ...": the count before the slash is the correct ones.
  c=$(awk -v n="$TOKENS" '$1 == n { gsub(/[()]/, " "); split($3, a, "/"); print a[1]; exit }' "$log")
  m=$(awk '/^peak resident memory:/ { print $4 }' "$log")
  [ -n "$c" ] && [ -n "$m" ] || { echo "demo-long: could not read the result from $log" >&2; exit 1; }
  correct=$((correct + c)) trials=$((trials + 1))
  rss=$(( m > rss ? m : rss ))
done
echo "long-context tokens=$TOKENS correct=$correct/$trials seconds=$((SECONDS - T0)) max_rss_mb=$rss" | tee "$OUT/long.txt"
