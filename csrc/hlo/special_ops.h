/* Builder ops for piecewise approximations: a table of numbers baked into
 * the program, and a lookup into it by a computed index. */
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

#ifdef __cplusplus
}
#endif

#endif
