/* Elementwise lowerings: arithmetic, comparison, logical, unary math, where,
 * clamp, casts, fill and copy. Each computes in PyTorch's promoted type,
 * with float16/bfloat16 widened to float32 as ATen's CPU kernels do, and
 * leaves the conversion to the output's dtype to exec/. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hlo/complex_ops.h"
#include "hlo/elementwise_extra_ops.h"
#include "hlo/special_ops.h"
#include "hlo/zeta_ops.h"
#include "ops/families.h"

/* The type of an op with float results: integers and bools compute in the
 * default dtype, float32; complex types stay. */
static tpu_dtype float_of(tpu_dtype t) {
  return tpu_dtype_is_float(t) || tpu_dtype_is_complex(t) ? tpu_dtype_compute(t) : TPU_F32;
}

/* Reads the operands at `indices` (tensors or runtime scalars) converted to
 * `dtype` and broadcast to their common shape; returns that type. */
static hlo_type read_operands(tpu_lowering* l, const int* indices, int count, tpu_dtype dtype,
                              hlo_value* out_values) {
  hlo_type shape = tpu_lower_broadcast_type(l, indices, count, dtype);
  for (int i = 0; i < count; i++) out_values[i] = tpu_lower_value_as(l, indices[i], &shape);
  return shape;
}

static hlo_value filled_like(hlo_builder* b, hlo_value x, tpu_dtype dtype, double value) {
  const hlo_type* t = hlo_type_of(b, x);
  return hlo_filled(b, dtype, t->rank, t->dims, value);
}

/* Table entries start with their op name; finds one by the lowering's op. */
static const void* find_op(tpu_lowering* l, const void* table, size_t count, size_t stride) {
  const char* name = tpu_lower_op_name(l);
  for (size_t i = 0; i < count; i++) {
    const void* entry = (const char*)table + i * stride;
    if (strcmp(*(const char* const*)entry, name) == 0) return entry;
  }
  tpu_lower_fail(l, TPU_INTERNAL, "aten::%s is registered but missing from its op table", name);
  return NULL;
}

#define FIND_OP(l, table) find_op(l, table, sizeof table / sizeof table[0], sizeof table[0])

/* ---- copies and fills ---- */

/* copy_(self, src), or copy_(src) as the glue's own copy_ calls it: the
 * value converted (by exec/) to the output's dtype and broadcast to its
 * shape. */
static tpu_status lower_copy(tpu_lowering* l) {
  int src = tpu_lower_arg_count(l) > 1 && tpu_lower_arg_kind(l, 1) == TPU_ARG_TENSOR ? 1 : 0;
  hlo_value v = tpu_lower_tensor(l, src);
  tpu_dtype from = tpu_lower_arg_type(l, src).dtype, to = tpu_lower_output_type(l, 0).dtype;
  /* ATen casts floats to narrow integers through int32, so values beyond
   * the narrow range wrap (200.0 -> int8 -56) where convert would saturate. */
  if (tpu_dtype_is_float(from) && tpu_dtype_is_integral(to) && tpu_dtype_size(to) < 4)
    v = hlo_convert(tpu_lower_builder(l), v, TPU_I32);
  tpu_lower_set_output(l, 0, v);
  return NULL;
}

/* fill_(self, value): value is a runtime scalar or a 0-d tensor. */
static tpu_status lower_fill(tpu_lowering* l) {
  hlo_type out = tpu_lower_output_type(l, 0);
  tpu_lower_set_output(l, 0, tpu_lower_value(l, 1, out.dtype));
  return NULL;
}

static tpu_status lower_zero(tpu_lowering* l) {
  hlo_type out = tpu_lower_output_type(l, 0);
  tpu_lower_set_output(l, 0, hlo_constant(tpu_lower_builder(l), out.dtype, 0));
  return NULL;
}

/* ---- binary arithmetic ---- */

/* add/sub(self, other, alpha) = self +- alpha * other; rsub swaps. */
static tpu_status lower_add(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  const char* name = tpu_lower_op_name(l);
  bool reversed = strcmp(name, "rsub") == 0;
  int operands[2] = {0, 1};
  tpu_dtype t = tpu_dtype_compute(tpu_lower_result_type(l, operands, 2));
  hlo_value v[2];
  hlo_type shape = read_operands(l, operands, 2, t, v);
  hlo_value x = v[reversed], y = v[!reversed];
  if (!tpu_lower_is_none(l, 2)) {
    hlo_value alpha = hlo_broadcast_to(b, tpu_lower_value(l, 2, t), shape.rank, shape.dims);
    y = hlo_binary(b, "multiply", y, alpha);
  }
  const char* op = reversed || strcmp(name, "sub") == 0 ? "subtract" : "add";
  tpu_lower_set_output(l, 0, hlo_binary(b, op, x, y));
  return NULL;
}

/* div(self, other, rounding_mode): true division in float, or "trunc" /
 * "floor" division in the promoted type. */
static tpu_status lower_div(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  const char* mode = tpu_lower_string(l, 2, NULL);
  int operands[2] = {0, 1};
  tpu_dtype t = tpu_lower_result_type(l, operands, 2);
  hlo_value v[2];
  read_operands(l, operands, 2, mode ? tpu_dtype_compute(t) : float_of(t), v);
  hlo_value q;
  if (!mode) {
    q = hlo_binary(b, "divide", v[0], v[1]);
  } else if (strcmp(mode, "trunc") == 0) {
    q = hlo_binary(b, "divide", v[0], v[1]); /* integer divide truncates */
    if (tpu_dtype_is_float(t)) q = hlo_trunc(b, q);
  } else if (strcmp(mode, "floor") == 0) {
    q = hlo_floor_divide(b, v[0], v[1]);
  } else {
    q = tpu_lower_fail(l, TPU_INVALID_ARGUMENT,
                       "aten::div: rounding_mode must be None, 'trunc' or 'floor', not '%s'", mode);
  }
  tpu_lower_set_output(l, 0, q);
  return NULL;
}

