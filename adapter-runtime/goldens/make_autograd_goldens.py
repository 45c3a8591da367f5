#!/usr/bin/env python3
"""Backward goldens for the xirang autograd engine, produced by real PyTorch (CPU).

    python3 -m venv /tmp/tv && /tmp/tv/bin/pip install torch numpy safetensors
    /tmp/tv/bin/python adapter-runtime/goldens/make_autograd_goldens.py

For every differentiable forward operator that the runtime's autograd engine can run (the operators
of ``tests/serial/autograd_gradcheck.rs``: a fully translated backward node and a kernel or recipe), in
f32, f16 and bf16 and a few layouts (contiguous; transposed views; broadcast operands for binary
operators), a case holds fixed-seed inputs, a fixed upstream gradient for each differentiable
output, and ``torch.autograd.grad`` of the operator (called as ``torch.ops.aten.<op>.<overload>``,
so PyTorch's own derivatives.yaml formulas) with respect to every differentiable input.

Writes, next to this script:

* ``autograd_cases.safetensors``: inputs, upstream gradients and expected gradients, named
  ``c<id>.t<slot>``;
* ``autograd_index.json``: one record per case: ``op``, ``class`` (a key of ``tolerances.json``),
  ``dtype``, ``layout``, ``args`` (boxed arguments in schema order, the encoding of
  ``make_goldens.py``), ``inputs`` (indices into ``args`` of the differentiable inputs, which
  require grad), ``grad_outputs`` (``[output index, tensor]``: the upstream gradients) and
  ``grads`` (the expected gradient of each input of ``inputs``; an input PyTorch leaves without a
  gradient gets zeros).

``tests/serial/autograd_goldens.rs`` records each case through the engine on the simulated device, runs
backward with the upstream gradients and compares every input's gradient. Deterministic inputs
(fixed seeds, one generator per block of cases); the expected gradients move in their last bits with
the CPU's vector unit, as ``make_goldens.py`` says (4 of 3,099 tensors on an AVX-512 machine with
``ATEN_CPU_CAPABILITY=avx2``): when cases are added, keep the committed tensors and merge the new ones in.
"""

import json
import os
import sys

import torch
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_goldens as mg  # noqa: E402  (argument encoding, tensor layouts, value generator)

aten = torch.ops.aten
DTYPES = ["f32", "f16", "bf16"]

cases = []
skipped = []


# ---------------------------------------------------------------- argument specs
#
# An operator's arguments, in schema order (every argument, defaults included: the engine records
# from the full boxed argument list):
#   T(shape, kind, layout)  a differentiable input of the case dtype (requires grad)
#   F(make)                 a tensor without grad: make(case, dt) -> mg.Arg
#   V(enc, value)           a non-tensor argument: its boxed encoding and the Python value


class T:
    def __init__(self, *shape, kind="normal", layout="contiguous", value=None):
        self.shape, self.kind, self.layout, self.value = list(shape), kind, layout, value


def P(*shape, layout="contiguous"):
    """A positive differentiable input (log, sqrt, divisors)."""
    return T(*shape, kind="positive", layout=layout)


class TL:
    """A differentiable ``Tensor[]`` (``cat``): every element requires grad."""

    def __init__(self, *elems):
        self.elems = list(elems)


class F:
    def __init__(self, make):
        self.make = make


class V:
    def __init__(self, enc, value):
        self.enc, self.value = enc, value


def S(v):
    return V(mg.scalar_enc(v), v)


def I(v):  # noqa: E743
    return V({"i": v}, v)


def B(v):
    return V({"b": v}, v)


def IL(v):
    return V({"il": v}, v)


def FL(v):
    return V({"f": v}, v)


def STR(v):
    return V({"str": v}, v)


NONE = V(None, None)


def BL(v):
    return V({"bl": v}, v)


class D:
    """A tensor without grad computed from the values before it: make(values) -> torch.Tensor
    (``native_layer_norm_backward``'s mean and rstd are its input's statistics)."""

    def __init__(self, make):
        self.make = make


