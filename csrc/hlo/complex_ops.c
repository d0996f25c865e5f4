/* Complex parts and the FFT. */
#include "hlo/complex_ops.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "hlo/builder_impl.h"
#include "hlo/elementwise_extra_ops.h"

hlo_value hlo_complex(hlo_builder* b, hlo_value re, hlo_value im) {
  hlo_value operands[2] = {re, im};
  if (!values_valid(b, operands, 2)) return HLO_INVALID;
  hlo_type t = *hlo_type_of(b, re);
  if (t.dtype != TPU_F32 && t.dtype != TPU_F64)
    return hlo_fail(b, TPU_INTERNAL, "complex: parts must be float32 or float64, not %s", tpu_dtype_name(t.dtype));
  t.dtype = tpu_dtype_complex_of(t.dtype);
  return emit_op(b, "stablehlo.complex", operands, 2, NULL, t);
}

static hlo_value part(hlo_builder* b, const char* op, hlo_value x) {
  if (!values_valid(b, &x, 1)) return HLO_INVALID;
  hlo_type t = *hlo_type_of(b, x);
  if (!tpu_dtype_is_complex(t.dtype)) return strcmp(op, "stablehlo.real") == 0 ? x : hlo_constant_like(b, x, 0);
  t.dtype = tpu_dtype_real_part(t.dtype);
  return emit_op(b, op, &x, 1, NULL, t);
}

hlo_value hlo_real(hlo_builder* b, hlo_value x) { return part(b, "stablehlo.real", x); }
hlo_value hlo_imag(hlo_builder* b, hlo_value x) { return part(b, "stablehlo.imag", x); }

hlo_value hlo_conj(hlo_builder* b, hlo_value x) {
  if (!values_valid(b, &x, 1) || !tpu_dtype_is_complex(hlo_type_of(b, x)->dtype)) return x;
  return hlo_complex(b, hlo_real(b, x), hlo_unary(b, "negate", hlo_imag(b, x)));
}

hlo_value hlo_constant_complex(hlo_builder* b, tpu_dtype dtype, double re, double im) {
  tpu_dtype parts = tpu_dtype_real_part(dtype);
  return hlo_complex(b, hlo_constant(b, parts, re), hlo_constant(b, parts, im));
}

hlo_value hlo_fft(hlo_builder* b, hlo_value x, hlo_fft_kind kind, const int64_t* lengths, int count) {
  static const char* const names[] = {"FFT", "IFFT", "RFFT", "IRFFT"};
  if (!values_valid(b, &x, 1)) return HLO_INVALID;
  hlo_type t = *hlo_type_of(b, x);
  if (count < 1 || count > 3 || count > t.rank)
    return hlo_fail(b, TPU_INTERNAL, "fft over %d dims of a rank-%d value", count, t.rank);
  bool complex_in = kind != HLO_RFFT;
  if (tpu_dtype_is_complex(t.dtype) != complex_in)
    return hlo_fail(b, TPU_INTERNAL, "fft %s of %s", names[kind], tpu_dtype_name(t.dtype));
  int last = t.rank - 1;
  if (kind == HLO_RFFT) {
    t.dtype = tpu_dtype_complex_of(t.dtype);
    t.dims[last] = lengths[count - 1] / 2 + 1;
  } else if (kind == HLO_IRFFT) {
    t.dtype = tpu_dtype_real_part(t.dtype);
    t.dims[last] = lengths[count - 1];
  }
  char attrs[256];
  int n = snprintf(attrs, sizeof attrs, "fft_type = #stablehlo<fft_type %s>, ", names[kind]);
  attr_i64_array(attrs + n, sizeof attrs - (size_t)n, "fft_length", lengths, count);
  return emit_op(b, "stablehlo.fft", &x, 1, attrs, t);
}