/* The type binary (and unary) ops read their operands in. */
typedef enum operand_rule {
  PROMOTED,   /* PyTorch's promoted type */
  AS_FLOAT,   /* promoted, then float: ops with float results */
  AS_BOOL,    /* each operand as (x != 0) */
  FLOAT_ONLY, /* promoted, which must be float (the CPU kernel has no other) */
  INT_ONLY,   /* promoted, which must be an integer type (likewise) */
} operand_rule;

typedef hlo_value (*binary_fn)(hlo_builder* b, hlo_value x, hlo_value y);
typedef hlo_value (*unary_fn)(hlo_builder* b, hlo_value x);

static hlo_value maximum_fn(hlo_builder* b, hlo_value x, hlo_value y) {
  return hlo_min_max(b, "maximum", x, y, true);
}
static hlo_value minimum_fn(hlo_builder* b, hlo_value x, hlo_value y) {
  return hlo_min_max(b, "minimum", x, y, true);
}
static hlo_value fmax_fn(hlo_builder* b, hlo_value x, hlo_value y) {
  return hlo_min_max(b, "maximum", x, y, false);
}
static hlo_value fmin_fn(hlo_builder* b, hlo_value x, hlo_value y) {
  return hlo_min_max(b, "minimum", x, y, false);
}

static hlo_value shift_right(hlo_builder* b, hlo_value x, hlo_value y) {
  bool arithmetic = tpu_dtype_is_signed_int(hlo_type_of(b, x)->dtype);
  return hlo_binary(b, arithmetic ? "shift_right_arithmetic" : "shift_right_logical", x, y);
}

/* x * log(y) (torch.xlogy) or x * log1p(y) (special.xlog1py), 0 where x
 * is 0 unless y is NaN. */
static hlo_value x_times_log(hlo_builder* b, hlo_value x, hlo_value log_y, hlo_value y) {
  hlo_value product = hlo_binary(b, "multiply", x, log_y);
  hlo_value zero = hlo_binary(b, "and", hlo_compare_constant(b, "EQ", x, 0), hlo_compare(b, "EQ", y, y));
  return hlo_select(b, zero, hlo_constant_like(b, product, 0), product);
}
static hlo_value xlogy_fn(hlo_builder* b, hlo_value x, hlo_value y) {
  return x_times_log(b, x, hlo_unary(b, "log", y), y);
}
static hlo_value xlog1py_fn(hlo_builder* b, hlo_value x, hlo_value y) { return x_times_log(b, x, hlo_log1p(b, y), y); }

/* heaviside(x, values): values where x is 0, else 1 where x > 0 and 0
 * elsewhere (NaN included), as PyTorch's kernel compares. */
static hlo_value heaviside_fn(hlo_builder* b, hlo_value x, hlo_value values) {
  hlo_value step = hlo_convert(b, hlo_compare_constant(b, "GT", x, 0), hlo_type_of(b, x)->dtype);
  return hlo_select(b, hlo_compare_constant(b, "EQ", x, 0), values, step);
}

/* Unsigned integers and bools are their own absolute value; a complex
 * number's is its (real) magnitude. */
static hlo_value abs_fn(hlo_builder* b, hlo_value x) {
  tpu_dtype t = hlo_type_of(b, x)->dtype;
  return tpu_dtype_is_float(t) || tpu_dtype_is_signed_int(t) || tpu_dtype_is_complex(t) ? hlo_unary(b, "abs", x) : x;
}

/* gcd by Euclid's algorithm on |x| and |y|, as PyTorch's kernel runs it:
 * (a, b) <- (b mod a, a) while a != 0. HLO has no loop here, so the step is
 * unrolled once per Fibonacci number below the dtype's bound (93 for int64,
 * 24 for int16): consecutive Fibonacci numbers take the most steps, two
 * fewer than that. Elements already done keep their values. */
static hlo_value gcd_fn(hlo_builder* b, hlo_value x, hlo_value y) {
  tpu_dtype t = hlo_type_of(b, x)->dtype;
  double largest = ldexp(1, 8 * (int)tpu_dtype_size(t) - (tpu_dtype_is_signed_int(t) ? 1 : 0));
  hlo_value a = abs_fn(b, x), g = abs_fn(b, y);
  hlo_value zero = hlo_constant_like(b, a, 0), one = hlo_constant_like(b, a, 1);
  for (double f0 = 0, f1 = 1; f0 < largest; f1 += f0, f0 = f1 - f0) {
    hlo_value running = hlo_compare(b, "NE", a, zero);
    hlo_value rest = hlo_binary(b, "remainder", g, hlo_select(b, running, a, one));
    g = hlo_select(b, running, a, g);
    a = hlo_select(b, running, rest, zero);
  }
  return g;
}

/* |x / gcd * y|, 0 where the gcd is 0, as PyTorch's kernel computes it in
 * C: types narrower than int promoted to int32 for the product and its
 * absolute value, so an overflow wraps as it does there. */
static hlo_value lcm_fn(hlo_builder* b, hlo_value x, hlo_value y) {
  tpu_dtype t = hlo_type_of(b, x)->dtype, wide = tpu_dtype_size(t) < 4 ? TPU_I32 : t;
  hlo_value g = gcd_fn(b, x, y), zero = hlo_constant_like(b, g, 0);
  hlo_value none = hlo_compare(b, "EQ", g, zero);
  hlo_value quotient = hlo_binary(b, "divide", x, hlo_select(b, none, hlo_constant_like(b, g, 1), g));
  hlo_value product = hlo_binary(b, "multiply", hlo_convert(b, quotient, wide), hlo_convert(b, y, wide));
  return hlo_select(b, none, zero, hlo_convert(b, abs_fn(b, product), t));
}

/* log(e^x + e^y) (or log2(2^x + 2^y) for base 2) as max + log1p(e^-|x-y|),
 * which never overflows; two equal infinities give themselves, where the
 * difference would be NaN, as in PyTorch's kernels. */
