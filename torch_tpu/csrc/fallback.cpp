// The one boxed kernel behind every lowered ATen op: converts the stack to a
// tpu_op_call, asks PyTorch's meta kernels for output types on the first
// call of each signature, allocates outputs and runs the C op.
#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <c10/util/SmallVector.h>

#include <cstring>
#include <memory>
#include <sstream>
#include <unordered_map>

#include "bridge.h"

namespace torch_tpu {
namespace {

constexpr auto kTpu = c10::DeviceType::PrivateUse1;

bool is_out_argument(const c10::Argument& a) {
  return a.alias_info() && a.alias_info()->isWrite() && a.kwarg_only();
}

bool is_mutable(const c10::Argument& a) { return a.alias_info() && a.alias_info()->isWrite(); }

c10::TypeKind kind_of(const c10::Argument& a) {
  c10::TypePtr type = a.real_type();
  if (auto optional = type->cast<c10::OptionalType>()) type = optional->getElementType();
  return type->kind();
}

// What the fallback reads from an operator's schema, worked out at its first
// call on each thread: walking the schema's types and names, and finding
// the op in the lowering table, cost more than the rest of a small op's
// dispatch.
struct OpInfo {
  std::string name;      // "aten::add"
  std::string overload;  // "Tensor"
  std::string base;      // "add": the lowering table's name
  bool lowered;          // an aten op the lowering table has
  bool draws_rng;        // random without a Generator argument: draws from the device's default one
  // The fused optimizer steps (torch.optim's fused=True) take their
  // hyperparameters as `float`, which would be compiled in; a learning-rate
  // or momentum schedule changes them every step, so they go as runtime
  // numbers instead.
  bool floats_at_runtime;
  bool batch_norm;       // native_batch_norm: writes its running stats in training, unmarked
  int output_mask = -1;  // the argument whose flags turn returns off (backward ops), or -1
  std::vector<c10::TypeKind> kinds;  // per argument
  std::vector<bool> mutates;         // per argument: marked as written
  std::vector<bool> out;             // per argument: an out= argument

  explicit OpInfo(const c10::OperatorHandle& op) : name(op.schema().name()), overload(op.schema().overload_name()) {
    size_t colons = name.rfind("::");
    base = name.substr(colons == std::string::npos ? 0 : colons + 2);
    lowered = name.rfind("aten::", 0) == 0 && tpu_op_supported(base.c_str(), overload.c_str());
    const auto& arguments = op.schema().arguments();
    bool has_generator = false;
    for (size_t i = 0; i < arguments.size(); i++) {
      kinds.push_back(kind_of(arguments[i]));
      mutates.push_back(is_mutable(arguments[i]));
      out.push_back(is_out_argument(arguments[i]));
      has_generator = has_generator || kinds.back() == c10::TypeKind::GeneratorType;
      if (arguments[i].name() == "output_mask") output_mask = static_cast<int>(i);
    }
    draws_rng = !has_generator && op.hasTag(at::Tag::nondeterministic_seeded);
    floats_at_runtime = false;
    for (const char* step : {"aten::_fused_adam_", "aten::_fused_adamw_", "aten::_fused_sgd_", "aten::_fused_adagrad_"})
      floats_at_runtime = floats_at_runtime || name == step;
    batch_norm = name == "aten::native_batch_norm";
  }

  bool describes(const c10::FunctionSchema& schema) const {
    return name == schema.name() && overload == schema.overload_name() && kinds.size() == schema.arguments().size();
  }
};

// The thread's OpInfo of `op`. Keyed by the schema's address, checked
// against its names: an operator removed and another registered in its
// place (torch.library in tests) gets its own.
const OpInfo& op_info(const c10::OperatorHandle& op) {
  thread_local std::unordered_map<const c10::FunctionSchema*, OpInfo> infos;
  const c10::FunctionSchema* key = &op.schema();
  auto it = infos.find(key);
  if (it != infos.end() && it->second.describes(*key)) return it->second;
  if (it != infos.end()) infos.erase(it);
  return infos.try_emplace(key, op).first->second;
}

// Whether the op writes argument i: a mutable argument, or the running
// stats of native_batch_norm in training, which its schema does not mark.
bool writes_argument(const OpInfo& info, c10::ArrayRef<c10::IValue> inputs, size_t i) {
  return info.mutates[i] || (info.batch_norm && (i == 3 || i == 4) && inputs[5].toBool());
}

// Whether return j is absent (None): backward ops skip the gradients their
// output_mask turns off.
bool return_absent(const OpInfo& info, c10::ArrayRef<c10::IValue> inputs, size_t j) {
  if (info.output_mask < 0) return false;
  auto mask = inputs[static_cast<size_t>(info.output_mask)].toListRef();
  return j < mask.size() && !mask[j].toBool();
}

// Converts one op's stack into C arguments, keeping what they point into
// alive. Each argument adds at most one entry to each list, and the lists
// are reserved for every argument before the first entry, so pointers into
// them stay valid; the common call allocates nothing here.
struct CallArgs {
  c10::SmallVector<tpu_arg, 8> args;
  std::vector<std::vector<int64_t>> int_lists;
  std::vector<std::vector<double>> float_lists;
  std::vector<std::vector<tpu_tensor>> tensor_lists;
  std::vector<at::Tensor> uploads;  // 0-d CPU tensors moved to the device
  std::vector<std::string> strings;
  int device = -1;
  const char* op = "";
  size_t arg_count = 0;
  bool floats_at_runtime = false;