/* ---- elementary functions ----
 * Each works on z's parts in their real type and follows the C library's
 * csinh, casin, ... (C99 Annex G), which PyTorch's CPU kernels call (but
 * for its vectorized complex128 acos, pi/2 - asin z): the inverse functions
 * reduce z to the first quadrant by their symmetries, work there with formulas that do not cancel, and put the signs back with
 * copysign, so that a signed zero picks the side of a branch cut. */

#define LN2 0.69314718055994530942
#define HALF_PI 1.57079632679489661923
/* Beyond this part, the inverse functions' 1/|z|^2 terms are below
 * float64's epsilon and their asymptotic forms are exact. */
#define HUGE_PART 1e8
/* Beyond this |x|, e^-|x| is negligible beside e^|x| in sinh and cosh. */
#define EXP_DOMINATES 20.0

static hlo_value any2(hlo_builder* b, hlo_value p, hlo_value q) { return hlo_binary(b, "or", p, q); }
static hlo_value is_nan(hlo_builder* b, hlo_value x) { return hlo_compare(b, "NE", x, x); }
static hlo_value is_inf(hlo_builder* b, hlo_value x) {
  return hlo_compare_constant(b, "EQ", hlo_unary(b, "abs", x), INFINITY);
}

/* A complex result as its two real parts. */
typedef struct parts_pair {
  hlo_value re, im;
} parts_pair;

/* log(hypot(x, y)) for x, y >= 0, also where the hypot would overflow. */
static hlo_value log_hypot(hlo_builder* b, hlo_value x, hlo_value y) {
  hlo_value m = hlo_min_max(b, "maximum", x, y, true), n = hlo_min_max(b, "minimum", x, y, true);
  hlo_value ratio =
      hlo_divide(b, n, hlo_select(b, hlo_compare_constant(b, "EQ", m, 0), hlo_constant_like(b, m, 1), m));
  hlo_value half_log = hlo_multiply(b, hlo_unary(b, "log_plus_one", hlo_multiply(b, ratio, ratio)),
                                    hlo_constant_like(b, m, 0.5));
  hlo_value r = hlo_add(b, hlo_unary(b, "log", m), half_log);
  return hlo_select(b, any2(b, is_inf(b, x), is_inf(b, y)), hlo_constant_like(b, r, INFINITY), r);
}

/* copysign(re, sign_re) + copysign(im, sign_im) i. */
static hlo_value signed_parts(hlo_builder* b, hlo_value re, hlo_value sign_re, hlo_value im, hlo_value sign_im) {
  return hlo_complex(b, hlo_copysign(b, re, sign_re), hlo_copysign(b, im, sign_im));
}

/* sinh(x) cos(y) + cosh(x) sin(y) i, or with cosh and sinh swapped: past
 * EXP_DOMINATES both are e^|x| / 2, applied as two factors e^|x|/2 so that
 * a finite result does not overflow on the way. The special values follow
 * glibc: a zero y stays in the imaginary part (the sign of the product),
 * an infinite x beside an infinite or NaN y gives +inf in the real part,
 * and x = 0 beside them gives sinh's real part x, cosh's imaginary +0. */
