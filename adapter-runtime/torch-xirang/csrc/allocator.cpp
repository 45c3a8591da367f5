// The xirang allocator: every PyTorch storage on the device is a runtime storage (a block of the
// Rust caching allocator). The DataPtr holds the device address (never dereferenced on the host)
// and the runtime's handle as its context; the deleter drops the handle.
#include "shim.h"

#include <c10/util/Exception.h>

namespace xirang {

namespace {

void release(void* handle) {
  xirang_storage_release(handle);
}

struct XirangAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    auto device = current_device();
    void* handle = nullptr;
    uint64_t data = 0;
    check(xirang_storage_alloc(device, nbytes, &handle, &data), "allocating xirang memory");
    return {reinterpret_cast<void*>(data), handle, &release, c10::Device(kDevice, device)};
  }

  // DataPtrs carry a context distinct from the pointer: no raw allocation.
  c10::DeleterFnPtr raw_deleter() const override {
    return nullptr;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "xirang: copying raw device memory (", count,
                                " bytes) is not supported; copy tensors instead");
  }
};

XirangAllocator g_allocator;

}  // namespace

c10::Allocator* allocator() {
  return &g_allocator;
}

void* storage_handle(const c10::Storage& s) {
  const auto& dp = s.data_ptr();
  return dp.get_deleter() == &release ? dp.get_context() : nullptr;
}

c10::Storage adopt_storage(void* borrowed, uint64_t data, uint64_t nbytes, c10::DeviceIndex device) {
  void* handle = xirang_storage_retain(borrowed);
  TORCH_CHECK(handle != nullptr, "xirang: a result without a storage handle");
  c10::DataPtr dp(reinterpret_cast<void*>(data), handle, &release, c10::Device(kDevice, device));
  return c10::Storage(c10::Storage::use_byte_size_t(), nbytes, std::move(dp), &g_allocator,
                      /*resizable=*/true);
}

void resize_storage_bytes(const c10::Storage& s, size_t nbytes) {
  TORCH_CHECK(s.resizable(), "Trying to resize storage that is not resizable");
  auto old_nbytes = s.nbytes();
  c10::DeviceGuard guard(s.device());
  c10::DataPtr fresh = g_allocator.allocate(nbytes);
  auto keep = std::min(old_nbytes, nbytes);
  if (keep > 0) {
    void* old_handle = storage_handle(s);
    TORCH_CHECK(old_handle != nullptr, "xirang: resizing a storage the runtime does not own");
    // both storages as byte tensors of `keep` elements
    int64_t sizes[1] = {static_cast<int64_t>(keep)};
    int64_t strides[1] = {1};
    XrTensor dst{fresh.get_context(), reinterpret_cast<uint64_t>(fresh.get()), nbytes, sizes, strides, 1, 0,
                 static_cast<int32_t>(at::kByte), 1, s.device().index(), -1};
    XrTensor src = dst;
    src.storage = old_handle;
    src.data = reinterpret_cast<uint64_t>(s.data_ptr().get());
    src.nbytes = old_nbytes;
    check(xirang_copy(&dst, &src), "resizing a xirang storage");
  }
  auto* impl = s.unsafeGetStorageImpl();
  impl->set_data_ptr_noswap(std::move(fresh));
  impl->set_nbytes(nbytes);
}

REGISTER_ALLOCATOR(kDevice, &g_allocator);

}  // namespace xirang