def layer_norm_stat(k, n):
    """Output k (1: mean, 2: rstd) of ``native_layer_norm(values[1], [n], eps=1e-5)``."""
    return D(lambda values: aten.native_layer_norm(values[1].detach(), [n], None, None, 1e-5)[k])


def mask(*shape):
    return F(lambda c, dt: mg.tensor_arg(c, list(shape), "bool"))


def target(n, ncls):
    def make(c, dt):
        t = torch.randint(0, ncls, [n], generator=mg.gen)
        if n > 2:
            t[1] = -100  # ignore_index
        return mg.tensor_arg(c, [n], "i64", value=t)

    return F(make)


def indices(shape, n):
    """int64 indices in [0, n), with repeats (so gradient rows accumulate) and the value 2 present."""

    def make(c, dt):
        t = torch.randint(0, n, shape, generator=mg.gen)
        t.view(-1)[0] = 2
        t.view(-1)[-1] = t.view(-1)[1]
        return mg.tensor_arg(c, list(shape), "i64", value=t)

    return F(make)


def total_weight(n, ncls):
    """``nll_loss_forward``'s second output for ``target(n, ncls)`` without class weights: the
    number of targets that are not ignored (the target helper sets one to -100 when n > 2)."""

    def make(c, dt):
        return mg.tensor_arg(c, [], dt, value=torch.tensor(float(n - 1 if n > 2 else n)).to(mg.DT[dt]))

    return F(make)


def weight(ncls):
    return F(lambda c, dt: mg.tensor_arg(c, [ncls], dt, kind="positive"))


def log_probs(n, ncls):
    return T(n, ncls, value=lambda dt: torch.log_softmax(mg.rand([n, ncls], dt).double(), 1).to(mg.DT[dt]))


def resolve(op):
    base, _, overload = op.partition(".")
    return getattr(getattr(aten, base), overload or "default")


def call(op, values):
    """Calls the ATen overload with boxed-order values (kwarg-only arguments by name)."""
    overload = resolve(op)
    pos, kw = [], {}
    for a, v in zip(overload._schema.arguments, values):
        if a.kwarg_only:
            kw[a.name] = v
        else:
            pos.append(v)
    return overload(*pos, **kw)


# ---------------------------------------------------------------- the operators
#
# Tolerance class per operator (tolerances.json): the class of the computation its backward does.
# Cases whose gradient sums over broadcast dimensions use `reduce`.

UNARY = [
    # (op, class, kind, extra arguments)
    ("abs", "arith", "normal", []),
    ("neg", "arith", "normal", []),
    ("relu", "arith", "normal", []),
    ("clone", "arith", "normal", [NONE]),
    ("exp", "transcendental", "normal", []),
    ("expm1", "transcendental", "normal", []),
    ("log", "transcendental", "positive", []),
    ("log2", "transcendental", "positive", []),
    ("log10", "transcendental", "positive", []),
    ("sqrt", "transcendental", "positive", []),
    ("rsqrt", "power_of_result", "positive", []),  # backward: result.pow(3) (tolerances.json)
    ("reciprocal", "transcendental", "positive", []),
    ("tanh", "transcendental", "normal", []),
    ("sigmoid", "transcendental", "normal", []),
    ("silu", "transcendental", "normal", []),
    ("elu", "transcendental", "normal", [S(1), S(1), S(1)]),
    ("hardsigmoid", "arith", "normal", []),
    ("hardswish", "arith", "normal", []),
    ("hardtanh", "arith", "normal", [S(-1), S(1)]),
    ("leaky_relu", "arith", "normal", [S(0.1)]),
    ("add.Scalar", "arith", "normal", [S(0.5), S(1)]),
    ("sub.Scalar", "arith", "normal", [S(0.5), S(1)]),
    ("rsub.Scalar", "arith", "normal", [S(0.5), S(1)]),
    ("sum", "arith", "normal", [NONE]),
    ("mean", "arith", "normal", [NONE]),
    ("sign", "arith", "normal", []),
    ("sin", "transcendental", "normal", []),
    ("cos", "transcendental", "normal", []),
    ("tan", "transcendental", "small", []),
    ("asin", "transcendental", "unit", []),
    ("acos", "transcendental", "unit", []),
    ("atan", "transcendental", "normal", []),
    ("sinh", "transcendental", "normal", []),
    ("cosh", "transcendental", "normal", []),
    ("asinh", "transcendental", "normal", []),
    ("atanh", "transcendental", "unit", []),
    ("ceil", "arith", "normal", []),
    ("floor", "arith", "normal", []),
    ("round", "arith", "normal", []),
    ("trunc", "arith", "normal", []),
    ("fmod.Scalar", "arith", "normal", [S(1.5)]),
    ("remainder.Scalar", "arith", "normal", [S(1.5)]),
    # hand-written hooks (`impl BackwardHooks for NpuOps`)
    ("erf", "transcendental", "normal", []),
    ("log1p", "transcendental", "positive", []),
    ("clamp_min", "arith", "normal", [S(0.0)]),
    ("clamp_max", "arith", "normal", [S(0.0)]),
]

