// PrivateUse1 hooks: availability, device count, default generators, storage resizing, pinned host
// memory; and the two functions the Python package calls for seeding (everything else it calls is
// the bridge).
#include "shim.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

namespace xirang {

namespace {

// A xirang generator: PyTorch's CPU generator (Mersenne Twister + Philox state) tagged with the
// device, as OpenReg's. Random operators run on PyTorch's CPU kernels through the fallback.
struct XirangGenerator final : at::CPUGeneratorImpl {
  explicit XirangGenerator(c10::DeviceIndex index) {
    device_ = c10::Device(kDevice, index);
    key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
  }
};

std::once_flag g_generators_once;
std::vector<at::Generator> g_generators;

}  // namespace

const at::Generator& default_generator(c10::DeviceIndex index) {
  std::call_once(g_generators_once, [] {
    auto n = xirang_device_count();
    for (int i = 0; i < n; ++i) {
      g_generators.push_back(at::make_generator<XirangGenerator>(static_cast<c10::DeviceIndex>(i)));
    }
  });
  auto i = index < 0 ? current_device() : index;
  TORCH_CHECK(i >= 0 && static_cast<size_t>(i) < g_generators.size(), "invalid xirang device index ", i);
  return g_generators[i];
}

namespace {

void release_pinned(void* ptr) {
  (void)xirang_host_free(reinterpret_cast<uint64_t>(ptr));
}

// Pinned host memory (Tensor.pin_memory(), DataLoader(pin_memory=True), the host side of a
// non-blocking device-to-host copy): the driver's page-locked memory, which its copy engine reads
// and writes without the staging buffer pageable memory needs.
struct XirangPinnedAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    if (nbytes == 0) {
      return {nullptr, nullptr, &release_pinned, c10::Device(c10::DeviceType::CPU)};
    }
    uint64_t addr = 0;
    check(xirang_host_alloc(nbytes, &addr), "allocating pinned host memory");
    auto* p = reinterpret_cast<void*>(addr);
    return {p, p, &release_pinned, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override {
    return &release_pinned;
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

XirangPinnedAllocator g_pinned;

struct XirangHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override {
    return true;
  }
  bool isAvailable() const override {
    return xirang_device_count() > 0;
  }
  bool hasPrimaryContext(c10::DeviceIndex) const override {
    return true;
  }
  c10::DeviceIndex deviceCount() const override {
    return static_cast<c10::DeviceIndex>(xirang_device_count());
  }
  void setCurrentDevice(c10::DeviceIndex device) const override {
    check(xirang_set_device(device), "setting the device");
  }
  c10::DeviceIndex getCurrentDevice() const override {
    return current_device();
  }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    auto old = current_device();
    if (device >= 0 && device != old) {
      setCurrentDevice(device);
    }
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    if (device < 0 || device >= deviceCount()) {
      return current_device();
    }
    return exchangeDevice(device);
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return default_generator(device_index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override {
    auto i = device_index < 0 ? current_device() : device_index;
    return at::make_generator<XirangGenerator>(i);
  }
  at::Device getDeviceFromPtr(void*) const override {
    return at::Device(kDevice, current_device());
  }
  bool isPinnedPtr(const void* data) const override {
    return data != nullptr && xirang_host_is_pinned(reinterpret_cast<uint64_t>(data)) == 1;
  }
  at::Allocator* getPinnedMemoryAllocator() const override {
    return &g_pinned;
  }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resize_storage_bytes(storage, newsize);
  }
};

[[maybe_unused]] const bool g_hooks_registered = [] {
  at::RegisterPrivateUse1HooksInterface(new XirangHooks());
  return true;
}();

}  // namespace

}  // namespace xirang

// Seeds the default generator of device `index` (-1: every device) and the runtime's own
// generator (the device kernels' randomness, e.g. dropout). 0 on success.
XIRANG_EXPORT int32_t xirang_shim_manual_seed(int32_t index, uint64_t seed) {
  try {
    auto n = xirang_device_count();
    for (int i = 0; i < n; ++i) {
      if (index < 0 || index == i) {
        auto gen = xirang::default_generator(static_cast<c10::DeviceIndex>(i));
        std::lock_guard<std::mutex> lock(gen.mutex());
        gen.set_current_seed(seed);
      }
    }
    return xirang_manual_seed(seed);
  } catch (...) {
    return XR_ERROR;
  }
}

// The seed of device `index`'s default generator.
XIRANG_EXPORT int32_t xirang_shim_initial_seed(int32_t index, uint64_t* out) {
  try {
    *out = xirang::default_generator(static_cast<c10::DeviceIndex>(index)).current_seed();
    return XR_OK;
  } catch (...) {
    return XR_ERROR;
  }
}

// The state of device `index`'s default generator (PyTorch's CPU generator state, a byte tensor):
// with `out` null, only its length in `*len`; else copies min(cap, length) bytes. 0 on success.
XIRANG_EXPORT int32_t xirang_shim_get_rng_state(int32_t index, uint8_t* out, uint64_t cap, uint64_t* len) {
  try {
    auto gen = xirang::default_generator(static_cast<c10::DeviceIndex>(index));
    std::lock_guard<std::mutex> lock(gen.mutex());
    auto state = gen.get_state();
    *len = static_cast<uint64_t>(state.nbytes());
    if (out != nullptr) {
      std::memcpy(out, state.const_data_ptr(), std::min<uint64_t>(cap, *len));
    }
    return XR_OK;
  } catch (...) {
    return XR_ERROR;
  }
}

// Restores device `index`'s default generator from `len` bytes of a state read above.
XIRANG_EXPORT int32_t xirang_shim_set_rng_state(int32_t index, const uint8_t* state, uint64_t len) {
  try {
    auto gen = xirang::default_generator(static_cast<c10::DeviceIndex>(index));
    auto t = at::empty({static_cast<int64_t>(len)}, at::TensorOptions().dtype(at::kByte));
    std::memcpy(t.data_ptr(), state, len);
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(t);
    return XR_OK;
  } catch (...) {
    return XR_ERROR;
  }
}
