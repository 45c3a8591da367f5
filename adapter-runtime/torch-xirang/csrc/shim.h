// The C++ shim of the xirang device: only what PyTorch's PrivateUse1 registration demands
// (allocator, device guard, hooks, the boxed kernel into Rust, the factory/view/copy kernels).
// Everything else is the Rust runtime behind include/xirang_bridge.h.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/Allocator.h>
#include <torch/library.h>

#include <string>

#include "xirang_bridge.h"

// The shim's own C functions the Python package calls (the shim is built -fvisibility=hidden).
#define XIRANG_EXPORT extern "C" __attribute__((visibility("default")))

namespace xirang {

constexpr c10::DeviceType kDevice = c10::DeviceType::PrivateUse1;

// Throws PyTorch's exception type for an XR_* status, with the bridge's message.
[[noreturn]] void raise(int32_t status, const char* what);

inline void check(int32_t status, const char* what) {
  if (status != XR_OK) {
    raise(status, what);
  }
}

// The calling thread's current xirang device.
c10::DeviceIndex current_device();

// The default generator of xirang device `index` (-1: the current device).
const at::Generator& default_generator(c10::DeviceIndex index);

// The allocator of xirang storages (registered for PrivateUse1).
c10::Allocator* allocator();

// The runtime's storage handle behind a xirang storage; nullptr when the storage was not
// allocated by this shim.
void* storage_handle(const c10::Storage& s);

// A new c10::Storage holding a new reference (retained here) on a result's borrowed handle.
c10::Storage adopt_storage(void* borrowed, uint64_t data, uint64_t nbytes, c10::DeviceIndex device);

// Resizes a xirang storage to `nbytes`, keeping the first min(old, new) bytes.
void resize_storage_bytes(const c10::Storage& s, size_t nbytes);

// The boundary's view of a tensor (xirang or CPU); pointers borrow from `t`, which must outlive
// the returned value. Returns false when the tensor cannot cross (no storage, not strided, a
// device other than xirang and CPU, a xirang storage without a runtime handle).
bool describe(const at::Tensor& t, XrTensor* out);

// `add.Tensor` for aten operators, `ns::name.overload` otherwise.
std::string qualified_name(const c10::OperatorName& name);

// The boxed kernel of every operator the adapter serves (generated/bridge_registrations.cpp).
void boxed_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// PyTorch's CPU kernel for `op`, after the runtime's fallback policy admitted and counted it.
void run_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, const std::string& name);

// The boxed fallback of device xirang (every operator nobody registers), also registered by name for
// the functional operators whose composite kernel would run their out= form on the host
// (generated/bridge_registrations.cpp).
void fallback_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// PyTorch's conjugate and negative bits (csrc/mathbits.cpp): whether `t` carries one; an alias
// of `t`'s memory without them; `host` with the bits of `like` applied as lazy views.
bool has_math_bits(const at::Tensor& t);
at::Tensor bitless_alias(const at::Tensor& t);
at::Tensor with_bits_of(at::Tensor host, const at::Tensor& like);

// `op` on a stack with an argument carrying a bit: views keep it, other operators get it resolved;
// `next` (boxed_kernel or fallback_kernel) then runs the call.
void call_with_math_bits(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                         void (*next)(const c10::OperatorHandle&, torch::jit::Stack*));

}  // namespace xirang
