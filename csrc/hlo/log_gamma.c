/* log|Gamma(x)| (torch.lgamma) for every real x. The CPU calls glibc's
 * lgamma, accurate to an ulp or so; XLA's (CHLO's) is some ulps off, and
 * far more near its zeros at 1 and 2 (147 ulps on (0, 1) in float32),
 * where igammac's series also takes lgamma(1 + a) for small a and cancels
 * it. So this one, in glibc's pieces: Taylor series about 1 and 2, the
 * recurrence below 8, Stirling's series above, and the reflection formula
 * at and below -1/2. */
#include <math.h>

#include "hlo/special_ops.h"

/* The Taylor coefficients of log Gamma(1 + u) + log(1 + u) at 0 (computed
 * with mpmath): 1 - Euler's gamma for k = 1 and (-1)^k (zeta(k) - 1) / k
 * above, so they fall as 2^-k. */
static const double log_gamma_1p_taylor[] = {
    4.2278433509846713939e-1, 3.2246703342411321824e-1, -6.7352301053198095133e-2, 2.0580808427784547879e-2,
    -7.3855510286739852663e-3, 2.8905103307415232858e-3, -1.1927539117032609771e-3,
    5.0966952474304242234e-4, -2.2315475845357937976e-4, 9.9457512781808533715e-5,
    -4.4926236738133141700e-5, 2.0507212775670691553e-5, -9.4394882752683959040e-6,
    4.3748667899074878042e-6, -2.0392157538013662368e-6, 9.5514121304074198329e-7,
    -4.4924691987645660433e-7, 2.1207184805554665869e-7, -1.0043224823968099609e-7,
    4.7698101693639805658e-8, -2.2711094608943164910e-8, 1.0838659214896954091e-8,
    -5.1834750419700466551e-9, 2.4836745438024783172e-9, -1.1921401405860912074e-9,
    5.7313672416788620133e-10, -2.7595228851242331452e-10, 1.3304764374244489481e-10,
    -6.4229645638381000221e-11, 3.1044247747322272762e-11,
};

/* The product x, rounded before the sum it goes into: XLA's CPU backend
 * fuses a multiply and an add into one FMA, which glibc's lgamma does not;
 * a select between them keeps them apart. */
static hlo_value rounded(hlo_builder* b, hlo_value x) {
  return hlo_select(b, hlo_compare(b, "EQ", x, x), x, hlo_binary_constant(b, "add", x, 1));
}

/* log Gamma(1 + u) + log(1 + u) for |u| <= 1/2, by its Taylor series (float32
 * needs fewer terms). It is also log Gamma(2 + u). */
static hlo_value log_gamma_2p(hlo_builder* b, hlo_value u) {
  int n = hlo_type_of(b, u)->dtype == TPU_F64 ? 28 : 14;
  hlo_value r = hlo_constant_like(b, u, log_gamma_1p_taylor[n - 1]);
  for (int i = n - 2; i >= 0; i--)
    r = hlo_binary_constant(b, "add", hlo_multiply(b, r, u), log_gamma_1p_taylor[i]);
  return hlo_multiply(b, r, u);
}

/* (a - 1/2)(log a - 1) + w(1/a), w Stirling's series less its leading
 * terms, in the form of glibc's for a >= 8 (so it rounds alike):
 * w = log(2 pi)/2 - 1/2 + the sum over k of B_2k / (2k (2k - 1) a^(2k-1)). */
static hlo_value log_gamma_stirling(hlo_builder* b, hlo_value a) {
  static const double w[] = {1.0 / 12,   -1.0 / 360,      1.0 / 1260, -1.0 / 1680,
                             1.0 / 1188, -691.0 / 360360, 1.0 / 156,  -3617.0 / 122400};
  hlo_value z = hlo_divide(b, hlo_constant_like(b, a, 1), a), y = hlo_multiply(b, z, z);
  int n = (int)(sizeof w / sizeof w[0]);
  hlo_value r = hlo_constant_like(b, a, w[n - 1]);
  for (int i = n - 2; i >= 0; i--) r = hlo_binary_constant(b, "add", hlo_multiply(b, r, y), w[i]);
  r = hlo_binary_constant(b, "add", hlo_multiply(b, z, r), 4.18938533204672741780329736405617640e-01);
  return hlo_add(b,
                 rounded(b, hlo_multiply(b, hlo_binary_constant(b, "add", a, -0.5),
                                         hlo_binary_constant(b, "add", hlo_unary(b, "log", a), -1))),
                 r);
}

/* log|Gamma(a)| for a > -1/2: log Gamma(2 + u) less log(1 + u) for u = a - 1
 * in [1/2, 3/2), less log|a| too for u = a below 1/2; below 8 log Gamma(2 + u)
 * plus log((a-1)...(a-k)), k steps down to u = a - k - 2 in [-1/2, 1/2)
 * (every subtraction exact); Stirling's series from 8. */
static hlo_value log_gamma_above_half(hlo_builder* b, hlo_value a) {
  hlo_value below_half = hlo_compare_constant(b, "LT", a, 0.5);
  hlo_value about_1 = hlo_compare_constant(b, "LT", a, 1.5);
  hlo_value steps = hlo_unary(b, "floor", hlo_binary_constant(b, "add", a, -1.5));
  hlo_value product = hlo_constant_like(b, a, 1);
  for (int j = 1; j <= 6; j++)
    product = hlo_select(b, hlo_compare_constant(b, "GE", steps, j),
                         hlo_multiply(b, product, hlo_binary_constant(b, "add", a, -j)), product);
  hlo_value u = hlo_select(b, below_half, a,
                           hlo_select(b, about_1, hlo_binary_constant(b, "add", a, -1),
                                      hlo_binary_constant(b, "add", hlo_subtract(b, a, steps), -2)));
  hlo_value series = log_gamma_2p(b, u), log_a = hlo_unary(b, "log", hlo_unary(b, "abs", a));
  hlo_value small = hlo_select(b, below_half, hlo_subtract(b, hlo_subtract(b, series, hlo_log1p(b, a)), log_a),
                               hlo_select(b, about_1, hlo_subtract(b, series, log_a),
                                          hlo_add(b, series, hlo_unary(b, "log", product))));
  return hlo_select(b, hlo_compare_constant(b, "LT", a, 8), small, log_gamma_stirling(b, a));
}

/* At and below -1/2, by reflection: |Gamma(x) Gamma(1 - x)| = pi / |sin(pi x)|,
 * sin(pi x) taken from x less its nearest integer (exact), so the poles at
 * the non-positive integers come out +inf. */
hlo_value hlo_log_gamma(hlo_builder* b, hlo_value x) {
  hlo_value reflect = hlo_compare_constant(b, "LE", x, -0.5);
  hlo_value one_minus_x = hlo_subtract(b, hlo_constant_like(b, x, 1), x);
  hlo_value positive = log_gamma_above_half(b, hlo_select(b, reflect, one_minus_x, x));
  hlo_value r = hlo_subtract(b, x, hlo_unary(b, "round_nearest_even", x));
  hlo_value sin_pi_x = hlo_unary(b, "abs", hlo_unary(b, "sine", hlo_binary_constant(b, "multiply", r, M_PI)));
  hlo_value reflected = hlo_subtract(
      b, hlo_subtract(b, hlo_constant_like(b, x, 1.14472988584940017414342735135305871), hlo_unary(b, "log", sin_pi_x)),
      positive);
  hlo_value v = hlo_select(b, reflect, reflected, positive);
  return hlo_select_constant(b, hlo_compare_constant(b, "EQ", x, -INFINITY), INFINITY, v);
}
