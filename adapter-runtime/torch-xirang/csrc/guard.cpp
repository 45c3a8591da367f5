// The device guard: devices, streams and events of the runtime (per-thread current device and
// stream, as CUDA's). Streams keep the runtime's ids; the default stream is 0. An event handle is
// the runtime's event id, and remembers its device.
#include "shim.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <array>
#include <atomic>
#include <mutex>
#include <unordered_map>

namespace xirang {

namespace {

std::mutex g_events_mu;
std::unordered_map<uint64_t, c10::DeviceIndex> g_event_device;

// Streams handed out by getStreamFromGlobalPool: four per device, created once, round robin.
constexpr int kPoolSize = 4;
constexpr int kMaxDevices = 64;
std::mutex g_pool_mu;
std::array<std::array<int64_t, kPoolSize>, kMaxDevices> g_pool{};
std::array<std::atomic<uint32_t>, kMaxDevices> g_pool_next{};

c10::DeviceIndex event_device(void* event, c10::DeviceIndex fallback) {
  std::lock_guard<std::mutex> lock(g_events_mu);
  auto it = g_event_device.find(reinterpret_cast<uint64_t>(event));
  return it == g_event_device.end() ? fallback : it->second;
}

struct XirangGuardImpl final : c10::impl::DeviceGuardImplInterface {
  XirangGuardImpl() = default;
  explicit XirangGuardImpl(c10::DeviceType t) {
    TORCH_CHECK(t == kDevice, "XirangGuardImpl initialized with non-PrivateUse1 DeviceType: ", t);
  }

  c10::DeviceType type() const override {
    return kDevice;
  }

  c10::Device exchangeDevice(c10::Device d) const override {
    auto old = getDevice();
    if (d.index() != old.index()) {
      setDevice(d);
    }
    return old;
  }

  c10::Device getDevice() const override {
    return c10::Device(kDevice, current_device());
  }

  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kDevice, "expected a xirang device, got ", d);
    check(xirang_set_device(d.index()), "setting the device");
  }

  void uncheckedSetDevice(c10::Device d) const noexcept override {
    (void)xirang_set_device(d.index());
  }

  c10::Stream getStream(c10::Device d) const override {
    int64_t id = 0;
    check(xirang_stream_current(d.index(), &id), "reading the current stream");
    return c10::Stream(c10::Stream::UNSAFE, d, id);
  }

  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::UNSAFE, d, 0);
  }

  c10::Stream getNewStream(c10::Device d, int priority = 0) const override {
    // torch.Stream("xirang") names no index: the stream is of the current device, and says so
    auto dev = d.index() < 0 ? c10::Device(kDevice, current_device()) : d;
    int64_t id = 0;
    check(xirang_stream_new(dev.index(), &id), "creating a stream");
    return c10::Stream(c10::Stream::UNSAFE, dev, id);
  }

  c10::Stream getStreamFromGlobalPool(c10::Device d, bool isHighPriority = false) const override {
    auto i = d.index() < 0 ? current_device() : d.index();
    TORCH_CHECK(i < kMaxDevices, "xirang: device index ", i, " beyond the stream pool");
    auto slot = g_pool_next[i].fetch_add(1) % kPoolSize;
    std::lock_guard<std::mutex> lock(g_pool_mu);
    if (g_pool[i][slot] == 0) {
      check(xirang_stream_new(i, &g_pool[i][slot]), "creating a stream");
    }
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kDevice, i), g_pool[i][slot]);
  }

  c10::Stream exchangeStream(c10::Stream s) const override {
    auto old = getStream(s.device());
    check(xirang_stream_set(s.device_index(), s.id()), "setting the current stream");
    return old;
  }

  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(xirang_device_count());
  }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "Event device index ",
                device_index, " does not match recording stream's device index ", stream.device_index(), ".");
    auto dev = stream.device_index();
    uint64_t id = reinterpret_cast<uint64_t>(*event);
    if (id == 0) {
      check(xirang_event_create(dev, &id), "creating an event");
      std::lock_guard<std::mutex> lock(g_events_mu);
      g_event_device[id] = dev;
    }
    check(xirang_event_record(dev, id, stream.id()), "recording an event");
    *event = reinterpret_cast<void*>(id);
  }

  void block(void* event, const c10::Stream& stream) const override {
    if (event == nullptr) {
      return;
    }
    check(xirang_event_block(stream.device_index(), stream.id(), reinterpret_cast<uint64_t>(event)),
          "making a stream wait for an event");
  }

  // Without waiting: whether the work recorded before the event has run (an event never
  // recorded has, as CUDA's).
  bool queryEvent(void* event) const override {
    if (event == nullptr) {
      return true;
    }
    int32_t done = 0;
    check(xirang_event_query(event_device(event, -1), reinterpret_cast<uint64_t>(event), &done),
          "querying an event");
    return done != 0;
  }

  void destroyEvent(void* event, const c10::DeviceIndex device_index) const noexcept override {
    if (event == nullptr) {
      return;
    }
    auto id = reinterpret_cast<uint64_t>(event);
    auto dev = event_device(event, device_index);
    (void)xirang_event_destroy(dev, id);
    std::lock_guard<std::mutex> lock(g_events_mu);
    g_event_device.erase(id);
  }

  // Without waiting: a fresh event recorded on the stream, queried (cudaStreamQuery's answer).
  bool queryStream(const c10::Stream& stream) const override {
    auto dev = stream.device_index();
    uint64_t id = 0;
    check(xirang_event_create(dev, &id), "creating an event");
    int32_t done = 0;
    auto recorded = xirang_event_record(dev, id, stream.id());
    auto queried = recorded == XR_OK ? xirang_event_query(dev, id, &done) : recorded;
    (void)xirang_event_destroy(dev, id);
    check(queried, "querying a stream");
    return done != 0;
  }

  void synchronizeStream(const c10::Stream& stream) const override {
    check(xirang_stream_synchronize(stream.device_index(), stream.id()), "synchronizing a stream");
  }

  void synchronizeEvent(void* event) const override {
    if (event == nullptr) {
      return;
    }
    check(xirang_event_synchronize(event_device(event, -1), reinterpret_cast<uint64_t>(event)),
          "synchronizing an event");
  }

  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    check(xirang_synchronize(device_index), "synchronizing the device");
  }

  double elapsedTime(void* event1, void* event2, const c10::DeviceIndex device_index) const override {
    TORCH_CHECK(event1 && event2, "Both events must be recorded before calculating elapsed time.");
    double ms = 0;
    check(xirang_event_elapsed(event_device(event1, device_index), reinterpret_cast<uint64_t>(event1),
                               reinterpret_cast<uint64_t>(event2), &ms),
          "measuring the time between events");
    return ms;
  }
};

}  // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, XirangGuardImpl);

}  // namespace xirang