BINARY = [
    # (op, class, kind of the second operand, extra arguments)
    ("add.Tensor", "arith", "normal", [S(0.5)]),
    ("sub.Tensor", "arith", "normal", [S(2)]),
    ("rsub.Tensor", "arith", "normal", [S(3)]),
    ("mul.Tensor", "arith", "normal", []),
    ("div.Tensor", "arith", "positive", []),
    ("sigmoid_backward", "transcendental", "normal", []),
    ("tanh_backward", "transcendental", "normal", []),
    ("threshold_backward", "arith", "normal", [S(0)]),
    ("maximum", "arith", "normal", []),
    ("minimum", "arith", "normal", []),
    ("hardtanh_backward", "arith", "normal", [S(-1), S(1)]),
    ("leaky_relu_backward", "arith", "normal", [S(0.1), B(False)]),
]


def specs():
    """(op, class, layout, [argument spec]) for every case shape (the dtype loop is outside)."""
    out = []
    for op, cls, kind, extra in UNARY:
        out.append((op, cls, "contiguous", [T(16, 24, kind=kind)] + extra))
        out.append((op, cls, "transposed", [T(5, 7, kind=kind, layout="transposed")] + extra))
    for op, cls, kind, extra in BINARY:
        out.append((op, cls, "contiguous", [T(16, 24), T(16, 24, kind=kind)] + extra))
        out.append((op, cls, "transposed", [T(5, 7, layout="transposed"), T(5, 7, kind=kind)] + extra))
        out.append((op, "reduce", "broadcast", [T(6, 8), T(8, kind=kind)] + extra))
        out.append((op, "reduce", "broadcast", [T(6, 1), T(6, 8, kind=kind)] + extra))
    out += [
        ("addcmul", "arith", "contiguous", [T(6, 8), T(6, 8), T(6, 8), S(2.0)]),
        ("addcmul", "reduce", "broadcast", [T(8), T(6, 8), T(6, 1), S(0.5)]),
        ("addcdiv", "arith", "contiguous", [T(6, 8), T(6, 8), P(6, 8), S(0.5)]),
        ("addcdiv", "reduce", "broadcast", [T(6, 8), T(6, 1), P(8), S(2.0)]),
        ("lerp.Tensor", "arith", "contiguous", [T(6, 8), T(6, 8), T(6, 8)]),
        ("lerp.Tensor", "reduce", "broadcast", [T(6, 8), T(8), T(6, 1)]),
        ("mm", "matmul", "contiguous", [T(8, 32), T(32, 6)]),
        ("mm", "matmul", "transposed", [T(5, 7, layout="transposed"), T(7, 4, layout="transposed")]),
        ("bmm", "matmul", "contiguous", [T(2, 5, 12), T(2, 12, 4)]),
        ("addmm", "matmul", "contiguous", [T(6, 5), T(6, 16), T(16, 5), S(1), S(1)]),
        ("addmm", "matmul", "broadcast", [T(5), T(6, 16), T(16, 5), S(0.5), S(2)]),
        ("baddbmm", "matmul", "contiguous", [T(2, 3, 5), T(2, 3, 8), T(2, 8, 5), S(1), S(1)]),
        ("baddbmm", "matmul", "broadcast", [T(5), T(2, 3, 8), T(2, 8, 5), S(2), S(0.5)]),
        ("dot", "matmul", "contiguous", [T(33), T(33)]),
        ("t", "arith", "contiguous", [T(5, 7)]),
        ("t", "arith", "transposed", [T(5, 7, layout="transposed")]),
        ("transpose.int", "arith", "contiguous", [T(2, 3, 4), I(0), I(2)]),
        ("unsqueeze", "arith", "contiguous", [T(3, 4), I(1)]),
        ("select.int", "arith", "contiguous", [T(3, 4), I(1), I(2)]),
        ("select.int", "arith", "transposed", [T(4, 5, layout="transposed"), I(0), I(-1)]),
        ("expand", "reduce", "contiguous", [T(3, 1), IL([2, 3, 4]), B(False)]),
        ("sum", "arith", "contiguous", [T(2, 3, 4), NONE]),
        ("_softmax", "softmax", "contiguous", [T(6, 10), I(1), B(False)]),
        ("_softmax", "softmax", "contiguous", [T(6, 10), I(0), B(False)]),
        ("_log_softmax", "softmax", "contiguous", [T(6, 10), I(1), B(False)]),
        ("_log_softmax", "softmax", "contiguous", [T(6, 10), I(0), B(False)]),
        ("where.self", "arith", "contiguous", [mask(6, 8), T(6, 8), T(6, 8)]),
        ("where.self", "reduce", "broadcast", [mask(8), T(6, 1), T(6, 8)]),
        ("masked_fill.Scalar", "arith", "contiguous", [T(6, 8), mask(6, 8), S(0.25)]),
        ("masked_fill.Scalar", "arith", "broadcast", [T(6, 8), mask(8), S(-1.5)]),
        ("mse_loss", "loss", "contiguous", [T(6, 8), T(6, 8), I(0)]),
        ("mse_loss", "loss", "contiguous", [T(6, 8), T(6, 8), I(1)]),
        ("mse_loss", "loss", "contiguous", [T(6, 8), T(6, 8), I(2)]),
        ("nll_loss_forward", "loss", "contiguous", [log_probs(7, 5), target(7, 5), NONE, I(1), I(-100)]),
        ("nll_loss_forward", "loss", "contiguous", [log_probs(7, 5), target(7, 5), weight(5), I(1), I(-100)]),
        ("nll_loss_forward", "loss", "contiguous", [log_probs(7, 5), target(7, 5), NONE, I(0), I(-100)]),
        ("nll_loss_forward", "loss", "contiguous", [log_probs(7, 5), target(7, 5), weight(5), I(2), I(-100)]),
        # translated for the transformer block (session 4)
        ("gelu", "transcendental", "contiguous", [T(16, 24), STR("none")]),
        ("gelu", "transcendental", "contiguous", [T(16, 24), STR("tanh")]),
        ("gelu", "transcendental", "transposed", [T(5, 7, layout="transposed"), STR("none")]),
        ("mul.Scalar", "arith", "contiguous", [T(16, 24), S(2.5)]),
        ("mul.Scalar", "arith", "transposed", [T(5, 7, layout="transposed"), S(-3)]),
        ("div.Scalar", "arith", "contiguous", [T(16, 24), S(4.0)]),
        ("div.Scalar", "arith", "transposed", [T(5, 7, layout="transposed"), S(3)]),
        ("sum.dim_IntList", "reduce", "contiguous", [T(4, 6, 5), IL([1]), B(False), NONE]),
        ("sum.dim_IntList", "reduce", "contiguous", [T(4, 6, 5), IL([0, 2]), B(True), NONE]),
        ("sum.dim_IntList", "reduce", "transposed", [T(5, 7, layout="transposed"), IL([-1]), B(False), NONE]),
        ("mean.dim", "reduce", "contiguous", [T(4, 6, 5), IL([1]), B(False), NONE]),
        ("mean.dim", "reduce", "contiguous", [T(4, 6, 5), IL([0, 2]), B(True), NONE]),
        ("mean.dim", "reduce", "transposed", [T(5, 7, layout="transposed"), IL([0]), B(False), NONE]),
        ("native_layer_norm", "norm", "contiguous", [T(6, 16), IL([16]), T(16), T(16), FL(1e-5)]),
        ("native_layer_norm", "norm", "contiguous", [T(2, 3, 8), IL([3, 8]), T(3, 8), T(3, 8), FL(1e-5)]),
        ("native_layer_norm", "norm", "contiguous", [T(6, 16), IL([16]), NONE, NONE, FL(1e-5)]),
        ("embedding", "reduce", "contiguous", [T(10, 8), indices([3, 5], 10), I(-1), B(False), B(False)]),
        ("embedding", "reduce", "contiguous", [T(10, 8), indices([12], 10), I(2), B(False), B(False)]),
    ]
    # translated once the translator took `M_LN2`, `is_complex()` conditions, string literals,
    # `.to(dtype)` and the helpers of `autograd/helpers.rs` (session 6); appended, so the
    # generator sequence of the cases above is unchanged
    for op, cls, kind, extra in [
        ("acosh", "transcendental", "ge1", []),
        ("exp2", "transcendental", "normal", []),
        ("sgn", "arith", "normal", []),
    ]:
        out.append((op, cls, "contiguous", [T(16, 24, kind=kind)] + extra))
        out.append((op, cls, "transposed", [T(5, 7, kind=kind, layout="transposed")] + extra))
    for op, cls, kind, extra in [
        ("atan2", "transcendental", "normal", []),
        ("fmod.Tensor", "arith", "positive", []),
        ("remainder.Tensor", "arith", "positive", []),
    ]:
        out.append((op, cls, "contiguous", [T(16, 24), T(16, 24, kind=kind)] + extra))
        out.append((op, cls, "transposed", [T(5, 7, layout="transposed"), T(5, 7, kind=kind)] + extra))
        out.append((op, "reduce", "broadcast", [T(6, 8), T(8, kind=kind)] + extra))
    out += [
        ("lerp.Scalar", "arith", "contiguous", [T(6, 8), T(6, 8), S(0.3)]),
        ("lerp.Scalar", "arith", "transposed", [T(5, 7, layout="transposed"), T(5, 7), S(-1.5)]),
        ("amax", "reduce", "contiguous", [T(4, 6, 5), IL([1]), B(False)]),
        ("amax", "reduce", "contiguous", [T(4, 6, 5), IL([0, 2]), B(True)]),
        ("amax", "reduce", "contiguous", [T(6, 8, kind="halves"), IL([]), B(False)]),  # ties share
        ("mv", "matmul", "contiguous", [T(6, 16), T(16)]),
        ("mv", "matmul", "transposed", [T(5, 7, layout="transposed"), T(7)]),
        ("addmv", "matmul", "contiguous", [T(6), T(6, 16), T(16), S(1), S(1)]),
        ("addmv", "matmul", "broadcast", [T(1), T(6, 16), T(16), S(0.5), S(2)]),
        ("gather", "reduce", "contiguous", [T(6, 8), I(1), indices([6, 5], 8), B(False)]),
        ("gather", "reduce", "contiguous", [T(6, 8), I(0), indices([9, 8], 6), B(False)]),
        ("index_select", "reduce", "contiguous", [T(10, 8), I(0), indices([12], 10)]),
        ("index_select", "reduce", "transposed", [T(5, 7, layout="transposed"), I(1), indices([9], 5)]),
        ("cat", "arith", "contiguous", [TL(T(3, 8), T(5, 8), T(1, 8)), I(0)]),
        ("cat", "arith", "transposed", [TL(T(5, 7, layout="transposed"), T(5, 3)), I(-1)]),
        # dropout: PyTorch's random mask cannot be reproduced; the deterministic settings check
        # the formula's scale (p = 0 training: mask all ones; not training: scale 1)
        ("native_dropout", "arith", "contiguous", [T(16, 24), FL(0.0), B(True)]),
        ("native_dropout", "arith", "contiguous", [T(16, 24), FL(0.5), B(False)]),
        ("_softmax_backward_data", "softmax", "contiguous",
         [T(6, 10), T(6, 10, value=lambda dt: torch.softmax(mg.rand([6, 10], dt).double(), 1).to(mg.DT[dt])),
          I(1), V({"dtype": "same"}, None)]),
        ("_log_softmax_backward_data", "softmax", "contiguous",
         [T(6, 10), T(6, 10, value=lambda dt: torch.log_softmax(mg.rand([6, 10], dt).double(), 1).to(mg.DT[dt])),
          I(1), V({"dtype": "same"}, None)]),
        ("elu_backward", "transcendental", "contiguous", [T(16, 24), S(1.0), S(1.0), S(1.0), B(False), T(16, 24)]),
        ("elu_backward", "transcendental", "contiguous", [T(16, 24), S(0.7), S(1.2), S(0.9), B(False), T(16, 24)]),
        ("gelu_backward", "transcendental", "contiguous", [T(16, 24), T(16, 24), STR("none")]),
        ("gelu_backward", "cancellation", "contiguous", [T(16, 24), T(16, 24), STR("tanh")]),  # tolerances.json
        ("hardswish_backward", "arith", "contiguous", [T(16, 24), T(16, 24)]),
        ("mse_loss_backward", "loss", "contiguous", [T(), T(6, 8), T(6, 8), I(1)]),
        ("mse_loss_backward", "loss", "contiguous", [T(6, 8), T(6, 8), T(6, 8), I(0)]),
        ("embedding_dense_backward", "reduce", "contiguous",
         [T(3, 5, 8), indices([3, 5], 10), I(10), I(-1), B(False)]),
        ("embedding_dense_backward", "reduce", "contiguous",
         [T(12, 8), indices([12], 10), I(10), I(2), B(False)]),
        ("nll_loss_backward", "loss", "contiguous",
         [T(), log_probs(7, 5), target(7, 5), NONE, I(1), I(-100), total_weight(7, 5)]),
        ("nll_loss_backward", "loss", "contiguous",
         [T(7), log_probs(7, 5), target(7, 5), NONE, I(0), I(-100), total_weight(7, 5)]),
    ]
    return out


