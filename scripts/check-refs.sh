#!/usr/bin/env bash
# check-refs.sh: fails when the project points at something it does not have.
#   1. A source file, script or page names a Markdown file that is not in the tree: any path that
#      contains docs/ (such as docs/infer.md) and any bare upper-case name (such as README.md).
#      Pages (README.md, docs/) are held to more: every *.md they name (a bare name there may
#      also be a page of docs/: "see train.md").
#   2. A relative link in README.md or a page under docs/ ([text](path), ![alt](path),
#      [ref]: path) leads nowhere. Web links and pure #anchors are not checked; for path#anchor
#      the path is.
# Names in shell variables ($WORK/README.md) and outputs under runs/ or build/ are not files of
# the tree and are skipped. "The tree" is what git tracks plus new files it does not ignore, so a
# file that exists only in an ignored folder does not count (CI checks a clean clone).
# docs/results/discussion.md is not a page of its own: scripts/paper_tables.sh appends it to
# docs/results.md, so its names and links are read from docs/, where they land.
# Prints each offence as file:line: what, and exits 1 when there is one; exit 0 and one line
# otherwise. Run by .ci/run before the long phases; takes well under a second.
set -euo pipefail
cd "$(dirname "$0")/.."

if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  mapfile -t files < <(git ls-files --cached --others --exclude-standard | while IFS= read -r f; do
    [ -e "$f" ] && printf '%s\n' "$f"; done)
else
  mapfile -t files < <(find . \( -path ./.git -o -path './build*' -o -path ./runs -o -path ./data -o -path ./.deps \) \
    -prune -o -type f -print | sed 's|^\./||')
fi

# The files whose text is read: sources, scripts, build files and pages.
scanned=()
for f in "${files[@]}"; do
  case "$f" in
    *.h | *.hpp | *.cpp | *.cc | *.cu | *.cuh | *.inc | *.sh | *.py | *.md | *.cmake) scanned+=("$f") ;;
    *CMakeLists.txt | Makefile | .ci/run) scanned+=("$f") ;;
  esac
done

printf '%s\n' "${files[@]}" | awk -v nscan="${#scanned[@]}" '
  # Paths: every file of the tree and every folder above one.
  FNR == NR {
    have[$0] = 1
    p = $0
    while (sub(/\/[^\/]*$/, "", p)) have[p] = 1
    next
  }
  function norm(path,   n, parts, out, i, k, stack) {  # folds "." and ".." segments
    n = split(path, parts, "/"); k = 0
    for (i = 1; i <= n; ++i) {
      if (parts[i] == "" || parts[i] == ".") continue
      if (parts[i] == "..") { if (k > 0) --k; else return "../" path; continue }
      stack[++k] = parts[i]
    }
    out = ""
    for (i = 1; i <= k; ++i) out = out (i > 1 ? "/" : "") stack[i]
    return out
  }
  function dir_of(f) { return f ~ /\// ? substr(f, 1, match(f, /\/[^\/]*$/) - 1) : "" }
  function resolves(target, f, bare,   d) {
    d = f == "docs/results/discussion.md" ? "docs" : dir_of(f)
    if (target ~ /^\//) return 0
    if (norm(target) in have) return 1
    if (d != "" && norm(d "/" target) in have) return 1
    if (bare && ("docs/" target) in have) return 1  # "train.md" in prose: a page of docs/
    return 0
  }
  function offence(f, line, target, what) {  # once per target and line
    if ((line SUBSEP target) in told) return
    told[line, target] = 1
    printf "%s:%d: %s %s, which is not in the tree\n", f, line, what, target; ++bad
  }
  FNR == 1 { page = (FILENAME == "README.md" || FILENAME ~ /^docs\/.*\.md$/); fence = 0; split("", told) }
  {
    line = $0
    # 1. Markdown files named anywhere in the text.
    rest = line
    while (match(rest, /[A-Za-z0-9_.\/$-]*[A-Za-z0-9_-]\.md([^A-Za-z0-9_]|$)/)) {
      tok = substr(rest, RSTART, RLENGTH)
      prev = RSTART > 1 ? substr(rest, RSTART - 1, 1) : ""
      rest = substr(rest, RSTART + RLENGTH)
      sub(/[^A-Za-z0-9_]$/, "", tok)
      if (tok ~ /\$/ || prev ~ /[$)}]/ || tok ~ /^(runs|build|BUILD|\/)/ || tok ~ /^[.]+$/) continue
      if (tok ~ /^https?:/ || prev == ":") continue
      want = page || tok ~ /(^|\/)docs\// || tok ~ /^[A-Z][A-Z0-9_-]*\.md$/
      if (want && !resolves(tok, FILENAME, 1)) offence(FILENAME, FNR, tok, "names")
    }
    if (!page) next
    # 2. Relative links of the pages (not inside fenced code or `code spans`).
    if (line ~ /^[ \t]*(```|~~~)/) { fence = !fence; next }
    if (fence) next
    gsub(/`[^`]*`/, "", line)
    if (match(line, /^[ \t]*\[[^]]+\]:[ \t]*[^ \t]+/)) {  # [ref]: target
      t = substr(line, RSTART, RLENGTH); sub(/^[^]]*\]:[ \t]*/, "", t); check_link(t)
    }
    while (match(line, /\]\([^)]*\)/)) {
      t = substr(line, RSTART + 2, RLENGTH - 3)
      line = substr(line, RSTART + RLENGTH)
      check_link(t)
    }
  }
  function check_link(t) {
    sub(/^[ \t]*</, "", t); sub(/>.*$/, "", t)
    sub(/[ \t].*$/, "", t)  # a title after the path
    if (t == "" || t ~ /^#/ || t ~ /^[a-z][a-z0-9+.-]*:/) return
    sub(/[#?].*$/, "", t)
    gsub(/%20/, " ", t)
    if (!resolves(t, FILENAME, 0)) offence(FILENAME, FNR, t, "links to")
  }
  END {
    if (bad) { printf "check-refs: %d broken reference(s)\n", bad; exit 1 }
    printf "check-refs: every named page and relative link resolves (%d files read)\n", nscan
  }
' - "${scanned[@]}"
