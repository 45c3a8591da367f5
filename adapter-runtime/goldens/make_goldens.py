#!/usr/bin/env python3
"""Golden cases for the xirang runtime's precision suite, produced by real PyTorch (CPU).

    python3 -m venv /tmp/tv && /tmp/tv/bin/pip install torch numpy safetensors
    /tmp/tv/bin/python adapter-runtime/goldens/make_goldens.py

Writes, next to this script:

* ``cases.safetensors``: every input and expected output tensor, named ``c<id>.<slot>``;
* ``index.json``: one record per case: the ATen operator (qualified name, e.g. ``add.Tensor``),
  its operator class (a key of ``tolerances.json``), dtype, layout, and the boxed arguments in
  schema order (positional, then kwarg-only), and the names of the expected outputs;
* ``mlp_init.safetensors``, ``mlp_data.safetensors``, ``mlp_losses.json``: the train_mlp golden
  (the same model and SGD loop in PyTorch, losses before each update).

Forward outputs come from ``torch.ops.aten.<op>.<overload>``; backward operators' expected outputs
come from ``torch.autograd`` on the corresponding forward op (so the suite checks the runtime's
backward operators against what autograd computes, not against a formula of ours).

Argument encoding (index.json):
  {"T": name} a tensor; optional "perm": [..] (a permuted, non-contiguous view of the stored
  contiguous base) or "expand": [..] (a stride-0 broadcast view of the base);
  {"TL": [arg, ...]} a tensor list; {"OTL": [arg or null, ...]} an optional-tensor list (Tensor?[]); {"i": n}; {"f": x}; {"b": v}; {"il": [..]}; {"bl": [..]};
  {"fl": [..]} a float list; {"s": {"i"|"f"|"b": v}} a Scalar; {"str": s}; {"dtype": "f32"}; null for None.

Deterministic inputs: fixed seeds, one generator drawn in build order; new builders go at the end of
``main`` so that the cases before them keep their inputs. The expected outputs come from PyTorch's CPU
kernels, which ATen picks by the CPU's vector unit: on another machine a few outputs of vectorized math
and reductions move in their last bits (``ATEN_CPU_CAPABILITY=avx2`` came closest to the committed
files on an AVX-512 machine: 7 of 16,257 tensors differed, by at most one bf16-sized step of a sum).
When cases are added, the committed tensors of the existing cases are kept and the new ones merged in.
"""

import json
import math
import os
import sys

import torch
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
aten = torch.ops.aten

DT = {
    "f32": torch.float32,
    "f64": torch.float64,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "i64": torch.int64,
    "i32": torch.int32,
    "bool": torch.bool,
}
NAME = {v: k for k, v in DT.items()}
FLOATS = ["f32", "f64", "f16", "bf16"]
INTS = ["i64", "i32"]

tensors = {}
cases = []
skipped = {}
gen = torch.Generator().manual_seed(1234)


class Case:
    def __init__(self, op, cls, dtype, layout):
        self.id = len(cases)
        self.op, self.cls, self.dtype, self.layout = op, cls, dtype, layout
        self.slots = 0

    def put(self, t):
        name = f"c{self.id}.t{self.slots}"
        self.slots += 1
        tensors[name] = t.detach().contiguous().clone()
        return name


def rand(shape, dt, kind="normal"):
    """Values for dtype `dt` (a key of DT). kind: normal | positive | nonzero | small."""
    if dt == "bool":
        return torch.rand(shape, generator=gen) > 0.5
    if dt in INTS:
        lo, hi = (1, 6) if kind == "positive" else (-6, 7)
        v = torch.randint(lo, hi, shape, generator=gen)
        if kind == "nonzero":
            v = torch.where(v == 0, torch.ones_like(v), v)
        return v.to(DT[dt])
    v = torch.randn(shape, generator=gen, dtype=torch.float64)
    if kind == "positive":
        v = v.abs() + 0.25
    elif kind == "nonzero":
        v = torch.where(v.abs() < 0.25, torch.full_like(v, 0.5), v)
    elif kind == "small":
        v = v * 0.5
    elif kind == "unit":  # inside (-1, 1): asin, acos, atanh
        v = torch.tanh(v)
    elif kind == "ge1":  # at least 1: acosh
        v = v.abs() + 1.0
    elif kind == "halves":  # multiples of 0.5: ties for round
        v = torch.round(v * 6) / 2
    elif kind == "special":  # some NaN and +-inf: isnan, isinf, logical_not
        flat = v.view(-1)
        for k, x in zip(range(0, flat.numel(), 3), (float("nan"), float("inf"), float("-inf"), 0.0)):
            flat[k] = x
    return v.to(DT[dt])


class Arg:
    """An input tensor with a layout: `value` is what torch computes on; `enc` the boxed form."""

    def __init__(self, case, value, enc):
        self.case, self.value, self.enc = case, value, enc


def tensor_arg(case, shape, dt, layout="contiguous", kind="normal", value=None):
    """layout: contiguous | transposed (permuted view of a contiguous base) | expand (stride-0 view)."""
    if layout == "transposed" and len(shape) >= 2:
        perm = list(range(len(shape)))
        perm[-1], perm[-2] = perm[-2], perm[-1]
        base_shape = [shape[p] for p in perm]
        base = value.permute(perm).contiguous() if value is not None else rand(base_shape, dt, kind)
        v = base.permute(perm)
        return Arg(case, v, {"T": case.put(base), "perm": perm})
    if layout == "expand" and len(shape) >= 1:
        base_shape = [1] + list(shape[1:])
        base = rand(base_shape, dt, kind) if value is None else value[:1].contiguous()
        v = base.expand(*shape)
        return Arg(case, v, {"T": case.put(base), "expand": list(shape)})
    v = rand(shape, dt, kind) if value is None else value
    return Arg(case, v, {"T": case.put(v)})


def outputs(case, res):
    if isinstance(res, torch.Tensor):
        res = [res]
    return [case.put(r) for r in res]


def scalar_enc(v):
    if isinstance(v, bool):
        return {"s": {"b": v}}
    if isinstance(v, int):
        return {"s": {"i": v}}
    return {"s": {"f": v}}


def emit(case, args, res):
    case_rec = {
        "id": case.id,
        "op": case.op,
        "class": case.cls,
        "dtype": case.dtype,
        "layout": case.layout,
        "args": args,
        "outs": outputs(case, res),
    }
    cases.append(case_rec)


def attempt(op, fn):
    """Run one case builder; torch errors (an unsupported dtype) skip the case, counted."""
    n_tensors, n_cases = len(tensors), len(cases)
    try:
        fn()
    except (RuntimeError, TypeError, NotImplementedError) as e:
        # roll back anything registered by the failed case
        for k in list(tensors)[n_tensors:]:
            del tensors[k]
        del cases[n_cases:]
        skipped[op] = skipped.get(op, 0) + 1
        if os.environ.get("GOLDEN_VERBOSE"):
            print(f"skip {op}: {e}", file=sys.stderr)


def new_case(op, cls, dt, layout):
    # ids are assigned at emit time order; reserve the next id
    c = Case(op, cls, dt, layout)
    c.id = next_id[0]
    next_id[0] += 1
    return c


next_id = [0]


def finalize_ids():
    # cases may have been rolled back: ids are already unique; keep them as names only
    pass


# ---------------------------------------------------------------- layouts

SHAPES = {
    "contiguous": [(3, 4), (2, 3, 5)],
    "transposed": [(4, 3), (2, 5, 3)],
    "expand": [(3, 4)],
    "zero_dim": [()],
    "empty": [(0, 4)],
}


def layouts():
    for layout, shapes in SHAPES.items():
        for shape in shapes:
            yield layout, list(shape)


def view_layout(layout):
    return layout if layout in ("transposed", "expand") else "contiguous"


# ---------------------------------------------------------------- elementwise binary

def binary_tensor(op, cls, fn, dtypes, kind_b="normal", extra=None):
    for dt in dtypes:
        for layout, shape in layouts():
            def build(dt=dt, layout=layout, shape=shape):
                c = new_case(op, cls, dt, layout)
                a = tensor_arg(c, shape, dt, view_layout(layout))
                b = tensor_arg(c, shape, dt, "contiguous", kind=kind_b)
                args = [a.enc, b.enc] + [e for e in (extra or {}).get("enc", [])]
                emit(c, args, fn(a.value, b.value))
            attempt(op, build)
        # broadcasting: [3,4] with [4] and [3,1]
        for bshape in ([4], [3, 1], []):
            def build(dt=dt, bshape=bshape):
                c = new_case(op, cls, dt, "broadcast")
                a = tensor_arg(c, [3, 4], dt)
                b = tensor_arg(c, bshape, dt, kind=kind_b)
                args = [a.enc, b.enc] + [e for e in (extra or {}).get("enc", [])]
                emit(c, args, fn(a.value, b.value))
            attempt(op, build)
    # type promotion: float tensor with an int tensor, f16 with a zero-dim f32
    for da, db, bshape in (("f32", "i64", [3, 4]), ("f16", "f32", []), ("i32", "i64", [4]), ("bf16", "f16", [3, 4])):
        def build(da=da, db=db, bshape=bshape):
            c = new_case(op, cls, da, "promotion")
            a = tensor_arg(c, [3, 4], da)
            b = tensor_arg(c, bshape, db, kind=kind_b)
            args = [a.enc, b.enc] + [e for e in (extra or {}).get("enc", [])]
            emit(c, args, fn(a.value, b.value))
        attempt(op, build)


def binary_scalar(op, cls, fn, dtypes, scalars, extra_enc=()):
    for dt in dtypes:
        for layout, shape in layouts():
            for s in scalars:
                def build(dt=dt, layout=layout, shape=shape, s=s):
                    c = new_case(op, cls, dt, layout)
                    a = tensor_arg(c, shape, dt, view_layout(layout))
                    emit(c, [a.enc, scalar_enc(s)] + list(extra_enc), fn(a.value, s))
                attempt(op, build)


def unary(op, cls, fn, dtypes, kind="normal", extra_enc=()):
    for dt in dtypes:
        for layout, shape in layouts():
            def build(dt=dt, layout=layout, shape=shape):
                c = new_case(op, cls, dt, layout)
                a = tensor_arg(c, shape, dt, view_layout(layout), kind=kind)
                emit(c, [a.enc] + list(extra_enc), fn(a.value))
            attempt(op, build)


def unary_backward(op, cls, fwd, bwd_args, dtypes, kind="normal"):
    """Gradient of `fwd` by autograd, recorded as a case of backward operator `op`.
    bwd_args(c, grad_arg, x_arg, y) -> boxed args of the backward op."""
    for dt in dtypes:
        for layout, shape in layouts():
            def build(dt=dt, layout=layout, shape=shape):
                c = new_case(op, cls, dt, layout)
                x = tensor_arg(c, shape, dt, view_layout(layout), kind=kind)
                xv = x.value.detach().clone().requires_grad_(True)
                y = fwd(xv)
                g = tensor_arg(c, shape, dt)
                (gx,) = torch.autograd.grad(y, xv, g.value)
                yd = y.detach()
                emit(c, bwd_args(c, g, x, yd), gx)
            attempt(op, build)


