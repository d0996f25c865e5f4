/* Sorting: sort (argsort and msort are composite over it), topk,
 * kthvalue, median/nanmedian and mode along a dim, searching sorted sequences (searchsorted,
 * bucketize) and membership (isin). Each sorts values with their int64 positions,
 * stably, with NaN above every number as PyTorch orders it; their
 * backwards are scatters that indexing.c lowers. */
#include <math.h>
#include <string.h>

#include "hlo/reduce_extra_ops.h"
#include "hlo/slice_ops.h"
#include "hlo/sort_ops.h"
#include "ops/families.h"

/* The sorted values and indices of tensor argument 0 along `dim` (wrapped;
 * a 0-d tensor is sorted as one element). */
static void sort_arg(tpu_lowering* l, int64_t dim, bool descending, int* out_dim,
                     hlo_value* out_values, hlo_value* out_indices) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value x = tpu_lower_tensor(l, 0);
  hlo_type t = *hlo_type_of(b, x);
  if (t.rank == 0) {
    t.rank = 1;
    t.dims[0] = 1;
    x = hlo_reshape(b, x, 1, t.dims);
  }
  if (dim < -t.rank || dim >= t.rank) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::%s: dim %lld is out of range for a %d-d tensor",
                   tpu_lower_op_name(l), (long long)dim, t.rank);
    dim = 0;
  }
  *out_dim = (int)(dim < 0 ? dim + t.rank : dim);
  t.dtype = TPU_I64;
  hlo_value pair[2] = {x, hlo_iota(b, t, *out_dim)}, sorted[2];
  hlo_sort(b, pair, 2, *out_dim, descending, sorted);
  *out_values = sorted[0];
  *out_indices = sorted[1];
}

/* x[..., start:start + length, ...] along dim. */
static hlo_value take_along(hlo_builder* b, hlo_value x, int dim, int64_t start, int64_t length) {
  hlo_type t = *hlo_type_of(b, x);
  int64_t starts[TPU_MAX_RANK] = {0}, strides[TPU_MAX_RANK];
  for (int d = 0; d < t.rank; d++) strides[d] = 1;
  starts[dim] = start;
  t.dims[dim] = start + length;
  return hlo_slice(b, x, starts, t.dims, strides);
}

static void put_pair(tpu_lowering* l, hlo_value values, hlo_value indices) {
  tpu_lower_set_output(l, 0, values);
  tpu_lower_set_output(l, 1, indices);
}

/* Sets zero outputs when there is nothing to sort (or to keep); true then. */
static bool put_if_empty(tpu_lowering* l) {
  hlo_type x = tpu_lower_arg_type(l, 0), v = tpu_lower_output_type(l, 0);
  if (hlo_type_numel(&x) != 0 && hlo_type_numel(&v) != 0) return false;
  hlo_builder* b = tpu_lower_builder(l);
  put_pair(l, hlo_constant(b, v.dtype, 0), hlo_constant(b, TPU_I64, 0));
  return true;
}

/* sort(self, dim, descending) and sort.stable(self, stable, dim,
 * descending): always stable, which also satisfies stable=False. */
static tpu_status lower_sort(tpu_lowering* l) {
  if (put_if_empty(l)) return NULL;
  int at = strstr(tpu_lower_overload(l), "stable") ? 2 : 1;
  int dim;
  hlo_value values, indices;
  sort_arg(l, tpu_lower_int(l, at, -1), tpu_lower_bool(l, at + 1, false), &dim, &values, &indices);
  put_pair(l, values, indices);
  return NULL;
}

/* topk(self, k, dim, largest, sorted): the first k of a full sort, so
 * always sorted; ties keep their original order. */
static tpu_status lower_topk(tpu_lowering* l) {
  if (put_if_empty(l)) return NULL;
  hlo_builder* b = tpu_lower_builder(l);
  int64_t k = tpu_lower_int(l, 1, 1);
  int dim;
  hlo_value values, indices;
  sort_arg(l, tpu_lower_int(l, 2, -1), tpu_lower_bool(l, 3, true), &dim, &values, &indices);
  put_pair(l, take_along(b, values, dim, 0, k), take_along(b, indices, dim, 0, k));
  return NULL;
}

