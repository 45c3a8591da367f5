"""Whole models training on `xirang` against `cpu` (issue #39, item 3): torchvision's resnet18,
mobilenet_v3_small and a 2-layer vit_b_16, a GPT-2 and a BERT from transformers and an LSTM classifier
from torch.nn, each with the same initial weights and batches on both devices (models_report.py, one
worker per model, says how each is set up and measured).

The outcome is a committed report, `adapter-runtime/torch-xirang/MODELS.md`, checked like OPINFO.md:
the test fails when the report it computes differs from the committed one. Regenerate it with
`XIRANG_MODELS_WRITE=1 pytest adapter-runtime/torch-xirang/tests/test_models.py`. It also fails when a
model's losses on the device leave CPU's by more than LOSS_RTOL in any of the 20 steps, or its step-1
gradients by more than GRAD_RTOL: that is correctness, where the share of operator calls the device
serves without PyTorch's CPU kernels (the issue's target: 95%) is reported, not asserted.

Each model also trains under automatic mixed precision (issue #39, item 4): `torch.autocast` with
bfloat16, and with float16 and `torch.amp.GradScaler`. Autocast on `xirang` follows PyTorch's policy for
accelerators (the AutocastPrivateUse1 lists, CUDA's), CPU autocast its own lists; so the device's kernels
are judged against the same autocast run on `xirang` with every operator forced onto PyTorch's CPU
kernels (same policy, CPU's arithmetic): the test fails when the losses leave that reference's by more
than AMP_ULPS units in the last place of the autocast dtype, or the gradient scaler skips other steps.
The distances to CPU autocast, and CPU autocast's own distance to float32 training, are reported.
"""

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
PKG = HERE.parent
REPORT = PKG / "MODELS.md"
WORKER = HERE / "models_report.py"
# the order of the report and of the workers (the longest first)
MODELS = ("resnet18", "mobilenet_v3_small", "vit_b_16 (2 layers)", "gpt2", "bert", "lstm")
TIERS = ("native", "recipe", "fallback")
TARGET = 95.0  # % of operator calls native or recipe (issue #39)
LOSS_RTOL = 1e-4
GRAD_RTOL = 1e-3
STEPS = 20
AMP_STEPS = 5  # models_report.AMP_STEPS
DEVICE_CONVOLUTION = ("convolution_overrideable", "convolution_backward_overrideable")  # models_report's
PRECISIONS = ("float32", "autocast bfloat16", "autocast float16 + GradScaler")
# A loss computed from half-precision activations is as coarse as they are: one rounding that goes the
# other way moves it by up to one unit in the last place (2^-7 relative for bfloat16, 2^-10 for float16).
ULP = {"autocast bfloat16": 2.0 ** -7, "autocast float16 + GradScaler": 2.0 ** -10}
AMP_ULPS = 2


def requirements():
    missing = []
    for name in ("torchvision", "transformers"):
        try:
            __import__(name)
        except Exception as e:  # noqa: BLE001 - named in the failure
            missing.append(f"{name} ({type(e).__name__}: {e})")
    assert not missing, (
        "the model report needs torchvision and transformers; failed to import: " + ", ".join(missing)
        + ". .ci/run installs both: pip install transformers==5.25.0, and pip install --no-deps "
        f"torchvision==0.29.2 (the release for torch {torch.__version__.split('+')[0]})")


def measure() -> list:
    """One worker per (model, precision); the rows in MODELS x PRECISIONS order."""
    jobs_list = [(m, p) for m in MODELS for p in PRECISIONS]
    jobs = max(1, min(len(jobs_list), os.cpu_count() or 1, 4))
    with tempfile.TemporaryDirectory() as tmp:
        pending = list(enumerate(jobs_list))
        running, errors = [], []
        while pending or running:
            while pending and len(running) < jobs:
                i, (key, prec) = pending.pop(0)
                err = open(f"{tmp}/{i}.err", "w")
                p = subprocess.Popen([sys.executable, str(WORKER), key, f"{tmp}/{i}.json", prec],
                                     stdout=subprocess.DEVNULL, stderr=err)
                running.append((i, f"{key} ({prec})", p, err, time.monotonic()))
            time.sleep(0.2)
            for job in [j for j in running if j[2].poll() is not None or time.monotonic() - j[4] > 900]:
                i, key, p, err, _ = job
                running.remove(job)
                if p.poll() is None:
                    p.kill()
                    p.wait()
                err.close()
                if p.returncode != 0:
                    errors.append(f"{key}: the worker exited {p.returncode}:\n"
                                  + Path(f"{tmp}/{i}.err").read_text()[-3000:])
        assert not errors, "\n".join(errors)
        return [json.loads(Path(f"{tmp}/{i}.json").read_text()) for i in range(len(jobs_list))]


