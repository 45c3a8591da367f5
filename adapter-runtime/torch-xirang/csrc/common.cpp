// Errors, the current device, and the boundary's view of a tensor.
#include "shim.h"

#include <c10/util/Exception.h>

namespace xirang {

void raise(int32_t status, const char* what) {
  std::string msg = xirang_last_error();
  if (msg.empty()) {
    msg = std::string("xirang: ") + what + " failed (status " + std::to_string(status) + ")";
  }
  switch (status) {
    case XR_OUT_OF_MEMORY:
      TORCH_CHECK_WITH(OutOfMemoryError, false, msg);
    case XR_INDEX:
      TORCH_CHECK_INDEX(false, msg);
    case XR_VALUE:
      TORCH_CHECK_VALUE(false, msg);
    case XR_TYPE:
      TORCH_CHECK_TYPE(false, msg);
    case XR_NOT_IMPLEMENTED:
      TORCH_CHECK_NOT_IMPLEMENTED(false, msg);
    default:
      TORCH_CHECK(false, msg);
  }
}

c10::DeviceIndex current_device() {
  int32_t d = 0;
  check(xirang_current_device(&d), "reading the current device");
  return static_cast<c10::DeviceIndex>(d);
}

bool describe(const at::Tensor& t, XrTensor* out) {
  if (!t.defined() || t.layout() != c10::kStrided || !t.has_storage()) {
    return false;
  }
  const auto& storage = t.storage();
  *out = XrTensor{};
  out->sizes = t.sizes().data();
  out->strides = t.strides().data();
  out->ndim = t.dim();
  out->offset = t.storage_offset();
  out->dtype = static_cast<int32_t>(t.scalar_type());
  out->itemsize = static_cast<int32_t>(t.element_size());
  out->alias = -1;
  out->data = reinterpret_cast<uint64_t>(storage.data_ptr().get());
  out->nbytes = storage.nbytes();
  if (t.device().type() == kDevice) {
    out->storage = storage_handle(storage);
    out->device = t.device().index();
    return out->storage != nullptr;
  }
  if (t.device().is_cpu()) {
    out->storage = nullptr;
    out->device = -1;
    return out->data != 0 || out->nbytes == 0;
  }
  return false;
}

std::string qualified_name(const c10::OperatorName& name) {
  std::string n = name.name;
  if (n.rfind("aten::", 0) == 0) {
    n = n.substr(6);
  }
  if (!name.overload_name.empty()) {
    n += "." + name.overload_name;
  }
  return n;
}

}  // namespace xirang
