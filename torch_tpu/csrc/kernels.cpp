// The kernels PyTorch needs registered directly for the tpu device (creation,
// views, copies, resize, item), and the one boxed fallback that sends every
// other ATen op to the C runtime's lowering table.
#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/IndexingUtils.h>
#include <ATen/native/layer_norm.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "bridge.h"

namespace torch_tpu {
namespace {

constexpr auto kTpu = c10::DeviceType::PrivateUse1;

int device_of(std::optional<at::Device> device) {
  int index = device.has_value() && device->has_index() ? device->index() : current_device();
  check_device_index(index);
  return index;
}

at::Tensor empty_memory_format(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout>, std::optional<at::Device> device,
                               std::optional<bool>, std::optional<at::MemoryFormat> memory_format) {
  c10::DeviceGuard guard(c10::Device(kTpu, static_cast<c10::DeviceIndex>(device_of(device))));
  auto type = dtype.value_or(at::get_default_dtype_as_scalartype());
  to_tpu_dtype(type, "torch.empty");
  return at::detail::empty_generic(size, allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   type, memory_format);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout>, std::optional<at::Device> device, std::optional<bool>) {
  c10::DeviceGuard guard(c10::Device(kTpu, static_cast<c10::DeviceIndex>(device_of(device))));
  auto type = dtype.value_or(at::get_default_dtype_as_scalartype());
  to_tpu_dtype(type, "torch.empty_strided");
  return at::detail::empty_strided_generic(size, stride, allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), type);
}

tpu_buffer* buffer_of(const c10::Storage& storage) { return static_cast<tpu_buffer*>(storage.data_ptr().get()); }

// Copies the first `numel` elements of one storage into a new, larger one.
void copy_storage_prefix(tpu_buffer* from, tpu_buffer* to, at::ScalarType type, int64_t numel) {
  tpu_tensor src{from, to_tpu_dtype(type, "resize_"), 1, {numel}, {1}, 0};
  tpu_tensor dst = src;
  dst.buffer = to;
  check(tpu_tensor_copy(&dst, &src));
}

const at::Tensor& resize_(const at::Tensor& self, at::IntArrayRef size,
                          std::optional<at::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  size_t item = self.dtype().itemsize();
  size_t needed = (static_cast<size_t>(self.storage_offset()) + static_cast<size_t>(self.numel())) * item;
  const c10::Storage& storage = self.storage();
  if (self.numel() > 0 && needed > storage.nbytes()) {
    TORCH_CHECK(storage.resizable(), "resize_: the storage of this tpu tensor is not resizable");
    c10::DeviceGuard guard(self.device());
    c10::DataPtr grown = allocator()->allocate(needed);
    size_t old_bytes = storage.nbytes();
    if (old_bytes >= item)
      copy_storage_prefix(buffer_of(storage), static_cast<tpu_buffer*>(grown.get()), self.scalar_type(),
                          static_cast<int64_t>(old_bytes / item));
    storage.unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(grown));
    storage.unsafeGetStorageImpl()->set_nbytes(needed);
  }
  if (memory_format.has_value()) impl->empty_tensor_restride(*memory_format);
  return self;
}

// A uint8 tensor over all of its storage: how PyTorch copies an untyped
// storage, whatever element type the storage holds.
bool is_storage_bytes(const at::Tensor& t) {
  return t.scalar_type() == at::kByte && t.storage_offset() == 0 && t.is_contiguous() &&
         static_cast<size_t>(t.numel()) == t.storage().nbytes();
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, int64_t offset, at::IntArrayRef size,
                        at::IntArrayRef stride) {
  // Bytes copied in by storage (torch.load) take the tensor's element type.
  if (source.nbytes() > 0) check(tpu_buffer_retype(buffer_of(source), to_tpu_dtype(self.scalar_type(), "set_")));
  self.unsafeGetTensorImpl()->set_storage_keep_dtype(std::move(source));
  self.unsafeGetTensorImpl()->set_sizes_and_strides(size, stride, offset);
  return self;
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  int64_t numel = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage(self, std::move(source), 0, {numel}, {1});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  return set_storage(self, source.storage(), source.storage_offset(), source.sizes(), source.strides());
}

