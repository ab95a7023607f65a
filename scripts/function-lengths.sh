#!/usr/bin/env bash
# function-lengths.sh: list every function in the library folders that is longer than its limit,
# as "file:line name length (limit N)", and exit 1 if there is one (0 if none, 2 if it cannot run).
#   limits: 80 lines; 120 for CUDA device code (__global__ or __device__ in a .cu/.cuh file)
#   a length counts the lines from the signature line (the one with the function's name; a
#   `template <...>` line above it is not counted) to the closing brace, both included; lambdas and
#   local classes inside a function count as part of it, so a lambda is never reported on its own.
# The function boundaries come from universal-ctags (Debian: universal-ctags), which parses C++ and
# CUDA without a build: its `end:` field is the line of the closing brace.
# Usage: scripts/function-lengths.sh [folder...]   (default: the library folders; run from anywhere)
set -euo pipefail

cd "$(dirname "$0")/.."
folders=("$@")
[ ${#folders[@]} -gt 0 ] || folders=(tensor autograd nn landmark sparse train infer beyond evals plot)

if ! ctags --version 2>/dev/null | grep -q "Universal Ctags"; then
  echo "function-lengths: needs universal-ctags (apt-get install universal-ctags)" >&2
  exit 2
fi

# One line per function definition: name, file, ..., line:N, end:M. Lambdas are tagged "__anonXXXX":
# they are skipped here, their lines are already inside the enclosing function.
found=$(ctags -f - --sort=no --languages=C++ --langmap=C++:+.cu.cuh --kinds-C++=f --fields=+ne -R "${folders[@]}" |
  awk -F'\t' '
    function device_code(file, line,   text, n, prev, cur) {
      # the qualifier sits on the signature line or, in the "__global__ void\nname(" style, just above it
      n = 0; prev = ""; cur = ""
      while ((getline text < file) > 0) {
        if (++n == line - 1) prev = text
        if (n == line) { cur = text; break }
      }
      close(file)
      return (prev cur) ~ /__(global|device)__/
    }
    $1 !~ /^__anon/ {
      line = 0; end = 0
      for (i = 4; i <= NF; ++i) {
        if ($i ~ /^line:/) line = substr($i, 6) + 0
        if ($i ~ /^end:/) end = substr($i, 5) + 0
      }
      if (line == 0 || end == 0) next
      length_ = end - line + 1
      if (length_ <= 80) next
      limit = ($2 ~ /\.cuh?$/ && device_code($2, line)) ? 120 : 80
      if (length_ > limit) printf "%s:%d %s %d (limit %d)\n", $2, line, $1, length_, limit
    }' |
  sort -t: -k1,1 -k2,2n) || { echo "function-lengths: ctags or awk failed" >&2; exit 2; }

if [ -n "$found" ]; then
  echo "$found"
  echo "function-lengths: $(echo "$found" | wc -l) function(s) over the limit" >&2
  exit 1
fi
echo "function-lengths: every function within its limit"
