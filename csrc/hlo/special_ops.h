/* Builder ops for piecewise approximations: a table of numbers baked into
 * the program, a lookup into it by a computed index, and erfcx and
 * exp(-x^2), on which erf, erfc and torch.special build; a log1p and
 * a log Gamma as accurate as the C library's, and digamma. */
#ifndef TPU_HLO_SPECIAL_OPS_H
#define TPU_HLO_SPECIAL_OPS_H

#include "hlo/builder.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A 1-D constant of `count` entries of `dtype` (f32 or f64): values[0],
 * values[stride], values[2 * stride], ... */
hlo_value hlo_constant_table(hlo_builder* b, tpu_dtype dtype, const double* values, int count,
                             int stride);
/* table[index] elementwise: index is an integer value of any shape whose
 * entries lie in the table (the caller clamps); the result has index's
 * shape and table's dtype. */
hlo_value hlo_table_lookup(hlo_builder* b, hlo_value table, hlo_value index);

/* exp(x^2) erfc(x) (f32 or f64) as ATen's kernel computes it: S. G.
 * Johnson's 100-piece table for -6.1 <= x <= 50, a continued fraction
 * above 50 (1/(sqrt(pi) x) above 5e7), 2 exp(x^2) minus the table below 0
 * and without it below -6.1, +inf below -26.7. */
hlo_value hlo_erfcx(hlo_builder* b, hlo_value x);
/* exp(-t^2) without the error of rounding t^2: t = hi + lo with hi short
 * enough that hi^2 is exact, and t^2 - hi^2 = lo (t + hi). */
hlo_value hlo_exp_neg_square(hlo_builder* b, hlo_value t);
/* log(1 + x) (a real float type) to an ulp or so: for |x| < 1 the log of
 * u = 1 + x, corrected by the rounding of u ((x - (u - 1)) / u; x where u
 * is 1), elsewhere XLA's log1p, which is off by up to 2^7 ulps between
 * -1/2 and -0.3. */
hlo_value hlo_log1p(hlo_builder* b, hlo_value x);
/* log|Gamma(x)| (f32 or f64) to a few ulps of glibc's lgamma, +inf at the
 * poles (hlo/log_gamma.c). */
hlo_value hlo_log_gamma(hlo_builder* b, hlo_value x);
/* digamma (f32 or f64) by the CPU kernel's method: NaN at the negative
 * integers, -1/x at +-0 (hlo/digamma.c). */
hlo_value hlo_digamma(hlo_builder* b, hlo_value x);

#ifdef __cplusplus
}
#endif

#endif
