// The boxed kernel: every operator the adapter serves (generated/bridge_registrations.cpp) comes
// here with PyTorch's stack; the arguments cross the C ABI as tagged values (tensors as views of
// their storage, no copy), Rust runs the operator, and the results come back as storages the
// runtime owns until PyTorch frees them. A call the runtime declines, and every operator the
// adapter does not register, runs PyTorch's own CPU kernel through `at::native::cpu_fallback`,
// after the runtime's fallback policy admitted and counted it.
#include "shim.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <c10/util/Exception.h>

#include <c10/util/SmallVector.h>

#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace xirang {

namespace {

// Everything the XrValues of one call point at. Nothing is allocated for the common call (tensors
// and scalars only): `tensors` is reserved for one per argument, so its addresses never move, and
// lists, rarer, sit in std::list nodes (stable addresses, no allocation while empty).
struct Frame {
  explicit Frame(size_t nargs) { tensors.reserve(nargs); }
  c10::SmallVector<XrTensor, 8> tensors;
  std::list<std::vector<XrTensor>> tensor_lists;
  std::list<std::vector<int64_t>> int_lists;
  std::list<std::vector<double>> float_lists;
  std::list<std::vector<uint8_t>> bool_lists;
  std::list<std::vector<XrValue>> value_lists;
  std::list<std::string> strings;
  std::list<at::Tensor> keep;  // list elements, kept alive while their sizes are borrowed
};

// What the kernel needs of an operator, looked up once per operator and thread: its qualified
// name and its index in the runtime's operator table.
struct OpInfo {
  c10::OperatorName name;
  std::string qualified;
  int64_t index;
};

const OpInfo& op_info(const c10::OperatorHandle& op) {
  thread_local std::unordered_map<const c10::FunctionSchema*, std::unique_ptr<OpInfo>> cache;
  // in front of the map, a direct-mapped table of recent operators: no hashing, no division
  struct Recent {
    const c10::FunctionSchema* schema;
    const OpInfo* info;
  };
  constexpr size_t kRecent = 64;
  thread_local Recent recent[kRecent] = {};
  const auto& schema = op.schema();
  auto& r = recent[(reinterpret_cast<uintptr_t>(&schema) >> 4) % kRecent];
  // keyed by the schema's address; the name is compared too, in case an operator was
  // deregistered and another registered at the same address
  if (r.schema == &schema && r.info->name == schema.operator_name()) {
    return *r.info;
  }
  auto it = cache.find(&schema);
  if (it == cache.end() || it->second->name != schema.operator_name()) {
    auto q = qualified_name(schema.operator_name());
    auto index = xirang_op_index(reinterpret_cast<const uint8_t*>(q.data()), q.size());
    auto& slot = cache[&schema];
    slot = std::make_unique<OpInfo>(OpInfo{schema.operator_name(), std::move(q), index});
    it = cache.find(&schema);
  }
  r = Recent{&schema, it->second.get()};
  return *it->second;
}

XrValue unsupported() {
  XrValue v{};
  v.tag = XR_TAG_UNSUPPORTED;
  return v;
}

XrValue scalar_value(const c10::IValue& iv) {
  XrValue v{};
  if (iv.isBool()) {
    v.tag = XR_TAG_SCALAR_BOOL;
    v.i = iv.toBool();
  } else if (iv.isInt()) {
    v.tag = XR_TAG_SCALAR_INT;
    v.i = iv.toInt();
  } else if (iv.isSymInt() && iv.toSymInt().maybe_as_int()) {
    v.tag = XR_TAG_SCALAR_INT;
    v.i = *iv.toSymInt().maybe_as_int();
  } else if (iv.isDouble()) {
    v.tag = XR_TAG_SCALAR_FLOAT;
    v.f = iv.toDouble();
  } else if (iv.isScalar()) {
    auto s = iv.toScalar();
    if (s.isBoolean()) {
      v.tag = XR_TAG_SCALAR_BOOL;
      v.i = s.toBool();
    } else if (s.isIntegral(false)) {
      v.tag = XR_TAG_SCALAR_INT;
      v.i = s.toLong();
    } else if (s.isFloatingPoint()) {
      v.tag = XR_TAG_SCALAR_FLOAT;
      v.f = s.toDouble();
    } else {
      return unsupported();
    }
  } else {
    return unsupported();
  }
  return v;
}

bool as_int(const c10::IValue& iv, int64_t* out) {
  if (iv.isInt()) {
    *out = iv.toInt();
    return true;
  }
  if (iv.isSymInt()) {
    auto m = iv.toSymInt().maybe_as_int();
    if (m) {
      *out = *m;
      return true;
    }
  }
  return false;
}

XrValue tensor_value(Frame& f, const at::Tensor& t, int32_t flags) {
  XrTensor d{};
  if (!describe(t, &d)) {
    return unsupported();
  }
  f.tensors.push_back(d);
  XrValue v{};
  v.tag = XR_TAG_TENSOR;
  v.flags = flags;
  if (t.unsafeGetTensorImpl()->is_wrapped_number()) {
    v.flags |= XR_FLAG_WRAPPED_NUMBER;
  }
  v.p = &f.tensors.back();
  v.len = 1;
  return v;
}

// One argument, by its schema type.
XrValue value(Frame& f, const c10::Argument& a, const c10::IValue& iv) {
  if (iv.isNone()) {
    XrValue v{};
    v.tag = XR_TAG_NONE;
    return v;
  }
  c10::TypePtr type = a.real_type();
  if (auto opt = type->cast<c10::OptionalType>()) {
    type = opt->getElementType();
    // An undefined tensor in a `Tensor?` slot is "no tensor", as PyTorch's kernels read it
    // (autograd passes saved optional tensors this way, e.g. nll_loss_backward's `weight`).
    if (iv.isTensor() && !iv.toTensor().defined()) {
      XrValue v{};
      v.tag = XR_TAG_NONE;
      return v;
    }
  }
  int32_t flags = (a.alias_info() && a.alias_info()->isWrite()) ? XR_FLAG_MUTABLE : 0;
  XrValue v{};
  v.flags = flags;
  switch (type->kind()) {
    case c10::TypeKind::TensorType:
      return iv.isTensor() ? tensor_value(f, iv.toTensor(), flags) : unsupported();
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType:
      if (!as_int(iv, &v.i)) {
        return unsupported();
      }
      v.tag = XR_TAG_INT;
      return v;
    case c10::TypeKind::FloatType:
      if (!iv.isDouble()) {
        return unsupported();
      }
      v.tag = XR_TAG_FLOAT;
      v.f = iv.toDouble();
      return v;
    case c10::TypeKind::BoolType:
      if (!iv.isBool()) {
        return unsupported();
      }
      v.tag = XR_TAG_BOOL;
      v.i = iv.toBool();
      return v;
    case c10::TypeKind::NumberType:
      return scalar_value(iv);
    case c10::TypeKind::ScalarTypeType:
      v.tag = XR_TAG_DTYPE;
      v.i = iv.toInt();
      return v;
    case c10::TypeKind::LayoutType:
      v.tag = XR_TAG_LAYOUT;
      v.i = iv.toInt();
      return v;
    case c10::TypeKind::MemoryFormatType:
      v.tag = XR_TAG_MEMORY_FORMAT;
      v.i = iv.toInt();
      return v;
    case c10::TypeKind::DeviceObjType: {
      auto d = iv.toDevice();
      v.tag = XR_TAG_DEVICE;
      if (d.is_cpu()) {
        v.i = -1;
      } else if (d.type() == kDevice) {
        v.i = d.has_index() ? d.index() : current_device();
      } else {
        return unsupported();
      }
      return v;
    }
    case c10::TypeKind::StringType: {
      f.strings.push_back(std::string(iv.toStringRef()));
      v.tag = XR_TAG_STR;
      v.p = f.strings.back().data();
      v.len = f.strings.back().size();
      return v;
    }
    case c10::TypeKind::ListType: {
      auto elem = type->castRaw<c10::ListType>()->getElementType();
      auto kind = elem->kind();
      if (kind == c10::TypeKind::IntType || kind == c10::TypeKind::SymIntType) {
        std::vector<int64_t> xs;
        for (const auto& e : iv.toListRef()) {
          int64_t x = 0;
          if (!as_int(e, &x)) {
            return unsupported();
          }
          xs.push_back(x);
        }
        f.int_lists.push_back(std::move(xs));
        v.tag = XR_TAG_INT_LIST;
        v.p = f.int_lists.back().data();
        v.len = f.int_lists.back().size();
        return v;
      }
      if (kind == c10::TypeKind::FloatType) {
        std::vector<double> xs;
        for (const auto& e : iv.toListRef()) {
          xs.push_back(e.toDouble());
        }
        f.float_lists.push_back(std::move(xs));
        v.tag = XR_TAG_FLOAT_LIST;
        v.p = f.float_lists.back().data();
        v.len = f.float_lists.back().size();
        return v;
      }
      if (kind == c10::TypeKind::BoolType) {
        std::vector<uint8_t> xs;
        for (const auto& e : iv.toListRef()) {
          xs.push_back(e.toBool() ? 1 : 0);
        }
        f.bool_lists.push_back(std::move(xs));
        v.tag = XR_TAG_BOOL_LIST;
        v.p = f.bool_lists.back().data();
        v.len = f.bool_lists.back().size();
        return v;
      }
      if (kind == c10::TypeKind::NumberType) {
        std::vector<XrValue> xs;
        for (const auto& e : iv.toListRef()) {
          auto s = scalar_value(e);
          if (s.tag == XR_TAG_UNSUPPORTED) {
            return s;
          }
          xs.push_back(s);
        }
        f.value_lists.push_back(std::move(xs));
        v.tag = XR_TAG_SCALAR_LIST;
        v.p = f.value_lists.back().data();
        v.len = f.value_lists.back().size();
        return v;
      }
      bool optional = false;
      if (auto o = elem->cast<c10::OptionalType>()) {
        optional = true;
        elem = o->getElementType();
      }
      if (elem->kind() == c10::TypeKind::TensorType) {
        std::vector<XrTensor> xs;
        for (const auto& e : iv.toListRef()) {
          XrTensor d{};
          if (e.isNone()) {
            d.dtype = -1;
            d.alias = -1;
          } else {
            f.keep.push_back(e.toTensor());
            if (!describe(f.keep.back(), &d)) {
              return unsupported();
            }
          }
          xs.push_back(d);
        }
        f.tensor_lists.push_back(std::move(xs));
        v.tag = optional ? XR_TAG_OPT_TENSOR_LIST : XR_TAG_TENSOR_LIST;
        v.p = f.tensor_lists.back().data();
        v.len = f.tensor_lists.back().size();
        return v;
      }
      return unsupported();
    }
    default:
      return unsupported();
  }
}

// A result tensor: an argument's storage (`alias`), a storage the runtime hands over, or bytes
// of a CPU tensor.
at::Tensor result_tensor(const XrTensor& r, c10::ArrayRef<c10::IValue> args) {
  c10::IntArrayRef sizes(r.sizes, static_cast<size_t>(r.ndim));
  c10::IntArrayRef strides(r.strides, static_cast<size_t>(r.ndim));
  if (r.alias >= 0) {
    TORCH_CHECK(static_cast<size_t>(r.alias) < args.size() && args[r.alias].isTensor(),
                "xirang: a result names argument ", r.alias, " which is not a tensor");
    auto t = args[r.alias].toTensor();
    // the runtime may have reshaped the argument within its storage (out= resized in place)
    if (t.sizes() != sizes || t.strides() != strides || t.storage_offset() != r.offset) {
      t.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides, r.offset);
    }
    return t;
  }
  auto dtype = static_cast<c10::ScalarType>(r.dtype);
  if (r.device < 0) {
    auto t = at::empty(sizes, at::TensorOptions().dtype(dtype).device(c10::kCPU));
    TORCH_CHECK(r.nbytes == t.nbytes(), "xirang: a CPU result of ", r.nbytes, " bytes for ", t.nbytes());
    if (r.nbytes > 0) {
      std::memcpy(t.data_ptr(), reinterpret_cast<const void*>(r.data), r.nbytes);
    }
    return t;
  }
  auto storage = adopt_storage(r.storage, r.data, r.nbytes, static_cast<c10::DeviceIndex>(r.device));
  auto t = at::detail::make_tensor<c10::TensorImpl>(std::move(storage),
                                                     c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                     c10::scalarTypeToTypeMeta(dtype));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides, r.offset);
  return t;
}