// A tensor's conjugate and negative bits (lazy conj() and the negated
// imaginary part of a conjugate) say how its stored values read; copy_
// moves stored values, so it applies the bits itself, as ATen's copy does.
// stored_as gives what a tensor with `like`'s bits must store to read as
// `values` (a CPU tensor).
at::Tensor stored_as(at::Tensor values, const at::Tensor& like) {
  values = values.resolve_conj().resolve_neg();
  if (like.is_conj()) values = values.conj_physical();
  if (like.is_neg()) values = values.neg();
  return values;
}

// After a device-to-device copy of stored values: the destination's stored
// values conjugated or negated where the two tensors' bits differ.
void fix_bits(at::Tensor& self, const at::Tensor& src) {
  if (self.is_conj() == src.is_conj() && self.is_neg() == src.is_neg()) return;
  at::Tensor raw = self.alias();
  raw._set_conj(false);
  raw._set_neg(false);
  if (self.is_conj() != src.is_conj()) raw.conj_physical_();
  if (self.is_neg() != src.is_neg()) raw.neg_();
}

// Copies between tpu and host, or within tpu (an op program that converts
// dtype and broadcasts), for every layout on either side; whole storages
// byte for byte.
at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  if (self.numel() == 0) return self;
  bool to_tpu = self.device().type() == kTpu, from_tpu = src.device().type() == kTpu;
  if (to_tpu && from_tpu && self.device() == src.device()) {
    if (is_storage_bytes(self) && is_storage_bytes(src)) {
      check(tpu_buffer_copy(buffer_of(self.storage()), buffer_of(src.storage())));
      return self;
    }
    tpu_tensor src_view = to_tpu_tensor(src, "copy_");
    tpu_tensor dst_view = to_tpu_tensor(self, "copy_");
    check(tpu_tensor_copy(&dst_view, &src_view));
    fix_bits(self, src);
    return self;
  }
  if (to_tpu) {
    at::Tensor host = stored_as(src.to(at::kCPU).to(self.scalar_type()).expand_as(self), self).contiguous();
    if (is_storage_bytes(self)) {
      check(tpu_buffer_from_host(buffer_of(self.storage()), host.data_ptr()));
      return self;
    }
    tpu_tensor dst = to_tpu_tensor(self, "copy_");
    check(tpu_tensor_from_host(&dst, host.data_ptr()));
    return self;
  }
  TORCH_CHECK(from_tpu, "copy_: neither side is a tpu tensor");
  at::Tensor host = at::empty(src.sizes(), src.options().device(at::kCPU));
  if (is_storage_bytes(src)) {
    check(tpu_buffer_to_host(buffer_of(src.storage()), host.data_ptr()));
  } else {
    tpu_tensor view = to_tpu_tensor(src, "copy_");
    check(tpu_tensor_to_host(&view, host.data_ptr()));
  }
  host._set_conj(src.is_conj());
  host._set_neg(src.is_neg());
  self.copy_(host);
  return self;
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  at::Tensor out = dst;
  copy_(out, self, non_blocking);
  return out;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (!dst.sizes().equals(self.sizes())) dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

// Module.to("tpu") swaps a parameter's data in place, so weights tied
// across modules stay one Parameter, only where this is true. PyTorch's
// own answer (c10/core/TensorImpl.h) is "the same keys, or both dense on a
// backend it lists"; its list leaves PrivateUse1 to answer for itself.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](c10::DispatchKeySet keys) {
    using c10::BackendComponent;
    constexpr auto backends = c10::DispatchKeySet(
        {BackendComponent::CPUBit, BackendComponent::CUDABit, BackendComponent::MPSBit, BackendComponent::HIPBit,
         BackendComponent::XPUBit, BackendComponent::HPUBit, BackendComponent::MTIABit,
         BackendComponent::PrivateUse1Bit});
    return keys.has_any(c10::DispatchKeySet(c10::DispatchKey::Dense)) && keys.has_any(backends);
  };
  return self.key_set() == from.key_set() || (dense(self.key_set()) && dense(from.key_set()));
}