  template <typename T>
  T& add(std::vector<T>& list) {
    if (list.capacity() == 0) list.reserve(arg_count);
    return list.emplace_back();
  }

  void note_device(const at::Tensor& t) {
    if (device < 0) device = t.device().index();
    TORCH_CHECK(device == t.device().index(), op, ": expected all tensors on the same device, but found tpu:",
                device, " and ", t.device(), "; move them with .to(\"tpu:", device, "\")");
  }

  tpu_tensor device_tensor(const at::Tensor& t, bool allow_cpu_list_item) {
    if (t.device().type() != kTpu) {
      TORCH_CHECK(t.dim() == 0 || allow_cpu_list_item, op,
                  ": expected all tensors on the same device, but found ", t.device(), " (shape ", t.sizes(),
                  ") beside tpu tensors; move it with .to(\"tpu\")");
      if (uploads.capacity() == 0) uploads.reserve(arg_count);
      uploads.push_back(t.to(c10::Device(kTpu, static_cast<c10::DeviceIndex>(device < 0 ? current_device() : device))));
      return to_tpu_tensor(uploads.back(), op);
    }
    note_device(t);
    if (t.is_conj() || t.is_neg()) {  // a lazy conjugate reaches mm and dot unresolved: read its values
      if (uploads.capacity() == 0) uploads.reserve(arg_count);
      uploads.push_back(t.resolve_conj().resolve_neg());
      return to_tpu_tensor(uploads.back(), op);
    }
    return to_tpu_tensor(t, op);
  }

  tpu_arg scalar(const c10::Scalar& s) {
    tpu_arg a{};
    a.kind = TPU_ARG_SCALAR;
    if (s.isFloatingPoint()) {
      a.u.scalar.type = TPU_F64;
      a.u.scalar.f = s.toDouble();
    } else if (s.isBoolean()) {
      a.u.scalar.type = TPU_BOOL;
      a.u.scalar.i = s.toBool();
    } else if (s.isComplex()) {
      a.u.scalar.type = TPU_C128;
      a.u.scalar.f = s.toComplexDouble().real();
      a.u.scalar.imag = s.toComplexDouble().imag();
    } else {
      a.u.scalar.type = TPU_I64;
      a.u.scalar.i = s.toLong();
    }
    return a;
  }

  tpu_arg tensor_list(const std::vector<std::optional<at::Tensor>>& items) {
    auto& list = add(tensor_lists);
    list.reserve(items.size());
    for (const auto& t : items) list.push_back(t && t->defined() ? device_tensor(*t, true) : tpu_tensor{});
    tpu_arg a{};
    a.kind = TPU_ARG_TENSOR_LIST;
    a.u.tensors.items = list.data();
    a.u.tensors.count = static_cast<int>(list.size());
    return a;
  }

