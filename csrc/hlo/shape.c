/* Shape ops: reshape, broadcast, transpose, slices, concatenate, pad, reverse. */
#include <stdio.h>
#include <string.h>

#include "hlo/builder_impl.h"

hlo_value hlo_reshape(hlo_builder* b, hlo_value x, int rank, const int64_t* dims) {
  if (!values_valid(b, &x, 1)) return HLO_INVALID;
  const hlo_type* in = hlo_type_of(b, x);
  hlo_type out = hlo_type_make(in->dtype, rank, dims);
  if (hlo_type_equal(in, &out)) return x;
  if (hlo_type_numel(in) != hlo_type_numel(&out)) {
    char a[128], c[128];
    return hlo_fail(b, TPU_INTERNAL, "reshape of %s to %s changes the element count",
                    hlo_type_print(in, a, sizeof a), hlo_type_print(&out, c, sizeof c));
  }
  hlo_value r = emit_op(b, "stablehlo.reshape", &x, 1, NULL, out);
  if (r != HLO_INVALID) b->values[r].reshape_of = x;
  return r;
}

hlo_value hlo_reshape_origin(const hlo_builder* b, hlo_value v) {
  while (v >= 0 && v < b->value_count && b->values[v].reshape_of != HLO_INVALID) v = b->values[v].reshape_of;
  return v;
}

hlo_value hlo_broadcast_in_dim(hlo_builder* b, hlo_value x, int rank, const int64_t* dims,
                               const int64_t* broadcast_dims) {
  if (!values_valid(b, &x, 1)) return HLO_INVALID;
  const hlo_type* in = hlo_type_of(b, x);
  hlo_type out = hlo_type_make(in->dtype, rank, dims);
  if (hlo_type_equal(in, &out)) return x;
  char attrs[256];
  attr_i64_array(attrs, sizeof attrs, "broadcast_dimensions", broadcast_dims, in->rank);
  return emit_op(b, "stablehlo.broadcast_in_dim", &x, 1, attrs, out);
}

hlo_value hlo_broadcast_to(hlo_builder* b, hlo_value x, int rank, const int64_t* dims) {
  if (!values_valid(b, &x, 1)) return HLO_INVALID;
  const hlo_type* in = hlo_type_of(b, x);
  if (in->rank > rank)
    return hlo_fail(b, TPU_INTERNAL, "cannot broadcast rank %d to rank %d", in->rank, rank);
  int64_t bdims[TPU_MAX_RANK];
  for (int i = 0; i < in->rank; i++) {
    bdims[i] = rank - in->rank + i;
    int64_t d = in->dims[i];
    if (d != 1 && d != dims[bdims[i]])
      return hlo_fail(b, TPU_INTERNAL, "cannot broadcast size %lld to %lld", (long long)d,
                      (long long)dims[bdims[i]]);
  }
  return hlo_broadcast_in_dim(b, x, rank, dims, bdims);
}

hlo_value hlo_transpose(hlo_builder* b, hlo_value x, const int64_t* permutation) {
  if (!values_valid(b, &x, 1)) return HLO_INVALID;
  const hlo_type* in = hlo_type_of(b, x);
  hlo_type out = *in;
  bool identity = true;
  for (int i = 0; i < in->rank; i++) {
    out.dims[i] = in->dims[permutation[i]];
    identity = identity && permutation[i] == i;
  }
  if (identity) return x;
  char attrs[256];
  attr_i64_array(attrs, sizeof attrs, "permutation", permutation, in->rank);
  return emit_op(b, "stablehlo.transpose", &x, 1, attrs, out);
}

hlo_value hlo_slice(hlo_builder* b, hlo_value x, const int64_t* start, const int64_t* limit,
                    const int64_t* strides) {
  if (!values_valid(b, &x, 1)) return HLO_INVALID;
  const hlo_type* in = hlo_type_of(b, x);
  hlo_type out = *in;
  for (int i = 0; i < in->rank; i++) {
    if (start[i] < 0 || limit[i] > in->dims[i] || start[i] > limit[i] || strides[i] < 1)
      return hlo_fail(b, TPU_INTERNAL, "slice [%lld:%lld:%lld] out of range for size %lld",
                      (long long)start[i], (long long)limit[i], (long long)strides[i],
                      (long long)in->dims[i]);
    out.dims[i] = (limit[i] - start[i] + strides[i] - 1) / strides[i];
  }
  if (hlo_type_equal(in, &out)) return x;
  char a1[200], a2[200], a3[200], attrs[640];
  attr_i64_array(a1, sizeof a1, "start_indices", start, in->rank);
  attr_i64_array(a2, sizeof a2, "limit_indices", limit, in->rank);
  attr_i64_array(a3, sizeof a3, "strides", strides, in->rank);
  snprintf(attrs, sizeof attrs, "%s, %s, %s", a1, a2, a3);
  return emit_op(b, "stablehlo.slice", &x, 1, attrs, out);
}

