/* Elementwise ops and constants. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "hlo/builder_impl.h"
#include "hlo/complex_ops.h"

static hlo_type scalar_type(tpu_dtype dtype) { return hlo_type_make(dtype, 0, NULL); }

/* Floats print as hex bit patterns of f32/f64, which is exact and covers
 * inf and nan; f16/bf16 constants are made in f32 and converted. */
static hlo_value constant_text(hlo_builder* b, tpu_dtype dtype, const char* literal) {
  char attrs[160];
  char ty[64];
  hlo_type t = scalar_type(dtype);
  snprintf(attrs, sizeof attrs, "value = dense<%s> : %s", literal, hlo_type_print(&t, ty, sizeof ty));
  return emit_op(b, "stablehlo.constant", NULL, 0, attrs, t);
}

hlo_value hlo_constant(hlo_builder* b, tpu_dtype dtype, double value) {
  char literal[64];
  if (tpu_dtype_is_complex(dtype)) return hlo_constant_complex(b, dtype, value, 0);
  if (dtype == TPU_F16 || dtype == TPU_BF16 || tpu_dtype_is_float8(dtype))
    return hlo_convert(b, hlo_constant(b, TPU_F32, value), dtype);
  if (dtype == TPU_F32) {
    float f = (float)value;
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    snprintf(literal, sizeof literal, "0x%08" PRIX32, bits);
  } else if (dtype == TPU_F64) {
    uint64_t bits;
    memcpy(&bits, &value, sizeof bits);
    snprintf(literal, sizeof literal, "0x%016" PRIX64, bits);
  } else if (dtype == TPU_BOOL) {
    snprintf(literal, sizeof literal, "%s", value != 0 ? "true" : "false");
  } else {
    if (isnan(value)) return hlo_fail(b, TPU_INVALID_ARGUMENT, "nan cannot be an integer constant");
    return hlo_constant_i64(b, dtype, (int64_t)value);
  }
  return constant_text(b, dtype, literal);
}

hlo_value hlo_constant_i64(hlo_builder* b, tpu_dtype dtype, int64_t value) {
  if (!tpu_dtype_is_integral(dtype)) return hlo_constant(b, dtype, (double)value);
  char literal[32];
  if (dtype == TPU_U64 || dtype == TPU_U32 || dtype == TPU_U8)
    snprintf(literal, sizeof literal, "%" PRIu64, (uint64_t)value);
  else
    snprintf(literal, sizeof literal, "%" PRId64, value);
  return constant_text(b, dtype, literal);
}

hlo_value hlo_constant_extreme(hlo_builder* b, tpu_dtype dtype, bool largest) {
  if (!tpu_dtype_is_integral(dtype) && dtype != TPU_BOOL)
    return hlo_constant(b, dtype, largest ? __builtin_inf() : -__builtin_inf());
  if (dtype == TPU_BOOL) return hlo_constant(b, dtype, largest);
  int bits = (int)tpu_dtype_size(dtype) * 8;
  /* Unsigned maxima as their two's-complement bits: printed unsigned. */
  uint64_t unsigned_max = bits == 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1;
  if (!tpu_dtype_is_signed_int(dtype)) return hlo_constant_i64(b, dtype, largest ? (int64_t)unsigned_max : 0);
  int64_t signed_max = (int64_t)(unsigned_max >> 1);
  return hlo_constant_i64(b, dtype, largest ? signed_max : -signed_max - 1);
}

hlo_value hlo_filled(hlo_builder* b, tpu_dtype dtype, int rank, const int64_t* dims, double value) {
  if (rank < 0 || rank > TPU_MAX_RANK) return hlo_fail(b, TPU_INTERNAL, "filled: rank %d", rank);
  hlo_type t = hlo_type_make(dtype, rank, dims); /* a copy: adding values moves the table */
  return hlo_broadcast_in_dim(b, hlo_constant(b, dtype, value), t.rank, t.dims, NULL);
}

hlo_value hlo_constant_like(hlo_builder* b, hlo_value like, double value) {
  if (!values_valid(b, &like, 1)) return HLO_INVALID;
  const hlo_type* t = hlo_type_of(b, like);
  return hlo_filled(b, t->dtype, t->rank, t->dims, value);
}

