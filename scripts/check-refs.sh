#!/usr/bin/env bash
# check-refs.sh: fails when the project points at something it does not have.
#   1. A source file, script or page names a Markdown file that is not in the tree: any path that
#      contains docs/ (such as docs/infer.md) and any bare upper-case name (such as README.md).
#      Pages (README.md, docs/) are held to more: every *.md they name (a bare name there may
#      also be a page of docs/: "see train.md").
#   2. A relative link in README.md or a page under docs/ ([text](path), ![alt](path),
#      [ref]: path) leads nowhere. Web links are not checked.
#   3. A link's anchor names no place in its page: for path#anchor with path a Markdown file of the
#      tree, and for a pure #anchor (the same page), the anchor must be the slug of a heading of
#      that file or an explicit <a id="..."> / <a name="..."> in it. The slug is GitHub's: the
#      heading's text (link and tag markup and backticks dropped) in lower case, ASCII punctuation
#      other than '-' and '_' dropped, each space made '-', and "-1", "-2", ... added to a slug
#      the page already has. Only # headings count, and nothing inside fenced code.
# Links inside fenced code or `code spans` are not links. Names in shell variables ($WORK/README.md)
# and outputs under runs/ or build/ are not files of the tree and are skipped. "The tree" is what
# git tracks plus new files it does not ignore, so a file that exists only in an ignored folder does
# not count (CI checks a clean clone).
# docs/results/discussion.md is not a page of its own: scripts/paper_tables.sh appends it to
# docs/results.md, so its names and links are read from docs/, where they land, and its pure
# #anchors must be places of docs/results.md.
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

printf '%s\n' "${files[@]}" | LC_ALL=C awk -v nscan="${#scanned[@]}" '
  BEGIN { punct = "!\"#$%&" sprintf("%c", 39) "()*+,./:;<=>?@[\\]^`{|}~" }  # dropped from slugs
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
  function resolved(target, f, bare,   d) {  # the tree path target names from file f, or ""
    d = f == "docs/results/discussion.md" ? "docs" : dir_of(f)
    if (target ~ /^\//) return ""
    if (norm(target) in have) return norm(target)
    if (d != "" && norm(d "/" target) in have) return norm(d "/" target)
    if (bare && ("docs/" target) in have) return "docs/" target  # "train.md" in prose: a page of docs/
    return ""
  }
  function resolves(target, f, bare) { return resolved(target, f, bare) != "" }
  function offence(f, line, target, what) {  # once per target and line
    if ((line SUBSEP target) in told) return
    told[line, target] = 1
    printf "%s:%d: %s %s, which is not in the tree\n", f, line, what, target; ++bad
  }
  function slug(text,   out, i, c) {  # the anchor GitHub makes of a heading
    while (match(text, /!?\[[^]]*\]\([^)]*\)/)) {  # [text](url) and ![alt](url): the text
      c = substr(text, RSTART, RLENGTH); sub(/^!?\[/, "", c); sub(/\]\(.*$/, "", c)
      text = substr(text, 1, RSTART - 1) c substr(text, RSTART + RLENGTH)
    }
    gsub(/<[^>]*>/, "", text)
    text = tolower(text); out = ""
    for (i = 1; i <= length(text); ++i) {
      c = substr(text, i, 1)
      if (c == " ") out = out "-"
      else if (!index(punct, c)) out = out c
    }
    return out
  }
  function place(f, a) { anchor[f, a] = 1 }
  FNR == 1 {
    page = (FILENAME == "README.md" || FILENAME ~ /^docs\/.*\.md$/); md = FILENAME ~ /\.md$/
    home = FILENAME == "docs/results/discussion.md" ? "docs/results.md" : FILENAME  # where #x points
    fence = 0; split("", told)
  }
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
    if (!md) next
    if (line ~ /^[ \t]*(```|~~~)/) { fence = !fence; next }
    if (fence) next
    # The places of every Markdown file: its headings and explicit anchors.
    if (line ~ /^#+[ \t]/ && match(line, /^#+/) && RLENGTH <= 6) {
      h = line; sub(/^#+[ \t]+/, "", h); sub(/[ \t]+#+[ \t]*$/, "", h); sub(/[ \t]+$/, "", h)
      gsub(/`/, "", h)
      a = slug(h); n = used[FILENAME, a]++
      place(FILENAME, n ? a "-" n : a)
    }
    rest = line
    while (match(rest, /<a[ \t][^>]*(id|name)=["\047][^"\047]*["\047]/)) {
      a = substr(rest, RSTART, RLENGTH); rest = substr(rest, RSTART + RLENGTH)
      sub(/^.*(id|name)=["\047]/, "", a); sub(/["\047]$/, "", a)
      place(FILENAME, a)
    }
    if (!page) next
    # 2. Relative links of the pages (not inside fenced code or `code spans`), 3. their anchors.
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
  function check_link(t,   a, p) {
    sub(/^[ \t]*</, "", t); sub(/>.*$/, "", t)
    sub(/[ \t].*$/, "", t)  # a title after the path
    if (t == "" || t ~ /^[a-z][a-z0-9+.-]*:/) return
    a = index(t, "#") ? substr(t, index(t, "#") + 1) : ""
    sub(/[#?].*$/, "", t)
    gsub(/%20/, " ", t)
    if (t == "") p = home
    else if ((p = resolved(t, FILENAME, 0)) == "") { offence(FILENAME, FNR, t, "links to"); return }
    if (a != "" && p ~ /\.md$/) {  # checked at the end, once every page is read
      ++nwant; want_f[nwant] = FILENAME; want_l[nwant] = FNR; want_p[nwant] = p; want_a[nwant] = a
    }
  }
  END {
    for (i = 1; i <= nwant; ++i)
      if (!((want_p[i], want_a[i]) in anchor)) {
        printf "%s:%d: links to %s#%s, and %s has no heading or <a id> with that anchor\n",
          want_f[i], want_l[i], want_p[i], want_a[i], want_p[i]; ++bad
      }
    if (bad) { printf "check-refs: %d broken reference(s)\n", bad; exit 1 }
    printf "check-refs: every named page, relative link and anchor resolves (%d files read, %d anchors)\n", nscan, nwant
  }
' - "${scanned[@]}"
