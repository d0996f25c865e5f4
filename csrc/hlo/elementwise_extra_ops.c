/* Composite elementwise math with PyTorch's semantics (see the header). */
#include "hlo/elementwise_extra_ops.h"

#include <math.h>

#include "hlo/special_ops.h"

#define LN2 0.69314718055994530942

static hlo_value both(hlo_builder* b, hlo_value p, hlo_value q) { return hlo_binary(b, "and", p, q); }

/* x - 1, also for unsigned types, where a -1 constant does not exist. */
static hlo_value decrement(hlo_builder* b, hlo_value x) {
  return hlo_binary(b, "subtract", x, hlo_constant_like(b, x, 1));
}

/* r != 0 and its sign differs from y's: where C's truncating results need
 * the Python (flooring) correction. */
static hlo_value needs_floor_fix(hlo_builder* b, hlo_value r, hlo_value y) {
  hlo_value differ =
      hlo_binary(b, "xor", hlo_compare_constant(b, "LT", r, 0), hlo_compare_constant(b, "LT", y, 0));
  return both(b, hlo_compare_constant(b, "NE", r, 0), differ);
}

hlo_value hlo_sign(hlo_builder* b, hlo_value x) {
  tpu_dtype t = hlo_type_of(b, x)->dtype;
  if (t == TPU_BOOL) return x;
  /* (x > 0) - (x < 0), which is 0 for NaN as in PyTorch; stablehlo.sign
   * would give NaN and rejects unsigned types. */
  hlo_value pos = hlo_convert(b, hlo_compare_constant(b, "GT", x, 0), t);
  hlo_value neg = hlo_convert(b, hlo_compare_constant(b, "LT", x, 0), t);
  return hlo_binary(b, "subtract", pos, neg);
}

hlo_value hlo_signbit(hlo_builder* b, hlo_value x) {
  tpu_dtype t = hlo_type_of(b, x)->dtype;
  if (t == TPU_F32 || t == TPU_F64)
    x = hlo_bitcast_convert(b, x, t == TPU_F32 ? TPU_I32 : TPU_I64);
  else if (!tpu_dtype_is_signed_int(t))
    return hlo_convert(b, hlo_constant_like(b, x, 0), TPU_BOOL);
  return hlo_compare_constant(b, "LT", x, 0);
}

hlo_value hlo_copysign(hlo_builder* b, hlo_value x, hlo_value y) {
  hlo_value magnitude = hlo_unary(b, "abs", x);
  return hlo_select(b, hlo_signbit(b, y), hlo_unary(b, "negate", magnitude), magnitude);
}

hlo_value hlo_min_max(hlo_builder* b, const char* op, hlo_value x, hlo_value y, bool nan_wins) {
  hlo_value r = hlo_binary(b, op, x, y);
  if (!tpu_dtype_is_float(hlo_type_of(b, x)->dtype)) return r;
  r = hlo_select(b, hlo_compare(b, "NE", y, y), nan_wins ? y : x, r);
  return hlo_select(b, hlo_compare(b, "NE", x, x), nan_wins ? x : y, r);
}

/* max * sqrt(1 + (min/max)^2), so it overflows only when the result does. */
hlo_value hlo_hypot(hlo_builder* b, hlo_value x, hlo_value y) {
  hlo_value ax = hlo_unary(b, "abs", x), ay = hlo_unary(b, "abs", y);
  hlo_value big = hlo_min_max(b, "maximum", ax, ay, true), small = hlo_min_max(b, "minimum", ax, ay, true);
  hlo_value one = hlo_constant_like(b, big, 1);
  hlo_value ratio =
      hlo_binary(b, "divide", small, hlo_select(b, hlo_compare_constant(b, "EQ", big, 0), one, big));
  hlo_value h = hlo_binary(b, "multiply", big,
                           hlo_unary(b, "sqrt", hlo_binary(b, "add", one, hlo_binary(b, "multiply", ratio, ratio))));
  hlo_value inf = hlo_binary(b, "or", hlo_compare_constant(b, "EQ", ax, INFINITY),
                             hlo_compare_constant(b, "EQ", ay, INFINITY));
  return hlo_select(b, inf, hlo_constant_like(b, h, INFINITY), h);
}

hlo_value hlo_python_remainder(hlo_builder* b, hlo_value x, hlo_value y) {
  hlo_value r = hlo_binary(b, "remainder", x, y);
  return hlo_select(b, needs_floor_fix(b, r, y), hlo_binary(b, "add", r, y), r);
}

