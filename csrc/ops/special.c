/* Special functions: Airy's Ai, the modified Bessel functions (i0, special_i0e,
 * special_i1, special_i1e, special_modified_bessel_*), the Bessel functions
 * of the first and second kind, ndtri, log_ndtr, erfcx and zeta. Each
 * evaluates the same piecewise Chebyshev series and rational functions as
 * ATen's CPU kernels (Cephes' coefficients, and S. G. Johnson's 100-piece
 * table for erfcx), branch conditions included, so edge values (0,
 * negatives, infinities, NaN, the interval boundaries) come out as on the
 * CPU. float16/bfloat16 compute in float32, integers and bools in float32;
 * zeta is the CPU's Euler-Maclaurin sum too (hlo/zeta_ops.c). */
#include <math.h>
#include <string.h>

#include "hlo/elementwise_extra_ops.h"
#include "hlo/special_ops.h"
#include "hlo/zeta_ops.h"
#include "ops/families.h"

#include "ops/special_coefficients.inc"

/* A series' coefficients; a float32 kernel may use only the trailing
 * `f32_count` of them (ATen's float tables drop the smallest terms). */
typedef struct series {
  const double* c;
  int count;
  int f32_count; /* 0: all */
} series;

#define SERIES_F32(table, f32_count) {table, (int)(sizeof table / sizeof table[0]), f32_count}
#define SERIES(table) SERIES_F32(table, 0)

static const series I0_A = SERIES(i0_a), I0_B = SERIES(i0_b);
static const series I1_A = SERIES(i1_a), I1_B = SERIES(i1_b);
static const series I1E_A = SERIES_F32(i1_a, 17), I1E_B = SERIES_F32(i1_b, 7); /* special_i1/i1e */
static const series K0_A = SERIES(k0_a), K0_B = SERIES(k0_b);
static const series K1_A = SERIES(k1_a), K1_B = SERIES(k1_b);

/* ---- arithmetic shorthands ---- */

static hlo_value c_div(hlo_builder* b, double c, hlo_value x) {
  return hlo_divide(b, hlo_constant_like(b, x, c), x);
}
static hlo_value negate_where(hlo_builder* b, hlo_value pred, hlo_value x) {
  return hlo_select(b, pred, hlo_unary(b, "negate", x), x);
}

/* ---- series evaluation ---- */

/* The coefficients this dtype's kernel uses: all, or the float32 tail. */
static const double* series_terms(hlo_builder* b, hlo_value x, const series* s, int* out_count) {
  bool tail = s->f32_count && hlo_type_of(b, x)->dtype == TPU_F32;
  *out_count = tail ? s->f32_count : s->count;
  return s->c + (s->count - *out_count);
}

/* c[0] z^(n-1) + ... + c[n-1], by Horner's rule (Cephes' polevl). */
static hlo_value polynomial(hlo_builder* b, hlo_value z, const series* s) {
  int n;
  const double* c = series_terms(b, z, s, &n);
  hlo_value r = hlo_constant_like(b, z, c[0]);
  for (int i = 1; i < n; i++) r = hlo_binary_constant(b, "add", hlo_multiply(b, r, z), c[i]);
  return r;
}

/* The Chebyshev series with coefficients c (highest order first) at y/2,
 * by Clenshaw's recurrence as Cephes' chbevl: b0 = y b1 - b2 + c[i], result
 * (b0 - b2) / 2. */
static hlo_value chebyshev(hlo_builder* b, hlo_value y, const series* s) {
  int n;
  const double* c = series_terms(b, y, s, &n);
  hlo_value b0 = hlo_constant_like(b, y, c[0]), b1 = hlo_constant_like(b, y, 0), b2 = b1;
  for (int i = 1; i < n; i++) {
    b2 = b1;
    b1 = b0;
    b0 = hlo_binary_constant(b, "add", hlo_subtract(b, hlo_multiply(b, y, b1), b2), c[i]);
  }
  return hlo_binary_constant(b, "multiply", hlo_subtract(b, b0, b2), 0.5);
}

