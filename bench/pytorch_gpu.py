#!/usr/bin/env python3
# pytorch_gpu.py: the PyTorch side of scripts/bench_gpu.sh, on the same GPU as bench_gpu.
#   1. one training step of the same models as bench_gpu (tiny, small, GPT-2 124M at B 4, T 1024:
#      the GPT of pytorch_train_step.py), eager mode, f32 with TF32 off; then the same with TF32
#      matrix products allowed, as separately labelled rows;
#   2. F.scaled_dot_product_attention (causal) forward + backward at T 512..4096, B 4, NH 8, HS 64,
#      f32, on whichever kernel PyTorch picks for f32.
# Lines meant for the script start with "torch " and hold key=value pairs, as bench_gpu's do.
# Usage: python3 bench/pytorch_gpu.py [--quick]
import os, sys, time
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_train_step import run  # noqa: E402  (the model and the timed step, shared with the CPU bench)

if not torch.cuda.is_available():
    print("pytorch_gpu: skipped, torch sees no CUDA device")
    sys.exit(77)
quick = "--quick" in sys.argv
reps = 1 if quick else 3
print(f"torch version={torch.__version__} device=\"{torch.cuda.get_device_name()}\"")
presets = [("tiny", 4, 256, 4, 512, 8, 4096), ("small", 6, 512, 8, 512, 8, 4096),
           ("gpt2-124m", 12, 768, 12, 1024, 4, 50257)]
for tf32 in (False, True):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    for name, L, C, NH, T, B, V in presets:
        if quick and name != "tiny":
            continue
        fwd, bwd, opt = run(name, L, C, NH, T, B, V, steps=reps, device="cuda", label=f"{name}{' tf32' if tf32 else ''}")
        print(f"torch train preset={name} math={'tf32' if tf32 else 'f32'} fwd={fwd:.5f} bwd={bwd:.5f} adamw={opt:.5f} "
              f"step={fwd + bwd + opt:.5f} tokens_per_s={B * T / (fwd + bwd + opt):.0f}", flush=True)
torch.backends.cuda.matmul.allow_tf32 = False

B, NH, HS = 4, 8, 64
for T in (512, 1024, 2048, 4096):
    if quick and T > 512:
        continue
    torch.manual_seed(3)
    q, k, v, g = (torch.randn(B, NH, T, HS, device="cuda") for _ in range(4))
    best = 1e9
    for r in range(reps + 3):
        qq, kk, vv = (t.clone().requires_grad_(True) for t in (q, k, v))
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        y = F.scaled_dot_product_attention(qq, kk, vv, is_causal=True)
        y.backward(g)
        torch.cuda.synchronize()
        if r:
            best = min(best, time.perf_counter() - t0)
    print(f"torch attention T={T} sdpa={best:.6f}", flush=True)
