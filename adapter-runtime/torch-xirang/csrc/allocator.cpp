// The xirang allocator: every PyTorch storage on the device is a runtime storage (a block of the
// Rust caching allocator). The DataPtr holds the device address (never dereferenced on the host)
// and the runtime's handle as its context; the deleter drops the handle. It is a
// c10::DeviceAllocator, so torch.accelerator's memory functions and Tensor.record_stream reach the
// runtime's allocator as they reach CUDA's.
#include "shim.h"

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

namespace xirang {

namespace {

void release(void* handle) {
  xirang_storage_release(handle);
}

struct XirangAllocator final : c10::DeviceAllocator {
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

  bool initialized() override {
    return xirang_device_count() > 0;
  }

  void emptyCache(c10::MempoolId_t) override {
    for (int32_t i = 0; i < xirang_device_count(); ++i) {
      check(xirang_empty_cache(i), "emptying the cache");
    }
  }

  // CUDA's allocator must be told that another stream uses a block, or it hands the block out
  // again as soon as it is freed, while that stream's kernels may still read it. The runtime's
  // queued kernels own references to the storages they read and write; a freed block returns to
  // the cache only once the last kernel using it has run, on whichever stream. So no stream can
  // reuse a block another stream's work still uses, and recording asks nothing more of the
  // allocator than CUDA's checks: the storage is the runtime's, the stream is of its device.
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {
    TORCH_CHECK(ptr.get_deleter() == &release || ptr.get() == nullptr,
                "xirang: record_stream on a storage the xirang allocator did not make");
    TORCH_CHECK(stream.device_type() == kDevice, "record_stream: expected a xirang stream, got one of ",
                stream.device());
    TORCH_CHECK(ptr.device().index() == stream.device_index(), "record_stream: the tensor is on ",
                ptr.device(), " but the stream is of ", stream.device());
  }

  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    XrMemoryStats s{};
    check(xirang_memory_stats(device, &s), "reading memory statistics");
    c10::CachingDeviceAllocator::DeviceStats out;
    constexpr auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    auto gauge = [](c10::CachingAllocator::Stat& st, uint64_t current, uint64_t peak) {
      st.current = static_cast<int64_t>(current);
      st.peak = static_cast<int64_t>(peak);
    };
    gauge(out.allocated_bytes[all], s.allocated_bytes, s.peak_allocated_bytes);
    gauge(out.active_bytes[all], s.allocated_bytes, s.peak_allocated_bytes);
    gauge(out.reserved_bytes[all], s.reserved_bytes, s.peak_reserved_bytes);
    auto& a = out.allocation[all];
    a.allocated = static_cast<int64_t>(s.alloc_count);
    a.freed = static_cast<int64_t>(s.free_count);
    a.current = a.allocated - a.freed;
    auto& seg = out.segment[all];
    seg.allocated = static_cast<int64_t>(s.device_mallocs);
    seg.freed = static_cast<int64_t>(s.device_frees);
    seg.current = seg.allocated - seg.freed;
    out.num_alloc_retries = static_cast<int64_t>(s.oom_retries);
    out.num_ooms = static_cast<int64_t>(s.ooms);
    out.num_device_alloc = static_cast<int64_t>(s.device_mallocs);
    out.num_device_free = static_cast<int64_t>(s.device_frees);
    return out;
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    check(xirang_reset_accumulated_memory_stats(device), "resetting memory statistics");
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    check(xirang_reset_peak_memory_stats(device), "resetting peak memory statistics");
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    uint64_t free = 0;
    uint64_t total = 0;
    check(xirang_mem_get_info(device, &free, &total), "reading the device's memory");
    return {static_cast<size_t>(free), static_cast<size_t>(total)};
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

namespace {

void record_stream(at::Tensor& self, c10::Stream stream) {
  g_allocator.recordStream(self.storage().data_ptr(), stream);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("record_stream", TORCH_FN(record_stream));
}

}  // namespace xirang
