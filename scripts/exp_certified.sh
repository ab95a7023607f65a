#!/usr/bin/env bash
# exp_certified.sh: beyond the paper. Fixed k against adaptive k (--left-out E, k capped at 16),
# with the certificate of each reading:
#   perplexity  the paper-tables landmark model (make paper-tables) on val.tokens at 2048 and 4096,
#               chunks of 250, exact positions, every window;
#   pass key    the demo's landmark model (make demo) at 1024 and 2048 tokens, 10 prompts each,
#               chunks of 200, exact positions.
# Fixed k 1, 2, 4, 8 run with --certify; E 0.1, 0.03, 0.01, 0.003 with --k 16 --left-out E. Each
# run's output goes to runs/certified/NAME.txt (through a temporary file: a run that is there is
# skipped, so the script resumes where it stopped); then runs/certified/certified.tsv.
# Usage: bash scripts/exp_certified.sh   (env LANDMARK, PAPER_MODEL, DEMO_MODEL, DATA, OUT)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
LANDMARK="${LANDMARK:-build/apps/landmark}"
PAPER_MODEL="${PAPER_MODEL:-runs/paper/train/landmark/checkpoint.safetensors}"
DEMO_MODEL="${DEMO_MODEL:-runs/demo/landmark/checkpoint.safetensors}"
DATA="${DATA:-data/tokens}"
OUT="${OUT:-runs/certified}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
die() { echo "exp_certified: $*" >&2; exit 1; }
[ -x "$LANDMARK" ] || die "$LANDMARK is missing; run 'make' first (or set LANDMARK=...)"
[ -f "$PAPER_MODEL" ] || die "$PAPER_MODEL is missing: run 'make paper-tables' first (or set PAPER_MODEL=...)"
[ -f "$DEMO_MODEL" ] || die "$DEMO_MODEL is missing: run 'make demo' first (or set DEMO_MODEL=...)"
[ -s "$DATA/val.tokens" ] || die "$DATA/val.tokens is missing: run 'make paper-tables' first (or set DATA=...)"
mkdir -p "$OUT"
SETTINGS=("k 1" "k 2" "k 4" "k 8" "E 0.1" "E 0.03" "E 0.01" "E 0.003")
flags_of() {  # "k K" or "E E" -> the retrieval flags
  case "$1" in
    k) echo "--k $2 --certify" ;;
    E) echo "--k 16 --left-out $2" ;;
  esac
}
run() {  # NAME COMMAND...: the command's stdout into $OUT/NAME.txt, unless it is there
  local name="$1"
  shift
  if [ -s "$OUT/$name.txt" ]; then echo "--- $name: done earlier"; return; fi
  echo "--- $name"
  "$@" > "$OUT/$name.txt.tmp" 2> "$OUT/$name.err" || die "$name failed (see $OUT/$name.err)"
  mv "$OUT/$name.txt.tmp" "$OUT/$name.txt"
}
for s in "${SETTINGS[@]}"; do
  read -r kind value <<< "$s"
  for len in 2048 4096; do
    # shellcheck disable=SC2046  # flags_of prints words meant to split
    run "ppl_${len}_${kind}${value}" "$LANDMARK" eval --checkpoint "$PAPER_MODEL" --tokens "$DATA/val.tokens" \
      --length "$len" --chunk 250 --positions exact $(flags_of "$kind" "$value") --bootstrap 1000
  done
  # shellcheck disable=SC2046
  run "pk_${kind}${value}" "$LANDMARK" passkey --checkpoint "$DEMO_MODEL" --lengths 1024,2048 --trials 10 \
    --chunk 200 --positions exact $(flags_of "$kind" "$value")
done

# The table: one row per (task, length, setting). Mean k: adaptive k's own count, else k. M: the
# mean over layers of each layer's mean and its largest maximum; the worst bound over layers.
cert_cols() {  # FILE [LENGTH]: "M_mean M_max bound" from the certificate lines (of one length)
  awk -v len="${2:-}" '
    /^left-out weight M per/ { on = (len == "" || index($0, "length " len " ") > 0); next }
    on && /^  layer [0-9]+:/ {
      for (i = 1; i <= NF; i++) {
        if ($i == "mean") { sub(",", "", $(i + 1)); m += $(i + 1); n++ }
        if ($i == "max") { v = $(i + 1); sub(";", "", v); if (v + 0 > mx) mx = v + 0 }
        if ($i == "bound") { if ($(i + 1) + 0 > b) b = $(i + 1) + 0 }
      }
      next  # (sub() above rebuilt the line without its leading spaces)
    }
    on && !/^  layer/ && !/^left-out/ { on = 0 }
    END { if (n == 0) { print "- - -"; exit } printf "%.4g %.4g %.4g\n", m / n, mx, b }' "$1"
}
mean_k() {  # FILE KIND VALUE [LENGTH]
  if [ "$2" = k ]; then echo "$3"; return; fi
  awk -v len="${4:-}" '/^ *[0-9]+ +[0-9.]+% \(/ { cur = $1 } /^adaptive k/ { if (len == "" || cur == len) { for (i = 1; i <= NF; i++) if ($i == "mean" && $(i + 1) == "k") print $(i + 2) } }' "$1" | head -n 1
}
{
  printf 'task\tmodel\tlength\tsetting\tvalue\tquality\tmean_k\tM_mean\tM_max\tworst_bound\tseconds\n'
  for s in "${SETTINGS[@]}"; do
    read -r kind value <<< "$s"
    for len in 2048 4096; do
      f="$OUT/ppl_${len}_${kind}${value}.txt"
      ppl=$(sed -n 's/^perplexity \([0-9.]*\), 95% bootstrap interval \[\([0-9.]*\), \([0-9.]*\)\].*/\1 [\2, \3]/p' "$f")
      secs=$(sed -n 's/.* \([0-9.]*\) s; attention size.*/\1/p' "$f" | head -n 1)
      read -r mm mx b <<< "$(cert_cols "$f")"
      printf 'perplexity\tpaper-tables landmark\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$len" "$kind" "$value" "$ppl" \
        "$(mean_k "$f" "$kind" "$value")" "$mm" "$mx" "$b" "${secs:--}"
    done
    f="$OUT/pk_${kind}${value}.txt"
    for len in 1024 2048; do
      acc=$(awk -v len="$len" '$1 == len && $2 ~ /%$/ { print $2; exit }' "$f")
      secs=$(awk -v len="$len" '$1 == len && $2 ~ /%$/ { for (i = 1; i <= NF; i++) if ($i ~ /^\[/) { v = $i; sub(/\[/, "", v); print v } }' "$f")
      read -r mm mx b <<< "$(cert_cols "$f" "$len")"
      printf 'passkey\tdemo landmark\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$len" "$kind" "$value" "$acc" \
        "$(mean_k "$f" "$kind" "$value" "$len")" "$mm" "$mx" "$b" "${secs:--}"
    done
  done
} > "$OUT/certified.tsv.tmp"
mv "$OUT/certified.tsv.tmp" "$OUT/certified.tsv"
column -t -s $'\t' "$OUT/certified.tsv"