def extra_specs():
    """Cases added after the first set, drawn from their own generator (so the earlier cases keep
    their values): the double backwards of layer norm and dropout."""
    return [
        # `layer_norm_double_backward`; mean and rstd are the input's own statistics
        ("native_layer_norm_backward", "norm", "contiguous",
         [T(6, 16), T(6, 16), IL([16]), layer_norm_stat(1, 16), layer_norm_stat(2, 16), T(16), T(16),
          BL([True, True, True])]),
        # a masked-off result is an undefined tensor in PyTorch, which the runtime's typed results
        # cannot carry: every case asks for all three (the bias's gradient is `Tensor()`: none)
        ("native_layer_norm_backward", "norm", "contiguous",
         [T(2, 3, 8), T(2, 3, 8), IL([8]), layer_norm_stat(1, 8), layer_norm_stat(2, 8), T(8), T(8),
          BL([True, True, True])]),
        # the mask is PyTorch's `not_implemented`: fixed
        ("native_dropout_backward", "arith", "contiguous", [T(16, 24), mask(16, 24), FL(2.0)]),
    ]


def kink_specs():
    """clamp_min / clamp_max at their kink, added with the upgrade to PyTorch 2.15 (after every other
    case, own generator): 2.15's formulas are `where(self > min, grad, 0)` and `where(self < max,
    grad, 0)` (2.3 had `>=` / `<=`), so the gradient at the bound is 0."""
    return [
        ("clamp_min", "arith", "contiguous", [T(8, value=kinks), S(0.0)]),
        ("clamp_max", "arith", "contiguous", [T(8, value=kinks), S(0.0)]),
    ]


