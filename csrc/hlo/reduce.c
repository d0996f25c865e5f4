/* Reductions: reduce with a binary reducer, and argmax/argmin. */
#include <stdio.h>
#include <string.h>

#include "hlo/builder_impl.h"

/* XLA CPU splits a reduce over a dimension longer than 32 into a
 * reduce_window of 32 and a reduce (for precision) and runs that
 * reduce_window unfused, by scalar loops: a row sum over [1024, 128] took 4.5x
 * the time of the same sum folded as below, and a training step spends much
 * of its time in such reductions (softmax, layer norm, cross-entropy rows;
 * bias and norm weight gradients down columns). So a reduction over the
 * trailing dims (rows) or the leading ones (columns) of more than FOLD_WIDTH
 * elements is folded first: the reduced axis, flattened, is cut into at most
 * FOLD_WIDTH slices, which are combined elementwise (XLA fuses that with the
 * producer and vectorizes it), until a row is at most FOLD_WIDTH long and the
 * reduce sees that, or a column is one long and no reduce is left (XLA's
 * reduce down a column loops over it element by element, 10x slower than
 * folding). Each step combines at most 32 values into one, as XLA's split
 * does. */
enum { FOLD_WIDTH = 32 };

/* x with `axis` (n long) cut into `slices` slices of ceil(n / slices), the
 * last padded with init, combined elementwise. */
static hlo_value fold_axis(hlo_builder* b, hlo_value x, hlo_value init, int axis, int64_t slices,
                           hlo_combine_fn combine, const void* context) {
  if (!values_valid(b, &x, 1)) return HLO_INVALID;
  hlo_type in = *hlo_type_of(b, x);
  int64_t n = in.dims[axis], width = (n + slices - 1) / slices;
  int64_t zeros[TPU_MAX_RANK] = {0}, high[TPU_MAX_RANK] = {0}, start[TPU_MAX_RANK] = {0};
  int64_t limit[TPU_MAX_RANK], ones[TPU_MAX_RANK];
  for (int i = 0; i < in.rank; i++) ones[i] = 1;
  high[axis] = slices * width - n;
  if (high[axis] > 0) x = hlo_pad(b, x, init, zeros, high, zeros);
  memcpy(limit, in.dims, sizeof(int64_t) * (size_t)in.rank);
  hlo_value parts[FOLD_WIDTH];
  for (int64_t i = 0; i < slices; i++) {
    start[axis] = i * width;
    limit[axis] = start[axis] + width;
    parts[i] = hlo_slice(b, x, start, limit, ones);
  }
  /* Pairwise, not a chain: XLA CPU generates a combine whose code reads an
   * operand twice (its maximum does) by repeating that operand's code, so a
   * chain of 32 maxima took 100 s to compile, doubling with each slice. */
  for (int64_t count = slices; count > 1; count = (count + 1) / 2)
    for (int64_t i = 0; i < count / 2; i++) {
      parts[i] = combine(b, parts[2 * i], parts[2 * i + 1], context);
      if (count % 2 && i == count / 2 - 1) parts[i + 1] = parts[count - 1];
    }
  return parts[0];
}

static int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Whether `dims` names dims first..first+count-1 exactly. */
static bool names_run(const hlo_type* in, const int64_t* dims, int count, int first) {
  bool reduced[TPU_MAX_RANK] = {false};
  for (int i = 0; i < count; i++)
    if (dims[i] >= 0 && dims[i] < in->rank) reduced[dims[i]] = true;
  for (int i = first; i < first + count; i++)
    if (i < 0 || i >= in->rank || !reduced[i]) return false;
  return true;
}

hlo_value reduce_with_region(hlo_builder* b, hlo_value x, hlo_value init, const int64_t* dims,
                             int dim_count, hlo_combine_fn combine, const void* context) {
  hlo_value operands[2] = {x, init};
  if (!values_valid(b, operands, 2)) return HLO_INVALID;
  hlo_type in = *hlo_type_of(b, x);
  if (dim_count == 0) return x;
  bool rows = names_run(&in, dims, dim_count, in.rank - dim_count);
  bool columns = !rows && names_run(&in, dims, dim_count, 0);
  int kept = in.rank - dim_count;
  int64_t n = 1;
  for (int i = 0; i < dim_count; i++) n *= in.dims[rows ? kept + i : i];
  if ((rows || columns) && n > FOLD_WIDTH) {
    /* [kept..., n] for rows, [n, kept...] for columns. */
    int axis = rows ? kept : 0;
    int64_t shape[TPU_MAX_RANK];
    memcpy(shape + (rows ? 0 : 1), in.dims + (rows ? 0 : dim_count), sizeof(int64_t) * (size_t)kept);
    shape[axis] = n;
    /* Half floats fold in float32: XLA rounds each elementwise combine to
     * the operand type, where its own reduce accumulates wider. */
    tpu_dtype wide = tpu_dtype_compute(in.dtype);
    x = hlo_convert(b, hlo_reshape(b, x, kept + 1, shape), wide);
    init = hlo_convert(b, init, wide);
    hlo_value result;
    if (rows) {
      while (n > FOLD_WIDTH) {
        int64_t slices = min_i64((n + FOLD_WIDTH - 1) / FOLD_WIDTH, FOLD_WIDTH);
        x = fold_axis(b, x, init, axis, slices, combine, context);
        n = (n + slices - 1) / slices;
      }
      int64_t last = axis;
      result = reduce_with_region(b, x, init, &last, 1, combine, context);
    } else {
      while (n > 1) {
        int64_t slices = min_i64(n, FOLD_WIDTH);
        x = fold_axis(b, x, init, 0, slices, combine, context);
        n = (n + slices - 1) / slices;
      }
      result = hlo_reshape(b, x, kept, shape + 1);
    }
    return hlo_convert(b, result, in.dtype);
  }
  hlo_type out = {in.dtype, 0, {0}};
  for (int i = 0; i < in.rank; i++) {
    bool reduced = false;
    for (int j = 0; j < dim_count; j++) reduced = reduced || dims[j] == i;
    if (!reduced) out.dims[out.rank++] = in.dims[i];
  }
  hlo_type scalar = {in.dtype, 0, {0}};
  hlo_type arg_types[2] = {scalar, scalar};
  hlo_value args[2];
  region_begin(b, arg_types, 2, args);
  hlo_value r = combine(b, args[0], args[1], context);
  region_end(b, &r, 1);
  char attrs[256];
  attr_i64_array(attrs, sizeof attrs, "dimensions", dims, dim_count);
  return emit_op(b, "stablehlo.reduce", operands, 2, attrs, out);
}

