/* Gathers and scatters of whole slices along one dim. */
#include "hlo/builder_impl.h"
#include "hlo/slice_ops.h"

/* The dims of x other than `dim`, as positions in a tensor where dim is
 * replaced by `index_rank` dims; returns their count. */
static int window_positions(int rank, int dim, int index_rank, int64_t* out) {
  int w = 0;
  for (int d = 0; d < rank; d++)
    if (d != dim) out[w++] = d < dim ? d : d - 1 + index_rank;
  return w;
}

hlo_value hlo_take(hlo_builder* b, hlo_value x, int dim, hlo_value index) {
  hlo_value operands[2] = {x, index};
  if (!values_valid(b, operands, 2)) return HLO_INVALID;
  hlo_type xt = *hlo_type_of(b, x), it = *hlo_type_of(b, index);
  if (xt.rank - 1 + it.rank > TPU_MAX_RANK)
    return hlo_fail(b, TPU_INTERNAL, "take of rank %d by rank %d exceeds rank %d", xt.rank, it.rank,
                    TPU_MAX_RANK);
  hlo_type out = {xt.dtype, 0, {0}};
  for (int d = 0; d < xt.rank; d++) {
    if (d != dim)
      out.dims[out.rank++] = xt.dims[d];
    else
      for (int i = 0; i < it.rank; i++) out.dims[out.rank++] = it.dims[i];
  }
  int64_t offset[TPU_MAX_RANK], sizes[TPU_MAX_RANK], d64 = dim;
  int w = window_positions(xt.rank, dim, it.rank, offset);
  for (int d = 0; d < xt.rank; d++) sizes[d] = d == dim ? 1 : xt.dims[d];
  hlo_gather_dims g = {offset, w, &d64, 1, &d64, 1, it.rank, sizes};
  return hlo_gather(b, x, index, &g, out);
}

hlo_value hlo_put(hlo_builder* b, hlo_value x, int dim, hlo_value index, hlo_value updates,
                  const char* combiner) {
  hlo_value operands[3] = {x, index, updates};
  if (!values_valid(b, operands, 3)) return HLO_INVALID;
  int rank = hlo_type_of(b, x)->rank, index_rank = hlo_type_of(b, index)->rank;
  int64_t window[TPU_MAX_RANK], d64 = dim;
  int w = window_positions(rank, dim, index_rank, window);
  hlo_scatter_dims s = {window, w, &d64, 1, &d64, 1, index_rank};
  return hlo_scatter(b, x, index, updates, &s, combiner);
}

hlo_value hlo_slice_dim(hlo_builder* b, hlo_value x, int dim, int64_t start, int64_t limit) {
  const hlo_type* t = hlo_type_of(b, x);
  int64_t starts[TPU_MAX_RANK] = {0}, limits[TPU_MAX_RANK], strides[TPU_MAX_RANK];
  for (int d = 0; d < t->rank; d++) limits[d] = t->dims[d], strides[d] = 1;
  starts[dim] = start;
  limits[dim] = limit;
  return hlo_slice(b, x, starts, limits, strides);
}