def view_specs():
    """Views the adapter serves without a kernel launch (`view`, `permute`, `_unsafe_view`: marked
    kernels since the native tier is generated), added after every other case with their own
    generator: their backward reshapes or permutes the gradient."""
    return [
        ("view", "arith", "contiguous", [T(4, 6), IL([2, 12])]),
        ("view", "arith", "contiguous", [T(2, 3, 4), IL([-1, 4])]),
        ("permute", "arith", "contiguous", [T(2, 3, 4), IL([2, 0, 1])]),
        ("permute", "arith", "transposed", [T(5, 7, layout="transposed"), IL([1, 0])]),
        ("_unsafe_view", "arith", "contiguous", [T(3, 8), IL([6, 4])]),
    ]


def triangle_specs():
    """`tril` / `triu` (native kernels), added after every other case with their own generator: the
    backward keeps the same triangle of the gradient."""
    return [
        ("tril", "arith", "contiguous", [T(5, 7), I(0)]),
        ("tril", "arith", "transposed", [T(2, 6, 4, layout="transposed"), I(-1)]),
        ("triu", "arith", "contiguous", [T(6, 5), I(2)]),
        ("triu", "arith", "transposed", [T(3, 5, 6, layout="transposed"), I(-2)]),
    ]


def cnn_specs():
    """Max pooling and `pow.Tensor_Scalar`, translated once their forward became device kernels
    (`kernels/pool.rs`, `kernels/elementwise.rs`), added after every other case with their own
    generator: the backward scatters the gradient to each window's maximum, and
    `grad * exponent * self.pow(exponent - 1)`. Overlapping windows sum their gradients into one
    input (`reduce`: CPU adds in the storage dtype, the device in float32)."""
    return [
        ("max_pool2d_with_indices", "reduce", "contiguous",
         [T(2, 3, 7, 6), IL([3, 3]), IL([2, 1]), IL([1, 1]), IL([1, 1]), B(True)]),
        ("max_pool2d_with_indices", "arith", "contiguous",
         [T(3, 6, 6), IL([2]), IL([]), IL([0]), IL([1]), B(False)]),
        ("pow.Tensor_Scalar", "transcendental", "contiguous", [T(16, 24, kind="positive"), S(2.5)]),
        ("pow.Tensor_Scalar", "transcendental", "contiguous", [T(16, 24), S(3)]),
        ("pow.Tensor_Scalar", "transcendental", "transposed", [T(5, 7, kind="positive", layout="transposed"), S(-0.5)]),
    ]