static hlo_value log_add_exp(hlo_builder* b, hlo_value x, hlo_value y, bool base2) {
  hlo_value big = hlo_min_max(b, "maximum", x, y, true);
  hlo_value gap = hlo_unary(b, "negate", hlo_unary(b, "abs", hlo_binary(b, "subtract", x, y)));
  hlo_value term = base2 ? hlo_binary(b, "divide",
                                      hlo_unary(b, "log_plus_one", hlo_binary(b, "power", hlo_constant_like(b, gap, 2), gap)),
                                      hlo_constant_like(b, gap, M_LN2))
                         : hlo_unary(b, "log_plus_one", hlo_unary(b, "exponential", gap));
  hlo_value same_infinity = hlo_binary(b, "and", hlo_compare(b, "EQ", x, y),
                                       hlo_compare_constant(b, "EQ", hlo_unary(b, "abs", x), INFINITY));
  return hlo_select(b, same_infinity, x, hlo_binary(b, "add", big, term));
}
static hlo_value logaddexp_fn(hlo_builder* b, hlo_value x, hlo_value y) { return log_add_exp(b, x, y, false); }
static hlo_value logaddexp2_fn(hlo_builder* b, hlo_value x, hlo_value y) { return log_add_exp(b, x, y, true); }

/* HLO leaves an integer power with a negative exponent undefined (XLA
 * CPU's two emitters disagree); PyTorch truncates 1 / x^-y: 1 for a base of
 * 1, +-1 for -1 by the exponent's parity, else 0. */
static hlo_value pow_fn(hlo_builder* b, hlo_value x, hlo_value y) {
  hlo_value power = hlo_binary(b, "power", x, y);
  if (!tpu_dtype_is_signed_int(hlo_type_of(b, x)->dtype)) return power;
  hlo_value one = hlo_constant_like(b, x, 1), zero = hlo_constant_like(b, x, 0);
  hlo_value odd = hlo_compare(b, "NE", hlo_binary(b, "and", y, one), zero);
  hlo_value minus_one = hlo_select(b, odd, hlo_constant_like(b, x, -1), one);
  hlo_value fraction = hlo_select(b, hlo_compare_constant(b, "EQ", x, 1), one,
                                  hlo_select(b, hlo_compare_constant(b, "EQ", x, -1), minus_one, zero));
  return hlo_select(b, hlo_compare_constant(b, "LT", y, 0), fraction, power);
}

/* Each op is one StableHLO op (hlo) or a composite (fn). */
/* The complex forms of ops whose real formula takes no complex numbers
 * (csrc/hlo/complex_ops.c). */
static const struct complex_form {
  const char* name;
  unary_fn unary;
  binary_fn binary;
} complex_forms[] = {
    {"acos", hlo_complex_acos, NULL},   {"acosh", hlo_complex_acosh, NULL}, {"asin", hlo_complex_asin, NULL},
    {"asinh", hlo_complex_asinh, NULL}, {"atan", hlo_complex_atan, NULL},   {"atanh", hlo_complex_atanh, NULL},
    {"cosh", hlo_complex_cosh, NULL},   {"sinh", hlo_complex_sinh, NULL},   {"logaddexp", NULL, hlo_complex_logaddexp},
};

/* The op's complex form, for a complex operand type, or NULL. */
static const struct complex_form* complex_form_of(tpu_lowering* l, tpu_dtype type) {
  if (!tpu_dtype_is_complex(type)) return NULL;
  for (size_t i = 0; i < sizeof complex_forms / sizeof complex_forms[0]; i++)
    if (!strcmp(complex_forms[i].name, tpu_lower_op_name(l))) return &complex_forms[i];
  return NULL;
}

static const struct binary_op {
  const char* name;
  const char* hlo;
  binary_fn fn;
  operand_rule rule;
} binary_ops[] = {
    {"__ilshift__", "shift_left", NULL, PROMOTED},
    {"__irshift__", NULL, shift_right, PROMOTED},
    {"__lshift__", "shift_left", NULL, PROMOTED},
    {"__rshift__", NULL, shift_right, PROMOTED},
    {"atan2", "atan2", NULL, AS_FLOAT},
    {"bitwise_and", "and", NULL, PROMOTED},
    {"bitwise_left_shift", "shift_left", NULL, PROMOTED},
    {"bitwise_or", "or", NULL, PROMOTED},
    {"bitwise_right_shift", NULL, shift_right, PROMOTED},
    {"bitwise_xor", "xor", NULL, PROMOTED},
    {"copysign", NULL, hlo_copysign, AS_FLOAT},
    {"floor_divide", NULL, hlo_floor_divide, PROMOTED},
    {"fmax", NULL, fmax_fn, PROMOTED},
    {"fmin", NULL, fmin_fn, PROMOTED},
    {"fmod", "remainder", NULL, PROMOTED},
    {"gcd", NULL, gcd_fn, INT_ONLY},
    {"heaviside", NULL, heaviside_fn, PROMOTED},
    {"hypot", NULL, hlo_hypot, FLOAT_ONLY},
    {"lcm", NULL, lcm_fn, INT_ONLY},
    {"logaddexp", NULL, logaddexp_fn, FLOAT_ONLY},
    {"logaddexp2", NULL, logaddexp2_fn, FLOAT_ONLY},
    {"logical_and", "and", NULL, AS_BOOL},
    {"logical_or", "or", NULL, AS_BOOL},
    {"logical_xor", "xor", NULL, AS_BOOL},
    {"maximum", NULL, maximum_fn, PROMOTED},
    {"minimum", NULL, minimum_fn, PROMOTED},
    {"mul", "multiply", NULL, PROMOTED},
    {"pow", NULL, pow_fn, PROMOTED},
    {"remainder", NULL, hlo_python_remainder, PROMOTED},
    {"special_xlog1py", NULL, xlog1py_fn, AS_FLOAT},
    {"xlogy", NULL, xlogy_fn, AS_FLOAT},
};

static tpu_dtype operand_type(tpu_lowering* l, operand_rule rule, const int* indices, int count) {
  if (rule == AS_BOOL) return TPU_BOOL;
  tpu_dtype t = tpu_lower_result_type(l, indices, count);
  return rule == AS_FLOAT ? float_of(t) : tpu_dtype_compute(t);
}