/* kthvalue(self, k, dim, keepdim): the k-th smallest (1-based). */
static tpu_status lower_kthvalue(tpu_lowering* l) {
  if (put_if_empty(l)) return NULL;
  hlo_builder* b = tpu_lower_builder(l);
  int64_t k = tpu_lower_int(l, 1, 1);
  int dim;
  hlo_value values, indices;
  sort_arg(l, tpu_lower_int(l, 2, -1), false, &dim, &values, &indices);
  int64_t n = hlo_type_of(b, values)->dims[dim];
  if (k < 1 || k > n) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT,
                   "aten::kthvalue: k = %lld is out of range for %lld values", (long long)k,
                   (long long)n);
    return NULL;
  }
  put_pair(l, take_along(b, values, dim, k - 1, 1), take_along(b, indices, dim, k - 1, 1));
  return NULL;
}

/* median(self) and median.dim(self, dim, keepdim), and nanmedian's:
 * the lower median, the ((n - 1) / 2)-th smallest, along dim (of every
 * value when there is none), with its index. median gives NaN, at the
 * first NaN's index, for a slice holding one; nanmedian leaves NaN out
 * (an all-NaN slice gives NaN). Ties give the first index in the input's
 * order, where the CPU's selection may give another. The position is per
 * slice, so it is picked by comparison with the sorted positions. */
static tpu_status lower_median(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  bool along_dim = tpu_lower_output_count(l) == 2, skip_nan = !strcmp(tpu_lower_op_name(l), "nanmedian");
  hlo_type out = tpu_lower_output_type(l, 0), in = tpu_lower_arg_type(l, 0);
  int64_t numel = hlo_type_numel(&in);
  if (numel == 0 || hlo_type_numel(&out) == 0) {
    tpu_lower_set_output(l, 0, hlo_constant(b, out.dtype, tpu_dtype_is_float(out.dtype) ? NAN : 0));
    if (along_dim) tpu_lower_set_output(l, 1, hlo_constant(b, TPU_I64, 0));
    return NULL;
  }
  hlo_value x = tpu_lower_tensor(l, 0);
  int64_t dim = along_dim ? tpu_lower_int(l, 1, -1) : 0;
  if (!along_dim || in.rank == 0) {
    x = hlo_reshape(b, x, 1, &numel);
    dim = 0;
  }
  hlo_type t = *hlo_type_of(b, x);
  if (dim < 0) dim += t.rank;
  int64_t n = t.dims[dim];
  t.dtype = TPU_I64;
  hlo_value pair[2] = {x, hlo_iota(b, t, (int)dim)}, sorted[2];
  hlo_sort(b, pair, 2, (int)dim, false, sorted);
  hlo_value count = hlo_reduce(b, hlo_convert(b, hlo_compare(b, "EQ", x, x), TPU_I64), hlo_constant(b, TPU_I64, 0),
                               "add", &dim, 1);
  hlo_value middle = hlo_constant_like(b, count, (double)((n - 1) / 2)), pos;
  if (skip_nan)
    pos = hlo_select(b, hlo_compare(b, "EQ", count, hlo_constant_like(b, count, 0)), middle,
                     hlo_binary(b, "divide", hlo_binary(b, "subtract", count, hlo_constant_like(b, count, 1)),
                                hlo_constant_like(b, count, 2)));
  else
    pos = hlo_select(b, hlo_compare(b, "LT", count, hlo_constant_like(b, count, (double)n)), count, middle);
  int64_t kept[TPU_MAX_RANK];
  for (int d = 0, k = 0; d < t.rank; d++)
    if (d != dim) kept[k++] = d;
  hlo_value at = hlo_compare(b, "EQ", hlo_iota(b, t, (int)dim), hlo_broadcast_in_dim(b, pos, t.rank, t.dims, kept));
  hlo_value value = hlo_reduce(b, hlo_select(b, at, sorted[0], hlo_constant_like(b, sorted[0], 0)),
                               hlo_constant(b, hlo_type_of(b, sorted[0])->dtype, 0), "add", &dim, 1);
  tpu_lower_set_output(l, 0, value);
  if (along_dim)
    tpu_lower_set_output(l, 1, hlo_reduce(b, hlo_select(b, at, sorted[1], hlo_constant_like(b, sorted[1], 0)),
                                          hlo_constant(b, TPU_I64, 0), "add", &dim, 1));
  return NULL;
}

