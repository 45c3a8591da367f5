// The factory, view and copy kernels every PrivateUse1 backend provides (as OpenReg's
// Minimal.cpp): PyTorch's own metadata kernels for views, the xirang allocator for storages,
// and bytes that move only through the C ABI (the host never dereferences a device address).
#include "shim.h"

#include <ATen/CPUFunctions.h>
#include <ATen/EmptyTensor.h>
#include <ATen/InferSize.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/as_strided_cpu_dispatch.h>
#include <ATen/ops/set_cpu_dispatch.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

namespace xirang {

namespace {

constexpr c10::DispatchKeySet kKeys(c10::DispatchKey::PrivateUse1);

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format) {
  auto d = c10::device_or_default(device);
  TORCH_CHECK(d.type() == kDevice, "xirang: empty on ", d);
  TORCH_CHECK(c10::layout_or_default(layout) == c10::kStrided, "xirang: only strided tensors are supported, not ",
              c10::layout_or_default(layout));
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "Only dense CPU tensors can be pinned");
  c10::DeviceGuard guard(d);
  return at::detail::empty_generic(size, allocator(), kKeys, c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                         std::optional<bool> pin_memory) {
  auto d = c10::device_or_default(device);
  TORCH_CHECK(d.type() == kDevice, "xirang: empty_strided on ", d);
  TORCH_CHECK(c10::layout_or_default(layout) == c10::kStrided, "xirang: only strided tensors are supported");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "Only dense CPU tensors can be pinned");
  c10::DeviceGuard guard(d);
  return at::detail::empty_strided_generic(size, stride, allocator(), kKeys, c10::dtype_or_default(dtype));
}

at::Tensor as_strided(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                      std::optional<c10::SymInt> storage_offset) {
  return at::cpu::as_strided_symint(self, size, stride, std::move(storage_offset));
}

at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

at::Tensor reshape_alias(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride));
}

// complex <-> (…, 2) real views of the same storage (make_tensor on the device, `x.real`, `x.imag`):
// as the CPU fallback they were copies, and writes through them were lost
at::Tensor view_as_real(const at::Tensor& self) {
  return at::native::view_as_real(self);
}

at::Tensor view_as_complex(const at::Tensor& self) {
  return at::native::view_as_complex(self);
}

at::Tensor unfold(const at::Tensor& self, int64_t dimension, int64_t size, int64_t step) {
  return at::native::unfold(self, dimension, size, step);
}

// Grows the storage through the xirang allocator (PyTorch's CPU resize would memcpy device
// addresses on the host).
const at::Tensor& resize_(const at::Tensor& self, c10::SymIntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  auto sizes = C10_AS_INTARRAYREF_SLOW(size);
  for (auto s : sizes) {
    TORCH_CHECK(s >= 0, "Trying to create tensor with negative dimension ", s, ": ", sizes);
  }
  auto* impl = self.unsafeGetTensorImpl();
  if (self.sizes() != sizes) {
    impl->set_sizes_contiguous(sizes);
  }
  auto needed = at::detail::computeStorageNbytesContiguous(sizes, self.dtype().itemsize(), self.storage_offset());
  if (needed > self.storage().nbytes()) {
    resize_storage_bytes(self.storage(), needed);
  }
  if (memory_format) {
    TORCH_CHECK(*memory_format != c10::MemoryFormat::Preserve, "Unsupported memory format ", *memory_format);
    impl->empty_tensor_restride(*memory_format);
  }
  return self;
}

XrTensor described(const at::Tensor& t) {
  XrTensor d{};
  TORCH_CHECK(describe(t, &d), "xirang: a ", t.device(), " tensor of layout ", t.layout(),
              " cannot cross to the runtime");
  return d;
}

// A contiguous xirang tensor over memory no runtime storage handle names: `at::from_blob` over a
// device address, which torch's serialization makes of a storage (`UntypedStorage._write_file`,
// the path of `pickle.dumps`). Its bytes move by address; the driver checks the range.
bool unowned(const at::Tensor& t) {
  return t.device().type() == kDevice && t.has_storage() && storage_handle(t.storage()) == nullptr &&
         t.is_contiguous();
}

uint64_t address(const at::Tensor& t) {
  return reinterpret_cast<uint64_t>(t.storage().data_ptr().get()) +
         static_cast<uint64_t>(t.storage_offset()) * t.element_size();
}

