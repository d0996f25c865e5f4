// Nested tensors on the tpu: PyTorch's own device-independent kernels for
// reading a nested tensor's layout and padding it, registered for the tpu's
// nested key as PyTorch registers them for HPU. They run on the host-side
// sizes and on tpu ops; torch_tpu/_nested.py builds nn.TransformerEncoder's
// nested fast path on them.
#include <ATen/ops/_nested_tensor_size_native.h>
#include <ATen/ops/_nested_tensor_storage_offsets_native.h>
#include <ATen/ops/_nested_tensor_strides_native.h>
#include <ATen/ops/to_padded_tensor_native.h>
#include <torch/library.h>

TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  m.impl("_nested_tensor_size", TORCH_FN(at::native::_nested_tensor_size));
  m.impl("_nested_tensor_strides", TORCH_FN(at::native::_nested_tensor_strides));
  m.impl("_nested_tensor_storage_offsets", TORCH_FN(at::native::_nested_tensor_storage_offsets));
  m.impl("to_padded_tensor", TORCH_FN(at::native::NestedTensor_to_padded_tensor_generic));
}