static hlo_value sinh_or_cosh(hlo_builder* b, hlo_value z, bool is_sinh) {
  hlo_value x = hlo_real(b, z), y = hlo_imag(b, z);
  hlo_value ax = hlo_unary(b, "abs", x), negative = hlo_signbit(b, x);
  hlo_value sh = hlo_sinh(b, x), ch = hlo_cosh(b, x), cy = hlo_unary(b, "cosine", y), sy = hlo_unary(b, "sine", y);
  hlo_value h = hlo_unary(b, "exponential", hlo_multiply(b, ax, hlo_constant_like(b, ax, 0.5)));
  hlo_value far = hlo_compare_constant(b, "GT", ax, EXP_DOMINATES);
  hlo_value trig[2] = {cy, sy}, parts[2];
  for (int i = 0; i < 2; i++) {
    bool odd = is_sinh == (i == 0); /* this part carries sinh(x) */
    hlo_value near = hlo_multiply(b, odd ? sh : ch, trig[i]);
    hlo_value big =
        hlo_multiply(b, hlo_multiply(b, h, hlo_multiply(b, trig[i], hlo_constant_like(b, h, 0.5))), h);
    if (odd) big = hlo_select(b, negative, hlo_unary(b, "negate", big), big);
    parts[i] = hlo_select(b, far, big, near);
  }
  hlo_value y_not_finite = is_nan(b, cy), zero_x = hlo_compare_constant(b, "EQ", x, 0);
  parts[0] = hlo_select(b, hlo_binary(b, "and", is_inf(b, x), y_not_finite),
                        hlo_constant_like(b, x, INFINITY), parts[0]);
  hlo_value zero_im = is_sinh ? y : hlo_select(b, negative, hlo_unary(b, "negate", y), y);
  parts[1] = hlo_select(b, hlo_compare_constant(b, "EQ", y, 0), zero_im, parts[1]);
  hlo_value at_zero = hlo_binary(b, "and", zero_x, y_not_finite);
  if (is_sinh)
    parts[0] = hlo_select(b, at_zero, x, parts[0]);
  else
    parts[1] = hlo_select(b, at_zero, hlo_constant_like(b, y, 0), parts[1]);
  return hlo_complex(b, parts[0], parts[1]);
}

hlo_value hlo_complex_sinh(hlo_builder* b, hlo_value z) { return sinh_or_cosh(b, z, true); }
hlo_value hlo_complex_cosh(hlo_builder* b, hlo_value z) { return sinh_or_cosh(b, z, false); }

/* asin(x + yi) for x, y >= 0 (Hull, Fairgrieve and Tang, "Implementing the
 * complex arcsine and arccosine functions using exception handling", 1997):
 * with r = |z + 1|, s = |z - 1| and A = (r + s) / 2 >= 1, the real part is
 * atan2(x, cos_part), cos_part = sqrt(A^2 - x^2), and the imaginary part
 * log(A + sqrt(A^2 - 1)). A - 1 and A - x are sums without cancellation:
 * one of them is y^2 c, c = (1 / (r + x + 1) + 1 / (s + |x - 1|)) / 2, the
 * other (y^2 / (r + x + 1) + s + |x - 1|) / 2, so that y^2 never forms.
 * Past HUGE_PART, asin z = atan2(x, y) + (log|z| + log 2) i. */
typedef struct asin_quadrant {
  hlo_value cos_part; /* sqrt(A^2 - x^2); y where |z| is huge */
  hlo_value im;       /* log(A + sqrt(A^2 - 1)) */
} asin_quadrant;

static asin_quadrant asin_first_quadrant(hlo_builder* b, hlo_value x, hlo_value y) {
  hlo_value one = hlo_constant_like(b, x, 1), half = hlo_constant_like(b, x, 0.5);
  hlo_value xp1 = hlo_add(b, x, one);
  hlo_value r = hlo_hypot(b, xp1, y), s = hlo_hypot(b, hlo_subtract(b, x, one), y);
  hlo_value a = hlo_add(b, hlo_multiply(b, half, r), hlo_multiply(b, half, s));
  hlo_value rx = hlo_add(b, r, xp1), d = hlo_add(b, s, hlo_unary(b, "abs", hlo_subtract(b, one, x)));
  hlo_value plain =
      hlo_unary(b, "sqrt", hlo_multiply(b, half, hlo_add(b, hlo_multiply(b, y, hlo_divide(b, y, rx)), d)));
  hlo_value c = hlo_multiply(b, half, hlo_add(b, hlo_divide(b, one, rx), hlo_divide(b, one, d)));
  hlo_value scaled = hlo_select(b, hlo_compare_constant(b, "EQ", y, 0), hlo_constant_like(b, y, 0),
                                hlo_multiply(b, y, hlo_unary(b, "sqrt", c)));
  hlo_value below = hlo_compare_constant(b, "LT", x, 1);
  hlo_value root_am1 = hlo_select(b, below, scaled, plain); /* sqrt(A - 1) */
  hlo_value root_amx = hlo_select(b, below, plain, scaled); /* sqrt(A - x) */
  hlo_value cos_part = hlo_multiply(b, hlo_unary(b, "sqrt", hlo_add(b, a, x)), root_amx);
  hlo_value im =
      hlo_unary(b, "log_plus_one",
                hlo_multiply(b, root_am1, hlo_add(b, root_am1, hlo_unary(b, "sqrt", hlo_add(b, a, one)))));
  hlo_value huge =
      any2(b, hlo_compare_constant(b, "GT", x, HUGE_PART), hlo_compare_constant(b, "GT", y, HUGE_PART));
  return (asin_quadrant){
      hlo_select(b, huge, y, cos_part),
      hlo_select(b, huge, hlo_add(b, log_hypot(b, x, y), hlo_constant_like(b, x, LN2)), im)};
}

