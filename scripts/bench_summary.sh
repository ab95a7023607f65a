#!/usr/bin/env bash
# bench_summary.sh LOG: the result lines of a `make bench` log (scripts/bench.sh) as a Markdown
# list that names the machine, the date and the thread count: what docs/results/bench.md
# shows (make bench-results). Every figure comes from the log; nothing is typed in.
set -euo pipefail
LOG="${1:?usage: bench_summary.sh path/to/bench.log}"
[ -s "$LOG" ] || { echo "bench_summary: no log at $LOG (run make bench first)" >&2; exit 1; }
head1="$(head -n 1 "$LOG")"
case "$head1" in "bench run: "*) ;; *) echo "bench_summary: $LOG does not start like a bench.sh log" >&2; exit 1 ;; esac
machine="$(grep -m 1 '^CPU: ' "$LOG" | sed 's/^CPU: //')"
torch="$(sed -n 's/^best: .*(\(PyTorch [^)]*\)).*/\1/p' "$LOG" | head -n 1)"
echo "Measured by scripts/bench.sh, what \`make bench\` runs (${head1#bench run: }); CPU: ${machine}."
echo
value() { { grep -o "\\b$1=[^ ]*" "$LOG" || true; } | tail -n 1 | cut -d= -f2; }  # empty when absent
line() {  # key, what it is
  local v
  v="$(value "$1")"
  [ -n "$v" ] && echo "- \`$1=$v\`: $2"
  return 0
}
line ratio_vs_openblas "our GEMM over OpenBLAS's sgemm, geometric mean over the Linear shapes in 3 layouts (bench_gemm)"
line peak_share "our GEMM's GFLOP/s over the FMA peak measured by the probe, geometric mean (bench_gemm)"
line tiny_speedup_vs_pytorch "PyTorch's tiny training step time over ours, alternated runs, best of each (${torch:-PyTorch})"
line tiny_step_s "our tiny training step (4 layers, d 256, T 512, batch 8), seconds (bench_train)"
line gpt2_124m_peak_share "model GFLOP/s of a GPT-2 124M-shaped training step over the FMA peak (bench_train)"
line gelu_speedup_vs_libm "GELU forward + backward in f32 (math::normal_cdf) over the same loops through libm's erff/expf (bench_train)"
line fused_speedup_vs_reference "fused causal attention over the composed reference, forward + backward (bench_train)"
line overhead_vs_causal "fused landmark attention's time over fused causal attention's (bench_landmark)"
line sparse_train_speedup_at_8k "the dense landmark op's fwd + bwd time over the top-k op's (training with the cache, K 4, F 50) at T 8192 (bench_landmark)"
line sparse_train_speedup_at_32k "the same at T 32768 (bench_landmark)"
line sparse_crossover_T "the shortest window (of 256, 512, ... 4096) where the top-k op is the faster (bench_landmark)"
line speedup_at_32k "full-KV-cache decode step time over the landmark step (k 4) at 32k tokens (bench_decode)"
line memory_vs_full_at_32k "the landmark session's resident memory over the full KV cache's at 32k tokens, block K/V in RAM; by sizes no cache that can retrieve every block is below 1 + 1/(2F) = 1.010 (the text's K/V plus one landmark key per block of F = 50; bench_decode)"
line bounded_speedup_passkey_k4_at_max "bounded exact top-k over the scan, pass-key keys, most blocks (bench_topk)"
line tiny_ranks2x1_vs_ranks1x2 "2 MPI ranks x 1 thread over 1 rank x 2 threads, tokens/s (scripts/bench_dp.sh)"
gpu="$(sed -n 's/^gpu device="\(.*\)"$/\1/p' "$LOG" | head -n 1)"
line train_124m_speedup_vs_torch "PyTorch eager's GPT-2 124M training step time (f32, B 4, T 1024) over ours, on ${gpu:-the GPU} (scripts/bench_gpu.sh)"
line landmark_4096_vs_sdpa "our fused landmark attention's time over PyTorch's scaled_dot_product_attention (causal), fwd + bwd at T 4096, on ${gpu:-the GPU}"
grep -q '^bench_gpu: skipped' "$LOG" && echo "- GPU: skipped ($(sed -n 's/^bench_gpu: skipped[:,]* *//p' "$LOG" | head -n 1))"
exit 0