// `ret` is the schema's return: a `Tensor` return the runtime left out (a backward whose
// `output_mask` entry is false, as native_layer_norm_backward's first gradient when the input needs
// none) is an undefined tensor to PyTorch, never None ("Expected Tensor but got None").
c10::IValue result_value(const XrValue& v, const c10::Argument& ret, c10::ArrayRef<c10::IValue> args) {
  switch (v.tag) {
    case XR_TAG_NONE:
      if (ret.real_type()->kind() == c10::TypeKind::TensorType) {
        return c10::IValue(at::Tensor());
      }
      return c10::IValue();
    case XR_TAG_TENSOR:
      return result_tensor(*static_cast<const XrTensor*>(v.p), args);
    case XR_TAG_TENSOR_LIST: {
      std::vector<at::Tensor> ts;
      const auto* xs = static_cast<const XrTensor*>(v.p);
      for (uint64_t i = 0; i < v.len; ++i) {
        // an element the runtime left out (dtype -1, as XrTensor::NONE) is an undefined tensor
        ts.push_back(xs[i].dtype < 0 && xs[i].alias < 0 ? at::Tensor() : result_tensor(xs[i], args));
      }
      return c10::IValue(ts);
    }
    case XR_TAG_INT:
    case XR_TAG_SCALAR_INT:
      return c10::IValue(v.i);
    case XR_TAG_FLOAT:
    case XR_TAG_SCALAR_FLOAT:
      return c10::IValue(v.f);
    case XR_TAG_BOOL:
    case XR_TAG_SCALAR_BOOL:
      return c10::IValue(v.i != 0);
    default:
      TORCH_CHECK(false, "xirang: a result of tag ", v.tag, " the shim does not read");
  }
}