hlo_value hlo_iota(hlo_builder* b, hlo_type type, int dimension) {
  if (dimension < 0 || dimension >= type.rank)
    return hlo_fail(b, TPU_INTERNAL, "iota dimension %d out of range for rank %d", dimension, type.rank);
  char attrs[64];
  snprintf(attrs, sizeof attrs, "iota_dimension = %d : i64", dimension);
  return emit_op(b, "stablehlo.iota", NULL, 0, attrs, type);
}

hlo_value hlo_unary(hlo_builder* b, const char* op, hlo_value x) {
  if (!values_valid(b, &x, 1)) return HLO_INVALID;
  char name[64];
  snprintf(name, sizeof name, "stablehlo.%s", op);
  hlo_type t = *hlo_type_of(b, x);
  if (strcmp(op, "is_finite") == 0) t.dtype = TPU_BOOL;
  if (strcmp(op, "abs") == 0) t.dtype = tpu_dtype_real_part(t.dtype); /* a complex number's magnitude */
  return emit_op(b, name, &x, 1, NULL, t);
}

hlo_value hlo_chlo(hlo_builder* b, const char* op, const hlo_value* operands, int n) {
  if (!values_valid(b, operands, n)) return HLO_INVALID;
  char name[64];
  snprintf(name, sizeof name, "chlo.%s", op);
  return emit_op(b, name, operands, n, NULL, *hlo_type_of(b, operands[0]));
}

static bool same_types(hlo_builder* b, const char* op, hlo_value x, hlo_value y) {
  if (!hlo_type_equal(hlo_type_of(b, x), hlo_type_of(b, y))) {
    char tx[128], ty[128];
    hlo_fail(b, TPU_INTERNAL, "%s got operands of different types %s and %s", op,
             hlo_type_print(hlo_type_of(b, x), tx, sizeof tx),
             hlo_type_print(hlo_type_of(b, y), ty, sizeof ty));
    return false;
  }
  return true;
}

hlo_value hlo_binary(hlo_builder* b, const char* op, hlo_value x, hlo_value y) {
  hlo_value operands[2] = {x, y};
  if (!values_valid(b, operands, 2) || !same_types(b, op, x, y)) return HLO_INVALID;
  char name[64];
  snprintf(name, sizeof name, "stablehlo.%s", op);
  return emit_op(b, name, operands, 2, NULL, *hlo_type_of(b, x));
}

hlo_value hlo_compare(hlo_builder* b, const char* direction, hlo_value x, hlo_value y) {
  hlo_value operands[2] = {x, y};
  if (!values_valid(b, operands, 2) || !same_types(b, "compare", x, y)) return HLO_INVALID;
  hlo_type t = *hlo_type_of(b, x);
  if (tpu_dtype_is_complex(t.dtype)) { /* equal where both parts are */
    bool eq = strcmp(direction, "EQ") == 0;
    if (!eq && strcmp(direction, "NE") != 0)
      return hlo_fail(b, TPU_UNIMPLEMENTED, "complex numbers have no order (compare %s)", direction);
    return hlo_binary(b, eq ? "and" : "or", hlo_compare(b, direction, hlo_real(b, x), hlo_real(b, y)),
                      hlo_compare(b, direction, hlo_imag(b, x), hlo_imag(b, y)));
  }
  const char* kind = tpu_dtype_is_float(t.dtype)          ? "FLOAT"
                     : tpu_dtype_is_signed_int(t.dtype)   ? "SIGNED"
                                                          : "UNSIGNED";
  char attrs[160];
  snprintf(attrs, sizeof attrs,
           "comparison_direction = #stablehlo<comparison_direction %s>, "
           "compare_type = #stablehlo<comparison_type %s>",
           direction, kind);
  t.dtype = TPU_BOOL;
  return emit_op(b, "stablehlo.compare", operands, 2, attrs, t);
}

hlo_value hlo_add(hlo_builder* b, hlo_value x, hlo_value y) { return hlo_binary(b, "add", x, y); }
hlo_value hlo_subtract(hlo_builder* b, hlo_value x, hlo_value y) { return hlo_binary(b, "subtract", x, y); }
hlo_value hlo_multiply(hlo_builder* b, hlo_value x, hlo_value y) { return hlo_binary(b, "multiply", x, y); }
hlo_value hlo_divide(hlo_builder* b, hlo_value x, hlo_value y) { return hlo_binary(b, "divide", x, y); }