// self (the source) into dst; one of them is on xirang.
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool /*non_blocking*/) {
  TORCH_CHECK(self.device().type() == kDevice || self.is_cpu(), "xirang: copying from ", self.device());
  TORCH_CHECK(dst.device().type() == kDevice || dst.is_cpu(), "xirang: copying to ", dst.device());
  if (dst.numel() == 0) {
    return dst;
  }
  // a conjugate or negative view (csrc/mathbits.cpp) on the device: its memory crosses as it is and
  // the host applies the bit; between two xirang tensors the copy goes by way of the host
  if (C10_UNLIKELY(self.device().type() == kDevice && dst.device().type() == kDevice &&
                   (has_math_bits(self) || has_math_bits(dst)))) {
    return copy_from(self.cpu(), dst, false);
  }
  if (dst.is_cpu()) {
    // device -> host: read the source's elements, then PyTorch's CPU copy (broadcast, cast); into
    // dst itself when it is their dense row-major image (a pinned dst then gets the direct copy)
    const bool direct = dst.is_contiguous() && dst.scalar_type() == self.scalar_type() &&
                        dst.sizes() == self.sizes() && !has_math_bits(self) && !has_math_bits(dst);
    auto tmp = direct ? dst : at::empty(self.sizes(), self.options().device(c10::kCPU));
    if (unowned(self)) {
      check(xirang_read_address(self.device().index(), address(self), static_cast<uint8_t*>(tmp.data_ptr()),
                                tmp.nbytes()),
            "copying to the host");
    } else {
      auto src = described(self);
      check(xirang_read(&src, static_cast<uint8_t*>(tmp.data_ptr()), tmp.nbytes()), "copying to the host");
    }
    if (!direct) {
      dst.copy_(with_bits_of(tmp, self));
    }
    return dst;
  }
  if (self.is_cpu()) {
    // host -> device: cast and broadcast on the host, then write the elements into dst's view (the
    // memory behind a conjugate or negative view holds the conjugate or negation of its values)
    auto tmp = self.to(dst.scalar_type()).expand(dst.sizes()).contiguous().resolve_conj().resolve_neg();
    if (C10_UNLIKELY(has_math_bits(dst))) {
      tmp = (dst.is_conj() ? tmp.conj_physical() : tmp);
      tmp = (dst.is_neg() ? tmp.neg() : tmp).contiguous();
    }
    if (unowned(dst)) {
      check(xirang_write_address(dst.device().index(), address(dst), static_cast<const uint8_t*>(tmp.const_data_ptr()),
                                 tmp.nbytes()),
            "copying to xirang");
      return dst;
    }
    auto d = described(dst);
    check(xirang_write(&d, static_cast<const uint8_t*>(tmp.const_data_ptr()), tmp.nbytes()), "copying to xirang");
    return dst;
  }
  auto s = described(self);
  auto d = described(dst);
  auto status = xirang_copy(&d, &s);
  if (status == XR_DECLINED) {
    // a cast the runtime does not model (complex to real): by way of the host
    return copy_from(self.cpu(), dst, false);
  }
  check(status, "copying between xirang tensors");
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  resize_(dst, self.sym_sizes(), std::nullopt);
  return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  auto tmp = at::empty({}, self.options().device(c10::kCPU));
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(), " elements cannot be converted to Scalar");
  auto src = described(self);
  check(xirang_read(&src, static_cast<uint8_t*>(tmp.data_ptr()), tmp.nbytes()), "reading a scalar");
  return at::_local_scalar_dense(tmp);
}

at::Tensor& set_source_storage_offset(at::Tensor& self, c10::Storage source, c10::SymInt offset,
                                      c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  TORCH_CHECK(source.device() == self.device() || source.nbytes() == 0, "Expected a storage on ", self.device(),
              " but got one on ", source.device());
  return at::cpu::set__symint(self, std::move(source), std::move(offset), size, stride);
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  auto n = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_source_storage_offset(self, std::move(source), 0, {n}, {1});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  return at::cpu::set_(self, source);
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::DeviceGuard guard(self.device());
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, allocator()->allocate(0), allocator(), true);
  return set_source_storage_offset(self, std::move(storage), 0, {0}, {});
}

// fill_ writes the value through the ABI (a host tensor of self's shape, written into the view).
at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value) {
  if (self.numel() == 0) {
    return self;
  }
  auto tmp = at::full(self.sizes(), value, self.options().device(c10::kCPU));
  auto d = described(self);
  check(xirang_write(&d, static_cast<const uint8_t*>(tmp.const_data_ptr()), tmp.nbytes()), "fill_");
  return self;
}

at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ", value.dim(),
              " dimensions.");
  return fill_scalar(self, value.item());
}

// zero_ is fill_ with 0, as PyTorch's CPU and CUDA kernels are (factories such as torch.zeros and
// zeros_like call it: without it they ran PyTorch's CPU kernel through the counted fallback).
at::Tensor& zero_(at::Tensor& self) {
  return fill_scalar(self, 0);
}

}  // namespace

}  // namespace xirang

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(xirang::empty_memory_format));
  m.impl("empty_strided", TORCH_FN(xirang::empty_strided));
  m.impl("as_strided", TORCH_FN(xirang::as_strided));
  m.impl("view", TORCH_FN(xirang::view));
  m.impl("_reshape_alias", TORCH_FN(xirang::reshape_alias));
  m.impl("unfold", TORCH_FN(xirang::unfold));
  m.impl("view_as_real", TORCH_FN(xirang::view_as_real));
  m.impl("view_as_complex", TORCH_FN(xirang::view_as_complex));
  m.impl("resize_", TORCH_FN(xirang::resize_));
  m.impl("_copy_from", TORCH_FN(xirang::copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(xirang::copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(xirang::local_scalar_dense));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(xirang::set_source_storage_offset));
  m.impl("set_.source_Storage", TORCH_FN(xirang::set_source_storage));
  m.impl("set_.source_Tensor", TORCH_FN(xirang::set_source_tensor));
  m.impl("set_", TORCH_FN(xirang::set_empty));
  m.impl("fill_.Scalar", TORCH_FN(xirang::fill_scalar));
  m.impl("fill_.Tensor", TORCH_FN(xirang::fill_tensor));
  m.impl("zero_", TORCH_FN(xirang::zero_));
}