/* atan2(x, cos_part), exactly 0 at x = 0 even beside NaN. */
static hlo_value asin_angle(hlo_builder* b, hlo_value x, hlo_value cos_part) {
  return hlo_select(b, hlo_compare_constant(b, "EQ", x, 0), x, hlo_binary(b, "atan2", x, cos_part));
}

/* atan2(cos_part, x) for x of either sign, exactly pi/2 at x = 0. */
static hlo_value acos_angle(hlo_builder* b, hlo_value x, hlo_value cos_part) {
  return hlo_select(b, hlo_compare_constant(b, "EQ", x, 0), hlo_constant_like(b, x, HALF_PI),
                    hlo_binary(b, "atan2", cos_part, x));
}

hlo_value hlo_complex_asin(hlo_builder* b, hlo_value z) {
  hlo_value x = hlo_real(b, z), y = hlo_imag(b, z), ax = hlo_unary(b, "abs", x);
  asin_quadrant q = asin_first_quadrant(b, ax, hlo_unary(b, "abs", y));
  return signed_parts(b, asin_angle(b, ax, q.cos_part), x, q.im, y);
}

/* asinh z = -i asin(iz): the parts swap places. */
hlo_value hlo_complex_asinh(hlo_builder* b, hlo_value z) {
  hlo_value x = hlo_real(b, z), y = hlo_imag(b, z), ay = hlo_unary(b, "abs", y);
  asin_quadrant q = asin_first_quadrant(b, ay, hlo_unary(b, "abs", x));
  return signed_parts(b, q.im, x, asin_angle(b, ay, q.cos_part), y);
}

/* acos z = pi/2 - asin z, its real part taken directly, without the
 * cancellation near z = 1. */
hlo_value hlo_complex_acos(hlo_builder* b, hlo_value z) {
  hlo_value x = hlo_real(b, z), y = hlo_imag(b, z);
  asin_quadrant q = asin_first_quadrant(b, hlo_unary(b, "abs", x), hlo_unary(b, "abs", y));
  return hlo_complex(b, acos_angle(b, x, q.cos_part), hlo_unary(b, "negate", hlo_copysign(b, q.im, y)));
}

/* acosh z = +-i acos z, the sign chosen for a real part >= 0. */
hlo_value hlo_complex_acosh(hlo_builder* b, hlo_value z) {
  hlo_value x = hlo_real(b, z), y = hlo_imag(b, z);
  asin_quadrant q = asin_first_quadrant(b, hlo_unary(b, "abs", x), hlo_unary(b, "abs", y));
  return hlo_complex(b, q.im, hlo_copysign(b, acos_angle(b, x, q.cos_part), y));
}