def rel(x: float) -> str:
    """A relative difference by its decade, from `< 1e-5` up: stable from run to run and machine to
    machine, where its last digits are not (float32 rounding, in sums whose order the host's
    instruction set decides: the runtime's matrix products pick AVX-512 or FMA kernels at run time)."""
    if math.isnan(x) or math.isinf(x):
        return "inf"
    if x < 1e-5:
        return "< 1e-5"
    if x >= 1:
        return ">= 1"
    return f"< 1e{math.floor(math.log10(x)) + 1}"


def plural(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def tiers(r: dict) -> dict:
    t = {k: sum(c[k] for c in r["counts"].values()) for k in TIERS}
    t["calls"] = sum(t.values())
    t["share"] = 100 * (t["native"] + t["recipe"]) / t["calls"] if t["calls"] else 0.0
    return t


def fallbacks(r: dict) -> list:
    return sorted(((op, c["fallback"]) for op, c in r["counts"].items() if c["fallback"]),
                  key=lambda oc: (-oc[1], oc[0]))


def summary(r: dict) -> str:
    t = tiers(r)
    met = "met" if t["share"] >= TARGET else "not met"
    return (f"{r['model']}: {t['calls']} operator calls in step 1, {t['native']} native, {t['recipe']} recipe, "
            f"{t['fallback']} fallback ({t['share']:.1f}% native+recipe: {TARGET:.0f}% target {met}); loss "
            f"{rel(r['loss_rel'][0])} and gradients {rel(r['grad_rel'])} from CPU's after step 1, losses "
            f"{rel(max(r['loss_rel']))} over {len(r['loss_rel'])} steps")


def amp_figures(r: dict, f32: dict) -> dict:
    """The mixed-precision run `r` of a model against its float32 run `f32`: the largest relative
    loss differences over the steps of xirang from the forced-CPU-kernel reference, of xirang from CPU
    autocast, and of CPU autocast from CPU float32; the steps the gradient scaler skipped."""
    def worst(a, b):
        return max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b))

    scales = r["xirang_scales"]
    skipped = sum(1 for i, s in enumerate(scales) if s < (scales[i - 1] if i else 65536.0))
    cpu_ok = r.get("cpu_error") is None
    return {
        "ref": max(r["forced_rel"]),
        "cpu": max(r["loss_rel"]) if cpu_ok else None,
        "own": worst(r["cpu_losses"], f32["cpu_losses"]) if cpu_ok else None,
        "skipped": skipped if scales else None,
    }


