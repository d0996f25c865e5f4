/* digamma (psi, the derivative of log Gamma) as ATen's CPU kernel computes
 * it (calc_digamma, after Cephes' psi): the recurrence psi(x) = psi(x + 1)
 * - 1/x up to 10, the asymptotic series from there, reflection below 0.
 * CHLO's digamma is close in absolute terms but not near psi's zero at
 * 1.4616, where the CPU's value comes out of the same cancellation as ours
 * (3,000 ulps apart before, in float32), nor near the poles in float64. */
#include <math.h>

#include "hlo/special_ops.h"

/* psi(10) = 1 + 1/2 + ... + 1/9 less Euler's gamma, where the recurrence
 * stops exactly. */
#define PSI_10 2.25175258906672110764

/* psi(y) = log y - 1/(2y) - the sum over k of B_2k / (2k y^2k): its
 * coefficients in z = 1/y^2, z^7 first, from the Bernoulli numbers B_2 ..
 * B_14. */
static const double asymptotic[] = {1.0 / 12, -691.0 / 32760, 1.0 / 132, -1.0 / 240, 1.0 / 252, -1.0 / 120, 1.0 / 12};

hlo_value hlo_digamma(hlo_builder* b, hlo_value x) {
  hlo_value negative = hlo_compare_constant(b, "LT", x, 0);
  hlo_value y = hlo_select(b, negative, hlo_subtract(b, hlo_constant_like(b, x, 1), x), x);
  /* psi(y) = psi(y + k) - 1/y - ... - 1/(y + k - 1): from y > 0, ten steps
   * reach 10 */
  hlo_value sum = hlo_constant_like(b, x, 0);
  for (int k = 0; k < 10; k++) {
    hlo_value below = hlo_compare_constant(b, "LT", y, 10);
    sum = hlo_select(b, below, hlo_subtract(b, sum, hlo_divide(b, hlo_constant_like(b, y, 1), y)), sum);
    y = hlo_select(b, below, hlo_binary_constant(b, "add", y, 1), y);
  }
  hlo_value z = hlo_divide(b, hlo_constant_like(b, y, 1), hlo_multiply(b, y, y));
  int n = (int)(sizeof asymptotic / sizeof asymptotic[0]);
  hlo_value series = hlo_constant_like(b, z, asymptotic[0]);
  for (int i = 1; i < n; i++) series = hlo_binary_constant(b, "add", hlo_multiply(b, series, z), asymptotic[i]);
  series = hlo_select_constant(b, hlo_compare_constant(b, "GE", y, 1e17), 0, hlo_multiply(b, z, series));
  hlo_value half_over_y = hlo_divide(b, hlo_constant_like(b, y, 0.5), y);
  hlo_value psi = hlo_subtract(b, hlo_subtract(b, hlo_add(b, sum, hlo_unary(b, "log", y)), half_over_y), series);
  psi = hlo_select(b, hlo_compare_constant(b, "EQ", y, 10), hlo_binary_constant(b, "add", sum, PSI_10), psi);
  /* psi(x) = psi(1 - x) - pi / tan(pi r), r the fraction of x (its sign);
   * the CPU takes that term in float64 for float32 too, as near the poles
   * pi r rounds to a far larger error in tan(pi r) */
  hlo_value whole = hlo_unary(b, "ceil", x);
  hlo_value r = hlo_convert(b, hlo_subtract(b, x, whole), TPU_F64);
  hlo_value cot = hlo_divide(b, hlo_constant_like(b, r, M_PI),
                             hlo_unary(b, "tan", hlo_binary_constant(b, "multiply", r, M_PI)));
  psi = hlo_select(b, negative, hlo_subtract(b, psi, hlo_convert(b, cot, hlo_type_of(b, x)->dtype)), psi);
  /* NaN at the negative integers (-inf too), -1/x (-inf or +inf) at +-0 */
  psi = hlo_select_constant(b, hlo_binary(b, "and", negative, hlo_compare(b, "EQ", x, whole)), NAN, psi);
  return hlo_select(b, hlo_compare_constant(b, "EQ", x, 0), hlo_divide(b, hlo_constant_like(b, x, -1), x), psi);
}
