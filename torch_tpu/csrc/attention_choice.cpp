// Which kernel F.scaled_dot_product_attention uses on the tpu. PyTorch asks
// each device through _fused_sdp_choice_stub. The answer "overrideable"
// sends the call to _scaled_dot_product_fused_attention_overrideable and its
// backward, which the C runtime lowers as one op each (csrc/ops/attention.c):
// products in the inputs' own dtype, scores and softmax in float32, and only
// the log-sum-exp kept for the backward. Anything else takes PyTorch's math
// form, which casts half inputs to float32 and keeps the probabilities.
#include <ATen/Context.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>

namespace torch_tpu {
namespace {

bool fused_form_fits(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const std::optional<at::Tensor>& mask, double dropout_p) {
  // Dropout would need the RNG inside the op; grouped-query heads are not
  // passed to the fused op; a mask that wants a gradient is rare enough.
  if (dropout_p > 0.0 || q.is_nested() || k.is_nested() || v.is_nested()) return false;
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) return false;
  // Sizes may be symbolic under torch.compile: compared as SymInts.
  if (q.sym_size(1) != k.sym_size(1) || k.sym_size(1) != v.sym_size(1)) return false;
  at::ScalarType t = q.scalar_type();
  if (!at::isFloatingType(t) || k.scalar_type() != t || v.scalar_type() != t) return false;
  return !(mask.has_value() && mask->defined() && mask->requires_grad());
}

// The fused form is the default for float16, bfloat16 and float32, as CUDA
// defaults to its fused kernels: the half types keep their products in
// bfloat16 or float16 (the math form would cast them to float32), and all
// three are faster than the math form on the CPU plugin (benchmarks/
// attention.py). float64 takes the math form, since PyTorch's fused op keeps
// its log-sum-exp in float32; torch.nn.attention.sdpa_kernel(OVERRIDEABLE)
// still forces it. With neither form allowed, PyTorch raises its "no viable
// backend" error.
int64_t choose_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const std::optional<at::Tensor>& mask, double dropout_p, bool /*is_causal*/,
                         std::optional<double> /*scale*/, bool /*enable_gqa*/) {
  const at::Context& context = at::globalContext();
  bool fused = context.userEnabledOverrideableSDP() && fused_form_fits(q, k, v, mask, dropout_p);
  bool math = context.userEnabledMathSDP();
  bool fused_by_default = q.scalar_type() != at::kDouble;
  at::SDPBackend choice = fused && (fused_by_default || !math) ? at::SDPBackend::overrideable
                          : math                   ? at::SDPBackend::math
                                                   : at::SDPBackend::error;
  return static_cast<int64_t>(choice);
}

}  // namespace
}  // namespace torch_tpu

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_tpu::choose_attention)
}  // namespace at::native
