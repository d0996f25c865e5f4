/* Tables of numbers as StableHLO constants and lookups into them, and
 * what erf, erfc and torch.special build on them: erfcx and exp(-x^2). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "hlo/builder_impl.h"
#include "hlo/special_ops.h"

#include "hlo/erfcx_coefficients.inc"

hlo_value hlo_constant_table(hlo_builder* b, tpu_dtype dtype, const double* values, int count,
                             int stride) {
  if (dtype != TPU_F32 && dtype != TPU_F64)
    return hlo_fail(b, TPU_INTERNAL, "constant tables are f32 or f64, not %s", tpu_dtype_name(dtype));
  if (count <= 0 || stride <= 0)
    return hlo_fail(b, TPU_INTERNAL, "a constant table needs entries (count %d, stride %d)", count, stride);
  hlo_text attrs = {0};
  char ty[64];
  int64_t n = count;
  hlo_type type = hlo_type_make(dtype, 1, &n);
  /* %.9e / %.17e round-trip f32 / f64 exactly and always carry a point */
  text_append(b, &attrs, "value = dense<[");
  for (int i = 0; i < count; i++) {
    double v = values[(size_t)i * (size_t)stride];
    if (dtype == TPU_F32)
      text_append(b, &attrs, "%s%.9e", i ? ", " : "", (double)(float)v);
    else
      text_append(b, &attrs, "%s%.17e", i ? ", " : "", v);
  }
  text_append(b, &attrs, "]> : %s", hlo_type_print(&type, ty, sizeof ty));
  hlo_value result = hlo_failed(b) ? HLO_INVALID : emit_op(b, "stablehlo.constant", NULL, 0, attrs.data, type);
  free(attrs.data);
  return result;
}

hlo_value hlo_table_lookup(hlo_builder* b, hlo_value table, hlo_value index) {
  const hlo_type* it = hlo_type_of(b, index);
  hlo_type result = hlo_type_make(hlo_type_of(b, table)->dtype, it->rank, it->dims);
  int64_t zero = 0, one = 1;
  /* each index picks one entry: no window dims, the table's dim collapsed,
   * the index vector an implicit trailing dim of size 1 */
  hlo_gather_dims g = {NULL, 0, &zero, 1, &zero, 1, it->rank, &one};
  return hlo_gather(b, table, index, &g, result);
}

static hlo_value where_c(hlo_builder* b, const char* direction, hlo_value x, double c, hlo_value then,
                         hlo_value otherwise) {
  return hlo_select(b, hlo_compare(b, direction, x, hlo_constant_like(b, x, c)), then, otherwise);
}

/* exp(x^2) erfc(x) for x >= 0 below 50 and the erfc side of x < 0: with
 * v = 400/(4 + |x|) in [0, 100], piece floor(v) of the table is a
 * polynomial in 2v - (2 floor(v) + 1); 1 at v = 100 (x = 0). */
static hlo_value erfcx_table(hlo_builder* b, hlo_value v) {
  tpu_dtype t = hlo_type_of(b, v)->dtype;
  hlo_value k = hlo_unary(b, "floor", v);
  k = hlo_binary(b, "minimum", hlo_binary(b, "maximum", k, hlo_constant_like(b, k, 0)), hlo_constant_like(b, k, 99));
  hlo_value u = hlo_binary(b, "subtract", hlo_binary_constant(b, "multiply", v, 2),
                           hlo_binary_constant(b, "add", hlo_binary_constant(b, "multiply", k, 2), 1));
  hlo_value index = hlo_convert(b, k, TPU_I32);
  hlo_value r = HLO_INVALID;
  for (int j = 6; j >= 0; j--) {
    hlo_value c = hlo_table_lookup(b, hlo_constant_table(b, t, &erfcx_coefficients[0][j], 100, 7), index);
    r = j == 6 ? c : hlo_binary(b, "add", c, hlo_binary(b, "multiply", r, u));
  }
  return where_c(b, "GE", v, 100, hlo_constant_like(b, r, 1), r);
}