/* op(self, other): either may be a Python scalar (pow.Scalar, remainder.Scalar_Tensor). */
static tpu_status lower_binary(tpu_lowering* l) {
  const struct binary_op* op = FIND_OP(l, binary_ops);
  if (!op) return NULL;
  hlo_builder* b = tpu_lower_builder(l);
  int operands[2] = {0, 1};
  tpu_dtype type = operand_type(l, op->rule, operands, 2);
  const struct complex_form* complex = complex_form_of(l, type);
  binary_fn fn = complex ? complex->binary : op->fn;
  bool takes_type = tpu_dtype_is_float(type) || complex;
  if ((op->rule == FLOAT_ONLY && !takes_type) || (op->rule == INT_ONLY && !tpu_dtype_is_integral(type))) {
    tpu_lower_fail(l, TPU_UNIMPLEMENTED, "aten::%s is not implemented for %s, as on the CPU; convert to %s type",
                   op->name, tpu_dtype_name(type), op->rule == FLOAT_ONLY ? "a float" : "an integer");
    return NULL;
  }
  hlo_value v[2];
  read_operands(l, operands, 2, type, v);
  tpu_lower_set_output(l, 0, fn ? fn(b, v[0], v[1]) : hlo_binary(b, op->hlo, v[0], v[1]));
  return NULL;
}

static const struct comparison {
  const char* name;
  const char* direction;
} comparisons[] = {
    {"eq", "EQ"}, {"ge", "GE"}, {"gt", "GT"}, {"le", "LE"}, {"lt", "LT"}, {"ne", "NE"},
};

/* Compares in the promoted type, like PyTorch (int8 < 200 wraps 200). */
static tpu_status lower_compare(tpu_lowering* l) {
  const struct comparison* op = FIND_OP(l, comparisons);
  if (!op) return NULL;
  int operands[2] = {0, 1};
  hlo_value v[2];
  read_operands(l, operands, 2, tpu_lower_result_type(l, operands, 2), v);
  tpu_lower_set_output(l, 0, hlo_compare(tpu_lower_builder(l), op->direction, v[0], v[1]));
  return NULL;
}

/* ---- unary ---- */


/* Integer inputs of floor, ceil, trunc and round are already whole. */
static hlo_value floor_fn(hlo_builder* b, hlo_value x) {
  return tpu_dtype_is_float(hlo_type_of(b, x)->dtype) ? hlo_unary(b, "floor", x) : x;
}
static hlo_value ceil_fn(hlo_builder* b, hlo_value x) {
  return tpu_dtype_is_float(hlo_type_of(b, x)->dtype) ? hlo_unary(b, "ceil", x) : x;
}
static hlo_value trunc_fn(hlo_builder* b, hlo_value x) {
  return tpu_dtype_is_float(hlo_type_of(b, x)->dtype) ? hlo_trunc(b, x) : x;
}
static hlo_value frac_fn(hlo_builder* b, hlo_value x) {
  return hlo_binary(b, "subtract", x, hlo_trunc(b, x));
}
static hlo_value exp2_fn(hlo_builder* b, hlo_value x) {
  return hlo_binary(b, "power", hlo_constant_like(b, x, 2), x); /* exact at integers */
}
static hlo_value log2_fn(hlo_builder* b, hlo_value x) {
  hlo_value y = hlo_unary(b, "log", x);
  return hlo_binary(b, "multiply", y, hlo_constant_like(b, y, 1.44269504088896340736));
}
static hlo_value log10_fn(hlo_builder* b, hlo_value x) {
  hlo_value y = hlo_unary(b, "log", x);
  return hlo_binary(b, "multiply", y, hlo_constant_like(b, y, 0.43429448190325182765));
}
static hlo_value reciprocal_fn(hlo_builder* b, hlo_value x) {
  return hlo_binary(b, "divide", hlo_constant_like(b, x, 1), x);
}

/* sgn: z / |z| for complex z (0 at 0), the sign otherwise. */
static hlo_value sgn_fn(hlo_builder* b, hlo_value x) {
  if (!tpu_dtype_is_complex(hlo_type_of(b, x)->dtype)) return hlo_sign(b, x);
  hlo_value magnitude = hlo_unary(b, "abs", x);
  hlo_value zero = hlo_compare(b, "EQ", magnitude, hlo_constant_like(b, magnitude, 0));
  hlo_value unit = hlo_binary(b, "divide", x, hlo_complex(b, magnitude, hlo_constant_like(b, magnitude, 0)));
  return hlo_select(b, zero, hlo_constant_like(b, x, 0), unit);
}

/* Predicates; integers are never NaN or infinite. */
static hlo_value isnan_fn(hlo_builder* b, hlo_value x) { return hlo_compare(b, "NE", x, x); }
static hlo_value infinity_test(hlo_builder* b, hlo_value x, double inf) {
  if (!tpu_dtype_is_float(hlo_type_of(b, x)->dtype)) return filled_like(b, x, TPU_BOOL, 0);
  return hlo_compare_constant(b, "EQ", x, inf);
}
static hlo_value isinf_fn(hlo_builder* b, hlo_value x) {
  /* abs first (StableHLO has no abs of unsigned); a complex number by its
   * parts, as its magnitude can overflow where neither part is infinite */
  tpu_dtype t = hlo_type_of(b, x)->dtype;
  if (tpu_dtype_is_integral(t) || t == TPU_BOOL) return filled_like(b, x, TPU_BOOL, 0);
  if (tpu_dtype_is_complex(t)) return hlo_binary(b, "or", isinf_fn(b, hlo_real(b, x)), isinf_fn(b, hlo_imag(b, x)));
  return infinity_test(b, hlo_unary(b, "abs", x), INFINITY);
}
static hlo_value isposinf_fn(hlo_builder* b, hlo_value x) { return infinity_test(b, x, INFINITY); }
static hlo_value isneginf_fn(hlo_builder* b, hlo_value x) { return infinity_test(b, x, -INFINITY); }

/* float16/bfloat16 widened to float32, as PyTorch's kernels compute them. */
static hlo_value widened(hlo_builder* b, hlo_value (*fn)(hlo_builder*, hlo_value), hlo_value x) {
  tpu_dtype t = hlo_type_of(b, x)->dtype;
  return hlo_convert(b, fn(b, hlo_convert(b, x, tpu_dtype_compute(t))), t);
}
static hlo_value lgamma_fn(hlo_builder* b, hlo_value x) { return widened(b, hlo_log_gamma, x); }
static hlo_value digamma_fn(hlo_builder* b, hlo_value x) { return widened(b, hlo_digamma, x); }