/* p(z) / q(z) for two coefficient series. */
static hlo_value rational(hlo_builder* b, hlo_value z, const series* p, const series* q) {
  return hlo_divide(b, polynomial(b, z, p), polynomial(b, z, q));
}

/* ---- modified Bessel functions ---- */

/* I0 (or exp(-|x|) I0 when `scaled`): Chebyshev series in |x|/2 - 2 on
 * [0, 8] and in 32/|x| - 2 above, the latter over sqrt(|x|). */
static hlo_value bessel_i0(hlo_builder* b, hlo_value x, bool scaled) {
  hlo_value ax = hlo_unary(b, "abs", x);
  hlo_value near =
      chebyshev(b, hlo_binary_constant(b, "add", hlo_binary_constant(b, "multiply", ax, 0.5), -2), &I0_A);
  hlo_value far = chebyshev(b, hlo_binary_constant(b, "add", c_div(b, 32, ax), -2), &I0_B);
  if (!scaled) {
    hlo_value e = hlo_unary(b, "exponential", ax);
    near = hlo_multiply(b, e, near);
    far = hlo_multiply(b, e, far);
  }
  far = hlo_divide(b, far, hlo_unary(b, "sqrt", ax));
  return hlo_select(b, hlo_compare_constant(b, "LE", ax, 8), near, far);
}

/* I1 (or exp(-|x|) I1 when `scaled`), odd in x; `a`/`far_series` are the
 * series the kernel uses (special_i1/i1e's float tables are shorter). */
static hlo_value bessel_i1(hlo_builder* b, hlo_value x, bool scaled, const series* a, const series* far_series) {
  hlo_value ax = hlo_unary(b, "abs", x);
  hlo_value near =
      chebyshev(b, hlo_binary_constant(b, "add", hlo_binary_constant(b, "multiply", ax, 0.5), -2), a);
  hlo_value far = chebyshev(b, hlo_binary_constant(b, "add", c_div(b, 32, ax), -2), far_series);
  if (scaled) {
    near = hlo_multiply(b, near, ax);
  } else {
    hlo_value e = hlo_unary(b, "exponential", ax);
    near = hlo_multiply(b, hlo_multiply(b, e, ax), near);
    far = hlo_multiply(b, e, far);
  }
  far = hlo_divide(b, far, hlo_unary(b, "sqrt", ax));
  return negate_where(b, hlo_compare_constant(b, "LT", x, 0),
                      hlo_select(b, hlo_compare_constant(b, "LE", ax, 8), near, far));
}

/* K0 or K1 (`order`), times exp(x) when `scaled`: on (0, 2] a Chebyshev
 * series in x^2 - 2 (over x for K1) with a log(x/2) I_order(x) term, above
 * it one in 8/x - 2 over sqrt(x); +inf at 0 and NaN below. */
static hlo_value bessel_k(hlo_builder* b, hlo_value x, int order, bool scaled) {
  hlo_value near =
      chebyshev(b, hlo_binary_constant(b, "add", hlo_multiply(b, x, x), -2), order ? &K1_A : &K0_A);
  hlo_value log_half = hlo_unary(b, "log", hlo_binary_constant(b, "multiply", x, 0.5));
  if (order == 0)
    near = hlo_subtract(b, near, hlo_multiply(b, log_half, bessel_i0(b, x, false)));
  else
    near =
        hlo_add(b, hlo_multiply(b, log_half, bessel_i1(b, x, false, &I1_A, &I1_B)), hlo_divide(b, near, x));
  hlo_value far = chebyshev(b, hlo_binary_constant(b, "add", c_div(b, 8, x), -2), order ? &K1_B : &K0_B);
  if (scaled)
    near = hlo_multiply(b, near, hlo_unary(b, "exponential", x));
  else
    far = hlo_multiply(b, hlo_unary(b, "exponential", hlo_unary(b, "negate", x)), far);
  far = hlo_divide(b, far, hlo_unary(b, "sqrt", x));
  hlo_value r = hlo_select(b, hlo_compare_constant(b, "LE", x, 2), near, far);
  return hlo_select_constant(b, hlo_compare_constant(b, "EQ", x, 0), INFINITY,
                             hlo_select_constant(b, hlo_compare_constant(b, "LT", x, 0), NAN, r));
}