// Random operators run on PyTorch's CPU kernels, which take only CPU generators: the xirang
// generator's state is lent to a CPU generator for the call and taken back afterwards, so
// `torch.xirang.manual_seed` and a `torch.Generator("xirang")` decide the numbers.
struct LentGenerators {
  std::vector<std::pair<at::Generator, at::Generator>> lent;  // (xirang, cpu)
  std::vector<std::unique_lock<std::mutex>> locks;

  void lend(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DeviceIndex device) {
    const auto& schema = op.schema();
    auto n = schema.arguments().size();
    auto base = stack->size() - n;
    for (size_t i = 0; i < n; ++i) {
      auto type = schema.arguments()[i].real_type();
      if (auto o = type->cast<c10::OptionalType>()) {
        type = o->getElementType();
      }
      if (type->kind() != c10::TypeKind::GeneratorType) {
        continue;
      }
      auto& iv = (*stack)[base + i];
      at::Generator xg;
      if (iv.isNone()) {
        xg = default_generator(device);
      } else {
        xg = iv.toGenerator();
        if (xg.device().type() != kDevice) {
          continue;
        }
      }
      locks.emplace_back(xg.mutex());
      auto cpu = at::make_generator<at::CPUGeneratorImpl>();
      cpu.set_state(xg.get_state());
      iv = c10::IValue(cpu);
      lent.emplace_back(xg, cpu);
    }
  }