/* mode(self, dim, keepdim): the most frequent value along dim (the
 * smallest of equally frequent ones) and the last index holding it, as
 * PyTorch's CPU kernel picks them from the stably sorted slice: each run of
 * equal sorted values is measured at its end from its start (a running max
 * of start positions), and the first longest run wins. */
static tpu_status lower_mode(tpu_lowering* l) {
  hlo_type in = tpu_lower_arg_type(l, 0);
  int64_t wanted = tpu_lower_int(l, 1, -1), reduced = wanted < 0 ? wanted + in.rank : wanted;
  if (in.rank > 0 && reduced >= 0 && reduced < in.rank && in.dims[reduced] == 0) {
    tpu_lower_fail(l, TPU_OUT_OF_RANGE, "mode(): Expected reduction dim %lld to have non-zero size.",
                   (long long)reduced);
    return NULL;
  }
  if (put_if_empty(l)) return NULL;
  hlo_builder* b = tpu_lower_builder(l);
  int dim;
  hlo_value values, indices;
  sort_arg(l, tpu_lower_int(l, 1, -1), false, &dim, &values, &indices);
  hlo_type t = *hlo_type_of(b, values), positions = t, edge = t;
  int64_t n = t.dims[dim], d = dim;
  positions.dtype = TPU_I64;
  edge.dtype = TPU_BOOL;
  edge.dims[dim] = 1;
  hlo_value pos = hlo_iota(b, positions, dim), starts = hlo_filled(b, TPU_BOOL, t.rank, t.dims, 1), ends = starts;
  if (n > 1) {
    hlo_value changes = hlo_compare(b, "NE", take_along(b, values, dim, 1, n - 1), take_along(b, values, dim, 0, n - 1));
    hlo_value first = hlo_filled(b, TPU_BOOL, edge.rank, edge.dims, 1);
    starts = hlo_concatenate(b, (hlo_value[]){first, changes}, 2, dim);
    ends = hlo_concatenate(b, (hlo_value[]){changes, first}, 2, dim);
  }
  hlo_value zero = hlo_constant_like(b, pos, 0);
  hlo_value start = hlo_cumulative(b, hlo_select(b, starts, pos, zero), hlo_constant(b, TPU_I64, 0), "maximum", dim);
  hlo_value length = hlo_select(b, ends, hlo_binary(b, "subtract", pos, start), hlo_constant_like(b, pos, -1));
  int64_t kept[TPU_MAX_RANK];
  for (int i = 0, k = 0; i < t.rank; i++)
    if (i != dim) kept[k++] = i;
  hlo_value longest = hlo_reduce(b, length, hlo_constant(b, TPU_I64, -1), "maximum", &d, 1);
  hlo_value winner = hlo_compare(b, "EQ", length, hlo_broadcast_in_dim(b, longest, t.rank, t.dims, kept));
  hlo_value first_end = hlo_reduce(b, hlo_select(b, winner, pos, hlo_constant_like(b, pos, (double)n)),
                                   hlo_constant(b, TPU_I64, (double)n), "minimum", &d, 1);
  hlo_value at = hlo_reshape(b, first_end, edge.rank, edge.dims);
  put_pair(l, hlo_gather_elements(b, values, dim, at), hlo_gather_elements(b, indices, dim, at));
  return NULL;
}

/* searchsorted(sorted_sequence, self, out_int32, right, side, sorter) and
 * bucketize(self, boundaries, out_int32, right): for each value, how many
 * boundaries (along the sequence's last dim) lie before it, "< value" or,
 * for right, "<= value", counted with one comparison per pair: XLA has no
 * binary search, and the count is what the search finds in a sorted
 * sequence. The count does not depend on the boundaries' order, so a
 * sorter (the order that sorts the sequence) changes nothing and is not
 * read (nor are its indices checked, as the CPU does). A NaN value lands
 * past every boundary, as the CPU's search does; for sequences holding
 * NaN the CPU's search and the count may differ. */
