#include "tpu/dtype.h"

static const struct {
  size_t size;
  const char* name;
  const char* mlir;
} dtype_info[TPU_DTYPE_COUNT] = {
    [TPU_BOOL] = {1, "bool", "i1"},       [TPU_U8] = {1, "uint8", "ui8"},
    [TPU_I8] = {1, "int8", "i8"},         [TPU_I16] = {2, "int16", "i16"},
    [TPU_I32] = {4, "int32", "i32"},      [TPU_I64] = {8, "int64", "i64"},
    [TPU_F16] = {2, "float16", "f16"},    [TPU_BF16] = {2, "bfloat16", "bf16"},
    [TPU_F32] = {4, "float32", "f32"},    [TPU_F64] = {8, "float64", "f64"},
    [TPU_U32] = {4, "uint32", "ui32"},    [TPU_U64] = {8, "uint64", "ui64"},
    [TPU_C64] = {8, "complex64", "complex<f32>"}, [TPU_C128] = {16, "complex128", "complex<f64>"},
    [TPU_F8E4M3FN] = {1, "float8_e4m3fn", "f8E4M3FN"}, [TPU_F8E5M2] = {1, "float8_e5m2", "f8E5M2"},
    [TPU_F8E4M3FNUZ] = {1, "float8_e4m3fnuz", "f8E4M3FNUZ"},
    [TPU_F8E5M2FNUZ] = {1, "float8_e5m2fnuz", "f8E5M2FNUZ"},
};

static bool valid(tpu_dtype dtype) { return (unsigned)dtype < TPU_DTYPE_COUNT; }

size_t tpu_dtype_size(tpu_dtype dtype) { return valid(dtype) ? dtype_info[dtype].size : 0; }
const char* tpu_dtype_name(tpu_dtype dtype) { return valid(dtype) ? dtype_info[dtype].name : "invalid"; }
const char* tpu_dtype_mlir(tpu_dtype dtype) { return valid(dtype) ? dtype_info[dtype].mlir : "invalid"; }
bool tpu_dtype_is_float8(tpu_dtype dtype) { return dtype >= TPU_F8E4M3FN && dtype <= TPU_F8E5M2FNUZ; }
bool tpu_dtype_is_float(tpu_dtype dtype) {
  return (dtype >= TPU_F16 && dtype <= TPU_F64) || tpu_dtype_is_float8(dtype);
}
bool tpu_dtype_is_signed_int(tpu_dtype dtype) { return dtype >= TPU_I8 && dtype <= TPU_I64; }
bool tpu_dtype_is_integral(tpu_dtype dtype) {
  return (dtype >= TPU_U8 && dtype <= TPU_I64) || dtype == TPU_U32 || dtype == TPU_U64;
}

bool tpu_dtype_is_complex(tpu_dtype dtype) { return dtype == TPU_C64 || dtype == TPU_C128; }

tpu_dtype tpu_dtype_real_part(tpu_dtype dtype) {
  return dtype == TPU_C64 ? TPU_F32 : dtype == TPU_C128 ? TPU_F64 : dtype;
}

tpu_dtype tpu_dtype_complex_of(tpu_dtype dtype) {
  if (tpu_dtype_is_complex(dtype)) return dtype;
  return dtype == TPU_F64 ? TPU_C128 : TPU_C64;
}

tpu_dtype tpu_dtype_compute(tpu_dtype dtype) {
  return dtype == TPU_F16 || dtype == TPU_BF16 || tpu_dtype_is_float8(dtype) ? TPU_F32 : dtype;
}
