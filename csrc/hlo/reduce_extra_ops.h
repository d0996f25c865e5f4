/* Builder ops for reductions beyond hlo_reduce: NaN-propagating max/min
 * and running (scan) reductions. */
#ifndef TPU_HLO_REDUCE_EXTRA_OPS_H
#define TPU_HLO_REDUCE_EXTRA_OPS_H

#include "hlo/builder.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Max (is_max) or min of x over dims where any NaN makes the result NaN,
 * as in PyTorch (XLA's maximum/minimum may drop NaNs). init is a 0-d value
 * of x's dtype that loses every comparison. */
hlo_value hlo_reduce_extreme(hlo_builder* b, hlo_value x, hlo_value init, bool is_max,
                             const int64_t* dims, int dim_count);

/* The p-norm of x over dims, in x's (floating) dtype: the count of nonzero
 * elements for p = 0, the largest (p = inf) or smallest (p = -inf) |x| with
 * NaN kept, the root of the sum of squares for p = 2, else
 * (sum |x|^p)^(1/p). */
hlo_value hlo_vector_norm(hlo_builder* b, hlo_value x, double p, const int64_t* dims, int dim_count);

/* Inclusive running reduction of x along `dim` with a binary reducer
 * ("add", "multiply", ...); init is the reducer's identity, a 0-d value of
 * x's dtype. Element i holds reducer(x[0..i]). */
hlo_value hlo_cumulative(hlo_builder* b, hlo_value x, hlo_value init, const char* reducer,
                         int dim);

/* The same with any associative combine(earlier, later, context). */
hlo_value hlo_scan(hlo_builder* b, hlo_value x, hlo_value init, hlo_combine_fn combine,
                   const void* context, int dim);

/* Running max (is_max) or min along `dim` where a NaN, once met, stays;
 * init as for hlo_reduce_extreme. */
hlo_value hlo_cumulative_extreme(hlo_builder* b, hlo_value x, hlo_value init, bool is_max, int dim);

/* For each entry of a 1-D bool mask, its rank among the true entries (i64):
 * where the k-th true position takes the k-th packed value from. */
hlo_value hlo_true_ranks(hlo_builder* b, hlo_value flat_mask);

#ifdef __cplusplus
}
#endif

#endif
