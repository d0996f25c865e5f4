// Nested tensors on the tpu.
//
// Strided nested tensors (torch.nested's default layout): PyTorch's own
// device-independent kernels, registered for the tpu's nested key as
// PyTorch registers them for HPU. They run on the host-side sizes and on
// tpu ops over the one buffer (some loop over the rows, one program each).
// torch_tpu/_nested.py builds nn.TransformerEncoder's nested fast path on the
// layout accessors and padding; scaled_dot_product_attention on jagged
// tensors takes its math form, which turns q, k and v into strided nested
// tensors and runs the transposes, products, softmax and dropout below (and
// their backward) on them, as on CPU.
//
// Jagged nested tensors (layout=torch.jagged) are a Python subclass over a
// dense values tensor and offsets; their padding and unpadding are the
// lowerings of csrc/ops/jagged.c, run by the fallback.
// _padded_dense_to_jagged_forward has no meta kernel, as its length may be
// a value on the device: here it gets one for a given length, and when the
// length is absent the kernel below reads it back first.
#include <ATen/ops/_nested_tensor_size_native.h>
#include <ATen/ops/_nested_tensor_storage_offsets_native.h>
#include <ATen/ops/_nested_tensor_strides_native.h>
#include <ATen/ops/_nested_view_from_buffer_native.h>
#include <ATen/ops/_safe_softmax_native.h>
#include <ATen/ops/_softmax_native.h>
#include <ATen/ops/_softmax_backward_data_native.h>
#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/add_native.h>
#include <ATen/ops/alias_native.h>
#include <ATen/ops/all_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/detach_native.h>
#include <ATen/ops/div_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/fill_native.h>
#include <ATen/ops/is_same_size_native.h>
#include <ATen/ops/isinf_native.h>
#include <ATen/ops/isnan_native.h>
#include <ATen/ops/isneginf_native.h>
#include <ATen/ops/isposinf_native.h>
#include <ATen/ops/logical_not_native.h>
#include <ATen/ops/masked_fill_native.h>
#include <ATen/ops/matmul_native.h>
#include <ATen/ops/matmul_backward_native.h>
#include <ATen/ops/mul_native.h>
#include <ATen/ops/native_dropout_native.h>
#include <ATen/ops/neg_native.h>
#include <ATen/ops/ones_like_native.h>
#include <ATen/ops/select_native.h>
#include <ATen/ops/split_with_sizes_native.h>
#include <ATen/ops/sub_native.h>
#include <ATen/ops/to_padded_tensor_native.h>
#include <ATen/ops/transpose_native.h>
#include <ATen/ops/unbind_native.h>
#include <ATen/ops/unsqueeze_native.h>
#include <ATen/ops/values_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/where_native.h>
#include <ATen/ops/zero_native.h>
#include <torch/library.h>

#include "bridge.h"

namespace torch_tpu {
namespace {

constexpr const char* kPaddedToJagged = "_padded_dense_to_jagged_forward";

// PyTorch's CPU kernel's argument checks, with the shapes in the message.
void check_padded_to_jagged(const at::Tensor& padded, at::TensorList offsets) {
  TORCH_CHECK_NOT_IMPLEMENTED(offsets.size() == 1, kPaddedToJagged,
                              "(): only one jagged dim is supported (as on CPU and CUDA), got ", offsets.size(),
                              " offsets tensors for padded of shape ", padded.sizes());
  TORCH_CHECK(offsets[0].dim() == 1 && offsets[0].numel() >= 1, kPaddedToJagged,
              "(): expected 1-d offsets with at least one entry, but got offsets of shape ", offsets[0].sizes(),
              " for padded of shape ", padded.sizes());
  TORCH_CHECK(padded.dim() >= 2, kPaddedToJagged, "(): expected padded dim >= 2, but padded.dim() == ",
              padded.dim(), " (shape ", padded.sizes(), ")");
}

// The output of a given length: [total_L, padded.shape[2:]].
at::Tensor padded_dense_to_jagged_meta(const at::Tensor& padded, at::TensorList offsets,
                                       std::optional<c10::SymInt> total_L) {
  check_padded_to_jagged(padded, offsets);
  TORCH_CHECK(total_L.has_value(), kPaddedToJagged,
              "(): on the meta device the output's length must be given (total_L=), as it is the offsets' "
              "last value");
  std::vector<c10::SymInt> shape{*total_L};
  for (int64_t d = 2; d < padded.dim(); d++) shape.push_back(padded.sym_size(d));
  return at::empty_symint(shape, padded.options());
}

// Without total_L the length is offsets[-1], read back with the longest
// row in one sync (the CPU reads each offset), and a row longer than the
// padded width raises the CPU's error; then the fallback runs the lowering.
// Given total_L, nothing is read back, as on CUDA.
void padded_dense_to_jagged(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  c10::IValue& total_L = stack->back();
  if (total_L.isNone()) {
    const at::Tensor& padded = (*stack)[stack->size() - 3].toTensor();
    std::vector<at::Tensor> offsets = (*stack)[stack->size() - 2].toTensorVector();
    check_padded_to_jagged(padded, offsets);
    at::Tensor o = offsets[0].to(at::kLong);
    at::Tensor longest = o.numel() > 1 ? (o.slice(0, 1) - o.slice(0, 0, -1)).max() : at::zeros({}, o.options());
    at::Tensor read = at::stack({o[-1], longest}).cpu();
    int64_t length = read[0].item<int64_t>(), longest_row = read[1].item<int64_t>();
    TORCH_CHECK(longest_row <= padded.size(1), kPaddedToJagged, "(): found batch item of length ", longest_row,
                " when max length specified by padded input is ", padded.size(1), " (padded of shape ",
                padded.sizes(), ")");
    TORCH_CHECK(length >= 0, kPaddedToJagged, "(): expected a non-negative final offset, got ", length,
                " for padded of shape ", padded.sizes());
    total_L = c10::IValue(length);
  }
  tpu_fallback(op, stack);
}

}  // namespace
}  // namespace torch_tpu

TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  m.impl("_nested_tensor_size", TORCH_FN(at::native::_nested_tensor_size));
  m.impl("_nested_tensor_strides", TORCH_FN(at::native::_nested_tensor_strides));
  m.impl("_nested_tensor_storage_offsets", TORCH_FN(at::native::_nested_tensor_storage_offsets));
  m.impl("to_padded_tensor", TORCH_FN(at::native::NestedTensor_to_padded_tensor_generic));
  // Views, copies and conversions.
  m.impl("alias", TORCH_FN(at::native::alias_nested));
  m.impl("detach", TORCH_FN(at::native::detach));
  m.impl("view", TORCH_FN(at::native::view_nested));
  m.impl("values", TORCH_FN(at::native::values_nested));
  m.impl("transpose.int", TORCH_FN(at::native::transpose_nested));
  m.impl("unsqueeze", TORCH_FN(at::native::unsqueeze_nested));
  m.impl("select.int", TORCH_FN(at::native::select_nested));
  m.impl("unbind.int", TORCH_FN(at::native::NestedTensor_unbind));
  m.impl("split_with_sizes", TORCH_FN(at::native::split_with_sizes_nested));
  m.impl("is_same_size", TORCH_FN(at::native::nested_is_same_size));
  m.impl("clone", TORCH_FN(at::native::clone_nested));
  m.impl("copy_", TORCH_FN(at::native::copy_nested_));
  m.impl("_to_copy", TORCH_FN(at::native::_to_copy_nested));
  m.impl("empty_like", TORCH_FN(at::native::empty_like_nested));
  m.impl("ones_like", TORCH_FN(at::native::ones_like));
  m.impl("zero_", TORCH_FN(at::native::zero_nested_));
  m.impl("fill_.Scalar", static_cast<at::Tensor& (*)(at::Tensor&, const at::Scalar&)>(&at::native::fill_nested_));
  // Arithmetic, and the tests and selections of _safe_softmax.
  m.impl("add.Tensor", TORCH_FN(at::native::NestedTensor_add_Tensor));
  m.impl("sub.Tensor", TORCH_FN(at::native::NestedTensor_sub_Tensor));
  m.impl("mul.Tensor", TORCH_FN(at::native::NestedTensor_mul_Tensor));
  m.impl("mul.Scalar", TORCH_FN(at::native::NestedTensor_mul_Scalar));
  m.impl("div.Tensor", TORCH_FN(at::native::NestedTensor_div_Tensor));
  m.impl("div.Scalar", TORCH_FN(at::native::NestedTensor_div_Scalar));
  m.impl("neg", TORCH_FN(at::native::NestedTensor_neg));
  m.impl("isinf", TORCH_FN(at::native::NestedTensor_isinf));
  m.impl("isnan", TORCH_FN(at::native::NestedTensor_isnan));
  m.impl("isneginf", TORCH_FN(at::native::NestedTensor_isneginf));
  m.impl("isposinf", TORCH_FN(at::native::NestedTensor_isposinf));
  m.impl("all.dim", TORCH_FN(at::native::NestedTensor_all));
  m.impl("logical_not", TORCH_FN(at::native::NestedTensor_logical_not));
  m.impl("where.self", TORCH_FN(at::native::NestedTensor_where));
  m.impl("where.self_out", TORCH_FN(at::native::NestedTensor_where_out));
  m.impl("masked_fill.Scalar", TORCH_FN(at::native::NestedTensor_masked_fill));
  // Attention's math form.
  m.impl("matmul", TORCH_FN(at::native::matmul_nested));
  m.impl("matmul_backward", TORCH_FN(at::native::matmul_backward_nested));
  m.impl("_softmax", TORCH_FN(at::native::softmax_nested));
  m.impl("_safe_softmax", TORCH_FN(at::native::_safe_softmax));
  m.impl("_softmax_backward_data", TORCH_FN(at::native::nested_softmax_backward));
  m.impl("native_dropout", TORCH_FN(at::native::native_dropout_nested));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // A strided nested tensor over a dense buffer (the math form's backward).
  m.impl("_nested_view_from_buffer", TORCH_FN(at::native::_nested_view_from_buffer));
  m.impl("_padded_dense_to_jagged_forward",
         torch::CppFunction::makeFromBoxedFunction<&torch_tpu::padded_dense_to_jagged>());
}

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("_padded_dense_to_jagged_forward", TORCH_FN(torch_tpu::padded_dense_to_jagged_meta));
}