hlo_value hlo_dynamic_slice(hlo_builder* b, hlo_value x, const hlo_value* starts,
                            const int64_t* sizes) {
  if (!values_valid(b, &x, 1)) return HLO_INVALID;
  const hlo_type* in = hlo_type_of(b, x);
  hlo_value operands[1 + TPU_MAX_RANK];
  operands[0] = x;
  for (int i = 0; i < in->rank; i++) operands[1 + i] = starts[i];
  hlo_type out = hlo_type_make(in->dtype, in->rank, sizes);
  char attrs[256];
  attr_i64_array(attrs, sizeof attrs, "slice_sizes", sizes, in->rank);
  return emit_op(b, "stablehlo.dynamic_slice", operands, 1 + in->rank, attrs, out);
}

hlo_value hlo_dynamic_update_slice(hlo_builder* b, hlo_value x, hlo_value update,
                                   const hlo_value* starts) {
  if (!values_valid(b, &x, 1)) return HLO_INVALID;
  const hlo_type* in = hlo_type_of(b, x);
  hlo_value operands[2 + TPU_MAX_RANK];
  operands[0] = x;
  operands[1] = update;
  for (int i = 0; i < in->rank; i++) operands[2 + i] = starts[i];
  return emit_op(b, "stablehlo.dynamic_update_slice", operands, 2 + in->rank, NULL, *in);
}

hlo_value hlo_concatenate(hlo_builder* b, const hlo_value* xs, int count, int dimension) {
  if (count < 1) return hlo_fail(b, TPU_INTERNAL, "concatenate of no values");
  if (!values_valid(b, xs, count)) return HLO_INVALID;
  if (count == 1) return xs[0];
  hlo_type out = *hlo_type_of(b, xs[0]);
  out.dims[dimension] = 0;
  for (int i = 0; i < count; i++) out.dims[dimension] += hlo_type_of(b, xs[i])->dims[dimension];
  char attrs[64];
  snprintf(attrs, sizeof attrs, "dimension = %d : i64", dimension);
  return emit_op(b, "stablehlo.concatenate", xs, count, attrs, out);
}

hlo_value hlo_pad(hlo_builder* b, hlo_value x, hlo_value pad_value, const int64_t* low,
                  const int64_t* high, const int64_t* interior) {
  hlo_value operands[2] = {x, pad_value};
  if (!values_valid(b, operands, 2)) return HLO_INVALID;
  const hlo_type* in = hlo_type_of(b, x);
  hlo_type out = *in;
  for (int i = 0; i < in->rank; i++) {
    int64_t d = in->dims[i];
    out.dims[i] = low[i] + high[i] + d + (d > 0 ? (d - 1) * interior[i] : 0);
  }
  char a1[200], a2[200], a3[200], attrs[640];
  attr_i64_array(a1, sizeof a1, "edge_padding_low", low, in->rank);
  attr_i64_array(a2, sizeof a2, "edge_padding_high", high, in->rank);
  attr_i64_array(a3, sizeof a3, "interior_padding", interior, in->rank);
  snprintf(attrs, sizeof attrs, "%s, %s, %s", a1, a2, a3);
  return emit_op(b, "stablehlo.pad", operands, 2, attrs, out);
}

hlo_value hlo_reverse(hlo_builder* b, hlo_value x, const int64_t* dims, int count) {
  if (!values_valid(b, &x, 1)) return HLO_INVALID;
  if (count == 0) return x;
  char attrs[256];
  attr_i64_array(attrs, sizeof attrs, "dimensions", dims, count);
  return emit_op(b, "stablehlo.reverse", &x, 1, attrs, *hlo_type_of(b, x));
}