def build_elementwise():
    ar = ["f32", "f64", "f16", "bf16", "i64", "i32"]
    one = {"enc": [scalar_enc(1)]}
    binary_tensor("add.Tensor", "arith", lambda a, b: aten.add.Tensor(a, b), ar, extra=one)
    binary_tensor("sub.Tensor", "arith", lambda a, b: aten.sub.Tensor(a, b), ar, extra=one)
    binary_tensor("add.Tensor", "arith", lambda a, b: aten.add.Tensor(a, b, alpha=2), FLOATS + INTS,
                  extra={"enc": [scalar_enc(2)]})
    binary_tensor("mul.Tensor", "arith", aten.mul.Tensor, ar + ["bool"])
    binary_tensor("div.Tensor", "arith", aten.div.Tensor, FLOATS + INTS, kind_b="nonzero")
    for mode in ("trunc", "floor"):
        binary_tensor("div.Tensor_mode", "arith", lambda a, b, m=mode: aten.div.Tensor_mode(a, b, rounding_mode=m),
                      FLOATS + INTS, kind_b="nonzero", extra={"enc": [{"str": mode}]})
    binary_tensor("maximum", "arith", aten.maximum, ar)
    binary_tensor("minimum", "arith", aten.minimum, ar)
    for name in ("eq", "ne", "lt", "le", "gt", "ge"):
        f = getattr(aten, name)
        binary_tensor(f"{name}.Tensor", "compare", f.Tensor, ar + ["bool"])
        binary_scalar(f"{name}.Scalar", "compare", f.Scalar, ["f32", "f16", "i64"], [0, 0.5])
    binary_scalar("add.Scalar", "arith", lambda a, s: aten.add.Scalar(a, s, 1), ar, [2, 0.5], [scalar_enc(1)])
    binary_scalar("sub.Scalar", "arith", lambda a, s: aten.sub.Scalar(a, s, 1), ar, [3, 1.25], [scalar_enc(1)])
    binary_scalar("mul.Scalar", "arith", aten.mul.Scalar, ar, [3, -0.75])
    binary_scalar("div.Scalar", "arith", aten.div.Scalar, FLOATS + INTS, [4, 0.3])
    binary_scalar("pow.Tensor_Scalar", "transcendental", aten.pow.Tensor_Scalar, FLOATS, [2, 0.5, 3])
    binary_scalar("pow.Tensor_Scalar", "arith", aten.pow.Tensor_Scalar, INTS, [2, 3])
    binary_tensor("pow.Tensor_Tensor", "transcendental", aten.pow.Tensor_Tensor, ["f32", "f64"], kind_b="small")

    unary("neg", "arith", aten.neg, ar)
    unary("abs", "arith", aten.abs, ar)
    for name, kind in (("exp", "small"), ("log", "positive"), ("sqrt", "positive"), ("rsqrt", "positive"),
                       ("sigmoid", "normal"), ("tanh", "normal")):
        unary(name, "transcendental", getattr(aten, name), FLOATS, kind=kind)
    unary("relu", "arith", aten.relu, FLOATS + INTS)
    unary("silu", "transcendental", aten.silu, FLOATS)
    for approx in ("none", "tanh"):
        unary("gelu", "transcendental", lambda x, a=approx: aten.gelu(x, approximate=a), FLOATS,
              extra_enc=[{"str": approx}])
    for lo, hi in ((-0.5, 0.5), (None, 0.0), (0, None)):
        unary("clamp", "arith", lambda x, lo=lo, hi=hi: aten.clamp(x, lo, hi), FLOATS + ["i64"],
              extra_enc=[None if lo is None else scalar_enc(lo), None if hi is None else scalar_enc(hi)])

    # backward operators, expected values by autograd
    unary_backward("threshold_backward", "arith", torch.relu,
                   lambda c, g, x, y: [g.enc, x.enc, scalar_enc(0)], FLOATS)
    for approx in ("none", "tanh"):
        unary_backward("gelu_backward", "transcendental",
                       lambda x, a=approx: torch.nn.functional.gelu(x, approximate=a),
                       lambda c, g, x, y, a=approx: [g.enc, x.enc, {"str": a}], FLOATS)
    unary_backward("silu_backward", "transcendental", torch.nn.functional.silu,
                   lambda c, g, x, y: [g.enc, x.enc], FLOATS)
    unary_backward("sigmoid_backward", "transcendental", torch.sigmoid,
                   lambda c, g, x, y: [g.enc, {"T": c.put(y)}], FLOATS)
    unary_backward("tanh_backward", "transcendental", torch.tanh,
                   lambda c, g, x, y: [g.enc, {"T": c.put(y)}], FLOATS)

    # where / masked_fill
    for dt in ar + ["bool"]:
        for layout, shape in layouts():
            def build(dt=dt, layout=layout, shape=shape):
                c = new_case("where.self", "select", dt, layout)
                m = tensor_arg(c, shape, "bool")
                a = tensor_arg(c, shape, dt, view_layout(layout))
                b = tensor_arg(c, shape, dt)
                emit(c, [m.enc, a.enc, b.enc], aten.where.self(m.value, a.value, b.value))
            attempt("where.self", build)

            def build2(dt=dt, layout=layout, shape=shape):
                c = new_case("masked_fill.Scalar", "select", dt, layout)
                a = tensor_arg(c, shape, dt, view_layout(layout))
                m = tensor_arg(c, shape, "bool")
                v = True if dt == "bool" else (-2.5 if dt in FLOATS else -3)
                emit(c, [a.enc, m.enc, scalar_enc(v)], aten.masked_fill.Scalar(a.value, m.value, v))
            attempt("masked_fill.Scalar", build2)
        def build3(dt=dt):
            c = new_case("where.self", "select", dt, "broadcast")
            m = tensor_arg(c, [3, 1], "bool")
            a = tensor_arg(c, [3, 4], dt)
            b = tensor_arg(c, [4], dt)
            emit(c, [m.enc, a.enc, b.enc], aten.where.self(m.value, a.value, b.value))
        attempt("where.self", build3)

        def build4(dt=dt):
            c = new_case("masked_fill.Scalar", "select", dt, "broadcast")
            a = tensor_arg(c, [3, 4], dt)
            m = tensor_arg(c, [4], "bool")
            v = False if dt == "bool" else 7
            emit(c, [a.enc, m.enc, scalar_enc(v)], aten.masked_fill.Scalar(a.value, m.value, v))
        attempt("masked_fill.Scalar", build4)


# ---------------------------------------------------------------- matmul

def build_matmul():
    for dt in FLOATS + ["i64"]:
        for (n, k, m) in ((3, 4, 5), (1, 7, 2), (0, 3, 2), (4, 0, 3), (8, 16, 8)):
            for lay in ("contiguous", "transposed"):
                def build(dt=dt, n=n, k=k, m=m, lay=lay):
                    c = new_case("mm", "matmul", dt, lay if n * k * m else "empty")
                    a = tensor_arg(c, [n, k], dt, lay)
                    b = tensor_arg(c, [k, m], dt, lay)
                    emit(c, [a.enc, b.enc], aten.mm(a.value, b.value))
                attempt("mm", build)

                def build_b(dt=dt, n=n, k=k, m=m, lay=lay):
                    c = new_case("bmm", "matmul", dt, lay if n * k * m else "empty")
                    a = tensor_arg(c, [2, n, k], dt, lay)
                    b = tensor_arg(c, [2, k, m], dt, lay)
                    emit(c, [a.enc, b.enc], aten.bmm(a.value, b.value))
                attempt("bmm", build_b)

                for bias_shape, beta, alpha in (([m], 1, 1), ([n, m], 0.5, 2), ([1, m], 1, 1)):
                    def build_c(dt=dt, n=n, k=k, m=m, lay=lay, bias_shape=bias_shape, beta=beta, alpha=alpha):
                        if dt == "i64" and isinstance(beta, float):
                            beta2 = 1
                        else:
                            beta2 = beta
                        c = new_case("addmm", "matmul", dt, lay if n * k * m else "empty")
                        bias = tensor_arg(c, bias_shape, dt)
                        a = tensor_arg(c, [n, k], dt, lay)
                        b = tensor_arg(c, [k, m], dt, lay)
                        emit(c, [bias.enc, a.enc, b.enc, scalar_enc(beta2), scalar_enc(alpha)],
                             aten.addmm(bias.value, a.value, b.value, beta=beta2, alpha=alpha))
                    attempt("addmm", build_c)
        # backward of mm by autograd: dA = g @ B^T, dB = A^T @ g, both as mm cases
        for (n, k, m) in ((3, 4, 5), (6, 2, 3)):
            def build_bw(dt=dt, n=n, k=k, m=m):
                if dt not in FLOATS:
                    return
                c = new_case("mm", "matmul", dt, "backward")
                a = rand([n, k], dt).requires_grad_(True)
                b = rand([k, m], dt)
                g = rand([n, m], dt)
                (ga,) = torch.autograd.grad(torch.mm(a, b), a, g)
                bt = Arg(c, b.t(), {"T": c.put(b), "perm": [1, 0]})
                emit(c, [{"T": c.put(g)}, bt.enc], ga)
            attempt("mm", build_bw)


# ---------------------------------------------------------------- reductions