  tpu_arg convert(const c10::Argument& schema, c10::TypeKind kind, const c10::IValue& v) {
    tpu_arg a{};
    if (kind == c10::TypeKind::GeneratorType) {
      a.kind = TPU_ARG_RNG;
      std::optional<at::Generator> g;
      if (v.isGenerator()) g = v.toGenerator();
      next_rng_state(g, device < 0 ? current_device() : device, &a.u.rng.seed, &a.u.rng.offset);
      return a;
    }
    if (v.isNone()) return a;
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (!t.defined()) return a;
      if (t.device().type() != kTpu && t.unsafeGetTensorImpl()->is_wrapped_number()) return scalar(t.item());
      // foreach ops take per-tensor values also as a 1-d CPU `Tensor scalars`.
      if (t.device().type() == c10::kCPU && t.dim() == 1 && std::strncmp(op, "aten::_foreach_", 15) == 0) {
        auto& list = add(float_lists);
        at::Tensor values = t.to(at::kDouble).contiguous();
        list.assign(values.data_ptr<double>(), values.data_ptr<double>() + values.numel());
        a.kind = TPU_ARG_SCALAR_LIST;
        a.u.floats.items = list.data();
        a.u.floats.count = static_cast<int>(list.size());
        return a;
      }
      a.kind = TPU_ARG_TENSOR;
      a.u.tensor = device_tensor(t, false);
      return a;
    }
    switch (kind) {
      case c10::TypeKind::NumberType: return scalar(v.toScalar());
      case c10::TypeKind::FloatType:
        if (floats_at_runtime) return scalar(v.toScalar());
        break;
      case c10::TypeKind::ScalarTypeType:
        a.kind = TPU_ARG_DTYPE;
        a.u.dtype = to_tpu_dtype(static_cast<at::ScalarType>(v.toInt()), op);
        return a;
      case c10::TypeKind::LayoutType:
      case c10::TypeKind::MemoryFormatType:
      case c10::TypeKind::DeviceObjType:
        return a;  // placement hints: outputs are always dense tpu tensors
      default: break;
    }
    if (v.isBool()) {
      a.kind = TPU_ARG_BOOL;
      a.u.b = v.toBool();
    } else if (v.isInt() || v.isSymInt()) {
      a.kind = TPU_ARG_INT;
      a.u.i = v.isInt() ? v.toInt() : v.toSymInt().guard_int(__FILE__, __LINE__);
    } else if (v.isDouble()) {
      a.kind = TPU_ARG_FLOAT;
      a.u.f = v.toDouble();
    } else if (v.isIntList() || v.isSymIntList()) {
      auto& list = add(int_lists);
      list = v.isIntList() ? v.toIntVector()
                           : c10::asIntArrayRefSlow(v.toSymIntList().vec(), __FILE__, __LINE__).vec();
      a.kind = TPU_ARG_INT_LIST;
      a.u.ints.items = list.data();
      a.u.ints.count = static_cast<int>(list.size());
    } else if (v.isTensorList()) {
      std::vector<std::optional<at::Tensor>> items;
      for (const at::Tensor& t : v.toTensorVector()) items.emplace_back(t);
      return tensor_list(items);
    } else if (v.isOptionalTensorList()) {
      return tensor_list(v.toOptionalTensorList().vec());
    } else if (v.isDoubleList() || (v.isList() && kind == c10::TypeKind::ListType)) {
      // float[] is compiled in; Scalar[] (foreach per-tensor values) is runtime.
      c10::TypePtr element = schema.real_type();
      if (auto optional = element->cast<c10::OptionalType>()) element = optional->getElementType();
      element = element->castRaw<c10::ListType>()->getElementType();
      auto& list = add(float_lists);
      if (v.isDoubleList()) {
        list = v.toDoubleVector();
      } else {
        for (const c10::IValue& item : v.toListRef()) list.push_back(item.toScalar().toDouble());
      }
      a.kind = element->kind() == c10::TypeKind::NumberType ? TPU_ARG_SCALAR_LIST : TPU_ARG_FLOAT_LIST;
      a.u.floats.items = list.data();
      a.u.floats.count = static_cast<int>(list.size());
    } else if (v.isString()) {
      a.kind = TPU_ARG_STRING;
      a.u.string = (add(strings) = v.toStringRef()).c_str();
    } else {
      TORCH_CHECK_NOT_IMPLEMENTED(false, op, ": argument '", schema.name(), "' of type ", v.tagKind(),
                                  " is not supported on tpu");
    }
    return a;
  }
};

at::Tensor to_meta(const at::Tensor& t) {
  if (!t.defined() || t.device().type() != kTpu) return t;
  int64_t storage_numel = static_cast<int64_t>(t.storage().nbytes() / t.dtype().itemsize());
  return at::empty({storage_numel}, t.options().device(at::kMeta)).as_strided(t.sizes(), t.strides(), t.storage_offset());
}

c10::IValue to_meta(c10::TypeKind kind, const c10::IValue& v) {
  if (kind == c10::TypeKind::GeneratorType) return c10::IValue();
  // Factory ops name their device: make the stand-in on meta, or the meta
  // call would come straight back here.
  if (v.isDevice() && v.toDevice().type() == kTpu) return c10::Device(at::kMeta);
  if (v.isTensor()) return to_meta(v.toTensor());
  if (v.isTensorList()) {
    std::vector<at::Tensor> items;
    for (const at::Tensor& t : v.toTensorVector()) items.push_back(to_meta(t));
    return items;
  }
  if (v.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> items;
    for (const auto& t : v.toOptionalTensorList().vec())
      items.push_back(t.has_value() ? std::optional<at::Tensor>(to_meta(*t)) : std::nullopt);
    return items;
  }
  return v;
}

// The tensors a mutable argument holds: one, a list's items, or none.
template <typename Fn>
void for_each_tensor(const c10::IValue& v, Fn fn) {
  if (v.isTensor()) {
    if (v.toTensor().defined()) fn(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorVector()) fn(t);
  }
}

// PyTorch's CPU kernels of nll_loss (not nll_loss2d) take uint8 class
// indices, but the decomposition that serves as their meta kernel rejects
// them. The outputs do not depend on the index type: the stand-in is int64.
c10::IValue byte_target_as_long(const c10::FunctionSchema& schema, const c10::Argument& a, c10::IValue v) {
  bool nll = schema.name() == "aten::nll_loss_forward" || schema.name() == "aten::nll_loss_backward";
  if (nll && a.name() == "target" && v.isTensor() && v.toTensor().scalar_type() == at::kByte)
    return v.toTensor().to(at::kLong);
  return v;
}

// aten::_grouped_mm's meta kernel checks the limits of CUDA's kernel
// (bfloat16 only, 16-byte aligned strides), which the tpu lowering does
// not have: its output follows from the shape rule, with the checks of
// PyTorch's CPU kernel.
at::Tensor grouped_mm_output(c10::ArrayRef<c10::IValue> inputs) {
  const at::Tensor& a = inputs[0].toTensor();
  const at::Tensor& b = inputs[1].toTensor();
  auto shapes = [&] {
    std::ostringstream s;
    s << "mat_a " << a.sizes() << " " << a.scalar_type() << ", mat_b " << b.sizes() << " " << b.scalar_type();
    return s.str();
  };
  TORCH_CHECK((a.dim() == 2 || a.dim() == 3) && (b.dim() == 2 || b.dim() == 3),
              "grouped_mm: mat_a and mat_b must be 2-d or 3-d, got ", shapes());
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "grouped_mm: mat_a and mat_b must have the same dtype, got ", shapes());
  TORCH_CHECK(at::isFloatingType(a.scalar_type()) && a.scalar_type() != at::kDouble,
              "grouped_mm: takes float32, bfloat16 or float16 matrices, got ", shapes());
  TORCH_CHECK(a.size(-1) == b.size(-2),
              "grouped_mm: mat_a's last dim and mat_b's second-to-last must match, got ", shapes());
  bool grouped = a.dim() == 2 || b.dim() == 2;
  TORCH_CHECK(inputs[2].isTensor() == grouped,
              grouped ? "grouped_mm: a 2-d operand needs offsets (offs=, the int32 end of each group), got "
                      : "grouped_mm: two 3-d operands take no offsets (offs=), got ",
              shapes());
  TORCH_CHECK(inputs[4].isNone() || inputs[4].toScalarType() == a.scalar_type(),
              "grouped_mm: out_dtype must be mat_a's dtype, got ", inputs[4].toScalarType(), " for ", shapes());
  int64_t groups = a.dim() == 3 ? a.size(0) : b.size(0);
  if (grouped) {
    const at::Tensor& offs = inputs[2].toTensor();
    TORCH_CHECK(offs.dim() == 1 && offs.scalar_type() == at::kInt,
                "grouped_mm: offs must be a 1-d int32 tensor, got ", offs.scalar_type(), offs.sizes(), " for ",
                shapes());
    TORCH_CHECK((a.dim() == 2 && b.dim() == 2) || offs.size(0) == groups, "grouped_mm: offs has ", offs.size(0),
                " groups but the 3-d operand ", groups, ", for ", shapes());
    groups = offs.size(0);
  } else {
    TORCH_CHECK(a.size(0) == b.size(0), "grouped_mm: the batch sizes must match, got ", shapes());
  }
  std::vector<int64_t> size = a.dim() == 2 && b.dim() == 2 ? std::vector<int64_t>{groups, a.size(0), b.size(1)}
                              : a.dim() == 2              ? std::vector<int64_t>{a.size(0), b.size(2)}
                              : b.dim() == 2              ? std::vector<int64_t>{a.size(1), b.size(1)}
                                                          : std::vector<int64_t>{groups, a.size(1), b.size(2)};
  return at::empty(size, a.options().device(at::kMeta));
}

