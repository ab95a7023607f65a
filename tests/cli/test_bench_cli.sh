#!/usr/bin/env bash
# test_bench_cli.sh: the benchmark programs refuse bad command lines and report failures with one
# clear line and an exit status (2 for a usage error, 1 for a failure), never an abort from an
# uncaught exception (exit 134) as they once did. Nothing is benchmarked: every run here stops
# at its flags, or at the first thing it builds. The scripts around them (gpu-check.sh's command
# line, bench_gpu.sh and bench_gpu_ratios.sh, bench_summary.sh and bench_results.sh) are checked
# on hand-written inputs.
# Usage: test_bench_cli.sh bench_train bench_decode bench_gemm bench_landmark bench_topk bench_gpu
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$1"  # LANDMARK (unused here), WORK, fail, expect, exits_with
TRAIN="$1" DECODE="$2" GEMM="$3" LANDMARK_BENCH="$4" TOPK="$5" GPU_BENCH="$6"

exits_with 2 "$WORK/1" "$TRAIN" --vocab abc
expect "$WORK/1" "--vocab needs an integer"
exits_with 2 "$WORK/2" "$TRAIN" --vocab 99999999999999999999
expect "$WORK/2" "got '99999999999999999999'"
exits_with 2 "$WORK/3" "$GEMM" --bogus
expect "$WORK/3" "unknown flag '--bogus'"
exits_with 2 "$WORK/4" "$LANDMARK_BENCH" --slow
expect "$WORK/4" "usage: bench_landmark"
exits_with 1 "$WORK/5" "$DECODE" --quick --block-dir "$WORK/missing"
expect "$WORK/5" "bench_decode: error: block store: $WORK/missing is not a directory"
exits_with 0 "$WORK/6" "$DECODE" --help
expect "$WORK/6" "usage: bench_decode"
exits_with 2 "$WORK/6b" "$DECODE" --device tpu
expect "$WORK/6b" "--device must be cpu or cuda, got 'tpu'"
exits_with 2 "$WORK/7" "$TOPK" --max-blocks 10
expect "$WORK/7" "--max-blocks needs an integer in [1000, 10000000], got '10'"
exits_with 2 "$WORK/8" "$TOPK" --out
expect "$WORK/8" "unknown or incomplete flag '--out'"
exits_with 2 "$WORK/9" "$GEMM" --blocks 64,7
expect "$WORK/9" "--blocks needs KC,MC,NC (three integers), got '64,7'"
exits_with 2 "$WORK/10" "$GEMM" --blocks 64,13,32
expect "$WORK/10" "--blocks: set_gemm_blocks: need kc >= 1, mc a positive multiple of"
SCRIPTS0="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../scripts" && pwd)"
exits_with 2 "$WORK/13" "$GPU_BENCH" --bogus
expect "$WORK/13" "usage: bench_gpu"
if ! command -v nvidia-smi > /dev/null; then  # no GPU here: it says so and exits 77 (the skip code)
  exits_with 77 "$WORK/14" "$GPU_BENCH" --quick
  expect "$WORK/14" "bench_gpu: skipped, no CUDA device"
  exits_with 77 "$WORK/14c" "$DECODE" --quick --device cuda
  expect "$WORK/14c" "bench_decode: skipped, no CUDA device"
  # and make bench's GPU part says it skipped, successfully
  exits_with 0 "$WORK/14b" bash "$SCRIPTS0/bench_gpu.sh" "$(dirname "$(dirname "$GPU_BENCH")")" "$WORK/gpu"
  expect "$WORK/14b" "bench_gpu: skipped"
fi

# scripts/gpu-check.sh refuses a bad command line before touching anything, and says what it needs.
exits_with 2 "$WORK/17" bash "$SCRIPTS0/gpu-check.sh" --steps tests,bogus
expect "$WORK/17" "unknown step 'bogus' in --steps"
exits_with 2 "$WORK/18" bash "$SCRIPTS0/gpu-check.sh" --deadline soon
expect "$WORK/18" "--deadline must be whole seconds, got 'soon'"
exits_with 2 "$WORK/18b" bash "$SCRIPTS0/gpu-check.sh" --jobs 0
expect "$WORK/18b" "--jobs must be a number of jobs from 1 to 9999, got '0'"
exits_with 2 "$WORK/18c" env DECODE_LIMIT=4min bash "$SCRIPTS0/gpu-check.sh"
expect "$WORK/18c" "DECODE_LIMIT must be a number of seconds in [1, 3600], got '4min'"
if ! command -v nvidia-smi > /dev/null; then
  exits_with 1 "$WORK/19" bash "$SCRIPTS0/gpu-check.sh" --out "$WORK/gpucheck"
  expect "$WORK/19" "nvidia-smi not found"
fi