hlo_value hlo_lerp(hlo_builder* b, hlo_value start, hlo_value end, hlo_value w) {
  hlo_value diff = hlo_binary(b, "subtract", end, start);
  hlo_value low = hlo_binary(b, "add", start, hlo_binary(b, "multiply", w, diff));
  hlo_value rest = hlo_binary(b, "subtract", hlo_constant_like(b, w, 1), w);
  hlo_value high = hlo_binary(b, "subtract", end, hlo_binary(b, "multiply", diff, rest));
  hlo_value size = hlo_unary(b, "abs", w); /* real for a complex w */
  hlo_value near_start = hlo_compare(b, "LT", size, hlo_constant_like(b, size, 0.5));
  return hlo_select(b, near_start, low, high);
}

hlo_value hlo_floor_divide(hlo_builder* b, hlo_value x, hlo_value y) {
  if (!tpu_dtype_is_float(hlo_type_of(b, x)->dtype)) {
    hlo_value q = hlo_binary(b, "divide", x, y);
    hlo_value r = hlo_binary(b, "remainder", x, y);
    return hlo_select(b, needs_floor_fix(b, r, y), decrement(b, q), q);
  }
  /* PyTorch's (and NumPy's) float floor division: divide the exactly
   * representable x - fmod(x, y), then round away floor's off-by-one. */
  hlo_value mod = hlo_binary(b, "remainder", x, y);
  hlo_value div = hlo_binary(b, "divide", hlo_binary(b, "subtract", x, mod), y);
  div = hlo_select(b, needs_floor_fix(b, mod, y), decrement(b, div), div);
  hlo_value fl = hlo_unary(b, "floor", div);
  fl = hlo_select(b, hlo_compare_constant(b, "GT", hlo_binary(b, "subtract", div, fl), 0.5),
                  hlo_binary_constant(b, "add", fl, 1), fl);
  hlo_value quotient = hlo_binary(b, "divide", x, y);
  hlo_value signed_zero = hlo_binary_constant(b, "multiply", hlo_unary(b, "sign", quotient), 0);
  hlo_value result = hlo_select(b, hlo_compare_constant(b, "EQ", div, 0), signed_zero, fl);
  return hlo_select(b, hlo_compare_constant(b, "EQ", y, 0), quotient, result);
}

hlo_value hlo_trunc(hlo_builder* b, hlo_value x) {
  return hlo_select(b, hlo_compare_constant(b, "LT", x, 0), hlo_unary(b, "ceil", x),
                    hlo_unary(b, "floor", x));
}

/* erf's Taylor series x * sum_n c_n x^2n, c_n = 2/sqrt(pi) (-1)^n / (n! (2n+1)):
 * accurate where the terms do not cancel much (|x| below the threshold). */
static hlo_value erf_series(hlo_builder* b, hlo_value x, int terms) {
  double coef[64];
  double factorial = 1;
  for (int n = 0; n < terms; n++) {
    if (n > 0) factorial *= n;
    coef[n] = (n % 2 ? -1 : 1) * 1.12837916709551257390 / (factorial * (2 * n + 1));
  }
  hlo_value z = hlo_binary(b, "multiply", x, x);
  hlo_value acc = hlo_constant_like(b, x, coef[terms - 1]);
  for (int n = terms - 2; n >= 0; n--)
    acc = hlo_binary_constant(b, "add", hlo_binary(b, "multiply", acc, z), coef[n]);
  return hlo_binary(b, "multiply", x, acc);
}

/* erfc(z) for z >= 0 as erfcx(z) exp(-z^2), both without cancellation or
 * the error of rounding z^2: as accurate as the CPU's far into the tail. */
static hlo_value erfc_tail(hlo_builder* b, hlo_value z) {
  hlo_value tail = hlo_binary(b, "multiply", hlo_erfcx(b, z), hlo_exp_neg_square(b, z));
  return hlo_select(b, hlo_compare_constant(b, "EQ", z, INFINITY), hlo_constant_like(b, z, 0), tail);
}

/* Where erf's series hands over to 1 - erfc, and how many terms it needs
 * there. */
typedef struct erf_split {
  double threshold;
  int terms;
} erf_split;

static erf_split erf_split_for(hlo_builder* b, hlo_value x) {
  if (hlo_type_of(b, x)->dtype == TPU_F64) return (erf_split){1.5, 30};
  return (erf_split){1.0, 12};
}