static hlo_value combine_binary(hlo_builder* b, hlo_value x, hlo_value y, const void* op) {
  return hlo_binary(b, (const char*)op, x, y);
}

hlo_value hlo_reduce(hlo_builder* b, hlo_value x, hlo_value init, const char* reducer,
                     const int64_t* dims, int dim_count) {
  return reduce_with_region(b, x, init, dims, dim_count, combine_binary, reducer);
}

hlo_value hlo_reduce_all(hlo_builder* b, hlo_value x, hlo_value init, const char* reducer) {
  const hlo_type* t = hlo_type_of(b, x);
  if (!t || t->rank == 0) return x;
  int64_t all[TPU_MAX_RANK];
  for (int d = 0; d < t->rank; d++) all[d] = d;
  return hlo_reduce(b, x, init, reducer, all, t->rank);
}

/* Region deciding whether (a, ia) beats (b, ib): strictly better value, or a
 * NaN against a non-NaN, or a tie broken by the lower index. */
static void arg_reduce_region(hlo_builder* b, tpu_dtype dtype, bool is_max) {
  hlo_type s = {dtype, 0, {0}};
  hlo_type si = {TPU_I64, 0, {0}};
  hlo_type types[4] = {s, si, s, si};
  hlo_value a[4];
  region_begin(b, types, 4, a);
  hlo_value better = hlo_compare(b, is_max ? "GT" : "LT", a[0], a[2]);
  hlo_value tie = hlo_compare(b, "EQ", a[0], a[2]);
  if (tpu_dtype_is_float(dtype)) {
    hlo_value a_nan = hlo_compare(b, "NE", a[0], a[0]);
    hlo_value b_nan = hlo_compare(b, "NE", a[2], a[2]);
    better = hlo_binary(b, "or", better, hlo_binary(b, "and", a_nan, hlo_unary(b, "not", b_nan)));
    tie = hlo_binary(b, "or", tie, hlo_binary(b, "and", a_nan, b_nan));
  }
  hlo_value lower = hlo_compare(b, "LT", a[1], a[3]);
  hlo_value pick_a = hlo_binary(b, "or", better, hlo_binary(b, "and", tie, lower));
  hlo_value results[2] = {hlo_select(b, pick_a, a[0], a[2]), hlo_select(b, pick_a, a[1], a[3])};
  region_end(b, results, 2);
}

void hlo_arg_reduce(hlo_builder* b, hlo_value x, int dim, bool is_max, hlo_value* out_values,
                    hlo_value* out_indices) {
  *out_values = *out_indices = HLO_INVALID;
  if (!values_valid(b, &x, 1)) return;
  hlo_type in = *hlo_type_of(b, x);
  hlo_type index_type = in;
  index_type.dtype = TPU_I64;
  hlo_value indices = hlo_iota(b, index_type, dim);
  /* The init loses every comparison: worst value, largest index. */
  hlo_value init = hlo_constant_extreme(b, in.dtype, !is_max);
  hlo_value index_init = hlo_constant_i64(b, TPU_I64, INT64_MAX);
  arg_reduce_region(b, in.dtype, is_max);
  hlo_value operands[4] = {x, indices, init, index_init};
  if (!values_valid(b, operands, 4)) return;
  hlo_type out = {in.dtype, 0, {0}};
  for (int i = 0; i < in.rank; i++)
    if (i != dim) out.dims[out.rank++] = in.dims[i];
  hlo_type out_index = out;
  out_index.dtype = TPU_I64;
  hlo_type results[2] = {out, out_index};
  int64_t d = dim;
  char attrs[64];
  attr_i64_array(attrs, sizeof attrs, "dimensions", &d, 1);
  hlo_value first = new_results(b, results, 2);
  if (first == HLO_INVALID) return;
  emit_op_results(b, "stablehlo.reduce", operands, 4, attrs, results, 2, first);
  *out_values = first;
  *out_indices = first + 1;
}