def kinks(dt):
    """Values at and around 0: the bound itself (twice, and -0.0), both sides, NaN."""
    return torch.tensor([-1.0, -0.5, 0.0, 0.0, -0.0, 0.5, 1.0, float("nan")], dtype=mg.DT[dt])


# ---------------------------------------------------------------- cases


def build(op, cls, layout, spec, dt):
    c = mg.Case(op, cls, dt, layout)
    c.id = len(cases)
    args, values, inputs, leaves = [], [], [], []
    for k, a in enumerate(spec):
        if isinstance(a, T):
            value = a.value(dt) if callable(a.value) else None
            arg = mg.tensor_arg(c, a.shape, dt, a.layout, kind=a.kind, value=value)
            leaf = arg.value.detach().requires_grad_(True)
            args.append(arg.enc)
            values.append(leaf)
            inputs.append(k)
            leaves.append(leaf)
        elif isinstance(a, TL):
            encs, elems = [], []
            for e in a.elems:
                arg = mg.tensor_arg(c, e.shape, dt, e.layout, kind=e.kind)
                leaf = arg.value.detach().requires_grad_(True)
                encs.append(arg.enc)
                elems.append(leaf)
                leaves.append(leaf)
            args.append({"TL": encs})
            values.append(elems)
            inputs.append(k)
        elif isinstance(a, V) and a.enc == {"dtype": "same"}:
            # `input_dtype` of the softmax backward operators: the case dtype
            args.append({"dtype": dt})
            values.append(mg.DT[dt])
        elif isinstance(a, D):
            t = a.make(values)
            arg = mg.tensor_arg(c, list(t.shape), mg.NAME[t.dtype], value=t)
            args.append(arg.enc)
            values.append(arg.value)
        elif isinstance(a, F):
            arg = a.make(c, dt)
            args.append(arg.enc)
            values.append(arg.value)
        else:
            args.append(a.enc)
            values.append(a.value)
    res = call(op, values)
    res = [res] if isinstance(res, torch.Tensor) else list(res)
    outs = [(i, r) for i, r in enumerate(res) if isinstance(r, torch.Tensor) and r.requires_grad]
    grad_outputs = [mg.rand(list(r.shape), dt) for _, r in outs]
    grads = torch.autograd.grad([r for _, r in outs], leaves, grad_outputs, allow_unused=True)
    grads = [torch.zeros_like(x) if g is None else g for x, g in zip(leaves, grads)]
    for g, x in zip(grads, leaves):
        assert g.dtype == x.dtype and g.shape == x.shape, (op, dt, g.dtype, g.shape)
    cases.append(
        {
            "id": c.id,
            "op": op,
            "class": cls,
            "dtype": dt,
            "layout": layout,
            "args": args,
            "inputs": inputs,
            "grad_outputs": [[i, c.put(g)] for (i, _), g in zip(outs, grad_outputs)],
            "grads": [c.put(g) for g in grads],
        }
    )


