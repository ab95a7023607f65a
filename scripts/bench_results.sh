#!/usr/bin/env bash
# bench_results.sh SUMMARY PAGE: replaces what lies between PAGE's two bench markers with SUMMARY
# (BUILD/bench-summary.md from scripts/bench.sh). `make bench-results` runs it on the notebook page
# docs/results/bench.md; the README's results table quotes that page by hand, with its date.
set -euo pipefail
SUMMARY="${1:?usage: bench_results.sh SUMMARY PAGE}"
PAGE="${2:?usage: bench_results.sh SUMMARY PAGE}"
BEGIN='<!-- bench:begin (generated from a make bench log by scripts/bench_results.sh; do not edit by hand) -->'
END='<!-- bench:end -->'
[ -s "$SUMMARY" ] || { echo "bench_results: no summary at $SUMMARY (run make bench first)" >&2; exit 1; }
[ "$(grep -cxF "$BEGIN" "$PAGE")" = 1 ] && [ "$(grep -cxF "$END" "$PAGE")" = 1 ] ||
  { echo "bench_results: $PAGE needs exactly one line each of: $BEGIN / $END" >&2; exit 1; }
awk -v begin="$BEGIN" -v end="$END" -v summary="$SUMMARY" '
  $0 == begin { print; while ((getline l < summary) > 0) print l; skip = 1; next }
  $0 == end { skip = 0 }
  !skip { print }' "$PAGE" > "$PAGE.tmp"
mv "$PAGE.tmp" "$PAGE"
echo "bench_results: $PAGE now shows $SUMMARY"
