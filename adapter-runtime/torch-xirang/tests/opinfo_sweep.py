"""One shard of the OpInfo sweep behind OPINFO.md (test_opinfo.py runs the shards and writes the report).

PyTorch's own device-against-CPU check, `TestCommon.test_compare_cpu`, applied to device `xirang`:
every OpInfo of `op_db`, every dtype it declares for CPU, each sample input made on `xirang` (as the
test makes them on its device), run there and on its CPU copy, and compared with
`torch.testing.assert_close` at the dtype's tolerances (or the OpInfo's own
`toleranceOverride`/`precisionOverride` for that test), after the OpInfo's `output_process_fn_grad`.
Backward: for the dtypes the OpInfo declares for CPU autograd, the gradients of the differentiable
inputs (`torch.autograd.grad` with the same seeded output gradients) against CPU's. A result that
differs from CPU's beyond the tolerance still passes when it is at least as close as CPU's to the
same sample computed in float64 on CPU (the rule of PyTorch's `test_python_ref` for low-precision
references): the runtime's host tier computes in f64 and rounds once, where CPU kernels round
intermediates in float16/bfloat16, and that is counted apart (`precise`). The OpInfo's
decorators for `test_compare_cpu` on a device-generic backend are honoured: `skip` (nondeterministic
operators: `empty_like`, random sampling) skips, `expectedFailure` marks its failures as expected.

Each sample records the tier that served it, from the runtime's per-operator counters: `fallback` when
any operator of the sample ran PyTorch's CPU kernel, else `native` or `recipe` by the OpInfo's own
operator, else `decomposed` (PyTorch broke the operator into ones the device served, or it only
touched tensor metadata).

Run: python opinfo_sweep.py SHARD SHARDS OUT.json
"""

import inspect
import json
import os
import re
import sys

# the same numbers on every machine: CPU kernels of one instruction set, one thread on both sides
os.environ.setdefault("ATEN_CPU_CAPABILITY", "avx2")
os.environ.setdefault("XIRANG_SIM_THREADS", "1")

import torch  # noqa: E402
from torch.testing._internal.common_device_type import precisionOverride, toleranceOverride  # noqa: E402
from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402
from torch.utils._pytree import tree_flatten, tree_map  # noqa: E402

import xirang  # noqa: E402

DEVICE = "xirang"
TEST = ("TestCommon", "test_compare_cpu")


def op_key(o) -> str:
    return o.name + (f".{o.variant_test_name}" if o.variant_test_name else "")


def short(e: BaseException) -> str:
    text = str(e).strip()
    first = text.splitlines()[0] if text else type(e).__name__
    m = re.search(r"Mismatched elements: (\d+) / (\d+)", text)
    if m:
        first += f" ({m.group(1)} / {m.group(2)} mismatched)"
    first = re.sub(r"0x[0-9a-f]+", "0x..", first)
    return (type(e).__name__ + ": " + first)[:140].replace("|", "/")


def policy(o, dtype):
    """(skip reason or None, failure expected, assert_close tolerance kwargs) from the OpInfo's
    decorators for test_compare_cpu on a device-generic backend."""
    skip, expected, tol = None, False, {}
    for d in o.decorators:
        if not hasattr(d, "is_active") or not d.is_active(*TEST, DEVICE, dtype, {}):
            continue
        for f in d.decorators:
            name = getattr(f, "__qualname__", type(f).__name__)
            if name.startswith("skip.<locals>") and inspect.isfunction(f):
                # unittest.skip(reason); device-specific skips (skipCUDAIf, ...) do not apply here
                skip = skip or str(inspect.getclosurevars(f).nonlocals.get("reason", "skipped"))
            elif name == "expectedFailure":
                expected = True
            elif isinstance(f, toleranceOverride) and dtype in f.d:
                tol = {"atol": f.d[dtype].atol, "rtol": f.d[dtype].rtol}
            elif isinstance(f, precisionOverride) and dtype in f.d:
                tol = {"atol": f.d[dtype], "rtol": 0.0}
    return skip, expected, tol


def moved(x, device, dtype=None):
    """`x` with every tensor copied to `device` (and, for the precise reference, floating tensors to
    `dtype`'s precision), keeping which tensors require grad."""

    def move(t):
        if not isinstance(t, torch.Tensor):
            return t
        u = t.detach().to(device)
        if dtype is not None and (u.is_floating_point() or u.is_complex()):
            u = u.to(torch.complex128 if u.is_complex() else dtype)
        return u.requires_grad_(t.requires_grad)

    return tree_map(move, x)


def to_cpu(x):
    return tree_map(lambda t: t.detach().cpu() if isinstance(t, torch.Tensor) else t, x)


def tier(o) -> str:
    counts = xirang.fallback_counts()
    base = (o.aten_name or o.name).split(".")[0]
    served = {"native": False, "recipe": False}
    for name, c in counts.items():
        if c["fallback"]:
            return "fallback"
        if name.split(".")[0] == base:
            served["native"] |= c["native"] > 0
            served["recipe"] |= c["recipe"] > 0
    if served["native"]:
        return "native"
    if served["recipe"]:
        return "recipe"
    return "decomposed"


def leaves(sample):
    flat, _ = tree_flatten((sample.input, sample.args, sample.kwargs))
    return [t for t in flat if isinstance(t, torch.Tensor) and t.requires_grad]