  ~LentGenerators() {
    for (auto& [xg, cpu] : lent) {
      try {
        xg.set_state(cpu.get_state());
      } catch (...) {
      }
    }
  }
};

c10::DeviceIndex device_of(const c10::OperatorHandle& op, const torch::jit::Stack* stack) {
  auto n = op.schema().arguments().size();
  for (size_t i = stack->size() - n; i < stack->size(); ++i) {
    const auto& iv = (*stack)[i];
    if (iv.isTensor() && iv.toTensor().defined() && iv.toTensor().device().type() == kDevice) {
      return iv.toTensor().device().index();
    }
    if (iv.isTensorList()) {
      for (const auto& e : iv.toListRef()) {
        if (e.isTensor() && e.toTensor().defined() && e.toTensor().device().type() == kDevice) {
          return e.toTensor().device().index();
        }
      }
    }
    if (iv.isDevice() && iv.toDevice().type() == kDevice && iv.toDevice().has_index()) {
      return iv.toDevice().index();
    }
  }
  return current_device();
}

}  // namespace

void run_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, const std::string& name) {
  // One pass over the arguments:
  // - a conjugate or negative view: the CPU fallback's copy to the host would resolve its bit with
  //   clone on the device (csrc/mathbits.cpp resolves it first);
  // - at::native::cpu_fallback puts the results on the device of the first tensor argument; when
  //   that one is a CPU scalar (rsub's `other` wrapped as a 0-dim tensor: `1 - x`), the results
  //   belong on the xirang tensor's device, as PyTorch's own device kernels put them.
  const auto nargs = op.schema().arguments().size();
  std::optional<c10::Device> moved_to;
  std::optional<bool> first_on_cpu;
  for (size_t i = stack->size() - nargs; i < stack->size(); ++i) {
    const auto& iv = (*stack)[i];
    if (!iv.isTensor() || !iv.toTensor().defined()) {
      continue;
    }
    const auto& t = iv.toTensor();
    if (C10_UNLIKELY(has_math_bits(t))) {
      call_with_math_bits(op, stack, &fallback_kernel);
      return;
    }
    if (!first_on_cpu.has_value()) {
      first_on_cpu = t.is_cpu();
    } else if (*first_on_cpu && !moved_to.has_value() && t.device().type() == kDevice) {
      moved_to = t.device();
    }
  }
  check(xirang_fallback_admit(reinterpret_cast<const uint8_t*>(name.data()), name.size()), name.c_str());
  LentGenerators gens;
  gens.lend(op, stack, device_of(op, stack));
  at::native::cpu_fallback(op, stack);
  if (C10_UNLIKELY(moved_to.has_value())) {
    const auto& rets = op.schema().returns();
    const auto base = stack->size() - rets.size();
    for (size_t r = 0; r < rets.size(); ++r) {
      auto& iv = (*stack)[base + r];
      if (rets[r].alias_info() == nullptr && iv.isTensor() && iv.toTensor().defined() && iv.toTensor().is_cpu()) {
        iv = c10::IValue(iv.toTensor().to(*moved_to));
      }
    }
  }
}