// aten::_scaled_mm's meta kernel also checks CUDA's limits (a row-major
// mat_a, a column-major mat_b, dims divisible by 16), which PyTorch's CPU
// kernel and the tpu lowering do not have: the output follows from the
// shape rule, after the CPU kernel's checks, in its order and words.
at::Tensor scaled_mm_output(c10::ArrayRef<c10::IValue> inputs) {
  const at::Tensor& a = inputs[0].toTensor();
  const at::Tensor& b = inputs[1].toTensor();
  const at::Tensor& scale_a = inputs[2].toTensor();
  const at::Tensor& scale_b = inputs[3].toTensor();
  auto tensorwise = [](const at::Tensor& t, const at::Tensor& s) {
    return at::isFloat8Type(t.scalar_type()) && s.scalar_type() == at::kFloat && s.numel() == 1;
  };
  auto rowwise = [](const at::Tensor& t, const at::Tensor& s) {
    return at::isFloat8Type(t.scalar_type()) && s.scalar_type() == at::kFloat && s.dim() == 2 &&
           s.size(0) == t.size(0) && s.size(1) == 1 && s.is_contiguous();
  };
  TORCH_CHECK(a.dim() <= 2 && b.dim() <= 2, "_scaled_mm: mat_a and mat_b must be matrices, got shapes ", a.sizes(),
              " and ", b.sizes());
  bool valid = (tensorwise(a, scale_a) && tensorwise(b.t(), scale_b.t())) ||
               (rowwise(a, scale_a) && rowwise(b.t(), scale_b.t()));
  TORCH_CHECK_VALUE(valid, "_scaled_mm: invalid scaling configuration.\n"
                    "- For TensorWise scaling, a and b should be float8, scales should be float and singletons.\n"
                    "- For RowWise scaling, a and b should be float8, scales should be float, scale_a should be (",
                    a.dim() == 2 ? a.size(0) : 0, ", 1) and scale_b should be (1, ", b.dim() == 2 ? b.size(1) : 0,
                    "), and both should be contiguous.\nGot mat_a.dtype()=", a.scalar_type(), ", scale_a.dtype()=",
                    scale_a.scalar_type(), ", scale_a.size()=", scale_a.sizes(), ", scale_a.stride()=",
                    scale_a.strides(), ", mat_b.dtype()=", b.scalar_type(), ", scale_b.dtype()=",
                    scale_b.scalar_type(), ", scale_b.size()=", scale_b.sizes(), " and scale_b.stride()=",
                    scale_b.strides());
  TORCH_CHECK(a.dim() == 2, "_scaled_mm: mat1 must be a matrix, got shape ", a.sizes());
  TORCH_CHECK(b.dim() == 2, "_scaled_mm: mat2 must be a matrix, got shape ", b.sizes());
  TORCH_CHECK(a.size(1) == b.size(0), "_scaled_mm: mat_a and mat_b shapes cannot be multiplied (", a.size(0), "x",
              a.size(1), " and ", b.size(0), "x", b.size(1), ")");
  if (inputs[5].isTensor()) {
    const at::Tensor& r = inputs[5].toTensor();
    TORCH_CHECK(r.numel() == 1 && r.scalar_type() == at::kFloat,
                "_scaled_mm: scale_result must be a float scalar, got ", r.scalar_type(), r.sizes());
  }
  if (inputs[4].isTensor())
    TORCH_CHECK(inputs[4].toTensor().numel() == b.size(1), "_scaled_mm: Bias must be size ", b.size(1),
                " but got ", inputs[4].toTensor().numel());
  at::ScalarType out = inputs[6].isNone() ? a.scalar_type() : inputs[6].toScalarType();
  return at::empty({a.size(0), b.size(1)}, a.options().dtype(out).device(at::kMeta));
}

