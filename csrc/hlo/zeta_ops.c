/* Hurwitz zeta and polygamma as PyTorch's CPU kernels compute them (see the
 * header). */
#include "hlo/zeta_ops.h"

#include <math.h>

#include "hlo/loop_ops.h"

#define PI 3.14159265358979323846
/* 2^-53: a term below this part of the sum no longer changes it. */
#define MACHEP 1.11022302462515654042e-16
/* The direct sum takes at least this many terms and runs until q + i
 * exceeds it, so that the Euler-Maclaurin tail starts far enough out. */
#define DIRECT_TERMS 9
/* The direct sum's length is about -q for q far below 0: a bound, so that a
 * huge negative q cannot keep the device busy for ever. */
#define MOST_DIRECT_TERMS 16777216.0

/* (2k)! / B_2k for k = 1..12 (B the Bernoulli numbers): the denominators of
 * the Euler-Maclaurin tail's terms. */
static const double euler_maclaurin[12] = {
    12.0,
    -720.0,
    30240.0,
    -1209600.0,
    47900160.0,
    -1.8924375803183791606e9,
    7.47242496e10,
    -2.950130727918164224e12,
    1.1646782814350067249e14,
    -4.5979787224074726105e15,
    1.8152105401943546773e17,
    -7.1661652561756670113e18,
};

/* Carried through the direct sum: its terms are (q + i)^-x. */
enum { EXPONENT, BASE, TERM, SUM, CONVERGED, CARRIED };

/* One term of the direct sum for the elements still summing: those not
 * converged whose step is below DIRECT_TERMS or base at most DIRECT_TERMS. */
static void direct_term(hlo_builder* b, hlo_value step, const hlo_value* in, hlo_value* out, const void* context) {
  (void)context;
  const hlo_type* shape = hlo_type_of(b, in[SUM]);
  hlo_value early = hlo_compare(b, "LT", step, hlo_constant_i64(b, TPU_I64, DIRECT_TERMS));
  hlo_value summing = hlo_binary(b, "or", hlo_broadcast_to(b, early, shape->rank, shape->dims),
                                 hlo_compare_constant(b, "LE", in[BASE], DIRECT_TERMS));
  summing = hlo_binary(b, "and", summing, hlo_unary(b, "not", in[CONVERGED]));
  hlo_value base = hlo_binary_constant(b, "add", in[BASE], 1);
  hlo_value term = hlo_binary(b, "power", base, hlo_unary(b, "negate", in[EXPONENT]));
  hlo_value sum = hlo_add(b, in[SUM], term);
  hlo_value negligible =
      hlo_compare(b, "LT", hlo_unary(b, "abs", term), hlo_binary_constant(b, "multiply", sum, MACHEP));
  out[EXPONENT] = in[EXPONENT];
  out[BASE] = hlo_select(b, summing, base, in[BASE]);
  out[TERM] = hlo_select(b, summing, term, in[TERM]);
  out[SUM] = hlo_select(b, summing, sum, in[SUM]);
  out[CONVERGED] = hlo_binary(b, "or", in[CONVERGED], hlo_binary(b, "and", summing, negligible));
}

/* The direct sum's length: enough steps for the smallest q among the
 * elements that need the sum (`live`), within the bound. */
static hlo_value direct_steps(hlo_builder* b, hlo_value q, hlo_value live) {
  hlo_value smallest = hlo_select(b, live, q, hlo_constant_like(b, q, 0));
  smallest = hlo_reduce_all(b, smallest, hlo_constant(b, hlo_type_of(b, q)->dtype, 0), "minimum");
  hlo_value steps = hlo_binary_constant(b, "add", hlo_unary(b, "floor", hlo_binary_constant(b, "multiply", smallest, -1)),
                                        DIRECT_TERMS + 1);
  steps = hlo_binary_constant(b, "minimum", hlo_binary_constant(b, "maximum", steps, DIRECT_TERMS), MOST_DIRECT_TERMS);
  return hlo_convert(b, steps, TPU_I64);
}