// Ops whose output length depends on the data, which no meta kernel can
// tell: the glue counts on the device (reading the count back is a sync, as
// in CUDA's kernels) and runs the lowering with the count as a trailing
// argument, into outputs of the lengths it now knows. The op's plan is
// looked up by its arguments, so `counts` holds everything that decides
// the output shapes (the count, and which outputs are asked for).
void run_counted(const char* name, std::initializer_list<at::Tensor> inputs, std::initializer_list<int64_t> counts,
                 std::initializer_list<at::Tensor> outs) {
  const at::Device device = outs.begin()->device();
  std::vector<tpu_arg> args;
  for (const at::Tensor& t : inputs) {
    TORCH_CHECK(t.device() == device, name, ": expected all tensors on ", device, ", but found one on ", t.device());
    args.emplace_back().kind = TPU_ARG_TENSOR;
    args.back().u.tensor = to_tpu_tensor(t, name);
  }
  for (int64_t count : counts) {
    args.emplace_back().kind = TPU_ARG_INT;
    args.back().u.i = count;
  }
  std::vector<tpu_tensor> views;
  std::vector<tpu_dtype> dtypes;
  std::vector<int> ranks;
  std::vector<const int64_t*> sizes;
  for (const at::Tensor& out : outs) views.push_back(to_tpu_tensor(out, name));
  for (const tpu_tensor& view : views) {
    dtypes.push_back(view.dtype);
    ranks.push_back(view.rank);
    sizes.push_back(view.sizes);
  }
  int out_count = static_cast<int>(views.size());
  tpu_op_call call{name, "", device.index(), args.data(), static_cast<int>(args.size()), views.data(), out_count};
  tpu_op_plan* plan = nullptr;
  check(tpu_op_lookup(&call, &plan));
  if (!plan) check(tpu_op_plan_create(&call, out_count, dtypes.data(), ranks.data(), sizes.data(), nullptr, nullptr, &plan));
  check(tpu_op_execute(plan, &call));
}

at::Tensor& masked_select_out(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "masked_select(): self and result must have the same scalar type");
  std::vector<int64_t> shape = at::infer_size(self.sizes(), mask.sizes());
  int64_t count = at::count_nonzero(mask.expand(shape)).item<int64_t>();
  at::native::resize_output(out, {count});
  run_counted("masked_select", {self, mask}, {count}, {out});
  return out;
}

at::Tensor masked_select(const at::Tensor& self, const at::Tensor& mask) {
  at::Tensor out = at::empty({0}, self.options());
  return masked_select_out(self, mask, out);
}

at::Tensor& nonzero_out(const at::Tensor& self, at::Tensor& out) {
  TORCH_CHECK(out.scalar_type() == at::kLong, "nonzero: expected out tensor to have scalar type Long but got ",
              out.scalar_type());
  int64_t count = at::count_nonzero(self).item<int64_t>();
  at::native::resize_output(out, {count, self.dim()});
  run_counted("nonzero", {self}, {count}, {out});
  return out;
}

at::Tensor nonzero(const at::Tensor& self) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return nonzero_out(self, out);
}