/* atanh(x + yi) for x, y >= 0: the real part log(|1 + z| / |1 - z|) / 2
 * as log1p(4x / ((1 - x)^2 + y^2)) / 4, or where that denominator is tiny
 * (it may underflow) as the difference of the two logs; the imaginary
 * part atan2(2y, (1 - x)(1 + x) - y^2) / 2. Past HUGE_PART, where 1 is
 * negligible beside |z|^2: x / |z|^2 and (pi - atan2(2y, |z|^2)) / 2, both
 * scaled by the larger part. */
static parts_pair atanh_first_quadrant(hlo_builder* b, hlo_value x, hlo_value y) {
  hlo_value one = hlo_constant_like(b, x, 1), omx = hlo_subtract(b, one, x), y2 = hlo_multiply(b, y, y);
  hlo_value q = hlo_add(b, hlo_multiply(b, omx, omx), y2);
  hlo_value re = hlo_multiply(
      b, hlo_unary(b, "log_plus_one", hlo_divide(b, hlo_multiply(b, hlo_constant_like(b, x, 4), x), q)),
      hlo_constant_like(b, x, 0.25));
  hlo_value logs =
      hlo_subtract(b, log_hypot(b, hlo_add(b, one, x), y), log_hypot(b, hlo_unary(b, "abs", omx), y));
  re = hlo_select(b, hlo_compare_constant(b, "LT", q, 1e-8),
                  hlo_multiply(b, logs, hlo_constant_like(b, x, 0.5)), re);
  hlo_value im =
      hlo_binary(b, "atan2", hlo_add(b, y, y), hlo_subtract(b, hlo_multiply(b, omx, hlo_add(b, one, x)), y2));
  im = hlo_multiply(b, im, hlo_constant_like(b, im, 0.5));

  /* |z|^2 / m = m + n (n / m), for the larger part m and the smaller n */
  hlo_value m = hlo_min_max(b, "maximum", x, y, false), n = hlo_min_max(b, "minimum", x, y, false);
  hlo_value norm_m = hlo_add(b, m, hlo_multiply(b, n, hlo_divide(b, n, m)));
  hlo_value far_re = hlo_multiply(b, hlo_divide(b, x, m), hlo_divide(b, hlo_constant_like(b, m, 1), norm_m));
  hlo_value far_im = hlo_binary(b, "atan2", hlo_add(b, hlo_divide(b, y, m), hlo_divide(b, y, m)), norm_m);
  far_im =
      hlo_multiply(b, hlo_subtract(b, hlo_constant_like(b, y, M_PI), far_im), hlo_constant_like(b, y, 0.5));
  hlo_value infinite = any2(b, is_inf(b, x), is_inf(b, y));
  far_re = hlo_select(b, infinite, hlo_constant_like(b, x, 0), far_re);
  far_im = hlo_select(b, infinite, hlo_select(b, is_nan(b, y), y, hlo_constant_like(b, y, HALF_PI)), far_im);
  hlo_value huge =
      any2(b, hlo_compare_constant(b, "GT", x, HUGE_PART), hlo_compare_constant(b, "GT", y, HUGE_PART));
  re = hlo_select(b, hlo_compare_constant(b, "EQ", x, 0), x, hlo_select(b, huge, far_re, re));
  return (parts_pair){re, hlo_select(b, huge, far_im, im)};
}

hlo_value hlo_complex_atanh(hlo_builder* b, hlo_value z) {
  hlo_value x = hlo_real(b, z), y = hlo_imag(b, z);
  parts_pair q = atanh_first_quadrant(b, hlo_unary(b, "abs", x), hlo_unary(b, "abs", y));
  return signed_parts(b, q.re, x, q.im, y);
}

/* atan z = -i atanh(iz): the parts swap places. */
hlo_value hlo_complex_atan(hlo_builder* b, hlo_value z) {
  hlo_value x = hlo_real(b, z), y = hlo_imag(b, z);
  parts_pair q = atanh_first_quadrant(b, hlo_unary(b, "abs", y), hlo_unary(b, "abs", x));
  return signed_parts(b, q.im, x, q.re, y);
}