/* zeta in float64, whatever the inputs' type. */
static hlo_value zeta_f64(hlo_builder* b, hlo_value x, hlo_value q) {
  hlo_value q_nonpositive = hlo_compare_constant(b, "LE", q, 0);
  hlo_value q_integer = hlo_compare(b, "EQ", q, hlo_unary(b, "floor", q));
  hlo_value x_fraction = hlo_compare(b, "NE", x, hlo_unary(b, "floor", x));
  hlo_value outside = hlo_binary(b, "and", q_nonpositive, hlo_binary(b, "or", q_integer, x_fraction));
  hlo_value live = hlo_binary(b, "and", hlo_compare_constant(b, "GT", x, 1), hlo_unary(b, "not", outside));
  live = hlo_binary(b, "and", live, hlo_unary(b, "is_finite", q));

  hlo_value init[CARRIED], summed[CARRIED];
  init[EXPONENT] = x;
  init[BASE] = q;
  init[TERM] = hlo_constant_like(b, q, 0);
  init[SUM] = hlo_binary(b, "power", q, hlo_unary(b, "negate", x));
  init[CONVERGED] = hlo_compare(b, "NE", q, q); /* false, in q's shape */
  hlo_counted_loop(b, direct_steps(b, q, live), init, CARRIED, direct_term, NULL, summed);

  /* The Euler-Maclaurin tail from w = q + i, for the sums that have not
   * converged: its terms stop once they no longer change the sum. */
  hlo_value w = summed[BASE], term = summed[TERM], done = summed[CONVERGED];
  hlo_value s = hlo_add(b, summed[SUM], hlo_divide(b, hlo_multiply(b, term, w), hlo_binary_constant(b, "add", x, -1)));
  s = hlo_subtract(b, s, hlo_binary_constant(b, "multiply", term, 0.5));
  hlo_value rising = hlo_constant_like(b, x, 1); /* x (x + 1) ... (x + 2k - 2) */
  for (int k = 0; k < 12; k++) {
    rising = hlo_multiply(b, rising, hlo_binary_constant(b, "add", x, 2.0 * k));
    term = hlo_divide(b, term, w);
    hlo_value t = hlo_binary_constant(b, "divide", hlo_multiply(b, rising, term), euler_maclaurin[k]);
    hlo_value next = hlo_add(b, s, t);
    hlo_value negligible = hlo_compare_constant(b, "LT", hlo_unary(b, "abs", hlo_divide(b, t, next)), MACHEP);
    s = hlo_select(b, done, s, next);
    done = hlo_binary(b, "or", done, negligible);
    rising = hlo_multiply(b, rising, hlo_binary_constant(b, "add", x, 2.0 * k + 1));
    term = hlo_divide(b, term, w);
  }
  s = hlo_select(b, summed[CONVERGED], summed[SUM], s);

  /* The CPU's domain rules, the first that holds deciding. */
  s = hlo_select_constant(b, hlo_binary(b, "and", q_nonpositive, x_fraction), NAN, s);
  s = hlo_select_constant(b, hlo_binary(b, "and", q_nonpositive, q_integer), INFINITY, s);
  s = hlo_select_constant(b, hlo_compare_constant(b, "LT", x, 1), NAN, s);
  return hlo_select_constant(b, hlo_compare_constant(b, "EQ", x, 1), INFINITY, s);
}

hlo_value hlo_zeta(hlo_builder* b, hlo_value x, hlo_value q) {
  /* in float64 for every type, as the CPU's kernel sums in double: a q far
   * below 0 makes terms of both signs that cancel */
  tpu_dtype t = hlo_type_of(b, x)->dtype;
  return hlo_convert(b, zeta_f64(b, hlo_convert(b, x, TPU_F64), hlo_convert(b, q, TPU_F64)), t);
}

hlo_value hlo_trigamma(hlo_builder* b, hlo_value x) {
  /* below 1/2: trigamma(x) = pi^2 / sin^2(pi x) - trigamma(1 - x) */
  hlo_value reflect = hlo_compare_constant(b, "LT", x, 0.5);
  hlo_value sine = hlo_unary(b, "sine", hlo_binary_constant(b, "multiply", x, PI));
  hlo_value sum = hlo_select(b, reflect, hlo_divide(b, hlo_constant_like(b, x, -PI * PI), hlo_multiply(b, sine, sine)),
                             hlo_constant_like(b, x, 0));
  hlo_value y = hlo_select(b, reflect, hlo_subtract(b, hlo_constant_like(b, x, 1), x), x);
  for (int i = 0; i < 6; i++) {
    sum = hlo_add(b, sum, hlo_divide(b, hlo_constant_like(b, y, 1), hlo_multiply(b, y, y)));
    y = hlo_binary_constant(b, "add", y, 1);
  }
  hlo_value ixx = hlo_divide(b, hlo_constant_like(b, y, 1), hlo_multiply(b, y, y));
  /* 1 + 1/(2y) + ixx (1/6 - ixx (1/30 - ixx / 42)), over y */
  hlo_value series = hlo_binary_constant(b, "multiply", ixx, 1.0 / 42);
  series = hlo_multiply(b, ixx, hlo_subtract(b, hlo_constant_like(b, y, 1.0 / 30), series));
  series = hlo_multiply(b, ixx, hlo_subtract(b, hlo_constant_like(b, y, 1.0 / 6), series));
  series = hlo_add(b, series, hlo_divide(b, hlo_constant_like(b, y, 1), hlo_binary_constant(b, "multiply", y, 2)));
  sum = hlo_add(b, sum, hlo_divide(b, hlo_binary_constant(b, "add", series, 1), y));
  return hlo_select(b, reflect, hlo_unary(b, "negate", sum), sum);
}

hlo_value hlo_polygamma(hlo_builder* b, int64_t n, hlo_value x) {
  double factorial = exp(lgamma((double)n + 1));
  hlo_value q = hlo_convert(b, x, TPU_F64);
  hlo_value z = zeta_f64(b, hlo_constant_like(b, q, (double)n + 1), q);
  return hlo_convert(b, hlo_binary_constant(b, "multiply", z, n % 2 ? factorial : -factorial), hlo_type_of(b, x)->dtype);
}
