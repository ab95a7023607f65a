#!/usr/bin/env bash
# check-layers.sh: fails when an #include runs against the layers of scripts/layers.txt (the
# table docs/design.md, section 1, explains): a folder including a folder above it (landmark/
# including infer/, say), or a core file of infer/ including one of its extensions. Every offence
# is printed as "including-file -> included-file: why", and the script exits 1; otherwise it
# prints one line and exits 0. The core-to-extension includes the table lists as pending are
# printed as such and pass. Reads #include "..." lines only (system headers are not layers).
# Run by .ci/run before the long phases; takes well under a second.
set -euo pipefail
cd "$(dirname "$0")/.."
table=scripts/layers.txt
[ -f "$table" ] || { echo "check-layers: $table is missing" >&2; exit 2; }

# Every library source file and the project headers it includes: "file included" per line.
mapfile -t folders < <(awk '$1 == "folder" { print $2 }' "$table")
includes=$(for d in "${folders[@]}"; do
  [ -d "$d" ] || continue
  find "$d" -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' -o -name '*.inc' \) -print
done | sort | while IFS= read -r f; do
  sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" | while IFS= read -r inc; do
    printf '%s %s\n' "$f" "$inc"
  done
done)

printf '%s\n' "$includes" | awk -v table="$table" '
  BEGIN {
    while ((getline line < table) > 0) {
      n = split(line, w, /[[:space:]]+/)
      if (w[1] == "folder") { known[w[2]] = 1; allow[w[2], w[2]] = 1; for (i = 3; i <= n; ++i) allow[w[2], w[i]] = 1 }
      else if (w[1] == "extension") ext[w[2]] = 1
      else if (w[1] == "pending") pending[w[2], w[3]] = 1
    }
  }
  NF == 2 {
    file = $1; inc = $2
    split(file, a, "/"); from = a[1]
    if (index(inc, "/") == 0) next            # a header beside the file, by bare name: not a layer
    split(inc, b, "/"); to = b[1]
    if (!(to in known)) next                  # not a library folder (stb, CLI, a test helper)
    if (!((from, to) in allow)) { printf "%s -> %s: %s/ may not include %s/ (scripts/layers.txt)\n", file, inc, from, to; bad++; next }
    # Inside infer/: a core file including an extension.
    if (from == "infer" && to == "infer" && !(file in ext) && (inc in ext)) {
      if ((file, inc) in pending) { printf "pending: %s -> %s (a seam still to build)\n", file, inc; seen[file, inc] = 1; npend++; next }
      printf "%s -> %s: the core of infer/ includes an extension (scripts/layers.txt)\n", file, inc; bad++; next
    }
    # The core may not include beyond/ by any route above: the folder rule already refuses it.
  }
  END {
    for (k in ext) if (system("test -f " k) != 0) { printf "%s: listed as an extension but not in the tree (scripts/layers.txt)\n", k; bad++ }
    for (k in pending) if (!(k in seen)) {
      split(k, p, SUBSEP)
      printf "%s -> %s: listed as pending but no longer included; take it off scripts/layers.txt\n", p[1], p[2]; bad++
    }
    if (bad) { printf "check-layers: %d include(s) against the layers\n", bad; exit 1 }
    printf "check-layers: every include follows scripts/layers.txt (%d core-to-extension include(s) pending)\n", npend + 0
  }'