// bincount: the bins run to the largest value (at least minlength), read
// back with the smallest in one sync, as CUDA's kernel reads them, with
// PyTorch's checks. Weighted counts are float32 for float32 weights and
// float64 otherwise, and an empty input gives int64 zeros, as on CPU.
at::Tensor bincount(const at::Tensor& self, const std::optional<at::Tensor>& weights_given, int64_t minlength) {
  const at::Tensor weights = weights_given.value_or(at::Tensor());
  TORCH_CHECK(self.dim() == 1 && at::isIntegralType(self.scalar_type(), /*includeBool=*/false),
              "bincount: expected a 1-d tensor of non-negative integers, got ", self.scalar_type(), " of shape ",
              self.sizes());
  TORCH_CHECK(minlength >= 0, "bincount: minlength should be >= 0, got ", minlength);
  TORCH_CHECK(!weights.defined() || (weights.dim() == 1 && weights.size(0) == self.size(0)),
              "bincount: weights should be 1-d and as long as the input, got weights of shape ", weights.sizes(),
              " for input of shape ", self.sizes());
  int64_t length = minlength;
  if (self.numel() > 0) {
    at::Tensor range = at::stack({self.min(), self.max()}).to(at::kCPU, at::kLong);
    int64_t smallest = range[0].item<int64_t>(), largest = range[1].item<int64_t>();
    TORCH_CHECK(smallest >= 0, "bincount: expected non-negative values, got ", smallest, " in input of shape ",
                self.sizes());
    length = std::max(length, largest + 1);
  }
  at::ScalarType dtype = !weights.defined() || self.numel() == 0 ? at::kLong  // as on CPU
                         : weights.scalar_type() == at::kFloat ? at::kFloat
                                                               : at::kDouble;
  at::Tensor out = at::empty({length}, self.options().dtype(dtype));
  if (weights.defined()) run_counted("bincount", {self, weights}, {length}, {out});
  else run_counted("bincount", {self}, {length}, {out});
  return out;
}

