#!/usr/bin/env bash
# test_no_raw_writers.sh: every file the project's programs write goes through the checked writers
# of tensor/files.h (write_file_atomic, open_output_temp, AppendFile), which refuse a link, a FIFO,
# a device or a directory at the output path and cannot block on a FIFO. This check fails, naming
# file:line, when any other way to open a file for writing appears in the library, app, bench,
# example or fuzz sources: std::ofstream / fstream, fopen / freopen, or open flags that write
# (O_WRONLY, O_RDWR, O_CREAT, O_APPEND, O_TRUNC). Comment lines are not read. The tests are not
# scanned: they plant hostile paths on purpose. Needs no build: `bash tests/cli/test_no_raw_writers.sh`.
set -euo pipefail
cd "$(dirname "$0")/../.."
allowed="tensor/files.cpp"
found=0
while IFS= read -r hit; do
  file=${hit%%:*}
  [ "$file" = "$allowed" ] && continue
  echo "raw writer: $hit" >&2
  found=$((found + 1))
done < <(grep -rnE --include='*.cpp' --include='*.h' --include='*.cu' --include='*.cuh' \
  '(^|[^a-z_])(ofstream|fstream)([^.>a-z_]|$)|fopen *\(|freopen *\(|O_WRONLY|O_RDWR|O_CREAT|O_APPEND|O_TRUNC' \
  tensor autograd nn plot landmark train infer beyond evals apps bench examples fuzz |
  grep -vE '^[^:]+:[0-9]+: *//')
[ "$found" -eq 0 ] || { echo "test_no_raw_writers: $found raw writer(s); use tensor/files.h" >&2; exit 1; }
echo "test_no_raw_writers: every writer goes through tensor/files.h"