/* -x log(x): 0 at 0, -inf below it (special.entr). */
static hlo_value entr_fn(hlo_builder* b, hlo_value x) {
  hlo_value value = hlo_unary(b, "negate", hlo_binary(b, "multiply", x, hlo_unary(b, "log", x)));
  value = hlo_select(b, hlo_compare_constant(b, "EQ", x, 0), hlo_constant_like(b, x, 0), value);
  return hlo_select(b, hlo_compare_constant(b, "LT", x, 0), hlo_constant_like(b, x, -INFINITY), value);
}

/* sin(pi x) / (pi x), and 1 at 0. */
static hlo_value sinc_fn(hlo_builder* b, hlo_value x) {
  hlo_value product = hlo_binary(b, "multiply", x, hlo_constant_like(b, x, M_PI));
  hlo_value ratio = hlo_binary(b, "divide", hlo_unary(b, "sine", product), product);
  return hlo_select(b, hlo_compare_constant(b, "EQ", x, 0), hlo_constant_like(b, x, 1), ratio);
}

static const struct unary_op {
  const char* name;
  const char* hlo;
  unary_fn fn;
  operand_rule rule;
} unary_ops[] = {
    {"abs", NULL, abs_fn, PROMOTED},
    {"acos", NULL, hlo_acos, AS_FLOAT},
    {"acosh", NULL, hlo_acosh, AS_FLOAT},
    {"asin", NULL, hlo_asin, AS_FLOAT},
    {"asinh", NULL, hlo_asinh, AS_FLOAT},
    {"atan", NULL, hlo_atan, AS_FLOAT},
    {"atanh", NULL, hlo_atanh, AS_FLOAT},
    {"bitwise_not", "not", NULL, PROMOTED},
    {"ceil", NULL, ceil_fn, PROMOTED},
    {"cos", "cosine", NULL, AS_FLOAT},
    {"cosh", NULL, hlo_cosh, AS_FLOAT},
    {"digamma", NULL, digamma_fn, AS_FLOAT},
    {"erf", NULL, hlo_erf, AS_FLOAT},
    {"erfc", NULL, hlo_erfc, AS_FLOAT},
    {"erfinv", NULL, hlo_erfinv, AS_FLOAT},
    {"exp", "exponential", NULL, AS_FLOAT},
    {"exp2", NULL, exp2_fn, AS_FLOAT},
    {"expm1", "exponential_minus_one", NULL, AS_FLOAT},
    {"floor", NULL, floor_fn, PROMOTED},
    {"frac", NULL, frac_fn, PROMOTED},
    {"isinf", NULL, isinf_fn, PROMOTED},
    {"isnan", NULL, isnan_fn, PROMOTED},
    {"isneginf", NULL, isneginf_fn, PROMOTED},
    {"isposinf", NULL, isposinf_fn, PROMOTED},
    {"lgamma", NULL, lgamma_fn, AS_FLOAT},
    {"log", "log", NULL, AS_FLOAT},
    {"log10", NULL, log10_fn, AS_FLOAT},
    {"log1p", NULL, hlo_log1p, AS_FLOAT},
    {"log2", NULL, log2_fn, AS_FLOAT},
    {"logical_not", "not", NULL, AS_BOOL},
    {"neg", "negate", NULL, PROMOTED},
    {"reciprocal", NULL, reciprocal_fn, AS_FLOAT},
    {"rsqrt", "rsqrt", NULL, AS_FLOAT},
    {"sgn", NULL, sgn_fn, PROMOTED},
    {"sigmoid", "logistic", NULL, AS_FLOAT},
    {"sign", NULL, hlo_sign, PROMOTED},
    {"signbit", NULL, hlo_signbit, PROMOTED},
    {"sin", "sine", NULL, AS_FLOAT},
    {"sinc", NULL, sinc_fn, AS_FLOAT},
    {"sinh", NULL, hlo_sinh, AS_FLOAT},
    {"special_entr", NULL, entr_fn, AS_FLOAT},
    {"sqrt", "sqrt", NULL, AS_FLOAT},
    {"tan", "tan", NULL, AS_FLOAT},
    {"tanh", "tanh", NULL, AS_FLOAT},
    {"trunc", NULL, trunc_fn, PROMOTED},
};

static hlo_value read_unary(tpu_lowering* l, operand_rule rule) {
  int self = 0;
  return tpu_lower_value(l, 0, operand_type(l, rule, &self, 1));
}

static tpu_status lower_unary(tpu_lowering* l) {
  const struct unary_op* op = FIND_OP(l, unary_ops);
  if (!op) return NULL;
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value x = read_unary(l, op->rule);
  const struct complex_form* complex = complex_form_of(l, hlo_type_of(b, x)->dtype);
  unary_fn fn = complex ? complex->unary : op->fn;
  tpu_lower_set_output(l, 0, fn ? fn(b, x) : hlo_unary(b, op->hlo, x));
  return NULL;
}

/* polygamma(n, self): the n-th derivative of digamma. */
static tpu_status lower_polygamma(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  int self = 1;
  hlo_value x = tpu_lower_value(l, 1, operand_type(l, AS_FLOAT, &self, 1));
  int64_t n = tpu_lower_int(l, 0, 0);
  /* as the CPU: digamma for n = 0, trigamma's own series for n = 1, zeta
   * for the others (XLA's polygamma is less accurate and wrong at some
   * negative x) */
  tpu_dtype t = hlo_type_of(b, x)->dtype;
  hlo_value wide = hlo_convert(b, x, tpu_dtype_compute(t));
  hlo_value r = n == 0 ? hlo_digamma(b, wide) : n == 1 ? hlo_trigamma(b, wide) : hlo_polygamma(b, n, wide);
  tpu_lower_set_output(l, 0, hlo_convert(b, r, t));
  return NULL;
}