void boxed_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const auto& info = op_info(op);
  const auto& name = info.qualified;
  const auto nargs = schema.arguments().size();
  // the arguments stay on the stack (nothing is copied) until the results replace them
  c10::ArrayRef<c10::IValue> args(stack->data() + (stack->size() - nargs), nargs);

  Frame frame(nargs);
  c10::SmallVector<XrValue, 8> values;
  values.reserve(nargs);
  TORCH_CHECK(info.index >= 0, "xirang: ", name,
              " is registered for the device but the runtime does not know it: the shim and the runtime were "
              "generated from different operator sets (rebuild the package after `xirang-scan generate`)");
  bool crosses = true;
  for (size_t i = 0; i < nargs && crosses; ++i) {
    if (C10_UNLIKELY(args[i].isTensor() && has_math_bits(args[i].toTensor()))) {
      call_with_math_bits(op, stack, &boxed_kernel);
      return;
    }
    values.push_back(value(frame, schema.arguments()[i], args[i]));
    if (values.back().tag == XR_TAG_UNSUPPORTED) {
      crosses = false;
    }
  }
  if (!crosses) {
    run_fallback(op, stack, name);
    return;
  }
  // The operator runs on its tensors' device. A guard only when that is not already the current
  // one: constructing and destroying c10::DeviceGuard costs two calls into Rust on every operator.
  const auto device = device_of(op, stack);
  std::optional<c10::DeviceGuard> guard;
  if (device != current_device()) {
    guard.emplace(c10::Device(kDevice, device));
  }
  XrResult out{};
  auto status = xirang_call_at(info.index, values.data(), values.size(), &out);
  if (status == XR_DECLINED) {
    run_fallback(op, stack, name);
    return;
  }
  check(status, name.c_str());
  c10::SmallVector<c10::IValue, 2> results;
  try {
    TORCH_CHECK(out.len == schema.returns().size(), "xirang: ", name, " returned ", out.len, " values, the schema ",
                schema.returns().size());
    for (uint64_t i = 0; i < out.len; ++i) {
      results.push_back(result_value(out.values[i], schema.returns()[i], args));
    }
  } catch (...) {
    xirang_result_free(&out);
    throw;
  }
  xirang_result_free(&out);
  // A result the schema says is a written argument (`-> Tensor(a!)`, out= and in-place forms) but
  // that came back in memory of its own (the runtime grew it): PyTorch's tensor takes the result's
  // shape and values, and is what the operator returns.
  for (size_t i = 0; i < results.size(); ++i) {
    const auto* ra = schema.returns()[i].alias_info();
    if (ra == nullptr || !ra->isWrite() || !results[i].isTensor()) {
      continue;
    }
    for (size_t j = 0; j < nargs; ++j) {
      const auto* aa = schema.arguments()[j].alias_info();
      if (aa == nullptr || aa->beforeSets() != ra->beforeSets() || !args[j].isTensor()) {
        continue;
      }
      auto target = args[j].toTensor();
      auto got = results[i].toTensor();
      if (got.defined() && !got.is_same(target)) {
        if (target.sizes() != got.sizes()) {
          at::native::resize_output(target, got.sizes());
        }
        target.copy_(got);
        results[i] = c10::IValue(target);
      }
      break;
    }
  }
  torch::jit::drop(*stack, nargs);
  for (auto& r : results) {
    torch::jit::push(*stack, std::move(r));
  }
}

// Every operator the adapter does not register runs PyTorch's CPU kernel.
void fallback_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  run_fallback(op, stack, op_info(op).qualified);
}

}  // namespace xirang

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&xirang::fallback_kernel>());
}
