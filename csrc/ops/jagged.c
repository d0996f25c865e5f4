/* Jagged (packed) rows to and from a padded batch: the two kernels under
 * PyTorch's jagged nested tensors (torch.nested with layout=torch.jagged).
 *
 * A jagged tensor is `values` [N, D..] and `offsets` [B + 1]: row b is
 * values[offsets[b] : offsets[b + 1]]. Its padded form is [B, S, D..].
 *
 * _jagged_to_padded_dense_forward(values, offsets[], max_lengths[],
 * padding_value) -> [B, S, D..], S = max_lengths[0]: row b's first
 * min(length, S) entries, padding_value after them (rows longer than S are
 * cut, as on CPU and CUDA). One gather of values at offsets[b] + s.
 *
 * _padded_dense_to_jagged_forward(dense, offsets[], total_L) -> [T, D..]:
 * the other way, entry s < length of dense row b written at offsets[b] + s
 * by one scatter. T is the output's length: total_L, or, when it is absent,
 * offsets[-1] read back by the glue (torch_tpu/csrc/nested.cpp), which then
 * also checks that no row is longer than S, as the CPU does. Given total_L,
 * nothing is read back (as on CUDA): the entries of a row past S, and any
 * position no row covers, are zero.
 *
 * Both take one jagged dim, as PyTorch's CPU and CUDA kernels do, int32 or
 * int64 offsets, and values of any real or bool dtype (the CPU kernels take no
 * complex ones). */
#include "hlo/slice_ops.h"
#include "ops/families.h"

/* The row positions of a [B, S] batch: starts (offsets[b], broadcast along
 * s) plus s, and whether s lies inside row b (s < offsets[b + 1] -
 * offsets[b]) and its position inside [0, limit). */
static void row_positions(hlo_builder* b, hlo_value offsets, int64_t batch, int64_t width, int64_t limit,
                          hlo_value* out_positions, hlo_value* out_inside) {
  int64_t grid[2] = {batch, width}, along_batch = 0, one = 1, first = 0;
  int64_t end = batch, last = batch + 1;
  offsets = hlo_convert(b, offsets, TPU_I64);
  hlo_value starts = hlo_slice(b, offsets, &first, &end, &one);
  hlo_value ends = hlo_slice(b, offsets, &one, &last, &one);
  hlo_value lengths = hlo_subtract(b, ends, starts);
  hlo_value s = hlo_iota(b, hlo_type_make(TPU_I64, 2, grid), 1);
  hlo_value positions = hlo_add(b, hlo_broadcast_in_dim(b, starts, 2, grid, &along_batch), s);
  hlo_value inside = hlo_compare(b, "LT", s, hlo_broadcast_in_dim(b, lengths, 2, grid, &along_batch));
  inside = hlo_binary(b, "and", inside, hlo_compare_constant(b, "GE", positions, 0));
  inside = hlo_binary(b, "and", inside, hlo_compare_constant(b, "LT", positions, (double)limit));
  *out_positions = positions;
  *out_inside = inside;
}

/* The one offsets tensor of argument 1, checked: 1-d, integer, not empty.
 * HLO_INVALID after a recorded error naming `data` (the op's argument 0). */
static hlo_value one_offsets(tpu_lowering* l, const hlo_type* data, const char* data_name) {
  char shape[96], offsets_shape[96] = "[]";
  hlo_shape_print(data, shape, sizeof shape);
  int count = tpu_lower_tensor_list_count(l, 1);
  hlo_type ot = count > 0 ? tpu_lower_tensor_list_type(l, 1, 0) : hlo_type_make(TPU_I64, 0, NULL);
  if (count > 0) hlo_shape_print(&ot, offsets_shape, sizeof offsets_shape);
  if (count != 1)
    return tpu_lower_fail(l, TPU_UNIMPLEMENTED,
                          "aten::%s: only one jagged dim is supported (as on CPU and CUDA), got %d offsets "
                          "tensors for %s of shape %s",
                          tpu_lower_op_name(l), count, data_name, shape);
  if (ot.rank != 1 || ot.dims[0] < 1 || !tpu_dtype_is_integral(ot.dtype))
    return tpu_lower_fail(l, TPU_INVALID_ARGUMENT,
                          "aten::%s: expected 1-d integer offsets with at least one entry, got %s of shape %s "
                          "for %s of shape %s",
                          tpu_lower_op_name(l), tpu_dtype_name(ot.dtype), offsets_shape, data_name, shape);
  hlo_value offsets = HLO_INVALID;
  tpu_lower_tensor_list(l, 1, &offsets, 1);
  return offsets;
}

