"""Goldens of the train_transformer test: a pre-norm transformer block trained with full-batch SGD
in PyTorch from fixed initial weights (a separate script, so that ``make_goldens.py``'s files keep
their bytes).

    python3 -m venv /tmp/tv && /tmp/tv/bin/pip install torch numpy safetensors
    /tmp/tv/bin/python adapter-runtime/goldens/make_transformer_goldens.py

Writes, next to this file:

* ``transformer_init.safetensors``: the f32 parameters (names below);
* ``transformer_data.safetensors``: f32 ``x`` [B, T, D] and i64 ``y`` [B];
* ``transformer_losses.json``: torch version, heads, steps, lr and the loss before each step.

Model (``train::train_transformer`` runs the same operators on the device)::

    a  = LN1(x)                                          # native_layer_norm over D
    q, k, v = linear(a) per head: view [B,T,H,Dh] -> permute(0,2,1,3) -> reshape [B*H,T,Dh]
    p  = softmax(bmm(q, k.transpose(1,2)) * Dh**-0.5, -1)
    h  = x + out(bmm(p, v) -> [B,H,T,Dh] -> permute -> [B*T, D])
    h2 = h + fc2(gelu(fc1(LN2(h))))
    logits = head(mean(h2, 1)); loss = cross_entropy(logits, y)
"""

import json
import math
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))

B, T, D, H, FF, C = 16, 8, 16, 2, 32, 3
STEPS, LR = 50, 0.05


def init_params(g):
    def lin(o, i):
        return torch.randn(o, i, generator=g) * (1 / math.sqrt(i)), torch.randn(o, generator=g) * 0.1

    p = {}
    for ln in ("ln1", "ln2"):
        p[f"{ln}.weight"] = 1 + 0.1 * torch.randn(D, generator=g)
        p[f"{ln}.bias"] = 0.1 * torch.randn(D, generator=g)
    for name, (o, i) in {
        "attn.q": (D, D),
        "attn.k": (D, D),
        "attn.v": (D, D),
        "attn.out": (D, D),
        "fc1": (FF, D),
        "fc2": (D, FF),
        "head": (C, D),
    }.items():
        p[f"{name}.weight"], p[f"{name}.bias"] = lin(o, i)
    return p


def forward(p, x):
    b, t, d = x.shape
    dh = d // H

    def linear(z, name):
        return F.linear(z, p[f"{name}.weight"], p[f"{name}.bias"])

    def split(z):  # [B*T, D] -> [B*H, T, Dh]
        return z.view(b, t, H, dh).permute(0, 2, 1, 3).reshape(b * H, t, dh)

    a = F.layer_norm(x, (d,), p["ln1.weight"], p["ln1.bias"], 1e-5).reshape(b * t, d)
    q, k, v = split(linear(a, "attn.q")), split(linear(a, "attn.k")), split(linear(a, "attn.v"))
    s = torch.bmm(q, k.transpose(1, 2)) * (1 / math.sqrt(dh))
    o = torch.bmm(torch.softmax(s, -1), v).view(b, H, t, dh).permute(0, 2, 1, 3).reshape(b * t, d)
    h = x + linear(o, "attn.out").view(b, t, d)
    m = F.layer_norm(h, (d,), p["ln2.weight"], p["ln2.bias"], 1e-5).reshape(b * t, d)
    h2 = h + linear(F.gelu(linear(m, "fc1")), "fc2").view(b, t, d)
    return linear(h2.mean(1), "head")


def main():
    g = torch.Generator().manual_seed(11)
    init = init_params(g)
    data = {"x": torch.randn(B, T, D, generator=g), "y": torch.randint(0, C, [B], generator=g)}
    save_file({k: v.contiguous() for k, v in sorted(init.items())}, os.path.join(HERE, "transformer_init.safetensors"))
    save_file(data, os.path.join(HERE, "transformer_data.safetensors"))
    params = {k: v.clone().requires_grad_(True) for k, v in sorted(init.items())}
    losses = []
    for _ in range(STEPS):
        loss = F.cross_entropy(forward(params, data["x"]), data["y"])
        losses.append(loss.item())
        grads = torch.autograd.grad(loss, list(params.values()))
        with torch.no_grad():
            for p, gr in zip(params.values(), grads):
                p -= LR * gr
    with open(os.path.join(HERE, "transformer_losses.json"), "w") as f:
        json.dump({"torch": torch.__version__, "heads": H, "steps": STEPS, "lr": LR, "losses": losses}, f, indent=1)
        f.write("\n")
    print(f"{STEPS} steps: loss {losses[0]:.6f} -> {losses[-1]:.6f}")


if __name__ == "__main__":
    main()
