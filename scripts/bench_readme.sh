#!/usr/bin/env bash
# bench_readme.sh SUMMARY README: replaces what lies between README's two bench markers with
# SUMMARY (BUILD/bench-summary.md from scripts/bench.sh). `make bench-readme` runs it.
set -euo pipefail
SUMMARY="${1:?usage: bench_readme.sh SUMMARY README}"
README="${2:?usage: bench_readme.sh SUMMARY README}"
BEGIN='<!-- bench:begin (generated from a make bench log by scripts/bench_readme.sh; do not edit by hand) -->'
END='<!-- bench:end -->'
[ -s "$SUMMARY" ] || { echo "bench_readme: no summary at $SUMMARY (run make bench first)" >&2; exit 1; }
[ "$(grep -cxF "$BEGIN" "$README")" = 1 ] && [ "$(grep -cxF "$END" "$README")" = 1 ] ||
  { echo "bench_readme: $README needs exactly one line each of: $BEGIN / $END" >&2; exit 1; }
awk -v begin="$BEGIN" -v end="$END" -v summary="$SUMMARY" '
  $0 == begin { print; while ((getline l < summary) > 0) print l; skip = 1; next }
  $0 == end { skip = 0 }
  !skip { print }' "$README" > "$README.tmp"
mv "$README.tmp" "$README"
echo "bench_readme: $README's speed section now shows $SUMMARY"