// Ops that return nothing and have no meta kernel (most fused optimizer
// steps, _cummax_helper) write only their arguments, which are `outputs`
// already, and their lowerings check the arguments. Other ops PyTorch
// gives no meta kernel have Python ones (torch_tpu/_meta.py).
bool writes_only_arguments(const c10::OperatorHandle& op) {
  return op.schema().returns().empty() && !op.hasKernelForDispatchKey(c10::DispatchKey::Meta);
}

// Returns the program does not compute, as the meta kernel gave them: a
// number (the sequence lengths of the fused attention op), or None for a
// declared Tensor. Kept with the plan; values[j] is empty for a computed return.
struct FixedReturns {
  std::vector<std::optional<c10::IValue>> values;
};

bool is_fixed_return(const c10::IValue& v) {
  return v.isNone() || (v.isTensor() && !v.toTensor().defined()) || v.isInt() || v.isSymInt() || v.isDouble() ||
         v.isBool();
}

// Runs the op's meta kernel on stand-in tensors: PyTorch's own shape and
// dtype rules (and its error messages for bad input) decide the outputs,
// in the order of op outputs: mutated arguments, then fresh returns.
// *fixed is made when some return is not a computed tensor.
std::vector<at::Tensor> infer_outputs(const c10::OperatorHandle& op, const OpInfo& info,
                                      c10::ArrayRef<c10::IValue> inputs, std::unique_ptr<FixedReturns>* fixed) {
  const auto& schema = op.schema();
  if (schema.name() == "aten::_grouped_mm") return {grouped_mm_output(inputs)};
  if (schema.name() == "aten::_scaled_mm" && schema.overload_name().empty()) return {scaled_mm_output(inputs)};
  const auto& arguments = schema.arguments();
  torch::jit::Stack meta;
  std::vector<at::Tensor> outputs;
  for (size_t i = 0; i < arguments.size(); i++) {
    meta.push_back(byte_target_as_long(schema, arguments[i], to_meta(info.kinds[i], inputs[i])));
    if (writes_argument(info, inputs, i))
      for_each_tensor(meta.back(), [&](const at::Tensor& t) { outputs.push_back(t); });
  }
  if (writes_only_arguments(op)) return outputs;
  op.callBoxed(&meta);  // out= stand-ins are resized in place
  for (size_t j = 0; j < schema.returns().size(); j++) {
    if (schema.returns()[j].alias_info() || return_absent(info, inputs, j)) continue;
    const c10::IValue& v = meta[j];
    if (is_fixed_return(v)) {
      if (!*fixed) *fixed = std::make_unique<FixedReturns>(FixedReturns{decltype(FixedReturns::values)(schema.returns().size())});
      (*fixed)->values[j] = v.isNone() || v.isTensor() ? c10::IValue(at::Tensor())
                            : v.isSymInt() ? c10::IValue(v.toSymInt().guard_int(__FILE__, __LINE__))
                                           : v;
      continue;
    }
    TORCH_CHECK_NOT_IMPLEMENTED(v.isTensor() || v.isTensorList(), "aten::", schema.name(), ": returns a ",
                                v.tagKind(), ", which the tpu fallback does not support");
    for_each_tensor(v, [&](const at::Tensor& t) { outputs.push_back(t); });
  }
  return outputs;
}