// torch.unique (sorted, as on CUDA) and torch.unique_consecutive (whole
// tensors; not by dim): the groups are counted on the device (one sync),
// then one program sorts (unique) and groups. Not asked for, the inverse
// and the counts are empty, as on CPU and CUDA.
std::tuple<at::Tensor, at::Tensor, at::Tensor> run_grouped(const char* name, const at::Tensor& self, bool sort,
                                                            bool return_inverse, bool return_counts) {
  int64_t count = 0;
  if (self.numel() > 0) {
    at::Tensor values = sort ? std::get<0>(self.flatten().sort()) : self.flatten();
    count = 1 + values.slice(0, 1).ne(values.slice(0, 0, -1)).sum().item<int64_t>();
  }
  at::Tensor values = at::empty({count}, self.options());
  at::Tensor inverse = at::empty(return_inverse ? self.sizes() : at::IntArrayRef{0}, self.options().dtype(at::kLong));
  at::Tensor counts = at::empty({return_counts ? count : 0}, self.options().dtype(at::kLong));
  run_counted(name, {self}, {count, return_inverse, return_counts}, {values, inverse, counts});
  return {values, inverse, counts};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique2(const at::Tensor& self, bool sorted, bool return_inverse,
                                                        bool return_counts) {
  return run_grouped("_unique2", self, true, return_inverse, return_counts);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_consecutive(const at::Tensor& self, bool return_inverse,
                                                                   bool return_counts, std::optional<int64_t> dim) {
  TORCH_CHECK_NOT_IMPLEMENTED(!dim.has_value(), "unique_consecutive: dim= is not lowered for tpu (got dim=", *dim,
                              "); call it without dim, or on the CPU");
  return run_grouped("unique_consecutive", self, false, return_inverse, return_counts);
}

// repeat_interleave with a tensor of repeats (the index form: i repeated
// repeats[i] times; x.repeat_interleave(repeats, dim) selects by it). The
// length is the repeats' sum, read back with their smallest in one sync,
// unless output_size gives it, as on CUDA.
at::Tensor repeat_interleave_index(const at::Tensor& repeats, std::optional<c10::SymInt> output_size) {
  TORCH_CHECK(repeats.dim() == 1, "repeat_interleave only accept 1D vector as repeat, got shape ", repeats.sizes());
  TORCH_CHECK_NOT_IMPLEMENTED(repeats.scalar_type() == at::kLong || repeats.scalar_type() == at::kInt,
                              "repeat_interleave: repeats must be int64 or int32, got ", repeats.scalar_type());
  int64_t total = 0;
  if (output_size.has_value()) {
    total = output_size->guard_int(__FILE__, __LINE__);
  } else if (repeats.numel() > 0) {
    at::Tensor range = at::stack({repeats.min().to(at::kLong), repeats.sum(at::kLong)}).cpu();
    TORCH_CHECK(range[0].item<int64_t>() >= 0, "repeats can not be negative, got ",
                range[0].item<int64_t>(), " in repeats of shape ", repeats.sizes());
    total = range[1].item<int64_t>();
  }
  at::Tensor out = at::empty({total}, repeats.options());
  run_counted("repeat_interleave", {repeats}, {total}, {out});
  return out;
}

// rrelu_with_noise_ writes self and noise, in the opposite order to the
// lowering's outputs (noise, result: the out-of-place op's); it runs as
// that op and a copy back.
at::Tensor& rrelu_with_noise_in_place(at::Tensor& self, at::Tensor& noise, const at::Scalar& lower,
                                      const at::Scalar& upper, bool training, std::optional<at::Generator> generator) {
  return self.copy_(at::rrelu_with_noise(self, noise, lower, upper, training, generator));
}

// torch.equal: the same shape and every element equal (NaN never is),
// read back in one sync; tensors of other dtypes compare by value, as on CPU.
bool equal(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.device() == other.device(), "equal: expected both tensors on ", self.device(),
              ", but found one on ", other.device());
  return self.sizes().equals(other.sizes()) && at::eq(self, other).all().item<bool>();
}

// x[mask]: boolean (or uint8) masks among the indices select by data. Each
// becomes its nonzero positions (counted on the device, one sync, as on
// CUDA), and the op runs as integer indexing through the fallback.
at::Tensor index_tensor(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  static const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::index", "Tensor");
  bool masked = false;
  for (const std::optional<at::Tensor>& i : indices)
    masked = masked || (i.has_value() && i->defined() && (i->scalar_type() == at::kBool || i->scalar_type() == at::kByte));
  c10::List<std::optional<at::Tensor>> positions;  // a copy of a c10::List would share its items
  if (masked) {
    for (const at::Tensor& t : at::native::expandTensors(self, indices))
      positions.push_back(t.defined() ? std::optional<at::Tensor>(t) : std::nullopt);
  }
  torch::jit::Stack stack{self, masked ? positions : indices};
  tpu_fallback(op, &stack);
  return stack[0].toTensor();
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  at::Tensor host = at::empty({}, self.options().device(at::kCPU));
  tpu_tensor view = to_tpu_tensor(self, "item");
  check(tpu_tensor_to_host(&view, host.data_ptr()));
  return at::_local_scalar_dense(host);
}

// rms_norm is CompositeImplicitAutograd: for devices other than CUDA it runs
// as six programs forward and about a dozen backward. _fused_rms_norm (one
// lowering each way, its derivative PyTorch's) is what CUDA takes. With the
// checks and messages of PyTorch's own rms_norm.
at::Tensor rms_norm(const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
                    const std::optional<at::Tensor>& weight, std::optional<double> eps) {
  at::native::_check_rms_norm_inputs_symint(input, normalized_shape, weight.value_or(at::Tensor()));
  return std::get<0>(at::_fused_rms_norm(input, C10_AS_INTARRAYREF_SLOW(normalized_shape), weight, eps));
}

}  // namespace