hlo_value hlo_erf(hlo_builder* b, hlo_value x) {
  erf_split s = erf_split_for(b, x);
  hlo_value z = hlo_unary(b, "abs", x);
  hlo_value tail = hlo_binary_constant(b, "add", hlo_binary_constant(b, "multiply", erfc_tail(b, z), -1), 1);
  tail = hlo_binary(b, "multiply", hlo_unary(b, "sign", x), tail);
  return hlo_select(b, hlo_compare_constant(b, "LT", z, s.threshold), erf_series(b, x, s.terms), tail);
}

/* 1 - erf(x) below |x| = 1/2, where erf(x) < 0.53 cancels by a bit at most. */
hlo_value hlo_erfc(hlo_builder* b, hlo_value x) {
  hlo_value z = hlo_unary(b, "abs", x);
  hlo_value tail = erfc_tail(b, z);
  tail = hlo_select(b, hlo_compare_constant(b, "LT", x, 0),
                    hlo_binary_constant(b, "add", hlo_binary_constant(b, "multiply", tail, -1), 2), tail);
  hlo_value near = hlo_binary_constant(
      b, "add", hlo_binary_constant(b, "multiply", erf_series(b, x, erf_split_for(b, x).terms), -1), 1);
  return hlo_select(b, hlo_compare_constant(b, "LT", z, 0.5), near, tail);
}

/* erfinv(y): Winitzki's closed form (relative error about 2e-3) refined by
 * Newton steps, on erf(x) = |y| up to |y| = 1/2 and on log erfc(x) =
 * log(1 - |y|) beyond, where erf saturates but erfc keeps its relative
 * precision (1 - |y| is exact there). Each step squares the error. */
hlo_value hlo_erfinv(hlo_builder* b, hlo_value y) {
  const double k = 0.147; /* Winitzki's constant */
  hlo_value a = hlo_unary(b, "abs", y);
  hlo_value q = hlo_binary_constant(b, "add", hlo_binary_constant(b, "multiply", a, -1), 1);
  hlo_value log_w = hlo_unary(
      b, "log", hlo_binary(b, "multiply", q, hlo_binary_constant(b, "add", a, 1))); /* log(1 - y^2) */
  hlo_value t = hlo_binary_constant(b, "add", hlo_binary_constant(b, "multiply", log_w, 0.5), 2 / (M_PI * k));
  hlo_value inner = hlo_binary(b, "subtract", hlo_binary(b, "multiply", t, t),
                               hlo_binary_constant(b, "multiply", log_w, 1 / k));
  hlo_value x = hlo_unary(b, "sqrt", hlo_binary(b, "subtract", hlo_unary(b, "sqrt", inner), t));
  hlo_value tail = hlo_compare_constant(b, "GT", a, 0.5), log_q = hlo_unary(b, "log", q);
  int steps = hlo_type_of(b, y)->dtype == TPU_F64 ? 4 : 3;
  for (int i = 0; i < steps; i++) {
    /* erf'(x) = 2/sqrt(pi) exp(-x^2) */
    hlo_value slope = hlo_binary_constant(
        b, "multiply",
        hlo_unary(b, "exponential", hlo_binary_constant(b, "multiply", hlo_binary(b, "multiply", x, x), -1)),
        1.12837916709551257390);
    hlo_value middle = hlo_binary(b, "subtract", x,
                                  hlo_binary(b, "divide", hlo_binary(b, "subtract", hlo_erf(b, x), a), slope));
    hlo_value c = hlo_erfc(b, x);
    hlo_value gap = hlo_binary(b, "subtract", hlo_unary(b, "log", c), log_q);
    hlo_value far = hlo_binary(b, "add", x, hlo_binary(b, "divide", hlo_binary(b, "multiply", gap, c), slope));
    x = hlo_select(b, tail, far, middle);
  }
  /* |y| = 1 is infinite; |y| > 1 and NaN stay NaN (log of a negative). */
  x = hlo_select(b, hlo_compare_constant(b, "EQ", a, 1), hlo_constant_like(b, x, INFINITY), x);
  return hlo_binary(b, "multiply", hlo_unary(b, "sign", y), x);
}

/* sqrt(1 - x^2), exact near |x| = 1. */
static hlo_value cofactor(hlo_builder* b, hlo_value x) {
  hlo_value one = hlo_constant_like(b, x, 1);
  hlo_value p = hlo_binary(b, "multiply", hlo_binary(b, "subtract", one, x), hlo_binary(b, "add", one, x));
  return hlo_unary(b, "sqrt", p);
}

