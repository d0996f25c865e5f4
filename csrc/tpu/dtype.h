/* Element types the runtime knows, independent of PyTorch's ScalarType. */
#ifndef TPU_DTYPE_H
#define TPU_DTYPE_H

#include <stddef.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tpu_dtype {
  TPU_BOOL = 0,
  TPU_U8,
  TPU_I8,
  TPU_I16,
  TPU_I32,
  TPU_I64,
  TPU_F16,
  TPU_BF16,
  TPU_F32,
  TPU_F64,
  TPU_U32, /* random bits and RNG state only */
  TPU_U64,
  TPU_C64,  /* complex: a float pair, real part first, as PyTorch stores it */
  TPU_C128,
  /* 8-bit floats, as PyTorch's float8 types: e4m3fn saturates (no inf),
   * e5m2 has inf; the fnuz kinds have one NaN (0x80) and no -0. Stored
   * and moved as themselves, computed in float32 (tpu_dtype_compute). */
  TPU_F8E4M3FN,
  TPU_F8E5M2,
  TPU_F8E4M3FNUZ,
  TPU_F8E5M2FNUZ,
  TPU_DTYPE_COUNT
} tpu_dtype;

#define TPU_MAX_RANK 8

size_t tpu_dtype_size(tpu_dtype dtype);
const char* tpu_dtype_name(tpu_dtype dtype);     /* "float32", as PyTorch spells it */
const char* tpu_dtype_mlir(tpu_dtype dtype);     /* "f32", as MLIR spells it */
bool tpu_dtype_is_float(tpu_dtype dtype);       /* f16, bf16, f32, f64 and the float8 types */
bool tpu_dtype_is_float8(tpu_dtype dtype);
bool tpu_dtype_is_signed_int(tpu_dtype dtype);   /* i8..i64 */
bool tpu_dtype_is_integral(tpu_dtype dtype);     /* u8, i8..i64, u32, u64 (not bool) */
bool tpu_dtype_is_complex(tpu_dtype dtype);
/* A complex type's parts (complex64 -> float32); any other type is itself. */
tpu_dtype tpu_dtype_real_part(tpu_dtype dtype);
/* The complex type with parts of `dtype`: float64 -> complex128, other
 * floats complex64 (as PyTorch promotes); a complex type is itself. */
tpu_dtype tpu_dtype_complex_of(tpu_dtype dtype);
/* The type arithmetic runs in: float16/bfloat16 and the float8 types widen
 * to float32, as in ATen's CPU kernels; every other type is itself. */
tpu_dtype tpu_dtype_compute(tpu_dtype dtype);

#ifdef __cplusplus
}
#endif

#endif