static hlo_value i0_fn(hlo_builder* b, hlo_value x) { return bessel_i0(b, x, false); }
static hlo_value i0e_fn(hlo_builder* b, hlo_value x) { return bessel_i0(b, x, true); }
static hlo_value i1_fn(hlo_builder* b, hlo_value x) { return bessel_i1(b, x, false, &I1E_A, &I1E_B); }
static hlo_value i1e_fn(hlo_builder* b, hlo_value x) { return bessel_i1(b, x, true, &I1E_A, &I1E_B); }
static hlo_value modified_i1_fn(hlo_builder* b, hlo_value x) { return bessel_i1(b, x, false, &I1_A, &I1_B); }
static hlo_value k0_fn(hlo_builder* b, hlo_value x) { return bessel_k(b, x, 0, false); }
static hlo_value k1_fn(hlo_builder* b, hlo_value x) { return bessel_k(b, x, 1, false); }
static hlo_value k0e_fn(hlo_builder* b, hlo_value x) { return bessel_k(b, x, 0, true); }
static hlo_value k1e_fn(hlo_builder* b, hlo_value x) { return bessel_k(b, x, 1, true); }

/* ---- Bessel functions of the first and second kind ---- */

/* One order's tables: the rational function near 0 (J: its zeros' squares
 * as factors; Y: its own), and the asymptotic P and Q above 5. */
typedef struct bessel_order {
  series rp, rq;        /* J on [0, 5] */
  double zero1, zero2;  /* squares of J's first two zeros */
  series yp, yq;        /* Y on (0, 5] */
  series pp, pq, qp, qq; /* the modulus and phase series above 5 */
  double phase;         /* pi/4 (order 0) or 3 pi/4 (order 1) */
} bessel_order;

static const bessel_order ORDER0 = {
    SERIES(j0_rp), SERIES(j0_rq), 5.78318596294678452118e+00, 3.04712623436620863991e+01,
    SERIES(y0_yp), SERIES(y0_yq), SERIES(j0_pp), SERIES(j0_pq), SERIES(j0_qp), SERIES(j0_qq),
    0.785398163397448309615660845819875721};
static const bessel_order ORDER1 = {
    SERIES(j1_rp), SERIES(j1_rq), 1.46819706421238932572e+01, 4.92184563216946036703e+01,
    SERIES(y1_yp), SERIES(y1_yq), SERIES(j1_pp), SERIES(j1_pq), SERIES(j1_qp), SERIES(j1_qq),
    2.356194490192344928846982537459627163};

/* J (first_kind) or Y of order o for x > 5:
 * sqrt(2/(pi x)) (P cos(x - phase) - (5/x) Q sin(x - phase)) for J and
 * (P sin + (5/x) Q cos) for Y, with P, Q rational in 25/x^2. */
static hlo_value bessel_far(hlo_builder* b, hlo_value x, const bessel_order* o, bool first_kind) {
  hlo_value five_x = c_div(b, 5, x);
  /* order 0 forms 25/(x x), order 1 (5/x)(5/x), as the kernels do */
  hlo_value w = o == &ORDER0 ? c_div(b, 25, hlo_multiply(b, x, x)) : hlo_multiply(b, five_x, five_x);
  hlo_value p = rational(b, w, &o->pp, &o->pq);
  hlo_value q = hlo_multiply(b, five_x, rational(b, w, &o->qp, &o->qq));
  hlo_value angle = hlo_binary_constant(b, "add", x, -o->phase);
  hlo_value cos_a = hlo_unary(b, "cosine", angle), sin_a = hlo_unary(b, "sine", angle);
  hlo_value sum = first_kind ? hlo_subtract(b, hlo_multiply(b, p, cos_a), hlo_multiply(b, q, sin_a))
                             : hlo_add(b, hlo_multiply(b, p, sin_a), hlo_multiply(b, q, cos_a));
  return hlo_divide(b, hlo_binary_constant(b, "multiply", sum, 0.797884560802865355879892119868763737),
                    hlo_unary(b, "sqrt", x));
}

