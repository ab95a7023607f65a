#!/usr/bin/env bash
# fuzz.sh [--runs N] [--jobs J] [--workers W] [SECONDS] [HARNESS...]: build the libFuzzer
# harnesses of fuzz/ (clang-16, ASan + UBSan, in build-fuzz/) and run each for SECONDS (default
# 60), J at a time (default 2, the machine's two cores), starting from the committed seeds in
# fuzz/corpus/<name>/ (new inputs go to build-fuzz/corpus/<name>/, never into the repository).
# With --runs N a harness stops after N executions instead (SECONDS is then ignored): that is how
# the long campaign of docs/reliability.md section 4 was run. With --workers W each harness runs
# as W processes at once that share its corpus (libFuzzer rereads the corpus directory, so each
# worker fuzzes from what the others found), each for SECONDS or for N/W executions (rounded up);
# the line printed sums their executions. W x J processes run at once. Exits non-zero on any
# finding: a crash, a sanitizer report, an exception other than lm::Error, an input slower than
# 10 s or a process above 2 GB.
# The input that did it is left in build-fuzz/findings/ and its log named. The harnesses write
# each input to a scratch file; it goes in /dev/shm when that is a writable tmpfs (3.5 times the
# executions per second of a disk-backed /tmp for the token-file reader). Needs the packages
# installed by `scripts/install-deps.sh fuzz` (clang-16, libclang-rt-16-dev, libfuzzer-16-dev).
#   bash scripts/fuzz.sh                               # every harness, 60 s each (what CI runs)
#   bash scripts/fuzz.sh 3600 cli                      # one harness for an hour
#   bash scripts/fuzz.sh --runs 10000000 --jobs 1 rdata token_file   # 10^7 executions each, in turn
#   bash scripts/fuzz.sh --runs 10000000 --jobs 1 --workers 2 bpe_train   # 10^7 by two workers
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { echo "fuzz.sh: $1 (usage: fuzz.sh [--runs N] [--jobs J] [--workers W] [SECONDS] [HARNESS...])" >&2; exit 2; }
is_count() { case "$1" in ''|*[!0-9]*) return 1;; esac; [ "$1" -gt 0 ]; }
seconds=60 runs="" jobs=2 workers=1
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) [ $# -ge 2 ] && is_count "$2" || usage "--runs needs a positive whole number, got '${2:-}'"; runs=$2; shift 2;;
    --jobs) [ $# -ge 2 ] && is_count "$2" || usage "--jobs needs a positive whole number, got '${2:-}'"; jobs=$2; shift 2;;
    --workers) [ $# -ge 2 ] && is_count "$2" || usage "--workers needs a positive whole number, got '${2:-}'"; workers=$2; shift 2;;
    -*) usage "unknown option '$1'";;
    *) break;;
  esac
done
if [ $# -gt 0 ] && [[ "$1" =~ ^[0-9]+$ ]]; then seconds=$1; shift; fi
is_count "$seconds" || usage "SECONDS must be a positive whole number, got '$seconds'"
command -v clang++-16 > /dev/null || { echo "fuzz.sh: clang++-16 not found; run: bash scripts/install-deps.sh fuzz" >&2; exit 1; }
scratch=${TMPDIR:-/tmp}
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then scratch=/dev/shm; fi

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
  local limit=(-max_total_time="$seconds") what="in ${seconds} s"
  if [ -n "$runs" ]; then limit=(-runs="$(( (runs + workers - 1) / workers ))"); what="(limit $runs)"; fi
  [ "$workers" -eq 1 ] || what="$what, $workers workers"
  # Worker w logs to build-fuzz/logs/<name>.log (w = 1) or <name>.w<w>.log; each saves what it
  # finds under build-fuzz/findings/<name>-.
  local start=$SECONDS w logs=() pids=() bad=()
  for ((w = 1; w <= workers; ++w)); do
    local log="build-fuzz/logs/$name.log"
    [ "$w" -eq 1 ] || log="build-fuzz/logs/$name.w$w.log"
    logs+=("$log")
    TMPDIR="$scratch" "$bin" "build-fuzz/corpus/$name" "fuzz/corpus/$name" "${limit[@]}" -max_len="$max_len" \
      -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="build-fuzz/findings/$name-" > "$log" 2>&1 &
    pids+=($!)
  done
  for ((w = 0; w < workers; ++w)); do wait "${pids[w]}" || bad+=("${logs[w]}"); done
  if [ ${#bad[@]} -eq 0 ]; then
    local total=0 n log
    for log in "${logs[@]}"; do
      n=$(grep -m1 'stat::number_of_executed_units' "$log" | awk '{print $2}')
      total=$((total + ${n:-0}))
    done
    echo "fuzz $name: $total executions $what, $((SECONDS - start)) s, 0 findings"
  else
    local log
    for log in "${bad[@]}"; do
      echo "fuzz $name: FINDING (log $log, input in build-fuzz/findings/):"
      grep -E -m5 'ERROR|SUMMARY|what\(\)|Test unit written' "$log" || tail -5 "$log"
    done
    return 1
  fi
}
# J at a time; every harness runs even after a finding.
status=0
for ((i = 0; i < ${#harnesses[@]}; i += jobs)); do
  pids=()
  for ((j = i; j < i + jobs && j < ${#harnesses[@]}; ++j)); do run_one "${harnesses[j]}" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" || status=1; done
done
exit $status
