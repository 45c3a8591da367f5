// Convolution on device `xirang`: PyTorch routes every convolution of a PrivateUse1 tensor to
// `convolution_overrideable` / `convolution_backward_overrideable`, whose default kernels only throw,
// and which have no CPU kernel the boxed fallback could run. These two entry points run PyTorch's CPU
// convolution (forward, or backward with the output mask) on host copies and return device tensors,
// counted as fallbacks of those operators under the runtime's policy (error mode raises, naming
// them), like every other operator the adapter does not serve.
#include "shim.h"

namespace xirang {
namespace {

void admit(const std::string& name) {
  check(xirang_fallback_admit(reinterpret_cast<const uint8_t*>(name.data()), name.size()), name.c_str());
}

at::Tensor to_device(const at::Tensor& t, const at::Device& device) {
  return t.defined() ? t.to(device) : t;
}

at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias, c10::SymIntArrayRef stride,
                                    c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, bool transposed,
                                    c10::SymIntArrayRef output_padding, c10::SymInt groups) {
  admit("convolution_overrideable");
  std::optional<at::Tensor> b;
  if (bias.has_value() && bias->defined()) {
    b = bias->cpu();
  }
  auto out = at::convolution_symint(input.cpu(), weight.cpu(), b, stride, padding, dilation, transposed,
                                    output_padding, std::move(groups));
  return out.to(input.device());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::SymIntArrayRef stride,
    c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, bool transposed, c10::SymIntArrayRef output_padding,
    c10::SymInt groups, std::array<bool, 3> output_mask) {
  admit("convolution_backward_overrideable");
  // the bias has one value per output channel
  c10::SymInt channels = transposed ? weight.sym_size(1) * groups : weight.sym_size(0);
  std::vector<c10::SymInt> bias_sizes{channels};
  auto [gi, gw, gb] = at::convolution_backward_symint(grad_output.cpu(), input.cpu(), weight.cpu(),
                                                      c10::SymIntArrayRef(bias_sizes), stride, padding, dilation,
                                                      transposed, output_padding, std::move(groups), output_mask);
  const auto device = input.device();
  return {to_device(gi, device), to_device(gw, device), to_device(gb, device)};
}

}  // namespace
}  // namespace xirang

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", TORCH_FN(xirang::convolution_overrideable));
  m.impl("convolution_backward_overrideable", TORCH_FN(xirang::convolution_backward_overrideable));
}