def amp_section(f32_rows: list, amp_rows: list) -> list:
    by_model = {r["model"]: r for r in f32_rows}
    out = [
        "",
        "## Mixed precision",
        "",
        "The same models, weights and batches under PyTorch's automatic mixed precision (issue #39, item 4): "
        "`torch.autocast(device, dtype=torch.bfloat16)` around the forward and the loss, and "
        "`torch.autocast(device, dtype=torch.float16)` with `torch.amp.GradScaler(device)` (its defaults: "
        "initial scale 65536, halved on a step whose gradients hold an inf or NaN, which the scaler skips), "
        f"for the first {AMP_STEPS} of the {STEPS} batches.",
        "",
        "- **Policy**: autocast on `xirang` casts by PyTorch's lists for accelerators (the "
        "AutocastPrivateUse1 registrations, `generated/autocast.cpp`: CUDA's lists, where softmax, layer "
        "norm and the losses run in float32), CPU autocast by CPU's own lists. The two runs therefore "
        "differ by policy as well as by arithmetic.",
        "- **Reference**: the same autocast run on `xirang` with every operator of step 1 forced onto "
        "PyTorch's CPU kernels (`xirang.set_force_fallback`): the device's policy and casts, CPU's "
        "arithmetic. Only the convolutions stay on the device there: PyTorch sends them to "
        "`convolution_overrideable` and its backward, which have no CPU kernel (their own goldens from "
        "torch 2.15 judge them). The test asserts the device's losses within "
        f"{AMP_ULPS} units in the last place of the autocast dtype of that reference's in every step "
        f"(bfloat16 {AMP_ULPS * ULP['autocast bfloat16']:.2g}, float16 "
        f"{AMP_ULPS * ULP['autocast float16 + GradScaler']:.2g} relative: such a loss is computed from "
        "half-precision activations, and one rounding going the other way moves it by up to an ulp), and "
        "the gradient scaler skipping the same steps with the same scales.",
        "- Reported beside it: the largest relative difference from CPU autocast's losses, and CPU "
        "autocast's own largest difference from CPU float32 training (what mixed precision costs on CPU).",
        "- **Calls** of step 1 by tier, as above; the fallback operators of each run below the table.",
        "",
        f"| model | precision | calls | native+recipe | fallback | loss vs reference, max over {AMP_STEPS} steps "
        "| loss vs CPU autocast | CPU autocast vs CPU float32 | steps the scaler skipped |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in amp_rows:
        t = tiers(r)
        f = amp_figures(r, by_model[r["model"]])
        sk = "-" if f["skipped"] is None else str(f["skipped"])
        cpu = "CPU autocast fails" if f["cpu"] is None else rel(f["cpu"])
        own = "-" if f["own"] is None else rel(f["own"])
        out.append(f"| {r['model']} | {r['precision']} | {t['calls']} | {t['share']:.1f}% | {t['fallback']} | "
                   f"{rel(f['ref'])} | {cpu} | {own} | {sk} |")
    tc = {k: sum(tiers(r)[k] for r in amp_rows) for k in (*TIERS, "calls")}
    out += [
        "",
        f"All mixed-precision runs: {tc['calls']} operator calls, "
        f"{100 * (tc['native'] + tc['recipe']) / tc['calls']:.1f}% native+recipe, {tc['fallback']} fallback.",
        "",
        "Fallback operators under mixed precision:",
        "",
    ]
    for r in amp_rows:
        fb = fallbacks(r)
        ops = ", ".join(f"`{op}` ({n})" for op, n in fb) if fb else "none"
        out.append(f"- {r['model']}, {r['precision']}: {ops}")
    failed = [r for r in amp_rows if r.get("cpu_error")]
    if failed:
        out += ["", "CPU autocast itself fails with oneDNN pinned to AVX2 (`ONEDNN_MAX_CPU_ISA=AVX2`, as every run here: its bfloat16 and float16 LSTM needs more); the device and its reference run:", ""]
        out += [f"- {r['model']}, {r['precision']}: `{r['cpu_error']}`" for r in failed]
    return out


def report(rows: list, amp_rows: list = ()) -> str:
    out = [
        "<!-- generated by adapter-runtime/torch-xirang/tests/test_models.py, do not edit: "
        "XIRANG_MODELS_WRITE=1 pytest adapter-runtime/torch-xirang/tests/test_models.py -->",
        "# Models on device `xirang`",
        "",
        f"Whole models trained on `xirang` against the same models on `cpu` (issue #39, item 3), on PyTorch "
        f"{torch.__version__.split('+')[0]}: the model is built once (`torch.manual_seed(0)`), deep-copied to "
        f"each device and trained there for {STEPS} steps on the same batches with `torch.optim.SGD` "
        "(momentum 0.9), every dropout at p=0, so that nothing random runs after the initialisation "
        "(`adapter-runtime/torch-xirang/tests/models_report.py`). CPU and the simulated device each compute on "
        "one thread, CPU's kernels pinned to AVX2 (ATen, MKL, oneDNN) so that its numbers are the same on "
        "every machine.",
        "",
        "- **Operator calls** of step 1 on `xirang` (zero_grad, forward, loss, backward, optimizer step) by "
        "the tier that served them, from the runtime's counters (`xirang.reset_fallback_counts()` before, "
        "`xirang.fallback_counts()` after): `native` device kernels, `recipe` (the runtime composes the "
        "operator from device kernels), `fallback` (PyTorch's CPU kernel on copies). Calls that only touch "
        "tensor metadata (views) are not counted. The issue's target: native+recipe at least "
        f"{TARGET:.0f}% of the calls of every model; reported, not asserted.",
        "- **Loss**: |loss on xirang - loss on cpu| / |loss on cpu| after step 1, and the largest over the "
        f"{STEPS} steps. The test asserts at most {LOSS_RTOL:g} in every step for every model.",
        "- **Gradients** after step 1: the largest over the parameters of max|g_xirang - g_cpu| / max|g_cpu|, "
        "where a parameter whose CPU gradient stays below 1e-4 of the model's largest gradient entry is "
        "measured against that floor (such a gradient is mostly zero up to rounding: attention's key biases, "
        "which softmax cancels, or a BatchNorm bias the next BatchNorm normalises away). The test asserts "
        f"at most {GRAD_RTOL:g}.",
        "- Setups: batch 2 for every model. The two BatchNorm networks take 64x64 images: at 32x32 their last "
        "feature map is 1x1, so their last BatchNorms normalise 2 values per channel, and that training is "
        "chaotic in float32 itself (CPU's own float32 losses leave its float64 ones by more than 1e-3 within "
        "3 steps, whatever the device); at 64x64 (8 values) CPU's float32 training stays within 1e-6 of its "
        "float64 one. resnet18 needs a damped start of its residual branches and lr 1e-3 for the same reason "
        "(its section says how).",
        "- Differences are given by their decade, the smallest `< 1e-5` (one float32 rounding is about "
        "1e-7; the differences here are sums of many): their last digits vary with the order of "
        "floating-point sums, which the host's instruction set decides.",
        "",
        "## Totals",
        "",
        "| model | calls | native | recipe | fallback | native+recipe | 95% target | loss, step 1 | gradients, "
        f"step 1 | loss, max over {STEPS} steps |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |",
    ]
    for r in rows:
        t = tiers(r)
        out.append(f"| {r['model']} | {t['calls']} | {t['native']} | {t['recipe']} | {t['fallback']} | "
                   f"{t['share']:.1f}% | {'met' if t['share'] >= TARGET else 'not met'} | "
                   f"{rel(r['loss_rel'][0])} | {rel(r['grad_rel'])} | {rel(max(r['loss_rel']))} |")
    tc = {k: sum(tiers(r)[k] for r in rows) for k in (*TIERS, "calls")}
    met = sum(1 for r in rows if tiers(r)["share"] >= TARGET)
    out += [
        "",
        f"All models: {tc['calls']} operator calls, {tc['native']} native, {tc['recipe']} recipe, "
        f"{tc['fallback']} fallback ({100 * (tc['native'] + tc['recipe']) / tc['calls']:.1f}% native+recipe); "
        f"the {TARGET:.0f}% target is met by {met} of {len(rows)} models.",
    ]
    tied = [r["model"] for r in rows if r["tied"]]
    if tied:
        out += [
            "",
            "Tied parameters stay tied on the device (" + ", ".join(tied) + ": the output layer's weight is the "
            "input embedding): `model.to(\"xirang\")` keeps one Parameter for both names (PyTorch alone "
            "makes one per module on a PrivateUse1 device, pytorch/pytorch#116255; `import xirang` keeps the "
            "ties). The test fails on a tie the move loses.",
        ]
    out += ["", "## Per model"]
    for r in rows:
        t = tiers(r)
        fb = fallbacks(r)
        ops = len(r["counts"])
        out += [
            "",
            f"### {r['model']}",
            "",
            summary(r) + ".",
            "",
            f"- Setup: {r['setup']}; SGD lr {r['lr']:g}, momentum 0.9; {r['params']} parameters.",
            f"- Step 1: {t['calls']} calls of {ops} operators; CPU's loss {r['cpu_losses'][0]:#.3g} at step 1, "
            f"{r['cpu_losses'][-1]:#.3g} at step {len(r['cpu_losses'])}.",
            f"- Gradients: the largest difference in `{r['grad_param']}`"
            + (" (measured against the floor)" if r["grad_param"] in r["grad_floored"] else "")
            + (f"; {plural(len(r['grad_floored']), 'parameter')} measured against the floor"
               if r["grad_floored"] else "") + ".",
        ]
        if fb:
            out += ["", f"Fallback operators: {len(fb)} ({plural(t['fallback'], 'call')}).", "",
                    "| operator | calls |", "| --- | ---: |"]
            out += [f"| `{op}` | {n} |" for op, n in fb]
        else:
            out += ["", "No operator fell back to PyTorch's CPU kernels."]
    if amp_rows:
        out += amp_section(rows, amp_rows)
    return "\n".join(out) + "\n"


def test_models_report_is_current():
    requirements()
    every = measure()
    rows = [r for r in every if r["precision"] == "float32"]
    amp_rows = [r for r in every if r["precision"] != "float32"]
    for r in rows:
        print(summary(r))
    text = report(rows, amp_rows)
    if os.environ.get("XIRANG_MODELS_WRITE"):
        REPORT.write_text(text)
    wrong = []
    for r in rows:
        worst = max(range(len(r["loss_rel"])), key=lambda i: r["loss_rel"][i])
        if r["loss_rel"][worst] > LOSS_RTOL:
            wrong.append(f"{r['model']}: step {worst + 1} loss on xirang {r['xirang_losses'][worst]!r}, on cpu "
                         f"{r['cpu_losses'][worst]!r} (relative {r['loss_rel'][worst]:.1e} > {LOSS_RTOL:g})")
        if not r["grad_rel"] <= GRAD_RTOL:
            wrong.append(f"{r['model']}: step-1 gradient of {r['grad_param']} differs by {r['grad_rel']:.1e} "
                         f"relative (> {GRAD_RTOL:g})")
        if r["ties_lost"]:
            wrong.append(f"{r['model']}: `.to(\"xirang\")` untied " + ", ".join(r["ties_lost"]))
    for r in amp_rows:
        tol = AMP_ULPS * ULP[r["precision"]]
        worst = max(range(len(r["forced_rel"])), key=lambda i: r["forced_rel"][i])
        if r["forced_rel"][worst] > tol:
            wrong.append(f"{r['model']}, {r['precision']}: step {worst + 1} loss on xirang "
                         f"{r['xirang_losses'][worst]!r}, on CPU kernels {r['forced_losses'][worst]!r} "
                         f"(relative {r['forced_rel'][worst]:.1e} > {tol:.2g})")
        if r["xirang_scales"] != r["forced_scales"]:
            wrong.append(f"{r['model']}, {r['precision']}: the gradient scaler's scales on xirang "
                         f"{r['xirang_scales']} differ from CPU kernels' {r['forced_scales']}")
        ft = tiers({"counts": {k: v for k, v in r["forced_counts"].items() if k not in DEVICE_CONVOLUTION}})
        if ft["native"] + ft["recipe"]:
            wrong.append(f"{r['model']}, {r['precision']}: the reference run still served "
                         f"{ft['native'] + ft['recipe']} calls on the device")
    assert not wrong, "training on xirang leaves CPU's:\n" + "\n".join(wrong)
    assert REPORT.is_file(), f"{REPORT} is missing: run with XIRANG_MODELS_WRITE=1"
    committed = REPORT.read_text()
    if committed != text:
        import difflib

        diff = "".join(difflib.unified_diff(committed.splitlines(True), text.splitlines(True), "committed", "now"))
        raise AssertionError(f"{REPORT.name} is not current (XIRANG_MODELS_WRITE=1 to rewrite):\n{diff[:6000]}")
