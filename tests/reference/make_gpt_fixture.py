#!/usr/bin/python3
# make_gpt_fixture.py: the PyTorch reference for tests/test_gpt_parity.cpp. Builds a tiny GPT that
# mirrors nn/gpt.cpp op for op, in float64, runs one forward/backward and three AdamW steps, and
# writes everything to gpt_fixture.safetensors next to this script, in our checkpoint format
# (nn/checkpoint.cpp). Not a second implementation to maintain: it is run once and its output is
# committed; the C++ tests never need Python.
#
# Regenerate (Debian's PyTorch, from the repository root):
#     /usr/bin/python3 tests/reference/make_gpt_fixture.py
# The output is deterministic for a given PyTorch version (fixed seed, CPU, float64).

import json
import math
import os
import struct

import torch
import torch.nn.functional as F

# ---- what the fixture holds ----
# Small enough that the file (parameters, gradients and final parameters, all f64) stays under
# 200 KB; large enough that every code path is exercised (2 layers, 2 heads, HS = 8 so rotary
# has 4 frequencies, T = 16 positions so the fastest pair turns more than twice around).
CONFIG = dict(vocab_size=53, n_layer=2, n_head=2, n_embd=16, block_size=16,
              dropout=0.0, rotary_base=10000.0, ln_eps=1e-5, bias=False)
BATCH = 2
SEED = 1234
# lr is constant over the 3 steps; weight decay is large so its effect (Linear weights only)
# is visible in the final parameters.
ADAMW = dict(lr=1e-2, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, steps=3)

DTYPE = torch.float64
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpt_fixture.safetensors")


# ---- the model, written out so each line can be set beside nn/gpt.cpp ----

def make_params(gen):
    """Parameters under the names GPT::named_parameters() gives, in that order.

    Scales are larger than the training init (0.02) so attention is far from uniform and the
    logits far from flat: a parity test on near-constant activations would prove little. The
    LayerNorm weights and biases are random too, so a swapped weight/bias would show."""
    V, C, L = CONFIG["vocab_size"], CONFIG["n_embd"], CONFIG["n_layer"]

    def randn(*shape, std):
        return torch.randn(*shape, generator=gen, dtype=DTYPE) * std

    p = {"wte.weight": randn(V, C, std=0.5)}
    for l in range(L):
        b = f"blocks.{l}."
        p[b + "ln1.weight"] = 1.0 + randn(C, std=0.2)
        p[b + "ln1.bias"] = randn(C, std=0.2)
        p[b + "attn.qkv.weight"] = randn(3 * C, C, std=0.3)   # (out, in) like nn.Linear
        p[b + "attn.proj.weight"] = randn(C, C, std=0.2)
        p[b + "ln2.weight"] = 1.0 + randn(C, std=0.2)
        p[b + "ln2.bias"] = randn(C, std=0.2)
        p[b + "mlp.fc.weight"] = randn(4 * C, C, std=0.25)
        p[b + "mlp.proj.weight"] = randn(C, 4 * C, std=0.15)
    p["ln_f.weight"] = 1.0 + randn(C, std=0.2)
    p["ln_f.bias"] = randn(C, std=0.2)
    return {k: v.requires_grad_(True) for k, v in p.items()}


def decays(name):
    # Module::decays: only Linear weights; the embedding (also the LM head) and LayerNorms do not.
    return name.endswith(("qkv.weight", "attn.proj.weight", "fc.weight", "mlp.proj.weight"))


def rotary_tables(T, HS, base):
    # nn/functional.cpp rotary_tables: inv_freq = base^(-2i/HS) and angle = pos * inv_freq, both
    # in f64 (Python floats; ** is C pow like std::pow), cos/sin rounded once to the model dtype.
    half = HS // 2
    inv_freq = [base ** (-2.0 * i / HS) for i in range(half)]
    cos = [[math.cos(t * f) for f in inv_freq] for t in range(T)]
    sin = [[math.sin(t * f) for f in inv_freq] for t in range(T)]
    return torch.tensor(cos, dtype=torch.float64).to(DTYPE), torch.tensor(sin, dtype=torch.float64).to(DTYPE)


def rotary(x, cos, sin):
    # x (B, NH, T, HS); pairs are INTERLEAVED: (x[2i], x[2i+1]) turns by angle(t, i):
    #   y0 = x0 cos - x1 sin,  y1 = x0 sin + x1 cos      (nn/nn_math.h rotate_pair)
    x0, x1 = x[..., 0::2], x[..., 1::2]                 # (B, NH, T, HS/2) each
    y0 = x0 * cos - x1 * sin
    y1 = x0 * sin + x1 * cos
    return torch.stack((y0, y1), dim=-1).flatten(-2)    # back to (B, NH, T, HS), pairs interleaved