// Pushes the op's returns: mutated arguments for aliased returns, fresh
// tensors (a list takes all fresh tensors the single-tensor returns leave).
void push_returns(const c10::FunctionSchema& schema, const OpInfo& info, c10::ArrayRef<c10::IValue> inputs,
                  c10::SmallVector<at::Tensor, 2>& fresh, const FixedReturns* fixed, torch::jit::Stack* stack) {
  auto is_fixed = [&](size_t j) { return fixed && fixed->values[j].has_value(); };
  c10::SmallVector<c10::IValue, 2> mutated;
  for (size_t i = 0; i < schema.arguments().size(); i++)
    if (info.mutates[i]) mutated.push_back(inputs[i]);
  const auto& rs = schema.returns();
  size_t single = 0;
  for (size_t j = 0; j < rs.size(); j++)
    if (!rs[j].alias_info() && rs[j].type()->kind() == c10::TypeKind::TensorType && !return_absent(info, inputs, j) &&
        !is_fixed(j))
      single++;
  size_t next_mutated = 0, next_fresh = 0;
  torch::jit::Stack returns;
  for (size_t j = 0; j < rs.size(); j++) {
    if (is_fixed(j)) {
      returns.push_back(*fixed->values[j]);
    } else if (rs[j].alias_info()) {
      returns.push_back(mutated[next_mutated++]);
    } else if (return_absent(info, inputs, j)) {
      returns.emplace_back(at::Tensor());
    } else if (rs[j].type()->kind() == c10::TypeKind::TensorType) {
      returns.emplace_back(std::move(fresh[next_fresh++]));
    } else {
      std::vector<at::Tensor> list;
      size_t take = fresh.size() - single;
      for (size_t i = 0; i < take; i++) list.push_back(std::move(fresh[next_fresh++]));
      returns.emplace_back(std::move(list));
    }
  }
  torch::jit::drop(*stack, inputs.size());
  for (auto& v : returns) stack->push_back(std::move(v));
}

