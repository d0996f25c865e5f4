// Status, dtype and tensor conversions between PyTorch and the C runtime.
#include "bridge.h"

#include <c10/util/Exception.h>

namespace torch_tpu {

void check(tpu_status status) {
  if (!status) return;
  std::string message = tpu_status_message(status);
  tpu_status_code code = tpu_status_code_of(status);
  tpu_status_free(status);
  if (code == TPU_UNIMPLEMENTED) TORCH_CHECK_NOT_IMPLEMENTED(false, message);
  TORCH_CHECK_INDEX(code != TPU_OUT_OF_RANGE, message);
  TORCH_CHECK(false, message);
}

tpu_dtype to_tpu_dtype(at::ScalarType type, const char* op) {
  switch (type) {
    case at::kBool: return TPU_BOOL;
    case at::kByte: return TPU_U8;
    case at::kChar: return TPU_I8;
    case at::kShort: return TPU_I16;
    case at::kInt: return TPU_I32;
    case at::kLong: return TPU_I64;
    case at::kHalf: return TPU_F16;
    case at::kBFloat16: return TPU_BF16;
    case at::kFloat: return TPU_F32;
    case at::kDouble: return TPU_F64;
    case at::kComplexFloat: return TPU_C64;
    case at::kComplexDouble: return TPU_C128;
    case at::kFloat8_e4m3fn: return TPU_F8E4M3FN;
    case at::kFloat8_e5m2: return TPU_F8E5M2;
    case at::kFloat8_e4m3fnuz: return TPU_F8E4M3FNUZ;
    case at::kFloat8_e5m2fnuz: return TPU_F8E5M2FNUZ;
    default: break;
  }
  TORCH_CHECK_NOT_IMPLEMENTED(false, op, ": dtype ", type,
                              " is not supported on tpu; supported: bool, uint8, int8, int16, int32, "
                              "int64, float16, bfloat16, float32, float64, complex64, complex128, "
                              "float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz");
}

at::ScalarType to_scalar_type(tpu_dtype dtype) {
  switch (dtype) {
    case TPU_C64: return at::kComplexFloat;
    case TPU_C128: return at::kComplexDouble;
    case TPU_F8E4M3FN: return at::kFloat8_e4m3fn;
    case TPU_F8E5M2: return at::kFloat8_e5m2;
    case TPU_F8E4M3FNUZ: return at::kFloat8_e4m3fnuz;
    case TPU_F8E5M2FNUZ: return at::kFloat8_e5m2fnuz;
    default: break;
  }
  static const at::ScalarType types[] = {at::kBool, at::kByte,  at::kChar,     at::kShort,
                                         at::kInt,  at::kLong,  at::kHalf,     at::kBFloat16,
                                         at::kFloat, at::kDouble};
  TORCH_CHECK(dtype >= 0 && dtype <= TPU_F64, "no PyTorch dtype for ", tpu_dtype_name(dtype));
  return types[dtype];
}

tpu_tensor to_tpu_tensor(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.dim() <= TPU_MAX_RANK, op, ": tensors of rank ", t.dim(), " are not supported on tpu (at most ",
              TPU_MAX_RANK, ")");
  tpu_tensor out{};
  out.buffer = static_cast<tpu_buffer*>(t.storage().data_ptr().get());
  out.dtype = to_tpu_dtype(t.scalar_type(), op);
  out.rank = static_cast<int>(t.dim());
  for (int d = 0; d < out.rank; d++) {
    out.sizes[d] = t.size(d);
    out.strides[d] = t.stride(d);
  }
  out.offset = t.storage_offset();
  return out;
}

}  // namespace torch_tpu
