"""PyTorch CPU profile of the train_mlp program, as a baseline for `xirang-prof compare`.

Runs the loop of adapter-runtime/examples/common/train.rs with the same aten operators, on the committed goldens,
under torch.profiler, and writes the per-operator key averages (aten:: names only) as `torch-profile`
JSON (sorted, no timestamps):

    /tmp/torchvenv/bin/python adapter-runtime/profile/torch_profile_mlp.py \
        --out adapter-runtime/profile/baselines/train_mlp_torch_cpu.json

Needs torch and safetensors. The committed output lets tests run without torch.
"""

import argparse
import json
import pathlib

import torch
from safetensors.torch import load_file

HERE = pathlib.Path(__file__).resolve().parent
GOLDENS = HERE.parent / "goldens"


def train(init, data, steps, lr):
    aten = torch.ops.aten
    w1, b1 = init["fc1.weight"].clone(), init["fc1.bias"].clone()
    w2, b2 = init["fc2.weight"].clone(), init["fc2.bias"].clone()
    x, y = data["x"], data["y"]
    one = torch.ones((), dtype=torch.float32)
    for _ in range(steps):
        hpre = aten.addmm(b1, x, w1.t())
        h = aten.relu(hpre)
        logits = aten.addmm(b2, h, w2.t())
        lsm = aten._log_softmax(logits, 1, False)
        loss, total_weight = aten.nll_loss_forward(lsm, y, None, 1, -100)
        loss.item()
        g_lsm = aten.nll_loss_backward(one, lsm, y, None, 1, -100, total_weight)
        g_logits = aten._log_softmax_backward_data(g_lsm, lsm, 1, torch.float32)
        g_w2 = aten.mm(g_logits.t(), h)
        g_b2 = aten.sum.dim_IntList(g_logits, [0], False)
        g_h = aten.mm(g_logits, w2)
        g_hpre = aten.threshold_backward(g_h, h, 0)
        g_w1 = aten.mm(g_hpre.t(), x)
        g_b1 = aten.sum.dim_IntList(g_hpre, [0], False)
        for p, g in ((w1, g_w1), (b1, g_b1), (w2, g_w2), (b2, g_b2)):
            aten.add_.Tensor(p, g, alpha=-lr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--lr", type=float, default=0.1)
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    init = load_file(str(GOLDENS / "mlp_init.safetensors"))
    data = load_file(str(GOLDENS / "mlp_data.safetensors"))
    with torch.no_grad():
        train(init, data, 2, a.lr)  # warm-up, not profiled
        init = load_file(str(GOLDENS / "mlp_init.safetensors"))
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            train(init, data, a.steps, a.lr)
    ops = []
    for e in prof.key_averages():
        if not e.key.startswith("aten::"):
            continue
        ops.append({
            "op": e.key,
            "calls": int(e.count),
            "cpu_time_total_us": round(float(e.cpu_time_total), 3),
            "self_cpu_time_total_us": round(float(e.self_cpu_time_total), 3),
        })
    ops.sort(key=lambda o: o["op"])
    doc = {
        "format": "torch-profile",
        "version": 1,
        "source": f"torch {torch.__version__} torch.profiler (CPU, 1 thread), train_mlp goldens, "
                  f"{a.steps} steps, lr {a.lr}",
        "ops": ops,
    }
    out = pathlib.Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
