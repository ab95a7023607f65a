#!/usr/bin/env bash
# test_mpi.sh: data-parallel training under mpirun (train/distributed.h). 2 ranks with a global
# batch of 8 against 1 rank with batch 8: the same losses step by step (relative difference at
# most 1e-6) for a standard and a landmark model (with a context-miss token and jumps, whose rows
# score different numbers of targets); rank 0 alone reports; a batch that does not split is
# refused; a run of 2 ranks resumes on 1; SIGTERM to one rank stops both at the same step with
# a checkpoint; a rank killed with SIGKILL ends the whole job instead of leaving the other waiting.
# Skipped (exit 77) without mpirun, with a build that has no MPI, and in sanitizer builds.
# Usage: test_mpi.sh path/to/landmark [sanitize]
source "$(dirname "$0")/lib.sh"
if [ "${2:-}" = sanitize ]; then
  echo "SKIP: not run under the sanitizers (OpenMPI's own start-up allocations read as leaks); the plain build runs it"
  exit 77
fi
command -v mpirun > /dev/null || { echo "SKIP: no mpirun (Debian: openmpi-bin libopenmpi-dev)"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
MPI=(mpirun -np 2 --oversubscribe -x OMP_NUM_THREADS=1 -x OMP_WAIT_POLICY=PASSIVE)

passkey_tokens "$WORK/text" "$WORK/data" --docs 300 --max-fillers 4
F=(--data "$WORK/data" --layers 2 --embd 32 --heads 2 --log-every 0)

# A build without MPI refuses a world of 2 ranks: skip.
if ! "${MPI[@]}" "$LANDMARK" train "${F[@]}" --batch 8 --block-size 64 --steps 2 --out "$WORK/probe" > "$WORK/probe.log" 2>&1; then
  if grep -q "has no MPI" "$WORK/probe.log"; then echo "SKIP: this build has no MPI"; exit 77; fi
  cat "$WORK/probe.log" >&2
  fail "2 ranks failed"
fi

losses() { grep -o '"step":[0-9]*,"loss":[-0-9.e+]*' "$1" | sed 's/.*"loss"://'; }
# Every step's loss within 1e-6 relative (the issue asks 1e-5): f32 sums in another order differ
# by about 1e-7 here; a mean over ranks that ignored how many targets each scored was off by 5e-6.
same_losses() {  # metrics A, metrics B, what
  paste <(losses "$1") <(losses "$2") | awk -v what="$3" '
    { n++; d = $1 - $2; if (d < 0) d = -d; if (d > 1e-6 * ($1 < 0 ? -$1 : $1)) { print what ": step " n ": " $1 " vs " $2; bad = 1 } }
    END { if (n != 5) { print what ": " n " steps, expected 5"; bad = 1 } exit bad }' || fail "$3: losses differ"
}

for model in standard landmark; do
  extra=(--batch 8 --block-size 64 --eval-every 5)
  [ "$model" = landmark ] && extra=(--batch 8 --block-size 64 --eval-every 5 --attention landmark --landmark-every 7 --cmt --jump 3)
  "$LANDMARK" train "${F[@]}" "${extra[@]}" --steps 5 --out "$WORK/$model.1" > "$WORK/$model.1.log" 2>&1 ||
    { cat "$WORK/$model.1.log" >&2; fail "$model on 1 rank"; }
  "${MPI[@]}" "$LANDMARK" train "${F[@]}" "${extra[@]}" --steps 5 --out "$WORK/$model.2" > "$WORK/$model.2.log" 2>&1 ||
    { cat "$WORK/$model.2.log" >&2; fail "$model on 2 ranks"; }
  same_losses "$WORK/$model.1/metrics.jsonl" "$WORK/$model.2/metrics.jsonl" "$model, 1 rank vs 2"
  # Validation too: each rank scores its rows of the same batches.
  v1=$(grep -o '"val_loss":[0-9.]*' "$WORK/$model.1/metrics.jsonl" | tail -n 1 | cut -d: -f2)
  v2=$(grep -o '"val_loss":[0-9.]*' "$WORK/$model.2/metrics.jsonl" | tail -n 1 | cut -d: -f2)
  awk -v a="$v1" -v b="$v2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-6 * a) }' || fail "$model validation: $v1 vs $v2"
  # Rank 0 alone reports: one header, one line for step 5, one "stopped"; the metrics say ranks 2.
  [ "$(grep -c '^training ' "$WORK/$model.2.log")" -eq 1 ] || fail "$model: the header printed more than once"
  expect "$WORK/$model.2.log" "2 ranks (mpi"
  [ "$(grep -c 'step      5/5 .*| ranks 2' "$WORK/$model.2.log")" -eq 1 ] || { cat "$WORK/$model.2.log" >&2; fail "$model: progress"; }
  [ "$(grep -c '^stopped: done at step 5' "$WORK/$model.2.log")" -eq 1 ] || fail "$model: the summary printed more than once"
  [ "$(grep -c '"ranks":2' "$WORK/$model.2/metrics.jsonl")" -eq 5 ] || fail "$model: metrics without ranks 2"
done

# A global batch that does not split evenly: a clear error, non-zero exit.
"${MPI[@]}" "$LANDMARK" train "${F[@]}" --block-size 64 --batch 7 --steps 2 --out "$WORK/odd" > "$WORK/odd.log" 2>&1 &&
  fail "--batch 7 accepted on 2 ranks"
expect "$WORK/odd.log" "--batch 7 does not split evenly across 2 ranks"

# 3 steps on 2 ranks, then resumed on 1 rank: the losses of the 1-rank run from the start.
"${MPI[@]}" "$LANDMARK" train "${F[@]}" --batch 8 --block-size 64 --steps 5 --stop-at 3 --out "$WORK/resume" > "$WORK/r1.log" 2>&1 ||
  { cat "$WORK/r1.log" >&2; fail "2 ranks, stop at 3"; }
"$LANDMARK" train "${F[@]}" --batch 8 --block-size 64 --steps 5 --resume "$WORK/resume/checkpoint.safetensors" --out "$WORK/resume" \
  > "$WORK/r2.log" 2>&1 || { cat "$WORK/r2.log" >&2; fail "the resume on 1 rank"; }
same_losses "$WORK/standard.1/metrics.jsonl" "$WORK/resume/metrics.jsonl" "2 ranks resumed on 1"

# SIGTERM to one rank only (rank 1, as a scheduler's signal may reach one process first): the
# ranks share their stop flags after each step, so both stop at the same step and rank 0 saves.
# (Not through mpirun: OpenMPI forwards SIGTERM but kills ranks that have not exited within its
# odls_base_sigkill_timeout, 1 s by default, which a loaded machine's checkpoint can exceed.)
"${MPI[@]}" "$LANDMARK" train "${F[@]}" --batch 8 --block-size 64 --steps 1000000 --eval-every 0 --out "$WORK/term" > "$WORK/term.log" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q '"step":3,' "$WORK/term/metrics.jsonl" 2>/dev/null && break; sleep 0.2; done
rank1=""
for p in $(pgrep -f "landmark train .*--out $WORK/term"); do
  tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1' && rank1=$p
done
[ -n "$rank1" ] || fail "no process of rank 1 found"
kill -TERM "$rank1"
set +e
wait "$pid"
set -e
expect "$WORK/term.log" "stopped: interrupted at step"
[ -s "$WORK/term/checkpoint.safetensors" ] || fail "no checkpoint after SIGTERM to rank 1"
last=$(grep -o '"step":[0-9]*' "$WORK/term/metrics.jsonl" | tail -n 1 | cut -d: -f2)
expect "$WORK/term.log" "stopped: interrupted at step $last;"

# A rank killed outright: mpirun sees it die and ends the job (no hang; 60 s is the bound).
start=$SECONDS
timeout 60 "${MPI[@]}" "$LANDMARK" train "${F[@]}" --batch 8 --block-size 64 --steps 1000000 --eval-every 0 --out "$WORK/dead" \
  > "$WORK/dead.log" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q '"step":3,' "$WORK/dead/metrics.jsonl" 2>/dev/null && break; sleep 0.2; done
rank_pid() {  # rank_pid N OUT: the process of rank N among those training into OUT (from its environment)
  local p
  for p in $(pgrep -f "landmark train .*--out $2"); do
    tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && { echo "$p"; return; }
  done
}
victim=$(rank_pid 1 "$WORK/dead")
[ -n "$victim" ] || fail "no rank process found to kill"
kill -KILL "$victim"
set +e
wait "$pid"
rc=$?
set -e
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { cat "$WORK/dead.log" >&2; fail "mpirun returned $rc after a rank died (124: it hung)"; }
echo "a killed rank ended the job in $((SECONDS - start)) s (exit $rc)"
echo "mpi: ok"