static hlo_value bessel_j(hlo_builder* b, hlo_value x, const bessel_order* o) {
  hlo_value ax = hlo_unary(b, "abs", x), z = hlo_multiply(b, x, x);
  hlo_value r = rational(b, z, &o->rp, &o->rq);
  hlo_value near;
  if (o == &ORDER0) {
    near = hlo_multiply(b,
                        hlo_multiply(b, hlo_binary_constant(b, "add", z, -o->zero1),
                                     hlo_binary_constant(b, "add", z, -o->zero2)),
                        r);
    hlo_value tiny = hlo_subtract(b, hlo_constant_like(b, x, 1),
                                  hlo_binary_constant(b, "multiply", z, 0.25)); /* 1 - x^2/4 below 1e-5 */
    near = hlo_select(b, hlo_compare_constant(b, "LT", ax, 0.00001), tiny, near);
  } else {
    near =
        hlo_multiply(b, hlo_multiply(b, hlo_multiply(b, r, ax), hlo_binary_constant(b, "add", z, -o->zero1)),
                     hlo_binary_constant(b, "add", z, -o->zero2));
  }
  hlo_value v = hlo_select(b, hlo_compare_constant(b, "LE", ax, 5), near, bessel_far(b, ax, o, true));
  return o == &ORDER0 ? v : negate_where(b, hlo_compare_constant(b, "LT", x, 0), v);
}

static hlo_value bessel_y(hlo_builder* b, hlo_value x, const bessel_order* o) {
  hlo_value z = hlo_multiply(b, x, x), log_x = hlo_unary(b, "log", x);
  hlo_value r = rational(b, z, &o->yp, &o->yq);
  hlo_value two_pi = hlo_constant_like(b, x, 0.636619772367581343075535053490057448);
  hlo_value near;
  if (o == &ORDER0)
    near = hlo_add(b, r, hlo_multiply(b, hlo_multiply(b, two_pi, log_x), bessel_j(b, x, o)));
  else
    near = hlo_add(
        b, hlo_multiply(b, x, r),
        hlo_multiply(b, two_pi, hlo_subtract(b, hlo_multiply(b, bessel_j(b, x, o), log_x), c_div(b, 1, x))));
  near = hlo_select_constant(b, hlo_compare_constant(b, "EQ", x, 0), -INFINITY,
                             hlo_select_constant(b, hlo_compare_constant(b, "LT", x, 0), NAN, near));
  return hlo_select(b, hlo_compare_constant(b, "LE", x, 5), near, bessel_far(b, x, o, false));
}

static hlo_value j0_fn(hlo_builder* b, hlo_value x) { return bessel_j(b, x, &ORDER0); }
static hlo_value j1_fn(hlo_builder* b, hlo_value x) { return bessel_j(b, x, &ORDER1); }
static hlo_value y0_fn(hlo_builder* b, hlo_value x) { return bessel_y(b, x, &ORDER0); }
static hlo_value y1_fn(hlo_builder* b, hlo_value x) { return bessel_y(b, x, &ORDER1); }

/* sin(x)/x, by its Taylor series below 0.5 and 0 at +-inf. */
static const double sinc_taylor[] = {1.0 / 6227020800.0, -1.0 / 39916800.0, 1.0 / 362880.0,
                                     -1.0 / 5040.0, 1.0 / 120.0, -1.0 / 6.0};
static hlo_value spherical_j0_fn(hlo_builder* b, hlo_value x) {
  static const series taylor = SERIES(sinc_taylor);
  hlo_value z = hlo_multiply(b, x, x);
  hlo_value near = hlo_binary_constant(b, "add", hlo_multiply(b, z, polynomial(b, z, &taylor)), 1);
  hlo_value v = hlo_select(b, hlo_compare_constant(b, "LT", hlo_unary(b, "abs", x), 0.5), near,
                           hlo_divide(b, hlo_unary(b, "sine", x), x));
  return hlo_select_constant(b, hlo_compare_constant(b, "EQ", hlo_unary(b, "abs", x), INFINITY), 0, v);
}

/* ---- normal distribution ---- */

/* The x with Phi(x) = y: a rational function of (y - 1/2)^2 in the middle,
 * of 1/sqrt(-2 log y) in the tails (two pieces, split at exp(-32)). */
