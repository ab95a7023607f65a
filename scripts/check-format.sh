#!/usr/bin/env bash
# check-format.sh [--fix]: the library, app and example folders (tensor, autograd, nn, landmark, sparse, train,
# infer, beyond, evals, plot, apps, examples) against .clang-format with clang-format-16
# (scripts/install-deps.sh lint installs it).
# Without --fix it changes nothing, lists each file that is not formatted and exits 1; with --fix it
# formats them in place.
set -euo pipefail
cd "$(dirname "$0")/.."
CF="${CLANG_FORMAT:-clang-format-16}"
command -v "$CF" > /dev/null || { echo "check-format: $CF not found (bash scripts/install-deps.sh lint)" >&2; exit 2; }
mapfile -t files < <(git ls-files 'tensor/*' 'autograd/*' 'nn/*' 'landmark/*' 'sparse/*' 'train/*' 'infer/*' 'beyond/*' 'evals/*' \
  'plot/*' 'apps/*' 'examples/*' | grep -E '\.(cpp|h|cu|cuh)$')
if [ "${1:-}" = --fix ]; then
  "$CF" -i "${files[@]}"
  echo "check-format: formatted ${#files[@]} files"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$CF" --dry-run -Werror "$f" > /dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  printf 'check-format: not formatted: %s\n' "${bad[@]}" >&2
  echo "check-format: ${#bad[@]} of ${#files[@]} files differ from .clang-format; run: bash scripts/check-format.sh --fix" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
