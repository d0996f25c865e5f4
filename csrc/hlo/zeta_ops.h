/* Builder ops for the Hurwitz zeta function and the polygamma functions
 * built on it, computed as PyTorch's CPU kernels compute them (Cephes'
 * Euler-Maclaurin sum for zeta, a recurrence and asymptotic series for
 * trigamma), so that they agree where XLA's own zeta and polygamma do not:
 * those lose accuracy (trigamma about 1e-10 relative in float64) and give
 * wrong values at some negative arguments. */
#ifndef TPU_HLO_ZETA_OPS_H
#define TPU_HLO_ZETA_OPS_H

#include "hlo/builder.h"

#ifdef __cplusplus
extern "C" {
#endif

/* zeta(x, q) = sum over k >= 0 of (k + q)^-x for x and q of one float type
 * and shape (summed in float64): +inf at x = 1 and at q a non-positive
 * integer, NaN for x < 1 and for q < 0 with x not an integer. */
hlo_value hlo_zeta(hlo_builder* b, hlo_value x, hlo_value q);
/* polygamma(1, x), by reflection below 1/2, six steps of the recurrence
 * and the asymptotic series. */
hlo_value hlo_trigamma(hlo_builder* b, hlo_value x);
/* polygamma(n, x) for n >= 2: (-1)^(n+1) n! zeta(n + 1, x), in float64. */
hlo_value hlo_polygamma(hlo_builder* b, int64_t n, hlo_value x);

#ifdef __cplusplus
}
#endif

#endif