/* round(self, decimals=0): halves to even, at 10^-decimals steps. */
static tpu_status lower_round(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value x = read_unary(l, PROMOTED);
  int64_t decimals = tpu_lower_int(l, 1, 0);
  if (!tpu_dtype_is_float(hlo_type_of(b, x)->dtype)) {
    tpu_lower_set_output(l, 0, x);
    return NULL;
  }
  if (decimals == 0) {
    tpu_lower_set_output(l, 0, hlo_unary(b, "round_nearest_even", x));
    return NULL;
  }
  /* As ATen: scale by 10^|decimals| up (or down), round, scale back. */
  hlo_value scale = hlo_constant_like(b, x, pow(10.0, (double)llabs(decimals)));
  const char* there = decimals > 0 ? "multiply" : "divide";
  const char* back = decimals > 0 ? "divide" : "multiply";
  hlo_value r = hlo_unary(b, "round_nearest_even", hlo_binary(b, there, x, scale));
  tpu_lower_set_output(l, 0, hlo_binary(b, back, r, scale));
  return NULL;
}

static double max_finite(tpu_dtype t) {
  switch (t) {
    case TPU_F16: return 65504.0;
    case TPU_BF16: return 3.38953138925153547590e38;
    case TPU_F32: return FLT_MAX;
    default: return DBL_MAX;
  }
}

/* nan_to_num(self, nan, posinf, neginf): the replacements are compile-time
 * floats; infinities default to the dtype's finite extremes. Computes in
 * the tensor's own dtype so that those extremes stay finite. */
static tpu_status lower_nan_to_num(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value x = tpu_lower_tensor(l, 0);
  tpu_dtype t = tpu_lower_arg_type(l, 0).dtype;
  if (tpu_dtype_is_float(t)) {
    double big = max_finite(t);
    hlo_value r = hlo_select(b, hlo_compare(b, "NE", x, x),
                             hlo_constant_like(b, x, tpu_lower_float(l, 1, 0.0)), x);
    r = hlo_select(b, hlo_compare_constant(b, "EQ", x, INFINITY),
                   hlo_constant_like(b, x, tpu_lower_float(l, 2, big)), r);
    x = hlo_select(b, hlo_compare_constant(b, "EQ", x, -INFINITY),
                   hlo_constant_like(b, x, tpu_lower_float(l, 3, -big)), r);
  }
  tpu_lower_set_output(l, 0, x);
  return NULL;
}

/* The bit layout of a float type: the integer type of its width, its
 * mantissa and exponent field widths and exponent bias. */
typedef struct float_bits {
  tpu_dtype bits;
  int mantissa, exponent, bias;
} float_bits;

static float_bits float_bits_of(tpu_dtype t) {
  switch (t) {
    case TPU_F16: return (float_bits){TPU_I16, 10, 5, 15};
    case TPU_BF16: return (float_bits){TPU_I16, 7, 8, 127};
    case TPU_F64: return (float_bits){TPU_I64, 52, 11, 1023};
    default: return (float_bits){TPU_I32, 23, 8, 127};
  }
}

/* An integer constant of any width, exactly, in like's shape and dtype. */
static hlo_value bits_like(hlo_builder* b, hlo_value like, int64_t v) {
  const hlo_type* t = hlo_type_of(b, like);
  hlo_type shape = *t;
  return hlo_broadcast_in_dim(b, hlo_constant_i64(b, shape.dtype, v), shape.rank, shape.dims, NULL);
}

/* frexp(self) -> (mantissa, exponent): x = mantissa * 2^exponent with
 * |mantissa| in [0.5, 1); 0, inf and NaN give themselves and exponent 0,
 * as glibc's frexp, which PyTorch's CPU kernel calls. Read off the float's
 * bits as integers, since XLA CPU treats subnormal floats as zero: a
 * subnormal's significand is shifted up to its leading one. */
static tpu_status lower_frexp(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  tpu_dtype t = tpu_lower_arg_type(l, 0).dtype;
  if (!tpu_dtype_is_float(t)) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "torch.frexp() only supports floating-point dtypes, got %s",
                   tpu_dtype_name(t));
    return NULL;
  }
  float_bits f = float_bits_of(t);
  int width = 1 + f.exponent + f.mantissa;
  int64_t field = ((int64_t)1 << f.exponent) - 1, fraction = ((int64_t)1 << f.mantissa) - 1;
  hlo_value bits = hlo_bitcast_convert(b, tpu_lower_tensor(l, 0), f.bits);
  hlo_value sign = hlo_binary(b, "and", bits, bits_like(b, bits, (int64_t)((uint64_t)1 << (width - 1))));
  hlo_value biased = hlo_binary(b, "and", hlo_binary(b, "shift_right_logical", bits, bits_like(b, bits, f.mantissa)),
                                bits_like(b, bits, field));
  hlo_value significand = hlo_binary(b, "and", bits, bits_like(b, bits, fraction));
  hlo_value zero = bits_like(b, bits, 0);
  hlo_value subnormal = hlo_compare(b, "EQ", biased, zero);
  hlo_value special = hlo_binary(b, "or", hlo_compare(b, "EQ", hlo_binary(b, "or", biased, significand), zero),
                                 hlo_compare(b, "EQ", biased, bits_like(b, bits, field))); /* 0, inf, NaN */
  /* A subnormal's leading one at bit p moves to the implicit bit. */
  hlo_value top = hlo_binary(b, "subtract", bits_like(b, bits, width - 1), hlo_unary(b, "count_leading_zeros", significand));
  hlo_value lifted = hlo_binary(b, "shift_left", significand, hlo_binary(b, "subtract", bits_like(b, bits, f.mantissa), top));
  significand = hlo_select(b, subnormal, hlo_binary(b, "and", lifted, bits_like(b, bits, fraction)), significand);
  hlo_value exponent = hlo_select(b, subnormal, hlo_binary(b, "add", top, bits_like(b, bits, 2 - f.bias - f.mantissa)),
                                  hlo_binary(b, "subtract", biased, bits_like(b, bits, f.bias - 1)));
  hlo_value mantissa = hlo_binary(b, "or", hlo_binary(b, "or", sign, significand),
                                  bits_like(b, bits, (int64_t)(f.bias - 1) << f.mantissa));
  tpu_lower_set_output(l, 0, hlo_bitcast_convert(b, hlo_select(b, special, bits, mantissa), t));
  tpu_lower_set_output(l, 1, hlo_select(b, special, zero, exponent));
  return NULL;
}