/* e^w's parts where w's real part is +inf, as cexp gives them: +inf cis(y),
 * a zero y kept. */
static parts_pair exp_at_infinity(hlo_builder* b, hlo_value w) {
  hlo_value y = hlo_imag(b, w), inf = hlo_constant_like(b, y, INFINITY);
  hlo_value im =
      hlo_select(b, hlo_compare_constant(b, "EQ", y, 0), y, hlo_multiply(b, inf, hlo_unary(b, "sine", y)));
  return (parts_pair){hlo_multiply(b, inf, hlo_unary(b, "cosine", y)), im};
}

/* log(e^x + e^y) as PyTorch's CPU kernel computes it: max + log1p(e^(min -
 * max)), min and max by real part (y the min on a tie), with the C
 * library's special values where the real parts are infinite: NaN + NaN i
 * where a part of either is NaN; max plus the signed zeros of e^(-inf + di)
 * where only min's real part is -inf; min where both are -inf; and
 * log(e^min + e^max) where both are +inf. */
hlo_value hlo_complex_logaddexp(hlo_builder* b, hlo_value x, hlo_value y) {
  hlo_value xr = hlo_real(b, x), yr = hlo_real(b, y);
  hlo_value x_first = hlo_compare(b, "LT", xr, yr);
  hlo_value lo = hlo_select(b, x_first, x, y), hi = hlo_select(b, x_first, y, x);
  hlo_value lo_r = hlo_real(b, lo), hi_r = hlo_real(b, hi);
  hlo_value r =
      hlo_add(b, hlo_unary(b, "log_plus_one", hlo_unary(b, "exponential", hlo_subtract(b, lo, hi))), hi);

  hlo_value turn = hlo_subtract(b, hlo_imag(b, lo), hlo_imag(b, hi)), zero = hlo_constant_like(b, turn, 0);
  hlo_value vanishing = hlo_complex(b, hlo_multiply(b, zero, hlo_unary(b, "cosine", turn)),
                                    hlo_multiply(b, zero, hlo_unary(b, "sine", turn)));
  hlo_value lo_vanishes = hlo_binary(b, "and", hlo_compare_constant(b, "EQ", lo_r, -INFINITY),
                                     hlo_compare_constant(b, "GT", hi_r, -INFINITY));
  r = hlo_select(b, hlo_binary(b, "and", lo_vanishes, hlo_unary(b, "not", is_inf(b, hi_r))),
                 hlo_add(b, hi, vanishing), r);

  parts_pair e_lo = exp_at_infinity(b, lo), e_hi = exp_at_infinity(b, hi);
  /* the sum's parts are infinite or NaN: clog's real part is +inf beside
   * an infinite one, else NaN, as the hypot is */
  hlo_value sum_re = hlo_add(b, e_lo.re, e_hi.re), sum_im = hlo_add(b, e_lo.im, e_hi.im);
  hlo_value both_up = hlo_complex(b, hlo_hypot(b, sum_re, sum_im), hlo_binary(b, "atan2", sum_im, sum_re));
  hlo_value infinite = hlo_binary(b, "and", is_inf(b, lo_r), hlo_compare(b, "EQ", lo_r, hi_r));
  r = hlo_select(b, infinite, hlo_select(b, hlo_compare_constant(b, "LT", lo_r, 0), lo, both_up), r);

  hlo_value nan = any2(b, any2(b, is_nan(b, xr), is_nan(b, hlo_imag(b, x))),
                       any2(b, is_nan(b, yr), is_nan(b, hlo_imag(b, y))));
  return hlo_select(b, nan, hlo_complex(b, hlo_constant_like(b, xr, NAN), hlo_constant_like(b, xr, NAN)), r);
}