def attention(x, p, b, cos, sin):
    B, T, C = x.shape
    NH = CONFIG["n_head"]
    HS = C // NH
    qkv = x @ p[b + "attn.qkv.weight"].T                               # (B, T, 3C): q | k | v
    q, k, v = qkv.split(C, dim=2)
    heads = lambda t: t.reshape(B, T, NH, HS).transpose(1, 2)          # (B, NH, T, HS)
    q, k, v = rotary(heads(q), cos, sin), rotary(heads(k), cos, sin), heads(v)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(HS))            # (B, NH, T, T)
    causal = torch.ones(T, T, dtype=torch.bool).tril()                 # key j visible to query i iff j <= i
    att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
    y = (att @ v).transpose(1, 2).reshape(B, T, C)                     # heads back together
    return y @ p[b + "attn.proj.weight"].T


def layernorm(x, p, name):
    return F.layer_norm(x, (x.shape[-1],), p[name + ".weight"], p[name + ".bias"], CONFIG["ln_eps"])


def forward(idx, p):
    """idx (B, T) int -> logits (B, T, V)."""
    T = idx.shape[1]
    C, NH = CONFIG["n_embd"], CONFIG["n_head"]
    cos, sin = rotary_tables(T, C // NH, CONFIG["rotary_base"])
    x = p["wte.weight"][idx]                                           # (B, T, C); no position embedding
    for l in range(CONFIG["n_layer"]):
        b = f"blocks.{l}."
        x = x + attention(layernorm(x, p, b + "ln1"), p, b, cos, sin)
        h = F.gelu(layernorm(x, p, b + "ln2") @ p[b + "mlp.fc.weight"].T)   # exact (erf) GELU
        x = x + h @ p[b + "mlp.proj.weight"].T
    x = layernorm(x, p, "ln_f")
    return x @ p["wte.weight"].T                                       # tied LM head


def loss_of(logits, targets):
    V = CONFIG["vocab_size"]
    return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))  # mean over all B*T positions


# ---- the safetensors writer (our format: nn/checkpoint.cpp) ----

ST_DTYPES = {torch.float64: ("F64", "<f8"), torch.int32: ("I32", "<i4")}


def save_safetensors(path, tensors, metadata):
    """tensors: list of (name, tensor) in file order; metadata: JSON-able dict."""
    header = {"__metadata__": {"format": "landmark-v1", "landmark": json.dumps(metadata)}}
    blobs, offset = [], 0
    for name, t in tensors:
        t = t.detach().contiguous()
        st_name, np_fmt = ST_DTYPES[t.dtype]
        data = t.numpy().astype(np_fmt, copy=False).tobytes()     # little-endian, row-major
        header[name] = {"dtype": st_name, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)                       # data starts 8-aligned
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in blobs:
            f.write(data)
    os.replace(path + ".tmp", path)


def main():
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(SEED)
    V, T = CONFIG["vocab_size"], CONFIG["block_size"]
    idx = torch.randint(0, V, (BATCH, T), generator=gen)
    targets = torch.randint(0, V, (BATCH, T), generator=gen)
    p = make_params(gen)
    names = list(p.keys())
    initial = {k: v.detach().clone() for k, v in p.items()}

    # One forward and backward at the initial weights.
    logits = forward(idx, p)
    loss = loss_of(logits, targets)
    loss.backward()
    grads = {k: v.grad.detach().clone() for k, v in p.items()}

    # Three AdamW steps from the same initial weights, weight decay on Linear weights only.
    for v in p.values():
        v.grad = None
    groups = [{"params": [p[k] for k in names if decays(k)], "weight_decay": ADAMW["weight_decay"]},
              {"params": [p[k] for k in names if not decays(k)], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=ADAMW["lr"], betas=(ADAMW["beta1"], ADAMW["beta2"]), eps=ADAMW["eps"])
    step_losses = []
    for _ in range(ADAMW["steps"]):
        opt.zero_grad(set_to_none=True)
        l = loss_of(forward(idx, p), targets)
        step_losses.append(l.item())      # the loss before this step's update
        l.backward()
        opt.step()

    tensors = [("idx", idx.to(torch.int32)), ("targets", targets.to(torch.int32))]
    tensors += [(k, initial[k]) for k in names]
    tensors += [("logits", logits), ("loss", loss)]
    tensors += [("grad." + k, grads[k]) for k in names]
    tensors += [("step_losses", torch.tensor(step_losses, dtype=torch.float64))]
    tensors += [("after." + k, p[k]) for k in names]
    metadata = {"config": CONFIG, "adamw": ADAMW, "batch": BATCH, "seed": SEED,
                "made_by": "tests/reference/make_gpt_fixture.py", "torch": torch.__version__}
    save_safetensors(OUT, tensors, metadata)

    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes, {len(tensors)} tensors)")
    print(f"config {CONFIG}, batch {BATCH}, adamw {ADAMW}")
    print(f"loss {loss.item():.17g}")
    print("step losses " + " ".join(f"{x:.17g}" for x in step_losses))
    for name, t in tensors:
        print(f"  {name:32s} {str(t.dtype).replace('torch.', ''):8s} {list(t.shape)}")


if __name__ == "__main__":
    main()