/* A float's place in its type's order as an integer of its width (the
 * sign-and-magnitude bits in two's complement): neighbours differ by one,
 * and both zeros are 0. */
static hlo_value float_order(hlo_builder* b, hlo_value bits, float_bits f) {
  hlo_value magnitude = hlo_binary(b, "and", bits, bits_like(b, bits, ((int64_t)1 << (f.exponent + f.mantissa)) - 1));
  return hlo_select(b, hlo_compare_constant(b, "LT", bits, 0), hlo_unary(b, "negate", magnitude), magnitude);
}

/* nextafter(self, other): the float after self toward other; other itself
 * when they are equal, NaN when either is. Stepped on the bits as integers
 * in the operands' own type (XLA CPU treats subnormal floats as zero, and
 * a widened float16 would step by a float32's ulp). */
static tpu_status lower_nextafter(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  int operands[2] = {0, 1};
  tpu_dtype t = tpu_lower_result_type(l, operands, 2);
  if (!tpu_dtype_is_float(t)) {
    tpu_lower_fail(l, TPU_UNIMPLEMENTED, "aten::nextafter is not implemented for %s, as on the CPU; convert to a "
                   "float type", tpu_dtype_name(t));
    return NULL;
  }
  hlo_value v[2];
  read_operands(l, operands, 2, t, v);
  float_bits f = float_bits_of(t);
  hlo_value bits[2] = {hlo_bitcast_convert(b, v[0], f.bits), hlo_bitcast_convert(b, v[1], f.bits)};
  hlo_value from = float_order(b, bits[0], f), to = float_order(b, bits[1], f);
  hlo_value step = hlo_select(b, hlo_compare(b, "LT", from, to), bits_like(b, from, 1), bits_like(b, from, -1));
  hlo_value next = hlo_binary(b, "add", from, step);
  /* back to sign and magnitude; a step onto zero keeps self's sign */
  hlo_value negative = hlo_binary(b, "or", hlo_compare_constant(b, "LT", next, 0),
                                  hlo_binary(b, "and", hlo_compare_constant(b, "EQ", next, 0),
                                             hlo_compare_constant(b, "LT", bits[0], 0)));
  hlo_value magnitude = hlo_unary(b, "abs", next);
  hlo_value result = hlo_select(b, negative, hlo_binary(b, "or", magnitude, bits_like(b, next, -((int64_t)1 << (f.exponent + f.mantissa)))),
                                magnitude);
  result = hlo_select(b, hlo_compare(b, "EQ", from, to), bits[1], result);
  hlo_value nan = hlo_binary(b, "or", hlo_compare(b, "NE", v[0], v[0]), hlo_compare(b, "NE", v[1], v[1]));
  result = hlo_select(b, nan, hlo_bitcast_convert(b, hlo_binary(b, "add", v[0], v[1]), f.bits), result);
  tpu_lower_set_output(l, 0, hlo_bitcast_convert(b, result, t));
  return NULL;
}

/* ---- selection and ternary arithmetic ---- */

/* where(condition, self, other): either branch may be a Python scalar. */
static tpu_status lower_where(tpu_lowering* l) {
  int all[3] = {0, 1, 2};
  tpu_dtype t = tpu_lower_result_type(l, all + 1, 2);
  hlo_type shape = tpu_lower_broadcast_type(l, all, 3, t);
  hlo_type pred = shape;
  pred.dtype = TPU_BOOL;
  hlo_value cond = tpu_lower_value_as(l, 0, &pred);
  hlo_value x = tpu_lower_value_as(l, 1, &shape), y = tpu_lower_value_as(l, 2, &shape);
  tpu_lower_set_output(l, 0, hlo_select(tpu_lower_builder(l), cond, x, y));
  return NULL;
}

/* clamp(self, min, max), clamp_min(self, min), clamp_max(self, max):
 * bounds are scalars, tensors or None; min(max(x, lo), hi) gives hi when
 * lo > hi, and NaN anywhere propagates, as in PyTorch. */
static tpu_status lower_clamp(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  const char* name = tpu_lower_op_name(l);
  bool both_bounds = strcmp(name, "clamp") == 0;
  int lo = strcmp(name, "clamp_max") == 0 ? -1 : 1;
  int hi = both_bounds ? 2 : (lo < 0 ? 1 : -1);
  int operands[3] = {0, 1, 2};
  int count = both_bounds ? 3 : 2;
  tpu_dtype t = tpu_dtype_compute(tpu_lower_result_type(l, operands, count));
  hlo_type shape = tpu_lower_broadcast_type(l, operands, count, t);
  hlo_value x = tpu_lower_value_as(l, 0, &shape);
  if (lo > 0 && !tpu_lower_is_none(l, lo)) x = maximum_fn(b, x, tpu_lower_value_as(l, lo, &shape));
  if (hi > 0 && !tpu_lower_is_none(l, hi)) x = minimum_fn(b, x, tpu_lower_value_as(l, hi, &shape));
  tpu_lower_set_output(l, 0, x);
  return NULL;
}

/* lerp(self, end, weight). */
static tpu_status lower_lerp(tpu_lowering* l) {
  int operands[3] = {0, 1, 2};
  hlo_value v[3];
  read_operands(l, operands, 3, float_of(tpu_lower_result_type(l, operands, 3)), v);
  tpu_lower_set_output(l, 0, hlo_lerp(tpu_lower_builder(l), v[0], v[1], v[2]));
  return NULL;
}

