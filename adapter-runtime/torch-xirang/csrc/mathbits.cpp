// PyTorch's conjugate and negative bits on xirang tensors. `x.conj()` of a complex tensor and the
// imaginary part of one are lazy views: a key on the tensor (Conjugate, Negative) says that its
// values are the conjugate, or the negation, of the memory's. PyTorch resolves the bit itself
// (ConjugateFallback) before most operators, but lets it through to the backend for the operators
// that must understand it (MathBitsFallback.h: "`clone` and `copy_` should fully understand ... your
// math bit"): clone, copy_, the view operators, and the matrix products that BLAS conjugates for
// free (mm, addmm, bmm, dot, ...). The runtime's tensors carry no such bit, so a call that meets one
// is adapted here:
// - a view operator runs on the bitless alias and its result takes the bit back (a view of a
//   conjugate view is one);
// - every other operator gets its inputs' bits resolved: the memory is read to the host, the bit
//   applied there by PyTorch's CPU kernels, and a new xirang tensor holds the values; a written
//   argument with a bit is refused (PyTorch clones such arguments before it calls a backend, so only
//   an operator that writes a conjugate view itself meets one).
// Without this, clone of a conjugate view recursed until the stack overflowed (the CPU fallback's
// copy to the host resolves the bit with clone), and the products read the memory unconjugated.
#include "shim.h"

#include <c10/util/Exception.h>

namespace xirang {

bool has_math_bits(const at::Tensor& t) {
  return t.defined() && (t.is_conj() || t.is_neg());
}

at::Tensor bitless_alias(const at::Tensor& t) {
  auto p = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(t.storage()),
                                                     c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), t.dtype());
  p.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return p;
}

at::Tensor with_bits_of(at::Tensor host, const at::Tensor& like) {
  if (like.is_conj()) {
    host = host.conj();
  }
  if (like.is_neg()) {
    host = host._neg_view();
  }
  return host;
}

namespace {

// the values of `t` (bits applied) in a new xirang tensor of its device, by way of the host
at::Tensor resolved(const at::Tensor& t) {
  auto host = with_bits_of(bitless_alias(t).cpu(), t).resolve_conj().resolve_neg();
  return host.to(t.device());
}

void mark(const c10::IValue& iv, const at::Tensor& like) {
  auto apply = [&](const at::Tensor& r) {
    if (r.defined()) {
      r._set_conj(like.is_conj());
      r._set_neg(like.is_neg());
    }
  };
  if (iv.isTensor()) {
    apply(iv.toTensor());
  } else if (iv.isTensorList()) {
    for (const auto& r : iv.toTensorList()) {
      apply(r);
    }
  }
}

}  // namespace

void call_with_math_bits(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                         void (*next)(const c10::OperatorHandle&, torch::jit::Stack*)) {
  const auto& schema = op.schema();
  const auto nargs = schema.arguments().size();
  const auto nrets = schema.returns().size();
  const auto base = stack->size() - nargs;
  bool view = false;
  for (const auto& r : schema.returns()) {
    view = view || (r.alias_info() != nullptr && !r.alias_info()->isWrite());
  }
  std::vector<at::Tensor> marked(nargs);
  for (size_t i = 0; i < nargs; ++i) {
    auto& iv = (*stack)[base + i];
    if (!iv.isTensor() || !has_math_bits(iv.toTensor())) {
      continue;
    }
    auto t = iv.toTensor();
    const auto* a = schema.arguments()[i].alias_info();
    TORCH_CHECK(a == nullptr || !a->isWrite(), "xirang: ", schema.operator_name(),
                " writes into a conjugate or negative view (", schema.arguments()[i].name(),
                "); resolve it first (`.resolve_conj()`, `.resolve_neg()`)");
    marked[i] = t;
    iv = c10::IValue(view ? bitless_alias(t) : resolved(t));
  }
  next(op, stack);
  if (!view) {
    return;
  }
  // a view's result aliases the argument of its alias set, and is a view with that argument's bits
  for (size_t r = 0; r < nrets; ++r) {
    const auto* ra = schema.returns()[r].alias_info();
    if (ra == nullptr || ra->isWrite()) {
      continue;
    }
    for (size_t i = 0; i < nargs; ++i) {
      const auto* aa = schema.arguments()[i].alias_info();
      if (marked[i].defined() && aa != nullptr && aa->beforeSets() == ra->beforeSets()) {
        mark((*stack)[stack->size() - nrets + r], marked[i]);
        break;
      }
    }
  }
}

}  // namespace xirang

// PyTorch's copy_ hands a copy that involves a device of its own to `_copy_from` (copy_impl's
// "not implemented here (e.g. XLA)" branch), which the conjugate and negative fallbacks do not let
// through: they resolve the destination into a clone and the copy lands in the clone, so
// `x.conj().copy_(y)` on xirang wrote nothing. Only devices outside PyTorch reach `_copy_from`; ours
// (csrc/minimal.cpp) understands both bits.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
}