static hlo_value ndtri_fn(hlo_builder* b, hlo_value y0) {
  static const series p0 = SERIES(ndtri_p0), q0 = SERIES(ndtri_q0), p1 = SERIES(ndtri_p1),
                      q1 = SERIES(ndtri_q1), p2 = SERIES(ndtri_p2), q2 = SERIES(ndtri_q2);
  const double exp_m2 = 0.13533528323661269189; /* exp(-2) */
  hlo_value one = hlo_constant_like(b, y0, 1);
  hlo_value upper = hlo_compare(b, "GT", y0, hlo_subtract(b, one, hlo_constant_like(b, y0, exp_m2)));
  hlo_value y = hlo_select(b, upper, hlo_subtract(b, one, y0), y0);
  hlo_value h = hlo_binary_constant(b, "add", y, -0.5), h2 = hlo_multiply(b, h, h);
  hlo_value middle = hlo_add(
      b, h,
      hlo_multiply(b, h, hlo_divide(b, hlo_multiply(b, h2, polynomial(b, h2, &p0)), polynomial(b, h2, &q0))));
  middle = hlo_binary_constant(b, "multiply", middle, 2.50662827463100050242E0);
  hlo_value x = hlo_unary(b, "sqrt", hlo_binary_constant(b, "multiply", hlo_unary(b, "log", y), -2.0));
  hlo_value x0 = hlo_subtract(b, x, hlo_divide(b, hlo_unary(b, "log", x), x));
  hlo_value z = c_div(b, 1, x);
  hlo_value x1 =
      hlo_select(b, hlo_compare_constant(b, "LT", x, 8), hlo_multiply(b, z, rational(b, z, &p1, &q1)),
                 hlo_multiply(b, z, rational(b, z, &p2, &q2)));
  hlo_value tail = negate_where(b, hlo_unary(b, "not", upper), hlo_subtract(b, x0, x1));
  hlo_value v = hlo_select(b, hlo_compare_constant(b, "GT", y, exp_m2), middle, tail);
  hlo_value outside =
      hlo_binary(b, "or", hlo_compare_constant(b, "LT", y0, 0), hlo_compare_constant(b, "GT", y0, 1));
  v = hlo_select_constant(b, outside, NAN, v);
  return hlo_select_constant(b, hlo_compare_constant(b, "EQ", y0, 0), -INFINITY,
                             hlo_select_constant(b, hlo_compare_constant(b, "EQ", y0, 1), INFINITY, v));
}

/* log Phi(x): log(erfcx(-t)/2) - t^2 below x = -1, else log1p(-erfc(t)/2),
 * with t = x / sqrt(2) (hlo_erfc is as accurate in the tail as the CPU's). */
static hlo_value log_ndtr_fn(hlo_builder* b, hlo_value x) {
  hlo_value t = hlo_binary_constant(b, "multiply", x, 0.707106781186547524400844362104849039);
  hlo_value scaled = hlo_erfcx(b, hlo_unary(b, "abs", t));
  hlo_value low = hlo_subtract(b, hlo_unary(b, "log", hlo_binary_constant(b, "multiply", scaled, 0.5)),
                               hlo_multiply(b, t, t));
  hlo_value high = hlo_unary(b, "log_plus_one", hlo_binary_constant(b, "multiply", hlo_erfc(b, t), -0.5));
  return hlo_select(b, hlo_compare_constant(b, "LT", x, -1), low, high);
}

/* ---- Airy function ---- */

/* The Maclaurin series below converges within 13 steps on [-2.09, 2.09]. */
#define AIRY_SERIES_STEPS 14
#define AIRY_EPSILON 1.11022302462515654042e-16
#define ONE_OVER_SQRT_PI 5.64189583547756286948e-01

/* Ai(x) as the CPU's kernel computes it: the asymptotic modulus and phase
 * series below -2.09, a rational function of 1/zeta (zeta = 2/3 x^(3/2))
 * from 2.09, and between them Ai = c1 f - c2 g by the Maclaurin series of
 * f and g, each element's sum stopping where the CPU's loop stops; NaN at
 * +-inf and 0 above 103.892. */