hlo_value hlo_optimization_barrier(hlo_builder* b, hlo_value x) {
  return hlo_unary(b, "optimization_barrier", x);
}

hlo_value hlo_binary_constant(hlo_builder* b, const char* op, hlo_value x, double k) {
  return hlo_binary(b, op, x, hlo_constant_like(b, x, k));
}

hlo_value hlo_compare_constant(hlo_builder* b, const char* direction, hlo_value x, double k) {
  return hlo_compare(b, direction, x, hlo_constant_like(b, x, k));
}

hlo_value hlo_select_constant(hlo_builder* b, hlo_value pred, double k, hlo_value x) {
  return hlo_select(b, pred, hlo_constant_like(b, x, k), x);
}

hlo_value hlo_select(hlo_builder* b, hlo_value pred, hlo_value on_true, hlo_value on_false) {
  hlo_value operands[3] = {pred, on_true, on_false};
  if (!values_valid(b, operands, 3) || !same_types(b, "select", on_true, on_false)) return HLO_INVALID;
  return emit_op(b, "stablehlo.select", operands, 3, NULL, *hlo_type_of(b, on_true));
}

hlo_value hlo_convert(hlo_builder* b, hlo_value x, tpu_dtype dtype) {
  if (!values_valid(b, &x, 1)) return HLO_INVALID;
  hlo_type t = *hlo_type_of(b, x);
  if (t.dtype == dtype) return x;
  bool from_complex = tpu_dtype_is_complex(t.dtype), to_complex = tpu_dtype_is_complex(dtype);
  if (from_complex && dtype == TPU_BOOL) return hlo_compare(b, "NE", x, hlo_constant_like(b, x, 0));
  if (from_complex && !to_complex) return hlo_convert(b, hlo_real(b, x), dtype); /* as PyTorch: imag dropped */
  if (!from_complex && to_complex) {
    hlo_value re = hlo_convert(b, x, tpu_dtype_real_part(dtype));
    return hlo_complex(b, re, hlo_constant_like(b, re, 0));
  }
  if (tpu_dtype_is_float8(t.dtype) || tpu_dtype_is_float8(dtype)) return hlo_convert_float8(b, x, dtype);
  /* PyTorch turns a float into bool by "!= 0", which convert also does. */
  t.dtype = dtype;
  return emit_op(b, "stablehlo.convert", &x, 1, NULL, t);
}

hlo_value hlo_bitcast_convert(hlo_builder* b, hlo_value x, tpu_dtype dtype) {
  if (!values_valid(b, &x, 1)) return HLO_INVALID;
  hlo_type t = *hlo_type_of(b, x);
  if (t.dtype == dtype) return x;
  if (tpu_dtype_size(t.dtype) != tpu_dtype_size(dtype))
    return hlo_fail(b, TPU_INVALID_ARGUMENT, "cannot reinterpret %s as %s: sizes differ",
                    tpu_dtype_name(t.dtype), tpu_dtype_name(dtype));
  if (tpu_dtype_is_complex(t.dtype) != tpu_dtype_is_complex(dtype))
    return hlo_fail(b, TPU_UNIMPLEMENTED, "a %s view of %s storage is not supported on tpu",
                    tpu_dtype_name(dtype), tpu_dtype_name(t.dtype));
  /* bool is i1 in StableHLO, which bitcasts to nothing; a bool byte holds
   * 0 or 1, so converting is the same reinterpretation (a float8 byte goes
   * through uint8: converting would change its bits). */
  if (t.dtype == TPU_BOOL && tpu_dtype_is_float8(dtype))
    return hlo_bitcast_convert(b, hlo_convert(b, x, TPU_U8), dtype);
  if (tpu_dtype_is_float8(t.dtype) && dtype == TPU_BOOL)
    return hlo_convert(b, hlo_bitcast_convert(b, x, TPU_U8), dtype);
  const char* op = t.dtype == TPU_BOOL || dtype == TPU_BOOL ? "stablehlo.convert" : "stablehlo.bitcast_convert";
  t.dtype = dtype;
  return emit_op(b, op, &x, 1, NULL, t);
}