def differentiable(out):
    flat, _ = tree_flatten(out)
    # an output may be an input itself (`x.to(x.device, copy=False)` returns `x`): still differentiable
    return [t for t in flat if isinstance(t, torch.Tensor) and t.requires_grad]


def on(sample, device, dtype=None):
    return sample.transform(lambda t: moved(t, device, dtype) if isinstance(t, torch.Tensor) else t)


def forward(o, s):
    return s.output_process_fn_grad(o(s.input, *s.args, **s.kwargs))


def backward(o, s, grads_out):
    """The gradients of `s`'s differentiable inputs for these output gradients (`None` for an
    input the outputs do not reach); `grads_out` None: seeded ones, returned alongside."""
    outs = differentiable(o(s.input, *s.args, **s.kwargs))
    ins = leaves(s)
    if not outs or not ins:
        return None, None
    if grads_out is None:
        torch.manual_seed(1)
        grads_out = [torch.randn_like(t) for t in outs]
    g = [x.to(device=t.device, dtype=t.dtype) for x, t in zip(grads_out, outs)]
    return torch.autograd.grad(outs, ins, g, allow_unused=True), grads_out


def error(a, b):
    """The largest elementwise distance between two results of the same structure (NaN where both
    are NaN counts as equal); None when they do not compare as tensors."""
    fa, _ = tree_flatten(to_cpu(a))
    fb, _ = tree_flatten(to_cpu(b))
    if len(fa) != len(fb):
        return None
    worst = 0.0
    for x, y in zip(fa, fb):
        if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
            if x != y and not (x is None and y is None):
                return None
            continue
        if x.shape != y.shape or not (x.is_floating_point() or x.is_complex()):
            return None
        d = (x.to(torch.complex128 if x.is_complex() else torch.float64)
             - y.to(torch.complex128 if y.is_complex() else torch.float64)).abs()
        d = torch.where(torch.isnan(d) & (torch.isnan(x) == torch.isnan(y)), torch.zeros_like(d), d)
        if d.numel():
            worst = max(worst, float(d.max()))
    return worst


def closer_to_precise(o, s, direction, got, expected, grads_out):
    """PyTorch's rule for low-precision references (`test_python_ref`): a result that differs from
    CPU's passes when it is at least as close as CPU's to the operator computed in float64."""
    try:
        p = on(s, "cpu", torch.float64)
        precise = forward(o, p) if direction == "forward" else backward(o, p, grads_out)[0]
    except Exception:  # noqa: BLE001 - no float64 form of this sample
        return False
    e_dev, e_cpu = error(got, precise), error(expected, precise)
    return e_dev is not None and e_cpu is not None and e_dev <= e_cpu


def judge(o, dtype, tol, rec, direction):
    torch.manual_seed(0)
    # as test_compare_cpu: the samples are made on the device, and their CPU copies are the reference
    for s in o.sample_inputs(DEVICE, dtype, requires_grad=direction == "backward"):
        c = on(s, "cpu")
        try:
            if direction == "forward":
                expected, grads_out = forward(o, c), None
            else:
                expected, grads_out = backward(o, c, None)
                if expected is None:
                    rec["skipped"] += 1
                    continue
        except Exception:  # noqa: BLE001 - not a valid sample on cpu either
            rec["skipped"] += 1
            continue
        xirang.reset_fallback_counts()
        try:
            got = forward(o, s) if direction == "forward" else backward(o, s, grads_out)[0]
            t = tier(o)
        except Exception as e:  # noqa: BLE001 - recorded in the report
            rec["failed"] += 1
            rec["tiers"][tier(o)] += 1
            rec["first"] = rec["first"] or short(e)
            continue
        rec["tiers"][t] += 1
        try:
            torch.testing.assert_close(to_cpu(got), expected, equal_nan=True, check_device=False, **tol)
            rec["passed"] += 1
        except Exception as e:  # noqa: BLE001 - recorded in the report
            if closer_to_precise(o, c, direction, got, expected, grads_out):
                rec["passed"] += 1
                rec["precise"] += 1
            else:
                rec["failed"] += 1
                rec["first"] = rec["first"] or short(e)


def new_record():
    return {"passed": 0, "failed": 0, "skipped": 0, "precise": 0, "unmade": False, "first": "", "tiers": dict.fromkeys(
        ("native", "recipe", "decomposed", "fallback"), 0)}


def sweep(shard: int, shards: int):
    torch.set_num_threads(1)
    xirang.set_fallback_mode("silent")
    xirang.set_fallback_alert(0)
    rows = []
    for i, o in enumerate(op_db):
        if i % shards != shard:
            continue
        for dtype in sorted(o.supported_dtypes("cpu"), key=str):
            skip, expected, tol = policy(o, dtype)
            for direction in ("forward", "backward"):
                if direction == "backward" and not (o.supports_autograd
                                                    and dtype in o.supported_backward_dtypes("cpu")):
                    continue
                rec = new_record()
                rec.update(op=op_key(o), dtype=str(dtype).removeprefix("torch."), direction=direction,
                           expected_failure=expected, skip=skip)
                if skip is None:
                    try:
                        judge(o, dtype, tol, rec, direction)
                    except Exception as e:  # noqa: BLE001 - making the samples on the device failed
                        rec["unmade"] = True
                        rec["first"] = rec["first"] or "samples: " + short(e)
                rows.append(rec)
    return rows


if __name__ == "__main__":
    shard, shards, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    rows = sweep(shard, shards)
    with open(out, "w") as f:
        json.dump(rows, f)