# The GPU ratios (scripts/bench_gpu_ratios.sh) from hand-written lines of both sides.
printf 'gpu device="Test GPU"\ngpu train preset=tiny step=0.010\ngpu train preset=gpt2-124m step=0.200\ngpu attention T=4096 causal=0.010 landmark=0.040\n' > "$WORK/ours.txt"
printf 'torch train preset=tiny math=f32 step=0.020\ntorch train preset=tiny math=tf32 step=0.005\ntorch train preset=gpt2-124m math=f32 step=0.100\ntorch train preset=gpt2-124m math=tf32 step=0.050\ntorch attention T=4096 sdpa=0.008\n' > "$WORK/torch.txt"
bash "$SCRIPTS0/bench_gpu_ratios.sh" "$WORK/ours.txt" "$WORK/torch.txt" > "$WORK/15"
expect "$WORK/15" "gpu train_124m_speedup_vs_torch=0.500 landmark_4096_vs_sdpa=5.00"
grep -Eq '^tiny +0\.0100 +0\.0200 +0\.0050 +2\.00$' "$WORK/15" || { cat "$WORK/15" >&2; fail "bench_gpu_ratios: wrong tiny row"; }
exits_with 2 "$WORK/16" bash "$SCRIPTS0/bench_gpu_ratios.sh" "$WORK/ours.txt"
expect "$WORK/16" "usage: scripts/bench_gpu_ratios.sh"

# The notebook's speed page comes from a bench log (scripts/bench_summary.sh, bench_results.sh):
# a hand-written log of two programs gives exactly their figures, the machine and the date.
SCRIPTS="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../scripts" && pwd)"
cat > "$WORK/bench.log" <<'LOG'
bench run: 2026-01-02 03:04 UTC, Test CPU 9000, 2 logical CPUs, OMP_NUM_THREADS=(unset)
CPU: Test CPU 9000 | threads 2 | caches L1d 48 KiB, L2 2048 KiB, L3 share 1024 KiB (sysfs)
gemm peak_share=0.812
gemm ratio_vs_openblas=1.234
best: ours 0.5 s, pytorch 1.0 s (PyTorch 9.9)
train tiny_speedup_vs_pytorch=2.00
decode speedup_at_32k=31.5 memory_vs_full_at_32k=1.012
LOG
bash "$SCRIPTS/bench_summary.sh" "$WORK/bench.log" > "$WORK/summary.md"
expect "$WORK/summary.md" "(2026-01-02 03:04 UTC, Test CPU 9000, 2 logical CPUs"
expect "$WORK/summary.md" "CPU: Test CPU 9000 | threads 2 | caches L1d 48 KiB"
expect "$WORK/summary.md" "- \`ratio_vs_openblas=1.234\`: our GEMM over OpenBLAS"
expect "$WORK/summary.md" "- \`peak_share=0.812\`"
expect "$WORK/summary.md" "- \`tiny_speedup_vs_pytorch=2.00\`: PyTorch's tiny training step time over ours, alternated runs, best of each (PyTorch 9.9)"
expect "$WORK/summary.md" "- \`speedup_at_32k=31.5\`"
expect "$WORK/summary.md" "- \`memory_vs_full_at_32k=1.012\`: the landmark session's resident memory over the full KV cache's"
[ "$(grep -c '^- ' "$WORK/summary.md")" -eq 5 ] || { cat "$WORK/summary.md" >&2; fail "the summary lists figures the log does not have"; }
# GPU figures name the card; a log whose GPU part was skipped says so.
{ cat "$WORK/bench.log"; printf 'gpu device="Test GPU, compute capability 9.0"\ngpu train_124m_speedup_vs_torch=0.900 landmark_4096_vs_sdpa=8.00\n'; } > "$WORK/gpu.log"
bash "$SCRIPTS/bench_summary.sh" "$WORK/gpu.log" > "$WORK/gpu_summary.md"
expect "$WORK/gpu_summary.md" "- \`train_124m_speedup_vs_torch=0.900\`: PyTorch eager's GPT-2 124M training step time (f32, B 4, T 1024) over ours, on Test GPU, compute capability 9.0"
expect "$WORK/gpu_summary.md" "- \`landmark_4096_vs_sdpa=8.00\`"
{ cat "$WORK/bench.log"; printf 'bench_gpu: skipped, no CUDA device: no driver\n'; } > "$WORK/nogpu.log"
bash "$SCRIPTS/bench_summary.sh" "$WORK/nogpu.log" > "$WORK/nogpu_summary.md"
expect "$WORK/nogpu_summary.md" "- GPU: skipped (no CUDA device: no driver)"
printf 'not a log\n' > "$WORK/other.log"
exits_with 1 "$WORK/11" bash "$SCRIPTS/bench_summary.sh" "$WORK/other.log"
expect "$WORK/11" "does not start like a bench.sh log"
printf '# T\n\n## Speed\n\nintro\n\n<!-- bench:begin (generated from a make bench log by scripts/bench_results.sh; do not edit by hand) -->\nold figures\n<!-- bench:end -->\n\n## Next\n' > "$WORK/page.md"
bash "$SCRIPTS/bench_results.sh" "$WORK/summary.md" "$WORK/page.md" > /dev/null
expect "$WORK/page.md" "ratio_vs_openblas=1.234"
expect "$WORK/page.md" "## Next"
expect "$WORK/page.md" "intro"
! grep -q "old figures" "$WORK/page.md" || fail "bench_results left the old figures in"
bash "$SCRIPTS/bench_results.sh" "$WORK/summary.md" "$WORK/page.md" > /dev/null  # twice: the same file
[ "$(grep -c 'ratio_vs_openblas=1.234' "$WORK/page.md")" -eq 1 ] || fail "a second bench_results run doubled the section"
printf '# no markers\n' > "$WORK/plain.md"
exits_with 1 "$WORK/12" bash "$SCRIPTS/bench_results.sh" "$WORK/summary.md" "$WORK/plain.md"
expect "$WORK/12" "needs exactly one line each of"
echo "bench CLI: all checks passed"