static tpu_status lower_jagged_to_padded(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type vt = tpu_lower_arg_type(l, 0), out = tpu_lower_output_type(l, 0);
  const int64_t* max_lengths = NULL;
  int lengths = tpu_lower_int_list(l, 2, &max_lengths);
  char shape[96];
  hlo_shape_print(&vt, shape, sizeof shape);
  if (lengths != 1) {
    tpu_lower_fail(l, TPU_UNIMPLEMENTED,
                   "aten::_jagged_to_padded_dense_forward: only one jagged dim is supported (as on CPU and "
                   "CUDA), got %d max_lengths for values of shape %s",
                   lengths, shape);
    return NULL;
  }
  if (vt.rank < 1 || out.rank != vt.rank + 1) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT,
                   "aten::_jagged_to_padded_dense_forward: expected values of at least 1 dim, got shape %s",
                   shape);
    return NULL;
  }
  hlo_value offsets = one_offsets(l, &vt, "values");
  if (offsets == HLO_INVALID) return NULL;
  int64_t batch = out.dims[0], width = out.dims[1];
  hlo_value padding = hlo_constant(b, out.dtype, tpu_lower_float(l, 3, 0.0));
  if (hlo_type_numel(&out) == 0 || hlo_type_numel(&vt) == 0) {
    tpu_lower_set_output(l, 0, hlo_broadcast_in_dim(b, padding, out.rank, out.dims, NULL));
    return NULL;
  }
  hlo_value positions, inside;
  row_positions(b, offsets, batch, width, vt.dims[0], &positions, &inside);
  hlo_value rows = hlo_take(b, tpu_lower_tensor(l, 0), 0, positions);
  int64_t grid_dims[2] = {0, 1};
  inside = hlo_broadcast_in_dim(b, inside, out.rank, out.dims, grid_dims);
  hlo_value padded = hlo_select(b, inside, rows, hlo_broadcast_in_dim(b, padding, out.rank, out.dims, NULL));
  tpu_lower_set_output(l, 0, padded);
  return NULL;
}

static tpu_status lower_padded_to_jagged(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type dt = tpu_lower_arg_type(l, 0), out = tpu_lower_output_type(l, 0);
  char shape[96];
  hlo_shape_print(&dt, shape, sizeof shape);
  if (dt.rank < 2 || out.rank != dt.rank - 1) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT,
                   "aten::_padded_dense_to_jagged_forward: expected padded of at least 2 dims, got shape %s", shape);
    return NULL;
  }
  hlo_value offsets = one_offsets(l, &dt, "padded");
  if (offsets == HLO_INVALID) return NULL;
  int64_t batch = tpu_lower_tensor_list_type(l, 1, 0).dims[0] - 1, width = dt.dims[1];
  if (batch > dt.dims[0]) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT,
                   "aten::_padded_dense_to_jagged_forward: %lld offsets describe %lld rows, but padded of shape "
                   "%s has %lld",
                   (long long)(batch + 1), (long long)batch, shape, (long long)dt.dims[0]);
    return NULL;
  }
  hlo_value values = hlo_filled(b, out.dtype, out.rank, out.dims, 0);
  if (hlo_type_numel(&out) == 0 || batch * width == 0) {
    tpu_lower_set_output(l, 0, values);
    return NULL;
  }
  hlo_value dense = tpu_lower_tensor(l, 0);
  if (batch < dt.dims[0]) dense = hlo_slice_dim(b, dense, 0, 0, batch);
  hlo_value positions, inside;
  row_positions(b, offsets, batch, width, out.dims[0], &positions, &inside);
  /* Entries outside their row go to position T, past the end: the
   * scatter skips them. */
  positions = hlo_select(b, inside, positions, hlo_constant_like(b, positions, (double)out.dims[0]));
  tpu_lower_set_output(l, 0, hlo_put(b, values, 0, positions, dense, NULL));
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"_jagged_to_padded_dense_forward", lower_jagged_to_padded, 0},
    {"_padded_dense_to_jagged_forward", lower_padded_to_jagged, 0},
};

TPU_OP_FAMILY(tpu_ops_jagged, entries);
