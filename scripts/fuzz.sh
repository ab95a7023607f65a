#!/usr/bin/env bash
# fuzz.sh [SECONDS] [HARNESS...]: build the libFuzzer harnesses of fuzz/ (clang-16, ASan + UBSan,
# in build-fuzz/) and run each for SECONDS (default 60), two at a time, starting from the
# committed seeds in fuzz/corpus/<name>/ (new inputs go to build-fuzz/corpus/<name>/, never into
# the repository). Exits non-zero on any finding: a crash, a sanitizer report, an exception other
# than lm::Error, an input slower than 10 s or a process above 2 GB. The input that did it is left
# in build-fuzz/findings/ and its log named. Needs the packages installed by
# `scripts/install-deps.sh fuzz` (clang-16, libclang-rt-16-dev, libfuzzer-16-dev).
#   bash scripts/fuzz.sh            # every harness, 60 s each (what CI runs)
#   bash scripts/fuzz.sh 3600 cli   # one harness for an hour
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
case "$seconds" in ''|*[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number, got '$seconds'" >&2; exit 2;; esac
command -v clang++-16 > /dev/null || { echo "fuzz.sh: clang++-16 not found; run: bash scripts/install-deps.sh fuzz" >&2; exit 1; }

mkdir -p build-fuzz
cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++-16 -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLANDMARK_FUZZ=ON > build-fuzz/build.log 2>&1 ||
  { cat build-fuzz/build.log; exit 1; }
cmake --build build-fuzz -j "$(nproc)" >> build-fuzz/build.log 2>&1 || { tail -50 build-fuzz/build.log; exit 1; }

if [ $# -gt 0 ]; then harnesses=("$@"); else
  harnesses=()
  for f in fuzz/fuzz_*.cpp; do n=$(basename "$f" .cpp); harnesses+=("${n#fuzz_}"); done
fi
mkdir -p build-fuzz/findings build-fuzz/logs
run_one() {
  local name=$1 bin=build-fuzz/fuzz/fuzz_$1
  [ -x "$bin" ] || { echo "fuzz.sh: no harness named '$name' (fuzz/fuzz_$name.cpp)" >&2; return 2; }
  mkdir -p "build-fuzz/corpus/$name"
  # -max_len: the largest seed (a checkpoint is ~160 KB) or 4 KB, whichever is more.
  local max_len
  max_len=$(find "fuzz/corpus/$name" -type f -printf '%s\n' | sort -n | tail -1)
  max_len=$(( ${max_len:-0} > 4096 ? max_len : 4096 ))
  if "$bin" "build-fuzz/corpus/$name" "fuzz/corpus/$name" -max_total_time="$seconds" -max_len="$max_len" \
       -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="build-fuzz/findings/$name-" > "build-fuzz/logs/$name.log" 2>&1; then
    echo "fuzz $name: $(grep -m1 'stat::number_of_executed_units' "build-fuzz/logs/$name.log" | awk '{print $2}') executions in ${seconds} s, 0 findings"
  else
    echo "fuzz $name: FINDING (log build-fuzz/logs/$name.log, input in build-fuzz/findings/):"
    grep -E -m5 'ERROR|SUMMARY|what\(\)|Test unit written' "build-fuzz/logs/$name.log" || tail -5 "build-fuzz/logs/$name.log"
    return 1
  fi
}
# Two at a time (the machine's two cores); every harness runs even after a finding.
status=0
for ((i = 0; i < ${#harnesses[@]}; i += 2)); do
  run_one "${harnesses[i]}" & a=$!
  b=""
  if (( i + 1 < ${#harnesses[@]} )); then run_one "${harnesses[i + 1]}" & b=$!; fi
  wait "$a" || status=1
  if [ -n "$b" ]; then wait "$b" || status=1; fi
done
exit $status