def main():
    mg.tensors = {}
    torch.manual_seed(0)
    # each block draws from a generator of its own, so a block added at the end leaves the inputs of
    # the cases before it as they were
    blocks = [(20240601, specs), (20261201, extra_specs), (20261202, kink_specs), (20261203, view_specs),
              (20261205, triangle_specs), (20261207, cnn_specs)]
    for seed, block in blocks:
        mg.gen = torch.Generator().manual_seed(seed)
        for dt in DTYPES:
            for op, cls, layout, spec in block():
                n = len(mg.tensors)
                try:
                    build(op, cls, layout, spec, dt)
                except (RuntimeError, TypeError, NotImplementedError) as e:
                    for k in list(mg.tensors)[n:]:
                        del mg.tensors[k]
                    skipped.append(f"{op} {dt} {layout}: {str(e).splitlines()[0]}")
    save_file(mg.tensors, os.path.join(HERE, "autograd_cases.safetensors"))
    with open(os.path.join(HERE, "autograd_index.json"), "w") as f:
        f.write('{"torch": %s, "count": %d, "skipped": %s, "cases": [\n' % (
            json.dumps(torch.__version__), len(cases), json.dumps(skipped)))
        f.write(",\n".join(json.dumps(c, separators=(",", ":")) for c in cases))
        f.write("\n]}\n")
    per_dtype = {dt: sum(c["dtype"] == dt for c in cases) for dt in DTYPES}
    ops = sorted({c["op"] for c in cases})
    print(f"{len(cases)} cases {per_dtype}, {len(ops)} operators, {len(mg.tensors)} tensors; skipped {len(skipped)}")
    for s in skipped:
        print("  skipped", s)


if __name__ == "__main__":
    main()
