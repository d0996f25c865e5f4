/* Builder ops for reductions beyond hlo_reduce: running (scan) reductions. */
#ifndef TPU_HLO_REDUCE_EXTRA_OPS_H
#define TPU_HLO_REDUCE_EXTRA_OPS_H

#include "hlo/builder.h"

/* Inclusive running reduction of x along `dim` with a binary reducer
 * ("add", "multiply", ...); init is the reducer's identity, a 0-d value of
 * x's dtype. Element i holds reducer(x[0..i]). */
hlo_value hlo_cumulative(hlo_builder* b, hlo_value x, hlo_value init, const char* reducer,
                         int dim);

#endif