hlo_value hlo_asin(hlo_builder* b, hlo_value x) { return hlo_binary(b, "atan2", x, cofactor(b, x)); }
hlo_value hlo_acos(hlo_builder* b, hlo_value x) { return hlo_binary(b, "atan2", cofactor(b, x), x); }
hlo_value hlo_atan(hlo_builder* b, hlo_value x) {
  return hlo_binary(b, "atan2", x, hlo_constant_like(b, x, 1));
}

/* (h/2) h +- (1/2h)/h with h = exp(|x|/2): e^|x|/2 +- e^-|x|/2 without
 * overflowing before the result does. */
static hlo_value half_exp_sum(hlo_builder* b, hlo_value y, const char* op) {
  hlo_value h = hlo_unary(b, "exponential", hlo_binary_constant(b, "multiply", y, 0.5));
  hlo_value up = hlo_binary(b, "multiply", hlo_binary_constant(b, "multiply", h, 0.5), h);
  hlo_value down = hlo_binary(b, "divide", hlo_binary(b, "divide", hlo_constant_like(b, h, 0.5), h), h);
  return hlo_binary(b, op, up, down);
}

hlo_value hlo_sinh(hlo_builder* b, hlo_value x) {
  hlo_value y = hlo_unary(b, "abs", x);
  /* Below 1, (e + e / (e + 1)) / 2 with e = expm1(y) avoids cancellation. */
  hlo_value e = hlo_unary(b, "exponential_minus_one", y);
  hlo_value small = hlo_binary_constant(
      b, "multiply", hlo_binary(b, "add", e, hlo_binary(b, "divide", e, hlo_binary_constant(b, "add", e, 1))),
      0.5);
  hlo_value r = hlo_select(b, hlo_compare_constant(b, "LT", y, 1), small, half_exp_sum(b, y, "subtract"));
  return hlo_binary(b, "multiply", hlo_unary(b, "sign", x), r);
}

hlo_value hlo_cosh(hlo_builder* b, hlo_value x) {
  return half_exp_sum(b, hlo_unary(b, "abs", x), "add");
}

/* log(2y), the limit of asinh(y) and acosh(y) where 1/y^2 is negligible. */
static hlo_value log_twice(hlo_builder* b, hlo_value y) {
  return hlo_binary_constant(b, "add", hlo_unary(b, "log", y), LN2);
}

#define HUGE_ARGUMENT 1e8

hlo_value hlo_asinh(hlo_builder* b, hlo_value x) {
  hlo_value y = hlo_unary(b, "abs", x);
  /* log1p(y + y^2 / (1 + sqrt(y^2 + 1))) is asinh(y) accurate near 0. */
  hlo_value y2 = hlo_binary(b, "multiply", y, y);
  hlo_value root =
      hlo_binary_constant(b, "add", hlo_unary(b, "sqrt", hlo_binary_constant(b, "add", y2, 1)), 1);
  hlo_value small = hlo_unary(b, "log_plus_one", hlo_binary(b, "add", y, hlo_binary(b, "divide", y2, root)));
  hlo_value r = hlo_select(b, hlo_compare_constant(b, "GT", y, HUGE_ARGUMENT), log_twice(b, y), small);
  return hlo_binary(b, "multiply", hlo_unary(b, "sign", x), r);
}

hlo_value hlo_acosh(hlo_builder* b, hlo_value x) {
  /* log1p(t + sqrt(t) sqrt(x + 1)) with t = x - 1; NaN below 1 via sqrt(t). */
  hlo_value t = hlo_binary_constant(b, "add", x, -1);
  hlo_value root = hlo_binary(b, "multiply", hlo_unary(b, "sqrt", t),
                              hlo_unary(b, "sqrt", hlo_binary_constant(b, "add", x, 1)));
  hlo_value small = hlo_unary(b, "log_plus_one", hlo_binary(b, "add", t, root));
  return hlo_select(b, hlo_compare_constant(b, "GT", x, HUGE_ARGUMENT), log_twice(b, x), small);
}

hlo_value hlo_atanh(hlo_builder* b, hlo_value x) {
  /* log1p(2x / (1 - x)) / 2: exact 1 - x, and +-inf at +-1. */
  hlo_value q = hlo_binary(b, "divide", hlo_binary_constant(b, "multiply", x, 2),
                           hlo_binary_constant(b, "add", hlo_binary_constant(b, "multiply", x, -1), 1));
  return hlo_binary_constant(b, "multiply", hlo_unary(b, "log_plus_one", q), 0.5);
}