// At the autograd key, so that autograd records _fused_rms_norm's backward;
// at the backend key too, for inference mode, which skips autograd keys.
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) { m.impl("rms_norm", rms_norm); }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("rms_norm", rms_norm);
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", at::native::as_strided_tensorimpl);
  m.impl("view", at::native::view);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  m.impl("unfold", at::native::unfold);
  // Views that change the element type share the storage; the runtime
  // reads complex storage as float pairs and back (exec/view.c).
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
  m.impl("resize_", resize_);
  m.impl("set_.source_Storage_storage_offset", set_storage);
  m.impl("set_.source_Tensor", set_source_tensor);
  m.impl("set_.source_Storage", set_source_storage);
  m.impl("copy_", copy_);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
  m.impl("masked_select", masked_select);
  m.impl("masked_select.out", masked_select_out);
  m.impl("nonzero", nonzero);
  m.impl("nonzero.out", nonzero_out);
  m.impl("bincount", bincount);
  m.impl("_unique2", unique2);
  m.impl("unique_consecutive", unique_consecutive);
  m.impl("equal", equal);
  m.impl("rrelu_with_noise_", rrelu_with_noise_in_place);
  m.impl("repeat_interleave.Tensor", repeat_interleave_index);
  m.impl("index.Tensor", index_tensor);
  // convolution's own kernels send other devices to convolution_overrideable,
  // which has no meta kernel; these two do, so they go to the fallback.
  m.impl("convolution", torch::CppFunction::makeFromBoxedFunction<&tpu_fallback>());
  m.impl("convolution_backward", torch::CppFunction::makeFromBoxedFunction<&tpu_fallback>());
  // _grouped_mm's CompositeExplicitAutograd kernel multiplies group by
  // group, reading each offset back to the host; the lowering does all
  // groups in one program.
  m.impl("_grouped_mm", torch::CppFunction::makeFromBoxedFunction<&tpu_fallback>());
  // conj_physical_'s CompositeExplicitAutograd kernel calls the CPU/CUDA
  // kernel directly; the lowering does it.
  m.impl("conj_physical_", torch::CppFunction::makeFromBoxedFunction<&tpu_fallback>());
  // PyTorch's kernels of the attention form it leaves to other devices
  // (see attention_choice.cpp) only raise; the lowering is one program.
  m.impl("_scaled_dot_product_fused_attention_overrideable",
         torch::CppFunction::makeFromBoxedFunction<&tpu_fallback>());
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward",
         torch::CppFunction::makeFromBoxedFunction<&tpu_fallback>());
  // These ops' composite kernels would win over the fallback and run as
  // several programs: logsumexp as nine (max, subtract, exp, sum, log, ...),
  // group norm as seven and layer norm as two (a batch norm, then the affine
  // part), binary_cross_entropy_with_logits as six, _safe_softmax
  // (attention's math form) as five, masked_fill, constant_pad_nd and
  // index_put as a fill or clone and then a write, isinf as abs and a
  // compare (all CompositeExplicitAutograd), and _fused_rms_norm (which
  // rms_norm above calls) as six (CompositeImplicitAutograd: with a backend
  // kernel, its autograd key takes its derivative instead of the composite).
  // Each lowering is one. Their autograd formulas stay PyTorch's.
  for (const char* name : {"logsumexp", "logsumexp.out", "masked_fill.Scalar", "masked_fill.Tensor",
                           "constant_pad_nd", "isinf", "native_layer_norm", "native_group_norm",
                           "binary_cross_entropy_with_logits", "_safe_softmax", "index_put", "_fused_rms_norm"})
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&tpu_fallback>());
  // PyTorch's CompositeExplicitAutograd kernels of the _foreach_ ops loop
  // over per-tensor ops and would win over the fallback; foreach ops with a
  // lowering go to the fallback instead, one program per call.
  for (const c10::OperatorName& op : c10::Dispatcher::singleton().getAllOpNames()) {
    if (op.name.rfind("aten::_foreach_", 0) != 0 || !tpu_op_supported(op.name.c_str() + 6, op.overload_name.c_str()))
      continue;
    std::string name = op.name.substr(6) + (op.overload_name.empty() ? "" : "." + op.overload_name);
    m.impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&tpu_fallback>());
  }
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&tpu_fallback>());
}

}  // namespace torch_tpu