static tpu_status lower_searchsorted(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  bool bucketize = strcmp(tpu_lower_op_name(l), "bucketize") == 0;
  int seq_at = bucketize ? 1 : 0, value_at = bucketize ? 0 : 1;
  bool right = tpu_lower_bool(l, 3, false);
  const char* side = bucketize ? NULL : tpu_lower_string(l, 4, NULL);
  if (side) right = strcmp(side, "right") == 0;
  hlo_type seq_type = tpu_lower_arg_type(l, seq_at), out = tpu_lower_output_type(l, 0);
  hlo_value seq = tpu_lower_tensor(l, seq_at);
  hlo_value x = tpu_lower_value(l, value_at, seq_type.dtype);
  int r = out.rank;
  int64_t m = seq_type.dims[seq_type.rank - 1]; /* PyTorch's meta function wants a 1-d or wider sequence */
  int64_t pairs[TPU_MAX_RANK], x_dims[TPU_MAX_RANK], seq_dims[TPU_MAX_RANK];
  for (int d = 0; d < r; d++) {
    pairs[d] = out.dims[d];
    x_dims[d] = d;
  }
  pairs[r] = m;
  for (int d = 0; d + 1 < seq_type.rank; d++) seq_dims[d] = d; /* batched: the values' leading dims */
  seq_dims[seq_type.rank - 1] = r;
  hlo_value before = hlo_compare(b, right ? "LE" : "LT", hlo_broadcast_in_dim(b, seq, r + 1, pairs, seq_dims),
                                 hlo_broadcast_in_dim(b, x, r + 1, pairs, x_dims));
  int64_t last = r;
  hlo_value count = hlo_reduce(b, hlo_convert(b, before, TPU_I64), hlo_constant(b, TPU_I64, 0), "add", &last, 1);
  hlo_value past_all = hlo_filled(b, TPU_I64, r, out.dims, (double)m);
  tpu_lower_set_output(l, 0, hlo_select(b, hlo_compare(b, "NE", x, x), past_all, count));
  return NULL;
}

/* isin(elements, test_elements, assume_unique, invert), either side a
 * tensor or a scalar: whether each element equals some test element, both
 * in their promoted dtype (NaN equals nothing). One comparison per pair,
 * reduced by `or`, as XLA has no hash set. */
static tpu_status lower_isin(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  static const int both[2] = {0, 1};
  tpu_dtype t = tpu_lower_result_type(l, both, 2);
  hlo_type out = tpu_lower_output_type(l, 0);
  hlo_value x = tpu_lower_value(l, 0, t), tests = tpu_lower_value(l, 1, t);
  int64_t n = hlo_type_numel(hlo_type_of(b, tests)), pairs[TPU_MAX_RANK + 1], x_dims[TPU_MAX_RANK];
  tests = hlo_reshape(b, tests, 1, &n);
  for (int d = 0; d < out.rank; d++) {
    pairs[d] = out.dims[d];
    x_dims[d] = d;
  }
  pairs[out.rank] = n;
  int64_t last = out.rank;
  hlo_value equal = hlo_compare(b, "EQ", hlo_broadcast_in_dim(b, x, out.rank + 1, pairs, x_dims),
                                hlo_broadcast_in_dim(b, tests, out.rank + 1, pairs, &last));
  hlo_value found = hlo_reduce(b, equal, hlo_constant(b, TPU_BOOL, 0), "or", &last, 1);
  tpu_lower_set_output(l, 0, tpu_lower_bool(l, 3, false) ? hlo_unary(b, "not", found) : found);
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"bucketize", lower_searchsorted, 0},
    {"isin", lower_isin, 0},
    {"kthvalue", lower_kthvalue, 0},
    {"median", lower_median, 0},
    {"mode", lower_mode, 0},
    {"nanmedian", lower_median, 0},
    {"searchsorted", lower_searchsorted, 0},
    {"sort", lower_sort, 0},
    {"topk", lower_topk, 0},
};

TPU_OP_FAMILY(tpu_ops_sort, entries);