def build_reductions():
    for dt in ["f32", "f64", "f16", "bf16", "i64", "i32", "bool"]:
        for layout, shape in layouts():
            vl = view_layout(layout)
            def b_all(dt=dt, layout=layout, shape=shape, op="sum", f=aten.sum.default):
                c = new_case(op, "reduce", dt, layout)
                a = tensor_arg(c, shape, dt, vl)
                emit(c, [a.enc, None], f(a.value))
            attempt("sum", b_all)
            if dt != "bool":
                attempt("prod", lambda dt=dt, layout=layout, shape=shape: b_all(dt, layout, shape, "prod", aten.prod.default))
            if dt in FLOATS:
                attempt("mean", lambda dt=dt, layout=layout, shape=shape: b_all(dt, layout, shape, "mean", aten.mean.default))
            if not shape or 0 in shape:
                continue
            nd = len(shape)
            for dims, keep in (([nd - 1], False), ([0], True), ([0, nd - 1], False)):
                def b_dim(dt=dt, layout=layout, shape=shape, dims=dims, keep=keep):
                    c = new_case("sum.dim_IntList", "reduce", dt, layout)
                    a = tensor_arg(c, shape, dt, vl)
                    emit(c, [a.enc, {"il": dims}, {"b": keep}, None], aten.sum.dim_IntList(a.value, dims, keep))
                attempt("sum.dim_IntList", b_dim)
                if dt in FLOATS:
                    def b_mean(dt=dt, layout=layout, shape=shape, dims=dims, keep=keep):
                        c = new_case("mean.dim", "reduce", dt, layout)
                        a = tensor_arg(c, shape, dt, vl)
                        emit(c, [a.enc, {"il": dims}, {"b": keep}, None], aten.mean.dim(a.value, dims, keep))
                    attempt("mean.dim", b_mean)
                if dt != "bool":
                    for name in ("amax", "amin"):
                        def b_am(dt=dt, layout=layout, shape=shape, dims=dims, keep=keep, name=name):
                            c = new_case(name, "reduce_exact", dt, layout)
                            a = tensor_arg(c, shape, dt, vl)
                            emit(c, [a.enc, {"il": dims}, {"b": keep}], getattr(aten, name)(a.value, dims, keep))
                        attempt(name, b_am)
            if dt != "bool":
                for name in ("argmax", "argmin"):
                    for dim, keep in ((None, False), (nd - 1, False), (0, True)):
                        def b_arg(dt=dt, layout=layout, shape=shape, dim=dim, keep=keep, name=name):
                            c = new_case(name, "reduce_exact", dt, layout)
                            # distinct values: ties pick the first index in torch, avoid depending on it
                            n = math.prod(shape)
                            perm = torch.randperm(n, generator=gen).reshape(shape)
                            vals = (perm - n // 2).to(DT[dt]) if dt not in FLOATS else ((perm.double() - n / 2) / 4).to(DT[dt])
                            a = tensor_arg(c, shape, dt, "contiguous", value=vals)
                            emit(c, [a.enc, None if dim is None else {"i": dim}, {"b": keep}],
                                 getattr(aten, name)(a.value, dim, keep))
                        attempt(name, b_arg)
                def b_prod(dt=dt, layout=layout, shape=shape):
                    c = new_case("prod.dim_int", "reduce", dt, layout)
                    a = tensor_arg(c, shape, dt, vl, kind="small")
                    emit(c, [a.enc, {"i": len(shape) - 1}, {"b": False}, None], aten.prod.dim_int(a.value, len(shape) - 1))
                attempt("prod.dim_int", b_prod)


# ---------------------------------------------------------------- nn

def build_nn():
    for dt in FLOATS:
        for shape, dim in (([3, 5], 1), ([3, 5], 0), ([2, 3, 4], -1), ([4], 0), ([0, 3], 1), ([], 0)):
            for lay in ("contiguous", "transposed"):
                if lay == "transposed" and len(shape) < 2:
                    continue
                for name, fwd, bname in (("_softmax", aten._softmax, "_softmax_backward_data"),
                                         ("_log_softmax", aten._log_softmax, "_log_softmax_backward_data")):
                    layout = "empty" if 0 in shape else ("zero_dim" if not shape else lay)
                    def b(dt=dt, shape=shape, dim=dim, lay=lay, name=name, fwd=fwd, layout=layout):
                        c = new_case(name, "softmax", dt, layout)
                        a = tensor_arg(c, shape, dt, lay)
                        emit(c, [a.enc, {"i": dim}, {"b": False}], fwd(a.value, dim, False))
                    attempt(name, b)

                    def bb(dt=dt, shape=shape, dim=dim, lay=lay, name=name, fwd=fwd, bname=bname, layout=layout):
                        c = new_case(bname, "softmax", dt, layout)
                        x = rand(shape, dt).requires_grad_(True)
                        y = fwd(x, dim, False)
                        g = tensor_arg(c, shape, dt, lay)
                        (gx,) = torch.autograd.grad(y, x, g.value)
                        emit(c, [g.enc, {"T": c.put(y)}, {"i": dim}, {"dtype": dt}], gx)
                    attempt(bname, bb)

        # layer norm forward and backward
        for shape, nshape, affine in (([3, 8], [8], True), ([2, 3, 4], [3, 4], True), ([4, 6], [6], False),
                                      ([0, 5], [5], True), ([5], [5], True)):
            def b_ln(dt=dt, shape=shape, nshape=nshape, affine=affine):
                layout = "empty" if 0 in shape else "contiguous"
                c = new_case("native_layer_norm", "norm", dt, layout)
                x = tensor_arg(c, shape, dt)
                w = tensor_arg(c, nshape, dt) if affine else None
                bias = tensor_arg(c, nshape, dt) if affine else None
                res = aten.native_layer_norm(x.value, nshape, w.value if w else None, bias.value if bias else None, 1e-5)
                emit(c, [x.enc, {"il": nshape}, w.enc if w else None, bias.enc if bias else None, {"f": 1e-5}], res)
            attempt("native_layer_norm", b_ln)

            def b_lnb(dt=dt, shape=shape, nshape=nshape, affine=affine):
                layout = "empty" if 0 in shape else "contiguous"
                c = new_case("native_layer_norm_backward", "norm", dt, layout)
                x = rand(shape, dt).requires_grad_(True)
                w = rand(nshape, dt).requires_grad_(True) if affine else None
                bias = rand(nshape, dt).requires_grad_(True) if affine else None
                out, mean, rstd = aten.native_layer_norm(x, nshape, w, bias, 1e-5)
                g = rand(shape, dt)
                inputs = [x] + ([w, bias] if affine else [])
                grads = torch.autograd.grad(out, inputs, g, allow_unused=True)
                if not affine:
                    # the runtime returns None-gradients as no tensor; compare the input gradient only
                    grads = [grads[0]]
                args = [{"T": c.put(g)}, {"T": c.put(x)}, {"il": nshape}, {"T": c.put(mean)}, {"T": c.put(rstd)},
                        {"T": c.put(w)} if affine else None, {"T": c.put(bias)} if affine else None,
                        {"bl": [True, affine, affine]}]
                emit(c, args, grads)
            attempt("native_layer_norm_backward", b_lnb)

        # embedding + dense backward
        for ishape, (v, d), pad in (([5], (10, 4), -1), ([2, 3], (7, 3), -1), ([2, 4], (6, 5), 2), ([0], (4, 3), -1)):
            def b_emb(dt=dt, ishape=ishape, v=v, d=d, pad=pad):
                c = new_case("embedding", "gather", dt, "empty" if 0 in ishape else "contiguous")
                w = tensor_arg(c, [v, d], dt)
                idx = torch.randint(0, v, ishape, generator=gen)
                emit(c, [w.enc, {"T": c.put(idx)}, {"i": pad}, {"b": False}, {"b": False}], aten.embedding(w.value, idx, pad))
            attempt("embedding", b_emb)

            def b_embb(dt=dt, ishape=ishape, v=v, d=d, pad=pad):
                c = new_case("embedding_dense_backward", "scatter", dt, "empty" if 0 in ishape else "contiguous")
                w = rand([v, d], dt).requires_grad_(True)
                idx = torch.randint(0, v, ishape, generator=gen)
                y = torch.nn.functional.embedding(idx, w, padding_idx=None if pad < 0 else pad)
                g = rand(list(ishape) + [d], dt)
                (gw,) = torch.autograd.grad(y, w, g)
                emit(c, [{"T": c.put(g)}, {"T": c.put(idx)}, {"i": v}, {"i": pad}, {"b": False}], gw)
            attempt("embedding_dense_backward", b_embb)

        # dropout: eval mode and p=0 are deterministic; the backward op is deterministic given a mask
        for shape in ([3, 4], [0, 2], []):
            def b_do(dt=dt, shape=shape):
                c = new_case("native_dropout", "arith", dt, "contiguous")
                x = tensor_arg(c, shape, dt)
                emit(c, [x.enc, {"f": 0.5}, {"b": False}], aten.native_dropout(x.value, 0.5, False))
            attempt("native_dropout", b_do)

            def b_dob(dt=dt, shape=shape):
                c = new_case("native_dropout_backward", "arith", dt, "contiguous")
                g = tensor_arg(c, shape, dt)
                m = tensor_arg(c, shape, "bool")
                emit(c, [g.enc, m.enc, {"f": 2.0}], aten.native_dropout_backward(g.value, m.value, 2.0))
            attempt("native_dropout_backward", b_dob)

        # losses
        for n, ncls, weighted, red in ((5, 4, False, 1), (5, 4, True, 1), (6, 3, False, 2), (4, 3, True, 0),
                                       (0, 3, False, 2)):
            def b_nll(dt=dt, n=n, ncls=ncls, weighted=weighted, red=red):
                c = new_case("nll_loss_forward", "loss", dt, "empty" if n == 0 else "contiguous")
                x = torch.log_softmax(rand([n, ncls], dt).double(), 1).to(DT[dt])
                tgt = torch.randint(0, ncls, [n], generator=gen)
                if n > 2:
                    tgt[1] = -100
                w = rand([ncls], dt, "positive") if weighted else None
                res = aten.nll_loss_forward(x, tgt, w, red, -100)
                emit(c, [{"T": c.put(x)}, {"T": c.put(tgt)}, {"T": c.put(w)} if weighted else None, {"i": red},
                         {"i": -100}], res)
            attempt("nll_loss_forward", b_nll)

            def b_nllb(dt=dt, n=n, ncls=ncls, weighted=weighted, red=red):
                c = new_case("nll_loss_backward", "loss", dt, "empty" if n == 0 else "contiguous")
                x = torch.log_softmax(rand([n, ncls], dt).double(), 1).to(DT[dt]).requires_grad_(True)
                tgt = torch.randint(0, ncls, [n], generator=gen)
                if n > 2:
                    tgt[1] = -100
                w = rand([ncls], dt, "positive") if weighted else None
                out, tw = aten.nll_loss_forward(x, tgt, w, red, -100)
                g = rand(list(out.shape), dt)
                (gx,) = torch.autograd.grad(out, x, g)
                emit(c, [{"T": c.put(g)}, {"T": c.put(x)}, {"T": c.put(tgt)}, {"T": c.put(w)} if weighted else None,
                         {"i": red}, {"i": -100}, {"T": c.put(tw)}], gx)
            attempt("nll_loss_backward", b_nllb)

        for shape, red in (([3, 4], 1), ([3, 4], 0), ([5], 2), ([], 1)):
            def b_mse(dt=dt, shape=shape, red=red):
                c = new_case("mse_loss", "loss", dt, "zero_dim" if not shape else "contiguous")
                x = tensor_arg(c, shape, dt)
                t = tensor_arg(c, shape, dt)
                emit(c, [x.enc, t.enc, {"i": red}], aten.mse_loss(x.value, t.value, red))
            attempt("mse_loss", b_mse)

            def b_mseb(dt=dt, shape=shape, red=red):
                c = new_case("mse_loss_backward", "loss", dt, "zero_dim" if not shape else "contiguous")
                x = rand(shape, dt).requires_grad_(True)
                t = rand(shape, dt)
                out = aten.mse_loss(x, t, red)
                g = rand(list(out.shape), dt)
                (gx,) = torch.autograd.grad(out, x, g)
                emit(c, [{"T": c.put(g)}, {"T": c.put(x)}, {"T": c.put(t)}, {"i": red}], gx)
            attempt("mse_loss_backward", b_mseb)


# ---------------------------------------------------------------- index ops

def build_index():
    for dt in FLOATS + INTS + ["bool"]:
        for shapes, dim in ((([2, 3], [4, 3]), 0), (([3, 2], [3, 1], [3, 0]), 1), (([2, 3, 4], [2, 1, 4]), -2),
                            (([0, 3], [2, 3]), 0)):
            for lay in ("contiguous", "transposed"):
                def b_cat(dt=dt, shapes=shapes, dim=dim, lay=lay):
                    c = new_case("cat", "copy", dt, lay)
                    args = [tensor_arg(c, list(s), dt, lay if len(s) >= 2 and 0 not in s else "contiguous") for s in shapes]
                    emit(c, [{"TL": [a.enc for a in args]}, {"i": dim}], aten.cat([a.value for a in args], dim))
                attempt("cat", b_cat)
        for shape, dim, nidx in (([5, 3], 0, 4), ([3, 6], 1, 2), ([4, 3], 0, 0), ([2, 3, 4], 2, 5)):
            for lay in ("contiguous", "transposed"):
                def b_is(dt=dt, shape=shape, dim=dim, nidx=nidx, lay=lay):
                    c = new_case("index_select", "gather", dt, lay)
                    x = tensor_arg(c, shape, dt, lay)
                    idx = torch.randint(0, shape[dim], [nidx], generator=gen)
                    emit(c, [x.enc, {"i": dim}, {"T": c.put(idx)}], aten.index_select(x.value, dim, idx))
                attempt("index_select", b_is)

                def b_g(dt=dt, shape=shape, dim=dim, lay=lay):
                    c = new_case("gather", "gather", dt, lay)
                    x = tensor_arg(c, shape, dt, lay)
                    ishape = list(shape)
                    ishape[dim] = max(1, ishape[dim] - 1)
                    idx = torch.randint(0, shape[dim], ishape, generator=gen)
                    emit(c, [x.enc, {"i": dim}, {"T": c.put(idx)}, {"b": False}], aten.gather(x.value, dim, idx))
                attempt("gather", b_g)

                def b_sa(dt=dt, shape=shape, dim=dim, lay=lay):
                    if dt == "bool":
                        return
                    c = new_case("scatter_add", "scatter", dt, lay)
                    x = tensor_arg(c, shape, dt, lay)
                    ishape = list(shape)
                    ishape[dim] = max(1, ishape[dim] - 1)
                    idx = torch.randint(0, shape[dim], ishape, generator=gen)
                    src = tensor_arg(c, ishape, dt)
                    emit(c, [x.enc, {"i": dim}, {"T": c.put(idx)}, src.enc], aten.scatter_add(x.value, dim, idx, src.value))
                attempt("scatter_add", b_sa)


# ---------------------------------------------------------------- views, copies, factories

def build_views():
    for dt in ["f32", "f16", "i64", "bool"]:
        for lay in ("contiguous", "transposed"):
            shape = [3, 4]
            specs = [
                ("t", lambda x: aten.t(x), []),
                ("transpose.int", lambda x: aten.transpose.int(x, 0, 1), [{"i": 0}, {"i": 1}]),
                ("permute", lambda x: aten.permute(x, [1, 0]), [{"il": [1, 0]}]),
                ("expand", lambda x: aten.expand(x.unsqueeze(0), [2, 3, 4]), None),
                ("select.int", lambda x: aten.select.int(x, 1, -1), [{"i": 1}, {"i": -1}]),
                ("slice.Tensor", lambda x: aten.slice.Tensor(x, 1, 1, 4, 2), [{"i": 1}, {"i": 1}, {"i": 4}, {"i": 2}]),
                ("unsqueeze", lambda x: aten.unsqueeze(x, 1), [{"i": 1}]),
                ("squeeze.dim", lambda x: aten.squeeze.dim(x, 0), [{"i": 0}]),
                ("clone", lambda x: aten.clone(x), [None]),
                ("_to_copy", lambda x: aten._to_copy(x, dtype=torch.float64), [{"dtype": "f64"}, None, None, None, {"b": False}, None]),
                ("zeros_like", lambda x: aten.zeros_like(x), [None, None, None, None, None]),
                ("ones_like", lambda x: aten.ones_like(x), [None, None, None, None, None]),
            ]
            for op, f, extra in specs:
                if extra is None:
                    continue
                def b(dt=dt, lay=lay, op=op, f=f, extra=extra):
                    c = new_case(op, "copy", dt, lay)
                    x = tensor_arg(c, shape, dt, lay)
                    emit(c, [x.enc] + extra, f(x.value))
                attempt(op, b)
            def b_view(dt=dt):
                c = new_case("view", "copy", dt, "contiguous")
                x = tensor_arg(c, [3, 4], dt)
                emit(c, [x.enc, {"il": [2, -1]}], aten.view(x.value, [2, -1]))
            attempt("view", b_view)
            def b_exp(dt=dt):
                c = new_case("expand", "copy", dt, "contiguous")
                x = tensor_arg(c, [3, 1], dt)
                emit(c, [x.enc, {"il": [2, 3, 4]}, {"b": False}], aten.expand(x.value, [2, 3, 4]))
            attempt("expand", b_exp)
            def b_as(dt=dt):
                c = new_case("as_strided", "copy", dt, "contiguous")
                x = tensor_arg(c, [3, 4], dt)
                emit(c, [x.enc, {"il": [2, 2]}, {"il": [1, 4]}, {"i": 1}], aten.as_strided(x.value, [2, 2], [1, 4], 1))
            attempt("as_strided", b_as)
        def b_full(dt=dt):
            c = new_case("full", "copy", dt, "contiguous")
            v = True if dt == "bool" else (2.5 if dt in FLOATS else 7)
            emit(c, [{"il": [2, 3]}, scalar_enc(v), {"dtype": dt}, None, None, None], aten.full([2, 3], v, dtype=DT[dt]))
        attempt("full", b_full)


def build_mlp_golden(steps=20, lr=0.1):
    g = torch.Generator().manual_seed(7)
    n, d, h, ncls = 64, 10, 32, 5
    init = {
        "fc1.weight": torch.randn(h, d, generator=g) * (1 / math.sqrt(d)),
        "fc1.bias": torch.randn(h, generator=g) * 0.1,
        "fc2.weight": torch.randn(ncls, h, generator=g) * (1 / math.sqrt(h)),
        "fc2.bias": torch.randn(ncls, generator=g) * 0.1,
    }
    data = {"x": torch.randn(n, d, generator=g), "y": torch.randint(0, ncls, [n], generator=g)}
    save_file({k: v.contiguous() for k, v in init.items()}, os.path.join(HERE, "mlp_init.safetensors"))
    save_file(data, os.path.join(HERE, "mlp_data.safetensors"))
    params = {k: v.clone().requires_grad_(True) for k, v in init.items()}
    losses = []
    for step in range(steps):
        hdn = torch.relu(data["x"] @ params["fc1.weight"].t() + params["fc1.bias"])
        logits = hdn @ params["fc2.weight"].t() + params["fc2.bias"]
        loss = torch.nn.functional.cross_entropy(logits, data["y"])
        losses.append(loss.item())
        grads = torch.autograd.grad(loss, list(params.values()))
        with torch.no_grad():
            for p, gr in zip(params.values(), grads):
                p -= lr * gr
    with open(os.path.join(HERE, "mlp_losses.json"), "w") as f:
        json.dump({"torch": torch.__version__, "steps": steps, "lr": lr, "losses": losses}, f, indent=1)
        f.write("\n")


# ---------------------------------------------------------------- Core ATen math

def build_math():
    """Trigonometric, hyperbolic, rounding, predicate, logical, bitwise, atan2/fmod/remainder.
    Drawn from their own generator, after every other case, so earlier cases keep their values."""
    global gen
    saved, gen = gen, torch.Generator().manual_seed(20261201)
    for name, kind in (("sin", "normal"), ("cos", "normal"), ("tan", "small"), ("asin", "unit"), ("acos", "unit"),
                       ("atan", "normal"), ("sinh", "normal"), ("cosh", "normal"), ("asinh", "normal"),
                       ("acosh", "ge1"), ("atanh", "unit"), ("erf", "normal")):
        unary(name, "transcendental", getattr(aten, name), FLOATS, kind=kind)
    for name in ("ceil", "floor", "round", "trunc"):
        unary(name, "arith", getattr(aten, name), FLOATS + INTS, kind="halves")
    for name in ("isnan", "isinf", "logical_not"):
        unary(name, "compare", getattr(aten, name), FLOATS + INTS + ["bool"], kind="special")
    ar = FLOATS + INTS + ["bool"]
    for name in ("logical_and", "logical_or", "logical_xor"):
        binary_tensor(name, "compare", getattr(aten, name), ar)
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        f = getattr(aten, name)
        binary_tensor(f"{name}.Tensor", "arith", f.Tensor, INTS + ["bool"])
        binary_scalar(f"{name}.Scalar", "arith", f.Scalar, INTS, [3, -4])
    unary("bitwise_not", "arith", aten.bitwise_not, INTS + ["bool"])
    binary_tensor("atan2", "transcendental", aten.atan2, FLOATS)
    for name in ("fmod", "remainder"):
        f = getattr(aten, name)
        binary_tensor(f"{name}.Tensor", "arith", f.Tensor, FLOATS + INTS, kind_b="nonzero")
        binary_scalar(f"{name}.Scalar", "arith", f.Scalar, FLOATS, [2.5, -1.5])
        binary_scalar(f"{name}.Scalar", "arith", f.Scalar, INTS, [3, -4])
    # activation backwards at and around their kinks (where PyTorch picks a side)
    edges = [-3.5, -3.0, -2.75, -1.0, -0.5, 0.0, 0.5, 1.0, 2.75, 3.0, 3.5, float("nan")]
    for op, fn, extra in (
        ("hardswish_backward", lambda g, x: aten.hardswish_backward(g, x), []),
        ("hardsigmoid_backward", lambda g, x: aten.hardsigmoid_backward(g, x), []),
        ("hardtanh_backward", lambda g, x: aten.hardtanh_backward(g, x, -1.0, 1.0), [scalar_enc(-1.0), scalar_enc(1.0)]),
        ("leaky_relu_backward", lambda g, x: aten.leaky_relu_backward(g, x, 0.1, False), [scalar_enc(0.1), {"b": False}]),
        ("elu_backward", lambda g, x: aten.elu_backward(g, 1.5, 1.0, 1.0, False, x),
         [scalar_enc(1.5), scalar_enc(1.0), scalar_enc(1.0), {"b": False}]),
    ):
        for dt in FLOATS:
            def build(op=op, fn=fn, extra=extra, dt=dt):
                c = new_case(op, "transcendental" if op == "elu_backward" else "arith", dt, "contiguous")
                g = tensor_arg(c, [len(edges)], dt)
                x = tensor_arg(c, [len(edges)], dt, value=torch.tensor(edges, dtype=DT[dt]))
                args = [g.enc, x.enc] + extra if op != "elu_backward" else [g.enc] + extra + [x.enc]
                emit(c, args, fn(g.value, x.value))
            attempt(op, build)
    # exp2 became a native kernel (session 6): appended last, earlier cases keep their values
    unary("exp2", "transcendental", aten.exp2, FLOATS)
    gen = saved


# ---------------------------------------------------------------- Core ATen host references

def case(op, cls, dt, layout, make):
    """One case of `build_core*`: make(case) -> (boxed arguments, expected output)."""
    def build():
        c = new_case(op, cls, dt, layout)
        args, out = make(c)
        emit(c, args, out)
    attempt(op, build)


def build_core():
    """Core ATen operators served by host reference implementations (`ops/core_aten.rs`): data
    movement, scans, reductions with indices, indexing, convolution, pooling, batch / group norm.
    Own generator, after every other case, so earlier cases keep their values."""
    global gen
    saved, gen = gen, torch.Generator().manual_seed(20261202)

    def idx(c, shape, n):
        t = torch.randint(0, n, shape, generator=gen)
        return {"T": c.put(t)}, t

    for dt in FLOATS + INTS + ["bool"]:
        def flip(c, dt=dt):
            a = tensor_arg(c, [3, 4, 5], dt)
            return [a.enc, {"il": [0, 2]}], aten.flip(a.value, [0, 2])
        case("flip", "copy", dt, "contiguous", flip)

        def flip_t(c, dt=dt):
            a = tensor_arg(c, [4, 6], dt, "transposed")
            return [a.enc, {"il": [-1]}], aten.flip(a.value, [-1])
        case("flip", "copy", dt, "transposed", flip_t)

        def repeat(c, dt=dt):
            a = tensor_arg(c, [2, 3], dt)
            return [a.enc, {"il": [2, 1, 3]}], aten.repeat(a.value, [2, 1, 3])
        case("repeat", "copy", dt, "contiguous", repeat)

        def pad(c, dt=dt):
            a = tensor_arg(c, [2, 3, 4], dt)
            v = True if dt == "bool" else 7
            return [a.enc, {"il": [1, 2, -1, 1]}, scalar_enc(v)], aten.constant_pad_nd(a.value, [1, 2, -1, 1], v)
        case("constant_pad_nd", "copy", dt, "contiguous", pad)

        def fill(c, dt=dt):
            a = tensor_arg(c, [3, 4], dt)
            v = False if dt == "bool" else 3
            return [a.enc, scalar_enc(v)], aten.fill.Scalar(a.value, v)
        case("fill.Scalar", "copy", dt, "contiguous", fill)

        def any_(c, dt=dt):
            a = tensor_arg(c, [4, 5], dt, kind="halves" if dt in FLOATS else "normal")
            return [a.enc], aten.any(a.value)
        case("any", "compare", dt, "contiguous", any_)

        def any_dim(c, dt=dt):
            a = tensor_arg(c, [4, 5], dt, kind="halves" if dt in FLOATS else "normal")
            return [a.enc, {"i": 1}, {"b": True}], aten.any.dim(a.value, 1, True)
        case("any.dim", "compare", dt, "contiguous", any_dim)

        def any_dims(c, dt=dt):
            a = tensor_arg(c, [3, 4, 5], dt, kind="halves" if dt in FLOATS else "normal")
            return [a.enc, {"il": [0, 2]}, {"b": False}], aten.any.dims(a.value, [0, 2], False)
        case("any.dims", "compare", dt, "contiguous", any_dims)

        def scatter_src(c, dt=dt):
            a = tensor_arg(c, [4, 5], dt)
            src = tensor_arg(c, [4, 5], dt)
            # distinct rows per column: no repeated target, so the result does not depend on order
            perm = torch.stack([torch.randperm(4, generator=gen) for _ in range(3)], 1)
            return [a.enc, {"i": 0}, {"T": c.put(perm)}, src.enc], aten.scatter.src(a.value, 0, perm, src.value)
        case("scatter.src", "scatter", dt, "contiguous", scatter_src)

        def scatter_value(c, dt=dt):
            a = tensor_arg(c, [4, 5], dt)
            ie, it = idx(c, [4, 2], 5)
            v = True if dt == "bool" else 2
            return [a.enc, {"i": 1}, ie, scalar_enc(v)], aten.scatter.value(a.value, 1, it, v)
        case("scatter.value", "scatter", dt, "contiguous", scatter_value)

        def slice_scatter(c, dt=dt):
            a = tensor_arg(c, [6, 4], dt)
            src = tensor_arg(c, [2, 4], dt)
            return ([a.enc, src.enc, {"i": 0}, {"i": 1}, {"i": 5}, {"i": 2}],
                    aten.slice_scatter(a.value, src.value, 0, 1, 5, 2))
        case("slice_scatter", "copy", dt, "contiguous", slice_scatter)

        def select_scatter(c, dt=dt):
            a = tensor_arg(c, [3, 4], dt)
            src = tensor_arg(c, [3], dt)
            return [a.enc, src.enc, {"i": 1}, {"i": -1}], aten.select_scatter(a.value, src.value, 1, -1)
        case("select_scatter", "copy", dt, "contiguous", select_scatter)

        def index_t(c, dt=dt):
            a = tensor_arg(c, [5, 4, 3], dt)
            i0e, i0 = idx(c, [2, 3], 5)
            i2e, i2 = idx(c, [3], 3)
            return [a.enc, {"OTL": [i0e, None, i2e]}], aten.index.Tensor(a.value, [i0, None, i2])
        case("index.Tensor", "gather", dt, "contiguous", index_t)

        def index_mask(c, dt=dt):
            a = tensor_arg(c, [4, 5], dt)
            m = tensor_arg(c, [4], "bool")
            return [a.enc, {"OTL": [m.enc]}], aten.index.Tensor(a.value, [m.value])
        case("index.Tensor", "gather", dt, "contiguous", index_mask)

        def index_put(c, dt=dt):
            a = tensor_arg(c, [5, 4], dt)
            ie = {"T": c.put(torch.tensor([4, 0, 2]))}
            v = tensor_arg(c, [3, 4], dt)
            return ([a.enc, {"OTL": [ie]}, v.enc, {"b": False}],
                    aten.index_put(a.value, [torch.tensor([4, 0, 2])], v.value, False))
        case("index_put", "scatter", dt, "contiguous", index_put)

        def nonzero(c, dt=dt):
            a = tensor_arg(c, [4, 5], dt, kind="halves" if dt in FLOATS else "normal")
            return [a.enc], aten.nonzero(a.value)
        case("nonzero", "select", dt, "contiguous", nonzero)

    for dt in FLOATS + INTS:
        def index_put_acc(c, dt=dt):
            a = tensor_arg(c, [5, 4], dt)
            ie = {"T": c.put(torch.tensor([4, 0, 4]))}
            v = tensor_arg(c, [3, 4], dt)
            return ([a.enc, {"OTL": [ie]}, v.enc, {"b": True}],
                    aten.index_put(a.value, [torch.tensor([4, 0, 4])], v.value, True))
        case("index_put", "reduce", dt, "contiguous", index_put_acc)

        def cumsum(c, dt=dt):
            a = tensor_arg(c, [4, 6], dt)
            return [a.enc, {"i": 1}, None], aten.cumsum(a.value, 1)
        case("cumsum", "reduce", dt, "contiguous", cumsum)

        def cumsum_t(c, dt=dt):
            a = tensor_arg(c, [5, 7], dt, "transposed")
            return [a.enc, {"i": 0}, None], aten.cumsum(a.value, 0)
        case("cumsum", "reduce", dt, "transposed", cumsum_t)

        for op, f in (("max.dim", aten.max.dim), ("min.dim", aten.min.dim)):
            def mm(c, dt=dt, f=f):
                a = tensor_arg(c, [4, 7], dt)
                return [a.enc, {"i": 1}, {"b": False}], f(a.value, 1, False)
            case(op, "select", dt, "contiguous", mm)

            def mm_t(c, dt=dt, f=f):
                a = tensor_arg(c, [5, 6], dt, "transposed")
                return [a.enc, {"i": 0}, {"b": True}], f(a.value, 0, True)
            case(op, "select", dt, "transposed", mm_t)

        def clamp_t(c, dt=dt):
            a = tensor_arg(c, [4, 5], dt)
            lo = tensor_arg(c, [5], dt)
            hi = tensor_arg(c, [4, 1], dt, kind="positive")
            return [a.enc, lo.enc, hi.enc], aten.clamp.Tensor(a.value, lo.value, hi.value)
        case("clamp.Tensor", "arith", dt, "contiguous", clamp_t)

        def sort(c, dt=dt):
            a = tensor_arg(c, [4, 9], dt)
            # distinct values per row (ties would make the indices order-dependent)
            v = torch.stack([torch.randperm(9, generator=gen) for _ in range(4)]).to(a.value.dtype) - 4
            return [{"T": c.put(v)}, {"i": -1}, {"b": True}], aten.sort(v, -1, True)
        case("sort", "select", dt, "contiguous", sort)

        def topk(c, dt=dt):
            v = torch.stack([torch.randperm(8, generator=gen) for _ in range(5)], 1).to(DT[dt]) - 3
            return [{"T": c.put(v)}, {"i": 3}, {"i": 0}, {"b": False}, {"b": True}], aten.topk(v, 3, 0, False, True)
        case("topk", "select", dt, "contiguous", topk)

    for dt in FLOATS:
        def var_c(c, dt=dt):
            a = tensor_arg(c, [4, 6, 5], dt)
            return [a.enc, {"il": [0, 2]}, scalar_enc(1), {"b": False}], aten.var.correction(a.value, [0, 2], correction=1)
        case("var.correction", "reduce", dt, "contiguous", var_c)

        def var_all(c, dt=dt):
            a = tensor_arg(c, [4, 6], dt)
            return [a.enc, None, scalar_enc(0), {"b": True}], aten.var.correction(a.value, None, correction=0, keepdim=True)
        case("var.correction", "reduce", dt, "contiguous", var_all)

        def var_d(c, dt=dt):
            a = tensor_arg(c, [5, 7], dt, "transposed")
            return [a.enc, {"il": [1]}, {"b": True}, {"b": False}], aten.var.dim(a.value, [1], True, False)
        case("var.dim", "reduce", dt, "transposed", var_d)

        def conv2d(c, dt=dt):
            x = tensor_arg(c, [2, 4, 7, 6], dt)
            w = tensor_arg(c, [6, 2, 3, 2], dt)
            b = tensor_arg(c, [6], dt)
            args = [x.enc, w.enc, b.enc, {"il": [2, 1]}, {"il": [1, 0]}, {"il": [1, 2]}, {"b": False}, {"il": [0, 0]}, {"i": 2}]
            return args, aten.convolution(x.value, w.value, b.value, [2, 1], [1, 0], [1, 2], False, [0, 0], 2)
        case("convolution", "matmul", dt, "contiguous", conv2d)

        def conv1d(c, dt=dt):
            x = tensor_arg(c, [2, 3, 9], dt)
            w = tensor_arg(c, [4, 3, 3], dt)
            args = [x.enc, w.enc, None, {"il": [1]}, {"il": [1]}, {"il": [1]}, {"b": False}, {"il": [0]}, {"i": 1}]
            return args, aten.convolution(x.value, w.value, None, [1], [1], [1], False, [0], 1)
        case("convolution", "matmul", dt, "contiguous", conv1d)

        def avgpool(c, dt=dt):
            x = tensor_arg(c, [2, 3, 7, 6], dt)
            args = [x.enc, {"il": [3, 2]}, {"il": [2, 2]}, {"il": [1, 0]}, {"b": True}, {"b": False}, None]
            return args, aten.avg_pool2d(x.value, [3, 2], [2, 2], [1, 0], True, False, None)
        case("avg_pool2d", "reduce", dt, "contiguous", avgpool)

        def avgpool_inc(c, dt=dt):
            x = tensor_arg(c, [3, 6, 6], dt)
            args = [x.enc, {"il": [2, 2]}, {"il": []}, {"il": [1, 1]}, {"b": False}, {"b": True}, None]
            return args, aten.avg_pool2d(x.value, [2, 2], [], [1, 1], False, True, None)
        case("avg_pool2d", "reduce", dt, "contiguous", avgpool_inc)

        def maxpool(c, dt=dt):
            x = tensor_arg(c, [2, 3, 7, 6], dt)
            args = [x.enc, {"il": [3, 3]}, {"il": [2, 1]}, {"il": [1, 1]}, {"il": [1, 1]}, {"b": True}]
            return args, aten.max_pool2d_with_indices(x.value, [3, 3], [2, 1], [1, 1], [1, 1], True)
        case("max_pool2d_with_indices", "select", dt, "contiguous", maxpool)

        def bn_eval(c, dt=dt):
            x = tensor_arg(c, [3, 4, 5], dt)
            w, b = tensor_arg(c, [4], dt), tensor_arg(c, [4], dt)
            m, v = tensor_arg(c, [4], dt), tensor_arg(c, [4], dt, kind="positive")
            args = [x.enc, w.enc, b.enc, m.enc, v.enc, {"f": 0.1}, {"f": 1e-5}]
            return args, aten._native_batch_norm_legit_no_training(x.value, w.value, b.value, m.value, v.value, 0.1, 1e-5)
        case("_native_batch_norm_legit_no_training", "norm", dt, "contiguous", bn_eval)

        def bn_train(c, dt=dt):
            x = tensor_arg(c, [6, 3, 4, 2], dt)
            w, b = tensor_arg(c, [3], dt), tensor_arg(c, [3], dt)
            args = [x.enc, w.enc, b.enc, {"b": True}, {"f": 0.1}, {"f": 1e-5}]
            return args, aten._native_batch_norm_legit.no_stats(x.value, w.value, b.value, True, 0.1, 1e-5)
        case("_native_batch_norm_legit.no_stats", "norm", dt, "contiguous", bn_train)

        def bn_running(c, dt=dt):
            x = tensor_arg(c, [6, 3, 5], dt)
            m, v = tensor_arg(c, [3], dt), tensor_arg(c, [3], dt, kind="positive")
            rm, rv = m.value.clone(), v.value.clone()
            out = aten._native_batch_norm_legit(x.value, None, None, rm, rv, True, 0.1, 1e-5)
            return [x.enc, None, None, m.enc, v.enc, {"b": True}, {"f": 0.1}, {"f": 1e-5}], out
        case("_native_batch_norm_legit", "norm", dt, "contiguous", bn_running)

        def gn(c, dt=dt):
            x = tensor_arg(c, [2, 6, 3, 4], dt)
            w, b = tensor_arg(c, [6], dt), tensor_arg(c, [6], dt)
            args = [x.enc, w.enc, b.enc, {"i": 2}, {"i": 6}, {"i": 12}, {"i": 3}, {"f": 1e-5}]
            return args, aten.native_group_norm(x.value, w.value, b.value, 2, 6, 12, 3, 1e-5)
        case("native_group_norm", "norm", dt, "contiguous", gn)

    for dt in FLOATS + INTS:
        def arange(c, dt=dt):
            out = aten.arange.start_step(-3, 7, 2, dtype=DT[dt])
            return [scalar_enc(-3), scalar_enc(7), scalar_enc(2), {"dtype": dt}, None, None, None], out
        case("arange.start_step", "copy", dt, "contiguous", arange)

    # second batch: padding modes, adaptive / 1-d pooling, resampling, pooling and convolution
    # backwards, group norm backward, distances, scatter_reduce
    for dt in FLOATS + INTS:
        for op, shape, pad in (("reflection_pad1d", [2, 3, 6], [2, 3]), ("reflection_pad2d", [2, 3, 5, 4], [1, 2, 3, 0]),
                               ("reflection_pad3d", [1, 2, 3, 4, 5], [1, 1, 2, 0, 1, 2]),
                               ("replication_pad2d", [2, 3, 5, 4], [2, 1, 0, 3]),
                               ("replication_pad3d", [1, 2, 3, 4, 5], [0, 2, 1, 1, 2, 0])):
            def padm(c, dt=dt, op=op, shape=shape, pad=pad):
                a = tensor_arg(c, shape, dt)
                return [a.enc, {"il": pad}], getattr(aten, op)(a.value, pad)
            case(op, "copy", dt, "contiguous", padm)

        def up(c, dt=dt):
            a = tensor_arg(c, [2, 3, 4, 5], dt)
            return [a.enc, {"il": [7, 8]}, None], aten.upsample_nearest2d.vec(a.value, [7, 8], None)
        case("upsample_nearest2d.vec", "copy", dt, "contiguous", up)

        def up_s(c, dt=dt):
            a = tensor_arg(c, [2, 3, 4, 5], dt)
            return [a.enc, None, {"fl": [2.0, 1.5]}], aten.upsample_nearest2d.vec(a.value, None, [2.0, 1.5])
        case("upsample_nearest2d.vec", "copy", dt, "contiguous", up_s)

        for red in ("sum", "prod", "mean", "amax", "amin"):
            for inc in (True, False):
                def sr(c, dt=dt, red=red, inc=inc):
                    a = tensor_arg(c, [4, 5], dt)
                    src = tensor_arg(c, [6, 5], dt)
                    ie, it = idx(c, [6, 5], 4)
                    return ([a.enc, {"i": 0}, ie, src.enc, {"str": red}, {"b": inc}],
                            aten.scatter_reduce.two(a.value, 0, it, src.value, red, include_self=inc))
                case("scatter_reduce.two", "reduce", dt, "contiguous", sr)

    for dt in FLOATS:
        for op, shape, osz in (("adaptive_avg_pool1d", [2, 3, 10], [4]), ("_adaptive_avg_pool2d", [2, 3, 7, 9], [3, 4]),
                               ("_adaptive_avg_pool3d", [1, 2, 5, 6, 7], [2, 3, 4])):
            def ap(c, dt=dt, op=op, shape=shape, osz=osz):
                a = tensor_arg(c, shape, dt)
                return [a.enc, {"il": osz}], getattr(aten, op)(a.value, osz)
            case(op, "reduce", dt, "contiguous", ap)

        def ap1(c, dt=dt):
            a = tensor_arg(c, [2, 3, 11], dt)
            return ([a.enc, {"il": [3]}, {"il": [2]}, {"il": [1]}, {"b": True}, {"b": False}],
                    aten.avg_pool1d(a.value, [3], [2], [1], True, False))
        case("avg_pool1d", "reduce", dt, "contiguous", ap1)

        def apb(c, dt=dt):
            x = tensor_arg(c, [2, 3, 7, 6], dt)
            out = aten.avg_pool2d(x.value, [3, 2], [2, 2], [1, 0], True, False, None)
            g = tensor_arg(c, list(out.shape), dt)
            args = [g.enc, x.enc, {"il": [3, 2]}, {"il": [2, 2]}, {"il": [1, 0]}, {"b": True}, {"b": False}, None]
            return args, aten.avg_pool2d_backward(g.value, x.value, [3, 2], [2, 2], [1, 0], True, False, None)
        case("avg_pool2d_backward", "reduce", dt, "contiguous", apb)

        def mpb(c, dt=dt):
            x = tensor_arg(c, [2, 3, 7, 6], dt)
            out, ind = aten.max_pool2d_with_indices(x.value, [3, 3], [2, 1], [1, 1], [1, 1], False)
            g = tensor_arg(c, list(out.shape), dt)
            args = [g.enc, x.enc, {"il": [3, 3]}, {"il": [2, 1]}, {"il": [1, 1]}, {"il": [1, 1]}, {"b": False}, {"T": c.put(ind)}]
            return args, aten.max_pool2d_with_indices_backward(g.value, x.value, [3, 3], [2, 1], [1, 1], [1, 1], False, ind)
        case("max_pool2d_with_indices_backward", "reduce", dt, "contiguous", mpb)

        def cb(c, dt=dt):
            x = tensor_arg(c, [2, 4, 7, 6], dt)
            w = tensor_arg(c, [6, 2, 3, 2], dt)
            out = aten.convolution(x.value, w.value, None, [2, 1], [1, 0], [1, 2], False, [0, 0], 2)
            g = tensor_arg(c, list(out.shape), dt)
            args = [g.enc, x.enc, w.enc, {"il": [6]}, {"il": [2, 1]}, {"il": [1, 0]}, {"il": [1, 2]}, {"b": False},
                    {"il": [0, 0]}, {"i": 2}, {"bl": [True, True, True]}]
            return args, aten.convolution_backward(g.value, x.value, w.value, [6], [2, 1], [1, 0], [1, 2], False, [0, 0], 2,
                                                   [True, True, True])
        case("convolution_backward", "matmul", dt, "contiguous", cb)

        def gnb(c, dt=dt):
            x = tensor_arg(c, [2, 6, 3, 4], dt)
            w, b = tensor_arg(c, [6], dt), tensor_arg(c, [6], dt)
            _, mean, rstd = aten.native_group_norm(x.value, w.value, b.value, 2, 6, 12, 3, 1e-5)
            g = tensor_arg(c, [2, 6, 3, 4], dt)
            args = [g.enc, x.enc, {"T": c.put(mean)}, {"T": c.put(rstd)}, w.enc, {"i": 2}, {"i": 6}, {"i": 12}, {"i": 3},
                    {"bl": [True, True, True]}]
            return args, aten.native_group_norm_backward(g.value, x.value, mean, rstd, w.value, 2, 6, 12, 3, [True, True, True])
        case("native_group_norm_backward", "norm", dt, "contiguous", gnb)

        for pv in (2.0, 1.0, 3.0):  # (JSON has no infinity literal)
            def cd(c, dt=dt, pv=pv):
                a, b = tensor_arg(c, [2, 4, 3], dt), tensor_arg(c, [2, 5, 3], dt)
                return [a.enc, b.enc, {"f": pv}, None], aten._cdist_forward(a.value, b.value, pv, None)
            case("_cdist_forward", "reduce", dt, "contiguous", cd)

        def pd(c, dt=dt):
            a = tensor_arg(c, [5, 3], dt)
            return [a.enc, {"f": 2.0}], aten._pdist_forward(a.value, 2.0)
        case("_pdist_forward", "reduce", dt, "contiguous", pd)

        def aapb(c, dt=dt):
            x = tensor_arg(c, [2, 3, 7, 9], dt)
            g = tensor_arg(c, [2, 3, 3, 4], dt)
            return [g.enc, x.enc], aten._adaptive_avg_pool2d_backward(g.value, x.value)
        case("_adaptive_avg_pool2d_backward", "reduce", dt, "contiguous", aapb)

        for osz, ac, sf in (([7, 9], False, None), ([7, 9], True, None), (None, False, [2.0, 1.5])):
            def ub(c, dt=dt, osz=osz, ac=ac, sf=sf):
                a = tensor_arg(c, [2, 3, 4, 5], dt)
                args = [a.enc, {"il": osz} if osz else None, {"b": ac}, {"fl": sf} if sf else None]
                return args, aten.upsample_bilinear2d.vec(a.value, osz, ac, sf)
            # a weighted sum of four neighbours, accumulated in f32 by PyTorch: the `reduce` standard
            case("upsample_bilinear2d.vec", "reduce", dt, "contiguous", ub)
    gen = saved


# ---------------------------------------------------------------- Core ATen host references (2)

def build_core_more():
    """`_embedding_bag`, `avg_pool3d`, `max_pool3d_with_indices`, `col2im` and `grid_sampler_2d`
    (`ops/core_aten_more.rs`). Own generator, after every other case, so earlier cases keep their
    values.

    Where PyTorch's CPU kernels have no dtype (avg_pool3d: f16, bf16, int32) the attempt is
    skipped and counted in `skipped`. `_embedding_bag` in `sum` mode compares the output only:
    its `offset2bag` is empty on PyTorch's CPU fast path and computed elsewhere (the suite
    compares a prefix of the outputs). grid_sampler_2d positions: PyTorch computes grid positions
    and interpolation weights in the input dtype, so for f16/bf16 its result is not the exact
    one unless every position is exactly representable: those dtypes sample on a lattice
    (quarter pixels, half pixels for bf16 bicubic, whose cubic weights need more bits), which
    also puts nearest-mode ties (rounded half to even) exactly on .5; f32 and f64 sample at
    random positions as well."""
    global gen
    saved, gen = gen, torch.Generator().manual_seed(20261203)

    def put_int(c, values, dtype=torch.int64):
        t = torch.as_tensor(values, dtype=dtype)
        return {"T": c.put(t)}, t

    # ------------------------------------------------ _embedding_bag
    # 7 rows of 3; bags [0, 3), [3, 3) (empty), [3, 8), [8, 10)
    n_idx, bounds = 10, [0, 3, 3, 8]
    for dt in FLOATS:
        def bag(c, dt=dt, mode=0, pad=-1, ilo=False, psw=False, layout="contiguous", itype=torch.int64, fixed=None):
            w = tensor_arg(c, [7, 3], dt, layout)
            if fixed is None:
                idx = torch.randint(0, 7, (n_idx,), generator=gen)
                offs = bounds + ([n_idx] if ilo else [])
            else:  # the 2-D input [B, N] of torch.nn.functional.embedding_bag: flattened, offsets 0, N, 2N, ...
                idx = torch.randint(0, 7, fixed, generator=gen).flatten()
                offs = list(range(0, fixed[0] * fixed[1], fixed[1]))
                ref = torch.nn.functional.embedding_bag(idx.view(fixed), w.value, mode=("sum", "mean", "max")[mode])
            if pad >= 0:
                idx[1] = idx[4] = pad  # in two bags
            ie, it = put_int(c, idx, itype)
            oe, ot = put_int(c, offs, itype)
            pe, pv = (None, None)
            if psw:
                p = tensor_arg(c, [n_idx], dt)
                pe, pv = p.enc, p.value
            out = aten._embedding_bag(w.value, it, ot, False, mode, False, pv, ilo, pad)
            if fixed is not None:
                assert torch.equal(out[0], ref)
            args = [w.enc, ie, oe, {"b": False}, {"i": mode}, {"b": False}, pe, {"b": ilo}, {"i": pad}]
            # sum: offset2bag is implementation-defined (empty on PyTorch's fast path)
            return args, out[:1] if mode == 0 else out
        for mode in (0, 1, 2):
            cls = "select" if mode == 2 else "reduce"
            case("_embedding_bag", cls, dt, "contiguous", lambda c, mode=mode: bag(c, mode=mode))
            case("_embedding_bag", cls, dt, "contiguous", lambda c, mode=mode: bag(c, mode=mode, pad=2, ilo=True))
            case("_embedding_bag", cls, dt, "contiguous", lambda c, mode=mode: bag(c, mode=mode, fixed=(3, 4)))
        case("_embedding_bag", "reduce", dt, "contiguous", lambda c: bag(c, psw=True))
        case("_embedding_bag", "reduce", dt, "contiguous", lambda c: bag(c, psw=True, pad=5, ilo=True))
        case("_embedding_bag", "reduce", dt, "transposed", lambda c: bag(c, mode=1, layout="transposed"))
        case("_embedding_bag", "select", dt, "transposed", lambda c: bag(c, mode=2, pad=0, layout="transposed"))
        case("_embedding_bag", "reduce", dt, "contiguous", lambda c: bag(c, mode=1, pad=3, itype=torch.int32))

    # ------------------------------------------------ 3-d pooling
    pools = (  # shape, kernel, stride, padding, dilation, ceil_mode, layout
        ([2, 3, 5, 6, 7], [2, 3, 2], [2, 1, 2], [1, 1, 0], [1, 1, 1], False, "contiguous"),
        ([2, 2, 6, 5, 7], [3, 2, 3], [2, 2, 2], [1, 0, 1], [2, 1, 2], True, "contiguous"),
        ([3, 5, 4, 6], [3], [2], [1], [1], True, "contiguous"),
        ([2, 3, 4, 5, 6], [2, 2, 3], [], [0, 1, 1], [1], False, "transposed"),
    )
    for dt in FLOATS + INTS:
        for shape, k, st, pd, dl, ceil, layout in pools:
            def mp(c, dt=dt, shape=shape, k=k, st=st, pd=pd, dl=dl, ceil=ceil, layout=layout):
                x = tensor_arg(c, shape, dt, layout)
                args = [x.enc, {"il": k}, {"il": st}, {"il": pd}, {"il": dl}, {"b": ceil}]
                return args, aten.max_pool3d_with_indices(x.value, k, st, pd, dl, ceil)
            case("max_pool3d_with_indices", "select", dt, layout, mp)
    for dt in FLOATS:
        def mp_special(c, dt=dt):  # NaNs (the last NaN of a window wins) and infinities
            v = rand([1, 2, 4, 4, 6], dt)
            for pos, val in (((0, 0, 0, 0, 0), "nan"), ((0, 0, 1, 1, 2), "nan"), ((0, 0, 2, 3, 4), "nan"),
                             ((0, 1, 0, 0, 1), "inf"), ((0, 1, 1, 1, 0), "-inf"), ((0, 1, 2, 2, 3), "-inf")):
                v[pos] = float(val)
            x = tensor_arg(c, [1, 2, 4, 4, 6], dt, value=v)
            args = [x.enc, {"il": [2, 2, 3]}, {"il": [2, 2, 3]}, {"il": [0]}, {"il": [1]}, {"b": False}]
            return args, aten.max_pool3d_with_indices(x.value, [2, 2, 3], [2, 2, 3], [0], [1], False)
        case("max_pool3d_with_indices", "select", dt, "contiguous", mp_special)
    avgs = (  # shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override, layout
        ([2, 3, 5, 6, 7], [2, 3, 2], [2, 1, 2], [1, 1, 0], False, True, None, "contiguous"),
        ([2, 2, 6, 5, 7], [3, 2, 3], [2, 2, 2], [1, 0, 1], True, False, None, "contiguous"),
        ([3, 5, 4, 6], [2], [], [1], True, True, 3, "contiguous"),
        ([2, 3, 4, 5, 6], [2, 2, 3], [1, 2, 2], [0, 1, 1], True, True, -2, "transposed"),
    )
    for dt in FLOATS + ["i64"]:
        for shape, k, st, pd, ceil, cip, div, layout in avgs:
            def ap(c, dt=dt, shape=shape, k=k, st=st, pd=pd, ceil=ceil, cip=cip, div=div, layout=layout):
                x = tensor_arg(c, shape, dt, layout)
                args = [x.enc, {"il": k}, {"il": st}, {"il": pd}, {"b": ceil}, {"b": cip}, None if div is None else {"i": div}]
                return args, aten.avg_pool3d(x.value, k, st, pd, ceil, cip, div)
            case("avg_pool3d", "reduce", dt, layout, ap)

    # ------------------------------------------------ col2im
    def blocks(size, k, d, p, s):
        return (size + 2 * p - (d * (k - 1) + 1)) // s + 1
    cols = (  # leading, channels, output_size, kernel, dilation, padding, stride, layout
        ([2], 3, [5, 6], [2, 3], [1, 1], [0, 1], [1, 2], "contiguous"),
        ([], 2, [6, 5], [3, 2], [2, 1], [1, 0], [2, 1], "contiguous"),
        ([2], 2, [4, 7], [2, 2], [1, 2], [1, 1], [1, 1], "transposed"),
    )
    for dt in FLOATS + ["bool"]:
        for lead, ch, osz, k, dl, pd, st, layout in cols:
            def c2i(c, dt=dt, lead=lead, ch=ch, osz=osz, k=k, dl=dl, pd=pd, st=st, layout=layout):
                n_blocks = blocks(osz[0], k[0], dl[0], pd[0], st[0]) * blocks(osz[1], k[1], dl[1], pd[1], st[1])
                x = tensor_arg(c, lead + [ch * k[0] * k[1], n_blocks], dt, layout)
                args = [x.enc, {"il": osz}, {"il": k}, {"il": dl}, {"il": pd}, {"il": st}]
                return args, aten.col2im(x.value, osz, k, dl, pd, st)
            case("col2im", "reduce", dt, layout, c2i)

    # ------------------------------------------------ grid_sampler_2d
    def lattice_grid(n, ho, wo, h, w, ac, step):
        """Normalized positions whose pixel coordinates are multiples of `step` in [-1.5, size + 0.5)."""
        out = torch.empty(n, ho, wo, 2, dtype=torch.float64)
        for d, size in ((0, w), (1, h)):
            k = torch.randint(int(-1.5 / step), int((size + 0.5) / step), (n, ho, wo), generator=gen).double() * step
            out[..., d] = 2 * k / (size - 1) - 1 if ac else (2 * k + 1) / size - 1
        return out

    def grid_case(dt, mode, pad, ac, positions, layout="contiguous"):
        def make(c):
            h, w = (5, 9) if ac else (4, 8)  # 2 (size - 1) or 2 size a power of two: exact lattices
            x = tensor_arg(c, [2, 3, h, w], dt, layout)
            if positions == "lattice":
                g64 = lattice_grid(2, 3, 5, h, w, ac, 0.5 if (dt == "bf16" and mode == 2) else 0.25)
                g = g64.to(DT[dt])
                assert torch.equal(g.double(), g64), "lattice positions must be exact in the dtype"
            else:
                g = (torch.rand(2, 3, 5, 2, generator=gen, dtype=torch.float64) * 2.6 - 1.3).to(DT[dt])
            ga = tensor_arg(c, [2, 3, 5, 2], dt, layout, value=g)
            args = [x.enc, ga.enc, {"i": mode}, {"i": pad}, {"b": ac}]
            return args, aten.grid_sampler_2d(x.value, ga.value, mode, pad, ac)
        # nearest selects input values; bilinear and bicubic are weighted sums (the reduce standard)
        case("grid_sampler_2d", "select" if mode == 1 else "reduce", dt, layout, make)

    for dt in FLOATS:
        for mode in (0, 1, 2):
            for pad in (0, 1, 2):
                for ac in (False, True):
                    grid_case(dt, mode, pad, ac, "lattice")
                    if dt in ("f32", "f64"):
                        grid_case(dt, mode, pad, ac, "random")
        grid_case(dt, 0, 0, False, "lattice", "transposed")
        grid_case(dt, 2, 2, True, "lattice", "transposed")
    gen = saved


def build_triangles():
    # appended after every other builder, so that the cases before it keep their random values
    for dt in FLOATS + INTS + ["bool"]:
        for shape, lay in (([3, 4], "contiguous"), ([4, 3], "transposed"), ([2, 3, 5], "contiguous"),
                           ([0, 3], "contiguous"), ([1, 1], "contiguous")):
            for op in ("tril", "triu"):
                for diag in (0, 1, -2, 7, -7):
                    def b(dt=dt, shape=shape, lay=lay, op=op, diag=diag):
                        c = new_case(op, "copy", dt, lay)
                        x = tensor_arg(c, shape, dt, lay)
                        emit(c, [x.enc, {"i": diag}], getattr(aten, op)(x.value, diag))
                    attempt(op, b)


def build_bias_products():
    # baddbmm and addmv (native kernels), and addmm with beta 0: a beta of 0 ignores the bias, NaN
    # included (the "nan_bias" layout); appended after every other builder
    for dt in FLOATS:
        for bias_shape, beta, alpha, lay in (([2, 3, 4], 1, 1, "contiguous"), ([4], 0.5, 2, "transposed"),
                                             ([1, 3, 1], 1, -1, "contiguous"), ([2, 3, 4], 0, 1, "nan_bias"),
                                             ([], 0, 0.5, "nan_bias")):
            def b_bmm(dt=dt, bias_shape=bias_shape, beta=beta, alpha=alpha, lay=lay):
                c = new_case("baddbmm", "matmul", dt, lay)
                nan = torch.full(bias_shape, float("nan"), dtype=DT[dt]) if lay == "nan_bias" else None
                bias = tensor_arg(c, bias_shape, dt, value=nan)
                op_lay = "contiguous" if lay == "nan_bias" else lay
                a = tensor_arg(c, [2, 3, 5], dt, op_lay)
                b = tensor_arg(c, [2, 5, 4], dt, op_lay)
                emit(c, [bias.enc, a.enc, b.enc, scalar_enc(beta), scalar_enc(alpha)],
                     aten.baddbmm(bias.value, a.value, b.value, beta=beta, alpha=alpha))
            attempt("baddbmm", b_bmm)
        for bias_shape, beta, alpha, lay in (([6], 1, 1, "contiguous"), ([1], 0.5, 2, "transposed"),
                                             ([], 1, -1, "contiguous"), ([6], 0, 1, "nan_bias")):
            def b_mv(dt=dt, bias_shape=bias_shape, beta=beta, alpha=alpha, lay=lay):
                c = new_case("addmv", "matmul", dt, lay)
                nan = torch.full(bias_shape, float("nan"), dtype=DT[dt]) if lay == "nan_bias" else None
                bias = tensor_arg(c, bias_shape, dt, value=nan)
                mat = tensor_arg(c, [6, 7], dt, "contiguous" if lay == "nan_bias" else lay)
                vec = tensor_arg(c, [7], dt)
                emit(c, [bias.enc, mat.enc, vec.enc, scalar_enc(beta), scalar_enc(alpha)],
                     aten.addmv(bias.value, mat.value, vec.value, beta=beta, alpha=alpha))
            attempt("addmv", b_mv)

        def b_mm(dt=dt):
            c = new_case("addmm", "matmul", dt, "nan_bias")
            bias = tensor_arg(c, [3, 4], dt, value=torch.full([3, 4], float("nan"), dtype=DT[dt]))
            a = tensor_arg(c, [3, 5], dt)
            b = tensor_arg(c, [5, 4], dt)
            emit(c, [bias.enc, a.enc, b.enc, scalar_enc(0), scalar_enc(1)], aten.addmm(bias.value, a.value, b.value, beta=0))
        attempt("addmm", b_mm)


def build_conv_device():
    """The device convolution (`kernels/conv.rs`): `convolution_overrideable` and its backward, which
    PyTorch sends every PrivateUse1 convolution to; expected values from `aten.convolution` and
    `aten.convolution_backward` (the CPU has no overrideable kernels). 1-, 2-, 3-d, groups, stride,
    padding, dilation, transposed with output_padding."""
    configs = [
        # (input, weight, bias?, stride, padding, dilation, transposed, output_padding, groups)
        ([2, 4, 11], [6, 2, 3], True, [2], [1], [2], False, [0], 2),
        ([2, 3, 7, 6], [4, 3, 3, 3], True, [1, 1], [1, 1], [1, 1], False, [0, 0], 1),
        ([1, 4, 9, 7], [4, 1, 3, 2], False, [2, 1], [1, 0], [1, 2], False, [0, 0], 4),
        ([1, 2, 5, 6, 4], [3, 2, 2, 3, 2], True, [1, 2, 1], [1, 1, 0], [1, 1, 1], False, [0, 0, 0], 1),
        ([2, 4, 6], [4, 1, 3], True, [2], [1], [1], True, [1], 2),
        ([2, 3, 5, 4], [3, 4, 3, 3], True, [2, 2], [1, 1], [1, 1], True, [1, 0], 1),
        ([1, 2, 3, 4, 2], [2, 2, 2, 2, 2], False, [2, 2, 2], [0, 0, 0], [1, 1, 1], True, [0, 0, 0], 1),
    ]
    for dt in ["f32", "f64", "f16", "bf16"]:
        for (xs, ws, has_b, st, pd, dl, tr, op, g) in configs:
            out_c = ws[1] * g if tr else ws[0]

            def fwd(c, dt=dt, xs=xs, ws=ws, has_b=has_b, st=st, pd=pd, dl=dl, tr=tr, op=op, g=g, out_c=out_c):
                x = tensor_arg(c, xs, dt)
                w = tensor_arg(c, ws, dt)
                b = tensor_arg(c, [out_c], dt) if has_b else None
                args = [x.enc, w.enc, b.enc if b else None, {"il": st}, {"il": pd}, {"il": dl}, {"b": tr},
                        {"il": op}, {"i": g}]
                return args, aten.convolution(x.value, w.value, b.value if b else None, st, pd, dl, tr, op, g)
            case("convolution_overrideable", "matmul", dt, "contiguous", fwd)

            def bwd(c, dt=dt, xs=xs, ws=ws, st=st, pd=pd, dl=dl, tr=tr, op=op, g=g, out_c=out_c):
                x = tensor_arg(c, xs, dt)
                w = tensor_arg(c, ws, dt)
                out = aten.convolution(x.value, w.value, None, st, pd, dl, tr, op, g)
                gy = tensor_arg(c, list(out.shape), dt)
                args = [gy.enc, x.enc, w.enc, {"il": st}, {"il": pd}, {"il": dl}, {"b": tr}, {"il": op}, {"i": g},
                        {"bl": [True, True, True]}]
                return args, aten.convolution_backward(gy.value, x.value, w.value, [out_c], st, pd, dl, tr, op, g,
                                                       [True, True, True])
            case("convolution_backward_overrideable", "matmul", dt, "contiguous", bwd)


def build_cnn_device():
    """The device kernels a CNN step needs besides convolution (`kernels/norm.rs`, `kernels/pool.rs`,
    `kernels/elementwise.rs`, `kernels/reduce.rs`): `native_batch_norm` (training with and without
    running statistics, evaluation) and its backward (training and evaluation), hardswish,
    hardsigmoid, isneginf, `all.dim` and more `pow.Tensor_Scalar` exponents. Appended after every
    other builder, so the earlier cases keep their inputs."""
    eps, mom = 1e-5, 0.1
    for dt in FLOATS:
        def bn_train(c, dt=dt):
            x = tensor_arg(c, [4, 3, 5, 2], dt)
            w, b = tensor_arg(c, [3], dt), tensor_arg(c, [3], dt)
            m, v = tensor_arg(c, [3], dt), tensor_arg(c, [3], dt, kind="positive")
            rm, rv = m.value.clone(), v.value.clone()
            out = aten.native_batch_norm(x.value, w.value, b.value, rm, rv, True, mom, eps)
            return [x.enc, w.enc, b.enc, m.enc, v.enc, {"b": True}, {"f": mom}, {"f": eps}], out
        case("native_batch_norm", "norm", dt, "contiguous", bn_train)

        def bn_no_stats(c, dt=dt):
            x = tensor_arg(c, [5, 4, 3], dt)
            out = aten.native_batch_norm(x.value, None, None, None, None, True, mom, eps)
            return [x.enc, None, None, None, None, {"b": True}, {"f": mom}, {"f": eps}], out
        case("native_batch_norm", "norm", dt, "contiguous", bn_no_stats)

        def bn_eval(c, dt=dt):
            x = tensor_arg(c, [3, 4, 2, 2], dt)
            w, b = tensor_arg(c, [4], dt), tensor_arg(c, [4], dt)
            m, v = tensor_arg(c, [4], dt), tensor_arg(c, [4], dt, kind="positive")
            out = aten.native_batch_norm(x.value, w.value, b.value, m.value, v.value, False, mom, eps)
            return [x.enc, w.enc, b.enc, m.enc, v.enc, {"b": False}, {"f": mom}, {"f": eps}], out
        case("native_batch_norm", "norm", dt, "contiguous", bn_eval)

        def bn_bwd_train(c, dt=dt):
            x = tensor_arg(c, [4, 3, 3, 2], dt)
            w = tensor_arg(c, [3], dt)
            _, sm, si = aten.native_batch_norm(x.value, w.value, None, None, None, True, mom, eps)
            g = tensor_arg(c, [4, 3, 3, 2], dt)
            smv, siv = tensor_arg(c, [3], dt, value=sm), tensor_arg(c, [3], dt, value=si)
            out = aten.native_batch_norm_backward(g.value, x.value, w.value, None, None, sm, si, True, eps,
                                                  [True, True, True])
            return [g.enc, x.enc, w.enc, None, None, smv.enc, siv.enc, {"b": True}, {"f": eps},
                    {"bl": [True, True, True]}], out
        case("native_batch_norm_backward", "norm", dt, "contiguous", bn_bwd_train)

        def bn_bwd_eval(c, dt=dt):
            x = tensor_arg(c, [3, 2, 5], dt)
            w = tensor_arg(c, [2], dt)
            m, v = tensor_arg(c, [2], dt), tensor_arg(c, [2], dt, kind="positive")
            g = tensor_arg(c, [3, 2, 5], dt)
            out = aten.native_batch_norm_backward(g.value, x.value, w.value, m.value, v.value, None, None, False, eps,
                                                  [True, True, True])
            return [g.enc, x.enc, w.enc, m.enc, v.enc, None, None, {"b": False}, {"f": eps},
                    {"bl": [True, True, True]}], out
        case("native_batch_norm_backward", "norm", dt, "contiguous", bn_bwd_eval)

    unary("hardswish", "transcendental", aten.hardswish, FLOATS)
    unary("hardsigmoid", "transcendental", aten.hardsigmoid, FLOATS)
    for dt in FLOATS:
        def neginf(c, dt=dt):
            v = rand([4, 5], "f64").to(DT[dt])
            v[0, 1], v[1, 2], v[2, 3], v[3, 4] = float("-inf"), float("inf"), float("nan"), -0.0
            x = tensor_arg(c, [4, 5], dt, value=v)
            return [x.enc], aten.isneginf(x.value)
        case("isneginf", "compare", dt, "contiguous", neginf)
    for dt in FLOATS + INTS + ["bool"]:
        def all_dim(c, dt=dt):
            v = rand([3, 4, 2], dt)
            if dt != "bool":
                v = (v > -1.0).to(DT[dt]) if dt in FLOATS else v
                v.view(-1)[::5] = 0
            x = tensor_arg(c, [3, 4, 2], dt, value=v)
            return [x.enc, {"i": 1}, {"b": False}], aten.all.dim(x.value, 1, False)
        case("all.dim", "compare", dt, "contiguous", all_dim)
    binary_scalar("pow.Tensor_Scalar", "transcendental", aten.pow.Tensor_Scalar, FLOATS, [-1, -0.5, 2.5])


def keep_committed_tensors():
    """The committed outputs of the cases that already existed stay as they are (the CPU's vector
    unit moves a few last bits between machines); only new tensors come from this run."""
    path = os.path.join(HERE, "cases.safetensors")
    if not os.path.exists(path):
        return
    from safetensors import safe_open
    with safe_open(path, framework="pt") as f:
        for k in f.keys():
            if k in tensors:
                old = f.get_tensor(k)
                if old.shape == tensors[k].shape and old.dtype == tensors[k].dtype:
                    tensors[k] = old


def main():
    torch.manual_seed(0)
    build_elementwise()
    build_matmul()
    build_reductions()
    build_nn()
    build_index()
    build_views()
    build_math()
    build_core()
    build_core_more()
    build_triangles()
    build_bias_products()
    build_conv_device()
    build_cnn_device()
    keep_committed_tensors()
    save_file(tensors, os.path.join(HERE, "cases.safetensors"))
    index = {"torch": torch.__version__, "count": len(cases), "skipped": dict(sorted(skipped.items())), "cases": cases}
    with open(os.path.join(HERE, "index.json"), "w") as f:
        f.write('{"torch": %s, "count": %d, "skipped": %s, "cases": [\n' % (
            json.dumps(index["torch"]), index["count"], json.dumps(index["skipped"], sort_keys=True)))
        f.write(",\n".join(json.dumps(c, separators=(",", ":")) for c in cases))
        f.write("\n]}\n")
    build_mlp_golden()
    ops = sorted({c["op"] for c in cases})
    print(f"{len(cases)} cases, {len(ops)} operators, {len(tensors)} tensors; skipped {sum(skipped.values())}")


if __name__ == "__main__":
    main()