static hlo_value airy_ai_fn(hlo_builder* b, hlo_value x) {
  static const series an = SERIES(airy_an), ad = SERIES(airy_ad), afn = SERIES(airy_afn),
                      afd = SERIES(airy_afd), agn = SERIES(airy_agn), agd = SERIES(airy_agd);
  hlo_value root = hlo_unary(b, "sqrt", hlo_unary(b, "abs", x)), fourth_root = hlo_unary(b, "sqrt", root);

  hlo_value zeta = hlo_binary_constant(b, "divide", hlo_multiply(b, hlo_binary_constant(b, "multiply", x, -2), root), 3);
  hlo_value z = c_div(b, 1, zeta), zz = hlo_multiply(b, z, z);
  hlo_value modulus = hlo_binary_constant(
      b, "add", hlo_divide(b, hlo_multiply(b, zz, polynomial(b, zz, &afn)), polynomial(b, zz, &afd)), 1);
  hlo_value phase_part = hlo_divide(b, hlo_multiply(b, z, polynomial(b, zz, &agn)), polynomial(b, zz, &agd));
  hlo_value phase = hlo_binary_constant(b, "add", zeta, 0.25 * M_PI);
  hlo_value below = hlo_multiply(b, c_div(b, ONE_OVER_SQRT_PI, fourth_root),
                                 hlo_subtract(b, hlo_multiply(b, hlo_unary(b, "sine", phase), modulus),
                                              hlo_multiply(b, hlo_unary(b, "cosine", phase), phase_part)));

  zeta = hlo_binary_constant(b, "divide", hlo_multiply(b, hlo_binary_constant(b, "multiply", x, 2), root), 3);
  hlo_value inverse = c_div(b, 1, zeta);
  hlo_value ratio = hlo_divide(b, polynomial(b, inverse, &an), polynomial(b, inverse, &ad));
  hlo_value above = hlo_divide(
      b, hlo_binary_constant(b, "multiply", ratio, ONE_OVER_SQRT_PI),
      hlo_multiply(b, hlo_binary_constant(b, "multiply", fourth_root, 2), hlo_unary(b, "exponential", zeta)));

  /* f = sum of x^(3k) / (2 3 5 6 ... (3k-1) 3k), g = x times the like sum */
  hlo_value cube = hlo_multiply(b, hlo_multiply(b, x, x), x);
  hlo_value f = hlo_constant_like(b, x, 1), g = x, m = f, n = x, t = f;
  for (int i = 0; i < AIRY_SERIES_STEPS; i++) {
    double k = 1 + 3.0 * i;
    hlo_value summing = hlo_compare_constant(b, "GT", t, AIRY_EPSILON);
    hlo_value m_next = hlo_binary_constant(
        b, "divide", hlo_binary_constant(b, "divide", hlo_multiply(b, m, cube), k + 1), k + 2);
    hlo_value n_next = hlo_binary_constant(
        b, "divide", hlo_binary_constant(b, "divide", hlo_multiply(b, n, cube), k + 2), k + 3);
    hlo_value f_next = hlo_add(b, f, m_next);
    m = hlo_select(b, summing, m_next, m);
    n = hlo_select(b, summing, n_next, n);
    t = hlo_select(b, summing, hlo_unary(b, "abs", hlo_divide(b, m_next, f_next)), t);
    f = hlo_select(b, summing, f_next, f);
    g = hlo_select(b, summing, hlo_add(b, g, n_next), g);
  }
  hlo_value middle = hlo_subtract(b, hlo_binary_constant(b, "multiply", f, 0.355028053887817239260),
                                  hlo_binary_constant(b, "multiply", g, 0.258819403792806798405));

  hlo_value v = hlo_select(b, hlo_compare_constant(b, "GE", x, 2.09), above, middle);
  v = hlo_select(b, hlo_compare_constant(b, "LT", x, -2.09), below, v);
  v = hlo_select_constant(b, hlo_compare_constant(b, "GT", x, 103.892), 0, v);
  return hlo_select_constant(b, hlo_compare_constant(b, "EQ", hlo_unary(b, "abs", x), INFINITY), NAN, v);
}