/* addcmul / addcdiv(self, tensor1, tensor2, value) = self + value * t1 (*|/) t2. */
static tpu_status lower_addc(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  int operands[3] = {0, 1, 2};
  hlo_value v[3];
  hlo_type shape = read_operands(l, operands, 3, tpu_dtype_compute(tpu_lower_result_type(l, operands, 3)), v);
  hlo_value scaled = v[1];
  if (!tpu_lower_is_none(l, 3))
    scaled = hlo_binary(b, "multiply", tpu_lower_value_as(l, 3, &shape), scaled);
  const char* op = strcmp(tpu_lower_op_name(l), "addcdiv") == 0 ? "divide" : "multiply";
  tpu_lower_set_output(l, 0, hlo_binary(b, "add", v[0], hlo_binary(b, op, scaled, v[2])));
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"__ilshift__", lower_binary, 0},
    {"__irshift__", lower_binary, 0},
    {"__lshift__", lower_binary, 0},
    {"__rshift__", lower_binary, 0},
    {"abs", lower_unary, TPU_OP_COMPLEX},
    {"acos", lower_unary, TPU_OP_COMPLEX},
    {"acosh", lower_unary, TPU_OP_COMPLEX},
    {"add", lower_add, TPU_OP_COMPLEX},
    {"addcdiv", lower_addc, TPU_OP_COMPLEX},
    {"addcmul", lower_addc, TPU_OP_COMPLEX},
    {"asin", lower_unary, TPU_OP_COMPLEX},
    {"asinh", lower_unary, TPU_OP_COMPLEX},
    {"atan", lower_unary, TPU_OP_COMPLEX},
    {"atan2", lower_binary, 0},
    {"atanh", lower_unary, TPU_OP_COMPLEX},
    {"bitwise_and", lower_binary, 0},
    {"bitwise_left_shift", lower_binary, 0},
    {"bitwise_not", lower_unary, 0},
    {"bitwise_or", lower_binary, 0},
    {"bitwise_right_shift", lower_binary, 0},
    {"bitwise_xor", lower_binary, 0},
    {"copysign", lower_binary, 0},
    {"ceil", lower_unary, 0},
    {"clamp", lower_clamp, 0},
    {"clamp_max", lower_clamp, 0},
    {"clamp_min", lower_clamp, 0},
    {"copy", lower_copy, TPU_OP_COMPLEX},
    {"cos", lower_unary, TPU_OP_COMPLEX},
    {"cosh", lower_unary, TPU_OP_COMPLEX},
    {"digamma", lower_unary, 0},
    {"div", lower_div, TPU_OP_COMPLEX},
    {"eq", lower_compare, TPU_OP_COMPLEX},
    {"erf", lower_unary, 0},
    {"erfc", lower_unary, 0},
    {"erfinv", lower_unary, 0},
    {"exp", lower_unary, TPU_OP_COMPLEX},
    {"exp2", lower_unary, TPU_OP_COMPLEX},
    {"expm1", lower_unary, TPU_OP_COMPLEX},
    {"fill", lower_fill, TPU_OP_COMPLEX},
    {"floor", lower_unary, 0},
    {"floor_divide", lower_binary, 0},
    {"fmax", lower_binary, 0},
    {"fmin", lower_binary, 0},
    {"fmod", lower_binary, 0},
    {"frexp", lower_frexp, 0},
    {"gcd", lower_binary, 0},
    {"frac", lower_unary, 0},
    {"ge", lower_compare, 0},
    {"gt", lower_compare, 0},
    {"heaviside", lower_binary, 0},
    {"hypot", lower_binary, 0},
    {"lcm", lower_binary, 0},
    {"isinf", lower_unary, TPU_OP_COMPLEX},
    {"isnan", lower_unary, TPU_OP_COMPLEX},
    {"isneginf", lower_unary, 0},
    {"isposinf", lower_unary, 0},
    {"le", lower_compare, 0},
    {"lerp", lower_lerp, TPU_OP_COMPLEX},
    {"lgamma", lower_unary, 0},
    {"log", lower_unary, TPU_OP_COMPLEX},
    {"log10", lower_unary, TPU_OP_COMPLEX},
    {"log1p", lower_unary, TPU_OP_COMPLEX},
    {"log2", lower_unary, TPU_OP_COMPLEX},
    {"logaddexp", lower_binary, TPU_OP_COMPLEX},
    {"logaddexp2", lower_binary, 0},
    {"logical_and", lower_binary, TPU_OP_COMPLEX},
    {"logical_not", lower_unary, TPU_OP_COMPLEX},
    {"logical_or", lower_binary, TPU_OP_COMPLEX},
    {"logical_xor", lower_binary, TPU_OP_COMPLEX},
    {"lt", lower_compare, 0},
    {"maximum", lower_binary, 0},
    {"minimum", lower_binary, 0},
    {"mul", lower_binary, TPU_OP_COMPLEX},
    {"nan_to_num", lower_nan_to_num, 0},
    {"ne", lower_compare, TPU_OP_COMPLEX},
    {"neg", lower_unary, TPU_OP_COMPLEX},
    {"nextafter", lower_nextafter, 0},
    {"polygamma", lower_polygamma, 0},
    {"pow", lower_binary, TPU_OP_COMPLEX},
    {"reciprocal", lower_unary, TPU_OP_COMPLEX},
    {"remainder", lower_binary, 0},
    {"round", lower_round, 0},
    {"rsqrt", lower_unary, TPU_OP_COMPLEX},
    {"rsub", lower_add, TPU_OP_COMPLEX},
    {"sgn", lower_unary, TPU_OP_COMPLEX},
    {"sigmoid", lower_unary, TPU_OP_COMPLEX},
    {"sign", lower_unary, 0},
    {"signbit", lower_unary, 0},
    {"sin", lower_unary, TPU_OP_COMPLEX},
    {"sinc", lower_unary, TPU_OP_COMPLEX},
    {"sinh", lower_unary, TPU_OP_COMPLEX},
    {"special_entr", lower_unary, 0},
    {"special_xlog1py", lower_binary, 0},
    {"sqrt", lower_unary, TPU_OP_COMPLEX},
    {"sub", lower_add, TPU_OP_COMPLEX},
    {"tan", lower_unary, TPU_OP_COMPLEX},
    {"tanh", lower_unary, TPU_OP_COMPLEX},
    {"trunc", lower_unary, 0},
    {"where", lower_where, TPU_OP_COMPLEX},
    {"xlogy", lower_binary, 0},
    {"zero", lower_zero, TPU_OP_COMPLEX},
};

TPU_OP_FAMILY(tpu_ops_elementwise, entries);
