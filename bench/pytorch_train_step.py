#!/usr/bin/python3
# pytorch_train_step.py: the same training step as bench/bench_train.cpp (GPT `tiny`/`small`
# presets: pre-LN, rotary on interleaved pairs, tied embedding, exact GELU, AdamW), timed with
# Debian's PyTorch 1.13 on the CPU, for the comparison quoted in docs/nn.md. Optional: nothing in
# the build or the tests needs Python. Usage: OMP_NUM_THREADS=2 /usr/bin/python3 bench/pytorch_train_step.py
# [--quick | --tiny] (either: the tiny preset only; scripts/bench_vs_pytorch.sh alternates --tiny
# runs with bench_train --tiny)
import math, sys, time
import torch
import torch.nn.functional as F

torch.set_num_threads(int(__import__("os").environ.get("OMP_NUM_THREADS", "2")))

def rotary(x, cos, sin):  # x (B, NH, T, HS), pairs (2i, 2i+1)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x0 * cos - x1 * sin
    out[..., 1::2] = x0 * sin + x1 * cos
    return out

class Block(torch.nn.Module):
    def __init__(s, C, NH):
        super().__init__()
        s.ln1, s.ln2 = torch.nn.LayerNorm(C), torch.nn.LayerNorm(C)
        s.qkv, s.proj = torch.nn.Linear(C, 3 * C, bias=False), torch.nn.Linear(C, C, bias=False)
        s.fc, s.mproj = torch.nn.Linear(C, 4 * C, bias=False), torch.nn.Linear(4 * C, C, bias=False)
        s.NH = NH
    def forward(s, x, cos, sin):
        B, T, C = x.shape
        q, k, v = s.qkv(s.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, s.NH, C // s.NH).transpose(1, 2) for t in (q, k, v))
        q, k = rotary(q, cos, sin), rotary(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True) if hasattr(F, "scaled_dot_product_attention") else \
            (torch.softmax((q @ k.transpose(-1, -2) / math.sqrt(C // s.NH)).masked_fill(
                torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf")), -1) @ v)
        x = x + s.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + s.mproj(F.gelu(s.fc(s.ln2(x))))

class GPT(torch.nn.Module):
    def __init__(s, V, L, C, NH):
        super().__init__()
        s.wte = torch.nn.Embedding(V, C)
        s.blocks = torch.nn.ModuleList(Block(C, NH) for _ in range(L))
        s.ln_f = torch.nn.LayerNorm(C)
    def forward(s, idx, tgt, cos, sin):
        x = s.wte(idx)
        for b in s.blocks:
            x = b(x, cos, sin)
        logits = s.ln_f(x) @ s.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), tgt.view(-1))

def sync(device):
    if device != "cpu":
        torch.cuda.synchronize()

def run(name, L, C, NH, T, B, V=4096, steps=3, device="cpu", label=None):
    """Best-of-`steps` forward / backward / AdamW times of one training step (after a warm-up)."""
    torch.manual_seed(0)
    m = GPT(V, L, C, NH).to(device)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, betas=(0.9, 0.95))
    HS = C // NH
    ang = torch.arange(T, dtype=torch.float64)[:, None] * (10000.0 ** (-torch.arange(0, HS, 2, dtype=torch.float64) / HS))[None]
    cos, sin = ang.cos().float().to(device), ang.sin().float().to(device)
    idx, tgt = torch.randint(0, V, (B, T)).to(device), torch.randint(0, V, (B, T)).to(device)
    best = [1e9, 1e9, 1e9]
    for s in range(steps + 1):
        opt.zero_grad(set_to_none=True)
        sync(device); t0 = time.perf_counter(); loss = m(idx, tgt, cos, sin)
        sync(device); t1 = time.perf_counter(); loss.backward()
        sync(device); t2 = time.perf_counter(); opt.step()
        sync(device); t3 = time.perf_counter()
        if s:
            best = [min(best[0], t1 - t0), min(best[1], t2 - t1), min(best[2], t3 - t2)]
    print(f"{label or name:6s} fwd {best[0]:.3f} s  bwd {best[1]:.3f} s  adamw {best[2]:.3f} s  step {sum(best):.3f} s  "
          f"{B * T / sum(best):.0f} tokens/s")
    return best

if __name__ == "__main__":
    print(f"PyTorch {torch.__version__} CPU, {torch.get_num_threads()} threads, vocab 4096, best of 3 steps after a warm-up")
    tiny = sum(run("tiny", 4, 256, 4, 512, 8))
    if "--quick" not in sys.argv and "--tiny" not in sys.argv:
        run("small", 6, 512, 8, 512, 8)
    print(f"pytorch tiny_step_s={tiny:.3f}")
