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

/* Coordinates (index's shape + [rank]) of the elements that torch.gather and
 * torch.scatter address: each dim's position, but `index` along `dim`. */
static hlo_value element_coords(hlo_builder* b, hlo_value index, int dim) {
  hlo_type t = *hlo_type_of(b, index);
  hlo_type one = t;
  one.dims[one.rank++] = 1;
  one.dtype = TPU_I64;
  hlo_value parts[TPU_MAX_RANK];
  for (int d = 0; d < t.rank; d++)
    parts[d] = d == dim ? hlo_reshape(b, hlo_convert(b, index, TPU_I64), one.rank, one.dims)
                        : hlo_iota(b, one, d);
  return hlo_concatenate(b, parts, t.rank, t.rank);
}

hlo_value hlo_gather_elements(hlo_builder* b, hlo_value x, int dim, hlo_value index) {
  hlo_value operands[2] = {x, index};
  if (!values_valid(b, operands, 2)) return HLO_INVALID;
  int rank = hlo_type_of(b, x)->rank;
  int64_t all[TPU_MAX_RANK], ones[TPU_MAX_RANK];
  for (int d = 0; d < rank; d++) all[d] = d, ones[d] = 1;
  hlo_gather_dims g = {NULL, 0, all, rank, all, rank, rank, ones};
  hlo_type out = *hlo_type_of(b, index);
  out.dtype = hlo_type_of(b, x)->dtype;
  return hlo_gather(b, x, element_coords(b, index, dim), &g, out);
}

hlo_value hlo_scatter_elements(hlo_builder* b, hlo_value x, int dim, hlo_value index,
                               hlo_value updates, const char* combiner) {
  hlo_value operands[3] = {x, index, updates};
  if (!values_valid(b, operands, 3)) return HLO_INVALID;
  int rank = hlo_type_of(b, x)->rank;
  int64_t all[TPU_MAX_RANK];
  for (int d = 0; d < rank; d++) all[d] = d;
  hlo_scatter_dims s = {NULL, 0, all, rank, all, rank, rank};
  return hlo_scatter(b, x, element_coords(b, index, dim), updates, &s, combiner);
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