/* ---- lowerings ---- */

typedef hlo_value (*unary_fn)(hlo_builder* b, hlo_value x);

static const struct unary_op {
  const char* name;
  unary_fn fn;
} unary_ops[] = {
    {"i0", i0_fn},
    {"special_airy_ai", airy_ai_fn},
    {"special_bessel_j0", j0_fn},
    {"special_bessel_j1", j1_fn},
    {"special_bessel_y0", y0_fn},
    {"special_bessel_y1", y1_fn},
    {"special_erfcx", hlo_erfcx},
    {"special_i0e", i0e_fn},
    {"special_i1", i1_fn},
    {"special_i1e", i1e_fn},
    {"special_log_ndtr", log_ndtr_fn},
    {"special_modified_bessel_i0", i0_fn},
    {"special_modified_bessel_i1", modified_i1_fn},
    {"special_modified_bessel_k0", k0_fn},
    {"special_modified_bessel_k1", k1_fn},
    {"special_ndtri", ndtri_fn},
    {"special_scaled_modified_bessel_k0", k0e_fn},
    {"special_scaled_modified_bessel_k1", k1e_fn},
    {"special_spherical_bessel_j0", spherical_j0_fn},
};

/* The dtype a special function computes in: floats as they are (float16
 * and bfloat16 widened to float32), integers and bools as float32. */
static tpu_dtype compute_type(tpu_lowering* l, const int* indices, int count) {
  tpu_dtype t = tpu_lower_result_type(l, indices, count);
  return tpu_dtype_is_float(t) ? tpu_dtype_compute(t) : TPU_F32;
}

static tpu_status lower_unary(tpu_lowering* l) {
  const char* name = tpu_lower_op_name(l);
  for (size_t i = 0; i < sizeof unary_ops / sizeof unary_ops[0]; i++) {
    if (strcmp(unary_ops[i].name, name)) continue;
    int self = 0;
    tpu_dtype t = compute_type(l, &self, 1);
    tpu_lower_set_output(l, 0, unary_ops[i].fn(tpu_lower_builder(l), tpu_lower_value(l, 0, t)));
    return NULL;
  }
  tpu_lower_fail(l, TPU_INTERNAL, "aten::%s is registered but missing from its op table", name);
  return NULL;
}

/* Hurwitz zeta(x, q) = sum over k >= 0 of (k + q)^-x (hlo/zeta_ops.h).
 * Either argument may be a Python scalar. */
static tpu_status lower_zeta(tpu_lowering* l) {
  int operands[2] = {0, 1};
  tpu_dtype t = compute_type(l, operands, 2);
  hlo_type shape = tpu_lower_broadcast_type(l, operands, 2, t);
  hlo_value x = tpu_lower_value_as(l, 0, &shape), q = tpu_lower_value_as(l, 1, &shape);
  tpu_lower_set_output(l, 0, hlo_zeta(tpu_lower_builder(l), x, q));
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"i0", lower_unary, 0},
    {"special_airy_ai", lower_unary, 0},
    {"special_bessel_j0", lower_unary, 0},
    {"special_bessel_j1", lower_unary, 0},
    {"special_bessel_y0", lower_unary, 0},
    {"special_bessel_y1", lower_unary, 0},
    {"special_erfcx", lower_unary, 0},
    {"special_i0e", lower_unary, 0},
    {"special_i1", lower_unary, 0},
    {"special_i1e", lower_unary, 0},
    {"special_log_ndtr", lower_unary, 0},
    {"special_modified_bessel_i0", lower_unary, 0},
    {"special_modified_bessel_i1", lower_unary, 0},
    {"special_modified_bessel_k0", lower_unary, 0},
    {"special_modified_bessel_k1", lower_unary, 0},
    {"special_ndtri", lower_unary, 0},
    {"special_scaled_modified_bessel_k0", lower_unary, 0},
    {"special_scaled_modified_bessel_k1", lower_unary, 0},
    {"special_spherical_bessel_j0", lower_unary, 0},
    {"special_zeta", lower_zeta, 0},
};

TPU_OP_FAMILY(tpu_ops_special, entries);
