// Device time in PyTorch's profiler: the PrivateUse1 profiler stubs, as CUDA's (stubs/cuda.cpp).
// `torch.profiler.profile(activities=[CPU, PrivateUse1])` (PyTorch's KINETO_PRIVATEUSE1_FALLBACK
// state) and `torch.autograd.profiler.profile(use_device="xirang")` record a runtime event on the
// current stream around every operator and report the device time between the two, which covers
// the kernels the operator queued, not the host's time to queue them.
#include "shim.h"

#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

namespace xirang {

namespace {

struct Recorded {
  c10::DeviceIndex device;
  uint64_t event;
};

struct XirangProfilerStubs final : torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    auto dev = current_device();
    if (device != nullptr) {
      *device = dev;
    }
    uint64_t id = 0;
    check(xirang_event_create(dev, &id), "creating a profiler event");
    *event = std::shared_ptr<void>(new Recorded{dev, id}, [](void* p) {
      auto* r = static_cast<Recorded*>(p);
      (void)xirang_event_destroy(r->device, r->event);
      delete r;
    });
    int64_t stream = 0;
    check(xirang_stream_current(dev, &stream), "reading the current stream");
    if (cpu_ns != nullptr) {
      *cpu_ns = c10::getTime();
    }
    check(xirang_event_record(dev, id, stream), "recording a profiler event");
  }

  // Microseconds between two recorded events, once both have run (CUDA's stub's unit).
  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* event,
                const torch::profiler::impl::ProfilerVoidEventStub* event2) const override {
    auto* a = static_cast<const Recorded*>(event->get());
    auto* b = static_cast<const Recorded*>(event2->get());
    TORCH_CHECK(a != nullptr && b != nullptr, "xirang profiler: an event was not recorded");
    check(xirang_event_synchronize(a->device, a->event), "waiting for a profiler event");
    check(xirang_event_synchronize(b->device, b->event), "waiting for a profiler event");
    double ms = 0;
    check(xirang_event_elapsed(a->device, a->event, b->event, &ms), "timing profiler events");
    return static_cast<float>(ms * 1000.0);
  }

  // Ranges and marks have no device-side counterpart in the runtime (CUDA forwards them to NVTX).
  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}

  bool enabled() const override {
    return true;
  }

  void onEachDevice(std::function<void(int)> op) const override {
    auto prev = current_device();
    for (int32_t i = 0; i < xirang_device_count(); ++i) {
      check(xirang_set_device(i), "setting the device");
      op(i);
    }
    check(xirang_set_device(prev), "setting the device");
  }

  void synchronize() const override {
    for (int32_t i = 0; i < xirang_device_count(); ++i) {
      check(xirang_synchronize(i), "synchronizing the device");
    }
  }
};

XirangProfilerStubs g_stubs;

[[maybe_unused]] const bool g_stubs_registered = [] {
  torch::profiler::impl::registerPrivateUse1Methods(&g_stubs);
  return true;
}();

}  // namespace

}  // namespace xirang