// torch.set_float32_matmul_precision: part of every call's signature, as
// it changes the program of a float32 matmul or convolution.
tpu_matmul_precision matmul_precision() {
  switch (at::globalContext().float32MatmulPrecision()) {
    case at::Float32MatmulPrecision::HIGH: return TPU_MATMUL_HIGH;
    case at::Float32MatmulPrecision::MEDIUM: return TPU_MATMUL_MEDIUM;
    case at::Float32MatmulPrecision::HIGHEST: break;
  }
  return TPU_MATMUL_HIGHEST;
}

std::string describe(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> inputs) {
  std::ostringstream s;
  s << op.schema().name();
  if (!op.schema().overload_name().empty()) s << "." << op.schema().overload_name();
  s << "(";
  for (size_t i = 0; i < inputs.size(); i++) {
    if (i) s << ", ";
    const auto& v = inputs[i];
    auto tensor = [&](const at::Tensor& t) {
      s << t.scalar_type() << t.sizes() << (t.is_contiguous() ? "" : " (strided)");
    };
    if (v.isTensor() && v.toTensor().defined()) {
      tensor(v.toTensor());
    } else if (v.isTensorList()) {  // an optimizer's lists run to hundreds: the count and the first
      auto list = v.toTensorList();
      s << "[" << list.size() << " tensors" << (list.empty() ? "" : ": ");
      if (!list.empty()) tensor(list.get(0));
      s << (list.size() > 1 ? ", ...]" : "]");
    } else if (v.isDouble()) {
      s << v.toDouble();  // 0.9, not 0.90000000000000002
    } else if (v.isString()) {
      s << "'" << v.toStringRef() << "'";
    } else if (v.isScalar() || v.isIntList() || v.isBool()) {
      s << v;
    } else {
      s << v.tagKind();
    }
  }
  s << ")";
  return s.str();
}

[[noreturn]] void no_lowering(const c10::OperatorHandle& op) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, op.schema().name(),
                              op.schema().overload_name().empty() ? "" : "." + op.schema().overload_name(),
                              " has no tpu lowering yet. To run it on the CPU instead, set "
                              "TORCH_TPU_CPU_FALLBACK=1 or use `with torch_tpu.cpu_fallback():`.");
}

}  // namespace

void tpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const OpInfo& info = op_info(op);
  const std::string& name = info.name;
  if (!info.lowered) {
    if (!cpu_fallback_enabled()) no_lowering(op);
    count_cpu_fallback(name + (info.overload.empty() ? "" : "." + info.overload));
    at::native::cpu_fallback(op, stack);
    return;
  }
  const auto& arguments = schema.arguments();
  size_t n = arguments.size();
  c10::ArrayRef<c10::IValue> inputs(&*(stack->end() - static_cast<std::ptrdiff_t>(n)), n);

  CallArgs call_args;
  call_args.op = name.c_str();
  call_args.arg_count = n;
  call_args.floats_at_runtime = info.floats_at_runtime;
  // Tensors the op writes in place (self, out=, lists, running stats), in order.
  c10::SmallVector<at::Tensor, 2> targets;
  for (size_t i = 0; i < n; i++) {
    const c10::IValue& v = inputs[i];
    if (writes_argument(info, inputs, i))
      for_each_tensor(v, [&](const at::Tensor& t) {
        TORCH_CHECK(t.device().type() == kTpu, name, ": cannot write into a ", t.device(),
                    " tensor from a tpu op; pass a tpu tensor");
        call_args.note_device(t);
        targets.push_back(t);
      });
    if (!info.out[i]) call_args.args.push_back(call_args.convert(arguments[i], info.kinds[i], v));
  }
  if (call_args.device < 0) call_args.device = current_device();
  if (info.draws_rng) {
    tpu_arg rng{};
    rng.kind = TPU_ARG_RNG;
    next_rng_state(std::nullopt, call_args.device, &rng.u.rng.seed, &rng.u.rng.offset);
    call_args.args.push_back(rng);
  }
  c10::DeviceGuard guard(c10::Device(kTpu, static_cast<c10::DeviceIndex>(call_args.device)));

  // In-place and out= outputs are known now; fresh outputs once the plan
  // gives their types.
  c10::SmallVector<tpu_tensor, 2> outputs;
  for (const at::Tensor& t : targets) outputs.push_back(to_tpu_tensor(t, name.c_str()));
  tpu_op_call call{info.base.c_str(), info.overload.c_str(), call_args.device, call_args.args.data(),
                   static_cast<int>(call_args.args.size()), outputs.data(), static_cast<int>(outputs.size()),
                   matmul_precision()};
  tpu_op_plan* plan = nullptr;
  check(tpu_op_lookup(&call, &plan));
  if (!plan) {
    std::unique_ptr<FixedReturns> fixed;
    std::vector<at::Tensor> metas = infer_outputs(op, info, inputs, &fixed);
    std::vector<tpu_dtype> dtypes;
    std::vector<int> ranks;
    std::vector<const int64_t*> sizes;
    // Fresh outputs take the meta kernel's layout (attention's output is
    // laid out like its query), so later views agree with torch.compile's.
    std::vector<const int64_t*> strides;
    for (const at::Tensor& m : metas) {
      dtypes.push_back(to_tpu_dtype(m.scalar_type(), name.c_str()));
      ranks.push_back(static_cast<int>(m.dim()));
      sizes.push_back(m.sizes().data());
      strides.push_back(strides.size() >= targets.size() && !m.is_contiguous() ? m.strides().data() : nullptr);
    }
    tpu_status created = tpu_op_plan_create(&call, static_cast<int>(metas.size()), dtypes.data(), ranks.data(),
                                            sizes.data(), strides.data(), fixed.get(), &plan);
    if (created && tpu_status_code_of(created) == TPU_UNIMPLEMENTED && cpu_fallback_enabled()) {
      tpu_status_free(created);  // a form the lowering refuses (complex numbers): the CPU runs it
      count_cpu_fallback(name + (info.overload.empty() ? "" : "." + info.overload));
      at::native::cpu_fallback(op, stack);
      return;
    }
    check(created);
    fixed.release();  // the plan keeps it
  }
  const auto* fixed = static_cast<const FixedReturns*>(tpu_op_plan_host_data(plan));

  // Outputs: the targets (out= resized to the plan's shapes), then fresh tensors.
  int count = tpu_op_plan_output_count(plan);
  TORCH_CHECK(count >= static_cast<int>(targets.size()), name, ": ", targets.size(), " tensors to write but ",
              count, " outputs");
  c10::SmallVector<at::Tensor, 2> fresh;
  outputs.clear();
  for (int k = 0; k < count; k++) {
    tpu_dtype dtype;
    int rank;
    const int64_t* sizes;
    const int64_t* strides;
    tpu_op_plan_output(plan, k, &dtype, &rank, &sizes, &strides);
    at::IntArrayRef shape(sizes, static_cast<size_t>(rank));
    if (k < static_cast<int>(targets.size())) {
      at::Tensor& out = targets[static_cast<size_t>(k)];
      if (!out.sizes().equals(shape)) at::native::resize_output(out, shape);
      outputs.push_back(to_tpu_tensor(out, name.c_str()));
    } else if (strides) {
      fresh.push_back(at::detail::empty_strided_generic(shape, at::IntArrayRef(strides, static_cast<size_t>(rank)),
                                                        allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                        to_scalar_type(dtype)));
      outputs.push_back(to_tpu_tensor(fresh.back(), name.c_str()));
    } else {
      fresh.push_back(at::detail::empty_generic(shape, allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                to_scalar_type(dtype), std::nullopt));
      outputs.push_back(to_tpu_tensor(fresh.back(), name.c_str()));
    }
  }
  call.outputs = outputs.data();
  call.output_count = static_cast<int>(outputs.size());
  tpu_status status = tpu_op_execute(plan, &call);
  if (status) check(tpu_status_name_op(status, info.base.c_str(), describe(op, inputs).c_str()));
  push_returns(schema, info, inputs, fresh, fixed, stack);
}

}  // namespace torch_tpu