hlo_value hlo_erfcx(hlo_builder* b, hlo_value x) {
  const double inv_sqrt_pi = 0.56418958354775628694807945156;
  hlo_value ax = hlo_unary(b, "abs", x);
  hlo_value table = erfcx_table(
      b, hlo_binary(b, "divide", hlo_constant_like(b, x, 400), hlo_binary_constant(b, "add", ax, 4)));
  hlo_value x2 = hlo_binary(b, "multiply", x, x);
  hlo_value num =
      hlo_binary_constant(b, "add", hlo_binary(b, "multiply", x2, hlo_binary_constant(b, "add", x2, 4.5)), 2);
  hlo_value den =
      hlo_binary(b, "multiply", x,
                 hlo_binary_constant(
                     b, "add", hlo_binary(b, "multiply", x2, hlo_binary_constant(b, "add", x2, 5)), 3.75));
  hlo_value fraction = hlo_binary_constant(b, "multiply", hlo_binary(b, "divide", num, den), inv_sqrt_pi);
  fraction = where_c(b, "GT", x, 5e7, hlo_binary(b, "divide", hlo_constant_like(b, x, inv_sqrt_pi), x), fraction);
  hlo_value positive = where_c(b, "GT", x, 50, fraction, table);
  hlo_value twice = hlo_binary_constant(b, "multiply", hlo_unary(b, "exponential", x2), 2);
  hlo_value negative = where_c(b, "LT", x, -6.1, twice, hlo_binary(b, "subtract", twice, table));
  negative = where_c(b, "LT", x, -26.7, hlo_constant_like(b, x, INFINITY), negative);
  hlo_value v = where_c(b, "GE", x, 0, positive, negative);
  return hlo_select(b, hlo_compare(b, "NE", x, x), x, v);
}

hlo_value hlo_exp_neg_square(hlo_builder* b, hlo_value t) {
  hlo_type type = *hlo_type_of(b, t);
  bool f32 = type.dtype == TPU_F32;
  tpu_dtype bits = f32 ? TPU_I32 : TPU_I64;
  /* clears the low 12 (f32) or 27 (f64) significand bits */
  hlo_value mask = hlo_broadcast_to(b, hlo_constant_i64(b, bits, f32 ? -4096 : -134217728), type.rank, type.dims);
  hlo_value hi = hlo_bitcast_convert(b, hlo_binary(b, "and", hlo_bitcast_convert(b, t, bits), mask), type.dtype);
  hlo_value rest = hlo_binary(b, "multiply", hlo_binary(b, "subtract", t, hi), hlo_binary(b, "add", t, hi));
  hlo_value big = hlo_unary(b, "exponential", hlo_unary(b, "negate", hlo_binary(b, "multiply", hi, hi)));
  return hlo_binary(b, "multiply", big, hlo_unary(b, "exponential", hlo_unary(b, "negate", rest)));
}

hlo_value hlo_log1p(hlo_builder* b, hlo_value x) {
  /* The barrier keeps XLA from folding (x + 1) - 1 back into x. */
  hlo_value u = hlo_optimization_barrier(b, hlo_binary_constant(b, "add", x, 1));
  hlo_value lost = hlo_subtract(b, x, hlo_binary_constant(b, "add", u, -1));
  hlo_value near = hlo_add(b, hlo_unary(b, "log", u), hlo_divide(b, lost, u));
  /* x itself where 1 + x rounds to 1 (log1p(x) rounds to x there), which
   * keeps -0.0's sign */
  near = hlo_select(b, hlo_compare_constant(b, "EQ", u, 1), x, near);
  return hlo_select(b, hlo_compare_constant(b, "LT", hlo_unary(b, "abs", x), 1), near,
                    hlo_unary(b, "log_plus_one", x));
}
