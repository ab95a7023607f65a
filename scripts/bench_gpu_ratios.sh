#!/usr/bin/env bash
# bench_gpu_ratios.sh OURS TORCH: the ratios of one side-by-side GPU run, from bench_gpu's
# "gpu ..." lines (OURS) and bench/pytorch_gpu.py's "torch ..." lines (TORCH), both measured on the
# same card in the same run (scripts/gpu-check.sh, scripts/bench.sh). A ratio above 1 means ours is
# faster. Last line: gpu train_124m_speedup_vs_torch=<r> landmark_4096_vs_sdpa=<r>
set -euo pipefail
[ $# -eq 2 ] && [ -f "$1" ] && [ -f "$2" ] || { echo "usage: scripts/bench_gpu_ratios.sh OURS.txt TORCH.txt" >&2; exit 2; }
awk '
  function val(key,   i, kv) { for (i = 1; i <= NF; ++i) { split($i, kv, "="); if (kv[1] == key) return kv[2] } return "" }
  FNR == 1 { file++ }
  file == 1 && $1 == "gpu" && $2 == "device=\"" { }
  file == 1 && $1 == "gpu" && $2 == "train" { ours[val("preset")] = val("step") }
  file == 1 && $1 == "gpu" && $2 == "attention" { causal[val("T")] = val("causal"); lmk[val("T")] = val("landmark") }
  file == 2 && $1 == "torch" && $2 == "train" { if (val("math") == "f32") t32[val("preset")] = val("step"); else ttf[val("preset")] = val("step") }
  file == 2 && $1 == "torch" && $2 == "attention" { sdpa[val("T")] = val("sdpa") }
  END {
    printf "training step (s)     ours f32   torch f32  torch tf32   torch f32 / ours\n"
    n = split("tiny small gpt2-124m", names, " ")
    for (i = 1; i <= n; ++i) { p = names[i]; if (!(p in ours)) continue
      printf "%-20s %10.4f  %10.4f  %10.4f   %8.2f\n", p, ours[p], t32[p], ttf[p], (p in t32 && ours[p] > 0) ? t32[p] / ours[p] : 0 }
    printf "attention fwd+bwd (s)  ours causal  ours landmark  torch sdpa   landmark / sdpa\n"
    m = split("512 1024 2048 4096", Ts, " ")
    for (i = 1; i <= m; ++i) { T = Ts[i]; if (!(T in lmk)) continue
      printf "T %-18s %10.5f  %13.5f  %10.5f   %8.2f\n", T, causal[T], lmk[T], sdpa[T], (sdpa[T] > 0) ? lmk[T] / sdpa[T] : 0 }
    s124 = ("gpt2-124m" in ours && "gpt2-124m" in t32 && ours["gpt2-124m"] > 0) ? sprintf("%.3f", t32["gpt2-124m"] / ours["gpt2-124m"]) : "n/a"
    l4 = (4096 in lmk && sdpa[4096] > 0) ? sprintf("%.2f", lmk[4096] / sdpa[4096]) : "n/a"
    printf "gpu train_124m_speedup_vs_torch=%s landmark_4096_vs_sdpa=%s\n", s124, l4
  }' "$1" "$2"
