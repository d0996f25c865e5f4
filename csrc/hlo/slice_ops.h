/* Builder ops that read or write whole slices of a tensor along one dim at
 * the positions of an index tensor: index_select, take, scatter-style
 * writes, and the index arithmetic of pooling and resampling. */
#ifndef TPU_HLO_SLICE_OPS_H
#define TPU_HLO_SLICE_OPS_H

#include "hlo/builder.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Slices of x along `dim` at the positions in `index` (an integer tensor
 * of any shape; out of range positions clamp), whose dims take dim's
 * place: x [A.., n, B..] and index [I..] give [A.., I.., B..]. */
hlo_value hlo_take(hlo_builder* b, hlo_value x, int dim, hlo_value index);

/* The other way: x with each slice of updates [A.., I.., B..] written at
 * its index position along `dim`, replacing it (combiner NULL) or combined
 * with it ("add", ...). */
hlo_value hlo_put(hlo_builder* b, hlo_value x, int dim, hlo_value index, hlo_value updates,
                  const char* combiner);

/* torch.gather: the elements of x at `index` (x's rank; dims other than
 * `dim` no longer than x's) along `dim`, in index's shape. */
hlo_value hlo_gather_elements(hlo_builder* b, hlo_value x, int dim, hlo_value index);

/* torch.scatter: x with each element of updates (index's shape) written at
 * its `index` position along `dim`, replacing (combiner NULL) or combined. */
hlo_value hlo_scatter_elements(hlo_builder* b, hlo_value x, int dim, hlo_value index,
                               hlo_value updates, const char* combiner);

/* x[..., start:limit, ...] along dim. */
hlo_value hlo_slice_dim(hlo_builder* b, hlo_value x, int dim, int64_t start, int64_t limit);

#ifdef __cplusplus
}
#endif

#endif
