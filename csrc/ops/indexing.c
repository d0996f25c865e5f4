/* Indexing and shape lowerings: cat, index_select, gather, the scatter
 * family, index_add/copy/fill/reduce, take, put, masked_fill, masked_scatter,
 * masked_select, nonzero, flip, roll, channel_shuffle, tril/triu and their indices,
 * constant_pad_nd, narrow_copy, and advanced indexing (index.Tensor,
 * index_put_). */
#include <string.h>

#include "hlo/reduce_extra_ops.h"
#include "hlo/slice_ops.h"
#include "hlo/sort_ops.h"
#include "ops/families.h"

#define MAX_CAT 1024

static int wrap_dim(int64_t dim, int rank) {
  int n = rank > 0 ? rank : 1; /* a 0-d tensor accepts dim 0 and -1 */
  return (int)(dim < 0 ? dim + n : dim);
}

static hlo_value at_least_1d(hlo_builder* b, hlo_value x) {
  int64_t one = 1;
  return hlo_type_of(b, x)->rank > 0 ? x : hlo_reshape(b, x, 1, &one);
}

static bool is_mask_dtype(tpu_dtype t) { return t == TPU_BOOL || t == TPU_U8; }

/* The output filled with zeros: the result of an op with nothing to read. */
static void set_empty_output(tpu_lowering* l) {
  tpu_lower_set_output(l, 0, hlo_constant(tpu_lower_builder(l), tpu_lower_output_type(l, 0).dtype, 0));
}

/* cat(tensors, dim): converted to the output's (promoted) dtype. Legacy
 * empty 1-d tensors of any rank are skipped, as in PyTorch. */
static tpu_status lower_cat(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type out = tpu_lower_output_type(l, 0);
  int dim = wrap_dim(tpu_lower_int(l, 1, 0), out.rank);
  int n = tpu_lower_tensor_list_count(l, 0);
  if (n > MAX_CAT) {
    tpu_lower_fail(l, TPU_UNIMPLEMENTED, "aten::cat: %d tensors; at most %d are supported", n, MAX_CAT);
    return NULL;
  }
  hlo_value all[MAX_CAT], items[MAX_CAT];
  tpu_lower_tensor_list(l, 0, all, n);
  int kept = 0;
  for (int i = 0; i < n; i++) {
    hlo_type t = tpu_lower_tensor_list_type(l, 0, i);
    if (hlo_type_numel(&t) == 0) continue;
    items[kept++] = hlo_convert(b, all[i], out.dtype);
  }
  if (kept == 0)
    set_empty_output(l);
  else
    tpu_lower_set_output(l, 0, hlo_concatenate(b, items, kept, dim));
  return NULL;
}

/* An integer index as i64 into a dim of `size`, negative entries
 * counting from the end. */
static hlo_value wrap_index(hlo_builder* b, hlo_value index, int64_t size) {
  index = hlo_convert(b, index, TPU_I64);
  hlo_value negative = hlo_compare(b, "LT", index, hlo_constant_like(b, index, 0));
  hlo_value wrapped = hlo_binary(b, "add", index, hlo_constant_like(b, index, (double)size));
  return hlo_select(b, negative, wrapped, index);
}

/* Index argument `arg` flattened and wrapped into a dim of `size`. */
static hlo_value flat_index(tpu_lowering* l, int arg, int64_t size) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type t = tpu_lower_arg_type(l, arg);
  int64_t n = hlo_type_numel(&t);
  return wrap_index(b, hlo_reshape(b, tpu_lower_tensor(l, arg), 1, &n), size);
}

/* index_select(self, dim, index). */
static tpu_status lower_index_select(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value x = at_least_1d(b, tpu_lower_tensor(l, 0));
  hlo_type xt = *hlo_type_of(b, x);
  int dim = wrap_dim(tpu_lower_int(l, 1, 0), xt.rank);
  hlo_type it = tpu_lower_arg_type(l, 2);
  if (hlo_type_numel(&xt) == 0 || hlo_type_numel(&it) == 0) {
    set_empty_output(l);
    return NULL;
  }
  tpu_lower_set_output(l, 0, hlo_take(b, x, dim, flat_index(l, 2, xt.dims[dim])));
  return NULL;
}

/* take(self, index): self flattened, read at index (shaped like index). */
static tpu_status lower_take(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type xt = tpu_lower_arg_type(l, 0), it = tpu_lower_arg_type(l, 1);
  int64_t n = hlo_type_numel(&xt);
  if (n == 0 || hlo_type_numel(&it) == 0) {
    set_empty_output(l);
    return NULL;
  }
  hlo_value flat = hlo_reshape(b, tpu_lower_tensor(l, 0), 1, &n);
  tpu_lower_set_output(l, 0, hlo_take(b, flat, 0, flat_index(l, 1, n)));
  return NULL;
}

/* index_add(self, dim, index, source, alpha), index_copy(self, dim, index,
 * source), index_fill(self, dim, index, value): slices of self along dim
 * at index get source's slices added, copied, or the value. */
static tpu_status lower_index_update(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  const char* op = tpu_lower_op_name(l);
  hlo_value x = at_least_1d(b, tpu_lower_tensor(l, 0));
  hlo_type xt = *hlo_type_of(b, x);
  int dim = wrap_dim(tpu_lower_int(l, 1, 0), xt.rank);
  hlo_type it = tpu_lower_arg_type(l, 2);
  hlo_type ut = xt;
  ut.dims[dim] = hlo_type_numel(&it);
  if (hlo_type_numel(&ut) == 0) {
    tpu_lower_set_output(l, 0, x);
    return NULL;
  }
  hlo_value updates;
  if (strcmp(op, "index_fill") == 0) {
    hlo_value value = tpu_lower_single(l, 3, xt.dtype);
    updates = hlo_broadcast_in_dim(b, value, ut.rank, ut.dims, NULL);
  } else {
    updates = hlo_reshape(b, hlo_convert(b, tpu_lower_tensor(l, 3), xt.dtype), ut.rank, ut.dims);
  }
  bool add = strcmp(op, "index_add") == 0;
  if (add && !tpu_lower_is_none(l, 4))
    updates = hlo_binary(b, "multiply", updates, tpu_lower_value_as(l, 4, &ut));
  tpu_lower_set_output(l, 0, hlo_put(b, x, dim, flat_index(l, 2, xt.dims[dim]), updates,
                                     add ? "add" : NULL));
  return NULL;
}

/* The flat positions of a flat mask's first `count` true entries, in
 * order: a stable sort by "not selected" brings them to the front. */
static hlo_value true_positions(hlo_builder* b, hlo_value flat_mask, int64_t count) {
  int64_t n = hlo_type_of(b, flat_mask)->dims[0];
  hlo_value pair[2] = {hlo_convert(b, hlo_unary(b, "not", flat_mask), TPU_I32),
                       hlo_iota(b, hlo_type_make(TPU_I64, 1, &n), 0)};
  hlo_value sorted[2];
  hlo_sort(b, pair, 2, 0, false, sorted);
  return hlo_slice(b, sorted[1], (int64_t[]){0}, &count, (int64_t[]){1});
}

/* Data-dependent lengths: the glue counts the selected elements on the
 * device first (one sync), then calls these with that count as an extra
 * last argument, so each length keys a program of its own. */

/* masked_select(self, mask, count): self's elements where mask is true,
 * both broadcast to one shape, in row-major order. */
static tpu_status lower_masked_select(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type out = tpu_lower_output_type(l, 0);
  hlo_type shape = tpu_lower_broadcast_type(l, (int[]){0, 1}, 2, out.dtype);
  int64_t n = hlo_type_numel(&shape);
  if (out.dims[0] == 0) {
    set_empty_output(l);
    return NULL;
  }
  hlo_value x = hlo_reshape(b, tpu_lower_value_as(l, 0, &shape), 1, &n);
  shape.dtype = TPU_BOOL;
  hlo_value mask = hlo_reshape(b, tpu_lower_value_as(l, 1, &shape), 1, &n);
  tpu_lower_set_output(l, 0, hlo_take(b, x, 0, true_positions(b, mask, out.dims[0])));
  return NULL;
}

/* The coordinates ([count, rank] int64) of x's first `count` nonzero
 * elements in row-major order; count at most x's size. */
static hlo_value nonzero_coordinates(hlo_builder* b, hlo_value x, int64_t count) {
  hlo_type xt = *hlo_type_of(b, x);
  int64_t n = hlo_type_numel(&xt), column[2] = {count, 1};
  hlo_value flat_x = hlo_reshape(b, x, 1, &n);
  hlo_value flat = true_positions(b, hlo_compare(b, "NE", flat_x, hlo_constant_like(b, flat_x, 0)), count);
  hlo_value coords[TPU_MAX_RANK];
  int64_t stride = 1;
  for (int d = xt.rank - 1; d >= 0; d--) {
    hlo_value c = hlo_binary(b, "divide", flat, hlo_constant_like(b, flat, (double)stride));
    c = hlo_binary(b, "remainder", c, hlo_constant_like(b, c, (double)xt.dims[d]));
    coords[d] = hlo_reshape(b, c, 2, column);
    stride *= xt.dims[d];
  }
  return hlo_concatenate(b, coords, xt.rank, 1);
}

/* nonzero(self, count) -> (count, rank) int64: the coordinates of self's
 * nonzero elements in row-major order. */
static tpu_status lower_nonzero(tpu_lowering* l) {
  hlo_type out = tpu_lower_output_type(l, 0);
  if (hlo_type_numel(&out) == 0) {
    set_empty_output(l);
    return NULL;
  }
  tpu_lower_set_output(l, 0, nonzero_coordinates(tpu_lower_builder(l), tpu_lower_tensor(l, 0), out.dims[0]));
  return NULL;
}

/* nonzero_static(self, size, fill_value) -> (size, rank) int64: nonzero's
 * first `size` rows, rows past the count holding fill_value; no sync, as
 * its shape is known. */
static tpu_status lower_nonzero_static(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type xt = tpu_lower_arg_type(l, 0), out = tpu_lower_output_type(l, 0);
  int64_t n = hlo_type_numel(&xt), found = out.dims[0] < n ? out.dims[0] : n;
  if (hlo_type_numel(&out) == 0) {
    set_empty_output(l);
    return NULL;
  }
  hlo_value fill = hlo_filled(b, TPU_I64, out.rank, out.dims, (double)tpu_lower_int(l, 2, -1));
  if (found == 0) {
    tpu_lower_set_output(l, 0, fill);
    return NULL;
  }
  hlo_value x = tpu_lower_tensor(l, 0);
  hlo_type rows = out;
  rows.dims[0] = found;
  hlo_value coords = nonzero_coordinates(b, x, found);
  hlo_value flat_x = hlo_reshape(b, x, 1, &n);
  hlo_value count = hlo_reduce(b, hlo_convert(b, hlo_compare(b, "NE", flat_x, hlo_constant_like(b, flat_x, 0)), TPU_I64),
                               hlo_constant(b, TPU_I64, 0), "add", (int64_t[]){0}, 1);
  hlo_value real_row = hlo_compare(b, "LT", hlo_iota(b, rows, 0), hlo_broadcast_in_dim(b, count, rows.rank, rows.dims, NULL));
  coords = hlo_select(b, real_row, coords, hlo_slice(b, fill, (int64_t[]){0, 0}, rows.dims, (int64_t[]){1, 1}));
  if (found < out.dims[0]) {
    hlo_value parts[2] = {coords, hlo_slice(b, fill, (int64_t[]){found, 0}, out.dims, (int64_t[]){1, 1})};
    coords = hlo_concatenate(b, parts, 2, 0);
  }
  tpu_lower_set_output(l, 0, coords);
  return NULL;
}

/* repeat_interleave(repeats, total) -> [total]: each index i repeated
 * repeats[i] times, in order. A 1 is added where each index's run ends
 * (the running total of repeats; repeats of 0 add at the same place), and
 * the running sum of those marks is the index. */
static tpu_status lower_repeat_interleave(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type rt = tpu_lower_arg_type(l, 0);
  int64_t n = hlo_type_numel(&rt), total = tpu_lower_output_type(l, 0).dims[0], marked = total + 1;
  if (total == 0 || n == 0) {
    set_empty_output(l);
    return NULL;
  }
  hlo_value repeats = hlo_reshape(b, tpu_lower_value(l, 0, TPU_I64), 1, &n);
  hlo_value ends = hlo_cumulative(b, repeats, hlo_constant(b, TPU_I64, 0), "add", 0);
  hlo_value zero = hlo_constant(b, TPU_I64, 0), ones = hlo_filled(b, TPU_I64, 1, &(int64_t){n - 1}, 1);
  hlo_value marks = hlo_put(b, hlo_broadcast_in_dim(b, zero, 1, &marked, NULL), 0, hlo_slice_dim(b, ends, 0, 0, n - 1), ones, "add");
  tpu_lower_set_output(l, 0, hlo_cumulative(b, hlo_slice_dim(b, marks, 0, 0, total), zero, "add", 0));
  return NULL;
}

/* torch.unique and torch.unique_consecutive: a value starts a group where
 * it differs from the one before (NaN differs from NaN, as on PyTorch's
 * CPU); the group starts give the values and, apart, the counts; each
 * element's group number, put back at its place, the inverse. unique sorts
 * first, with each value's position. Outputs not asked for are empty. */
static tpu_status lower_groups(tpu_lowering* l, bool sort) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type xt = tpu_lower_arg_type(l, 0), inverse = tpu_lower_output_type(l, 1);
  int64_t n = hlo_type_numel(&xt), count = tpu_lower_output_type(l, 0).dims[0], one = 1;
  if (count == 0) {
    for (int k = 0; k < 3; k++) tpu_lower_set_output(l, k, hlo_constant(b, tpu_lower_output_type(l, k).dtype, 0));
    return NULL;
  }
  hlo_value given[2] = {hlo_reshape(b, tpu_lower_tensor(l, 0), 1, &n), hlo_iota(b, hlo_type_make(TPU_I64, 1, &n), 0)};
  hlo_value order[2] = {given[0], given[1]};
  if (sort) hlo_sort(b, given, 2, 0, false, order);
  hlo_value starts_group[2] = {hlo_filled(b, TPU_BOOL, 1, &one, 1),
                               hlo_compare(b, "NE", hlo_slice_dim(b, order[0], 0, 1, n),
                                           hlo_slice_dim(b, order[0], 0, 0, n - 1))};
  hlo_value first = hlo_concatenate(b, starts_group, 2, 0);
  hlo_value starts = true_positions(b, first, count);
  tpu_lower_set_output(l, 0, hlo_take(b, order[0], 0, starts));
  if (hlo_type_numel(&inverse) > 0) {
    hlo_value group = hlo_cumulative(b, hlo_convert(b, first, TPU_I64), hlo_constant(b, TPU_I64, 0), "add", 0);
    group = hlo_binary(b, "subtract", group, hlo_constant_like(b, group, 1));
    if (sort) {
      hlo_value zeros = hlo_filled(b, TPU_I64, 1, &n, 0);
      group = hlo_put(b, zeros, 0, order[1], group, NULL);
    }
    tpu_lower_set_output(l, 1, hlo_reshape(b, group, inverse.rank, inverse.dims));
  } else {
    tpu_lower_set_output(l, 1, hlo_constant(b, TPU_I64, 0));
  }
  if (tpu_lower_output_type(l, 2).dims[0] > 0) {
    hlo_value ends[2] = {hlo_slice_dim(b, starts, 0, 1, count),
                         hlo_filled(b, TPU_I64, 1, &one, (double)n)};
    tpu_lower_set_output(l, 2, hlo_binary(b, "subtract", hlo_concatenate(b, ends, 2, 0), starts));
  } else {
    tpu_lower_set_output(l, 2, hlo_constant(b, TPU_I64, 0));
  }
  return NULL;
}

/* _unique2(self, count, return_inverse, return_counts) -> (values, inverse,
 * counts): always sorted, as CUDA's kernel is (an order is all sorted=False
 * leaves open). */
static tpu_status lower_unique(tpu_lowering* l) { return lower_groups(l, true); }

/* unique_consecutive(self, count, return_inverse, return_counts): runs of
 * equal neighbours, in order. */
static tpu_status lower_unique_consecutive(tpu_lowering* l) { return lower_groups(l, false); }

/* put(self, index, source, accumulate): self flattened, written (or added
 * to) at index. */
static tpu_status lower_put(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value x = tpu_lower_tensor(l, 0);
  hlo_type xt = *hlo_type_of(b, x), it = tpu_lower_arg_type(l, 1);
  int64_t n = hlo_type_numel(&xt), ni = hlo_type_numel(&it);
  if (n == 0 || ni == 0) {
    tpu_lower_set_output(l, 0, x);
    return NULL;
  }
  hlo_value source = hlo_reshape(b, hlo_convert(b, tpu_lower_tensor(l, 2), xt.dtype), 1, &ni);
  hlo_value flat = hlo_put(b, hlo_reshape(b, x, 1, &n), 0, flat_index(l, 1, n), source,
                           tpu_lower_bool(l, 3, false) ? "add" : NULL);
  tpu_lower_set_output(l, 0, hlo_reshape(b, flat, xt.rank, xt.dims));
  return NULL;
}

/* masked_scatter(self, mask, source): the true positions of mask (broadcast
 * to self) take source's leading values in order. */
static tpu_status lower_masked_scatter(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value x = tpu_lower_tensor(l, 0);
  hlo_type xt = *hlo_type_of(b, x), st = tpu_lower_arg_type(l, 2);
  int64_t n = hlo_type_numel(&xt), ns = hlo_type_numel(&st);
  if (n == 0 || ns == 0) {
    tpu_lower_set_output(l, 0, x);
    return NULL;
  }
  hlo_value mask = hlo_convert(b, tpu_lower_tensor(l, 1), TPU_BOOL);
  mask = hlo_broadcast_to(b, mask, xt.rank, xt.dims);
  hlo_value source = hlo_reshape(b, hlo_convert(b, tpu_lower_tensor(l, 2), xt.dtype), 1, &ns);
  hlo_value taken = hlo_take(b, source, 0, hlo_true_ranks(b, hlo_reshape(b, mask, 1, &n)));
  tpu_lower_set_output(l, 0, hlo_select(b, mask, hlo_reshape(b, taken, xt.rank, xt.dims), x));
  return NULL;
}

/* gather(self, dim, index): out[i][j] = self[index[i][j]][j] for dim 0. */
static tpu_status lower_gather(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type it = tpu_lower_arg_type(l, 2);
  if (hlo_type_numel(&it) == 0) {
    set_empty_output(l);
    return NULL;
  }
  hlo_value x = at_least_1d(b, tpu_lower_tensor(l, 0));
  hlo_value index = at_least_1d(b, tpu_lower_tensor(l, 2));
  int dim = wrap_dim(tpu_lower_int(l, 1, 0), hlo_type_of(b, x)->rank);
  tpu_lower_set_output(l, 0, hlo_gather_elements(b, x, dim, index));
  return NULL;
}

/* The StableHLO combiner of a scatter reduce name (mean sums, then
 * divides); NULL if unknown. */
static const char* reduce_combiner(const char* reduce) {
  static const char* const names[][2] = {
      {"add", "add"},      {"sum", "add"},      {"multiply", "multiply"}, {"prod", "multiply"},
      {"amax", "maximum"}, {"amin", "minimum"}, {"mean", "add"},
  };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(reduce, names[i][0]) == 0) return names[i][1];
  return NULL;
}

/* Floor division of integers by positive counts (torch's mean for ints). */
static hlo_value floor_divide_by_count(hlo_builder* b, hlo_value sum, hlo_value count) {
  hlo_value q = hlo_binary(b, "divide", sum, count);
  hlo_value negative_rest =
      hlo_compare(b, "LT", hlo_binary(b, "remainder", sum, count), hlo_constant_like(b, sum, 0));
  return hlo_select(b, negative_rest, hlo_binary(b, "subtract", q, hlo_constant_like(b, q, 1)), q);
}

/* Element-wise (hlo_scatter_elements) or slice-wise (hlo_put) placement. */
typedef hlo_value (*place_fn)(hlo_builder* b, hlo_value x, int dim, hlo_value index, hlo_value updates,
                              const char* combiner);

/* x with updates placed at index along dim, combined by `reduce` ("sum",
 * "prod", "mean", "amax", "amin"; NULL replaces). Without include_self the
 * positions reached start from the reduction's identity instead of x; mean
 * divides by how many values met there (x's counted when included),
 * flooring for integers. */
static hlo_value reduce_into(tpu_lowering* l, place_fn place, hlo_value x, int dim, hlo_value index,
                             hlo_value updates, const char* reduce, bool include_self) {
  hlo_builder* b = tpu_lower_builder(l);
  const char* combiner = reduce ? reduce_combiner(reduce) : NULL;
  if (reduce && !combiner)
    return tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::%s: unknown reduce \"%s\"", tpu_lower_op_name(l), reduce);
  hlo_type xt = *hlo_type_of(b, x), ut = *hlo_type_of(b, updates);
  hlo_value start = x;
  if (reduce && !include_self) {
    bool prod = strcmp(reduce, "prod") == 0;
    hlo_value identity = strcmp(reduce, "amax") == 0   ? hlo_constant_extreme(b, xt.dtype, false)
                         : strcmp(reduce, "amin") == 0 ? hlo_constant_extreme(b, xt.dtype, true)
                                                        : hlo_constant(b, xt.dtype, prod);
    start = place(b, x, dim, index, hlo_broadcast_in_dim(b, identity, ut.rank, ut.dims, NULL), NULL);
  }
  hlo_value result = place(b, start, dim, index, updates, combiner);
  if (!reduce || strcmp(reduce, "mean") != 0) return result;
  hlo_value counts = place(b, hlo_constant_like(b, x, include_self), dim, index, hlo_constant_like(b, updates, 1), "add");
  hlo_value unset = hlo_compare(b, "EQ", counts, hlo_constant_like(b, counts, 0));
  counts = hlo_select(b, unset, hlo_constant_like(b, counts, 1), counts);
  return tpu_dtype_is_float(xt.dtype) ? hlo_binary(b, "divide", result, counts)
                                      : floor_divide_by_count(b, result, counts);
}

/* scatter(self, dim, index, src|value[, reduce]), scatter_add(self, dim,
 * index, src), scatter_reduce(self, dim, index, src, reduce, include_self). */
static tpu_status lower_scatter(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  const char* op = tpu_lower_op_name(l);
  hlo_value x = at_least_1d(b, tpu_lower_tensor(l, 0));
  hlo_type xt = *hlo_type_of(b, x);
  hlo_type it = tpu_lower_arg_type(l, 2);
  if (hlo_type_numel(&it) == 0) {
    tpu_lower_set_output(l, 0, x);
    return NULL;
  }
  int dim = wrap_dim(tpu_lower_int(l, 1, 0), xt.rank);
  hlo_value index = at_least_1d(b, tpu_lower_tensor(l, 2));
  hlo_type ut = *hlo_type_of(b, index);
  ut.dtype = xt.dtype;
  hlo_value updates;
  if (tpu_lower_arg_kind(l, 3) == TPU_ARG_TENSOR && tpu_lower_arg_type(l, 3).rank > 0) {
    /* src may be larger than index: only its leading corner is used. */
    int64_t start[TPU_MAX_RANK] = {0}, strides[TPU_MAX_RANK];
    for (int d = 0; d < ut.rank; d++) strides[d] = 1;
    updates = hlo_slice(b, hlo_convert(b, tpu_lower_tensor(l, 3), xt.dtype), start, ut.dims, strides);
  } else {
    updates = tpu_lower_value_as(l, 3, &ut);
  }
  const char* reduce = strcmp(op, "scatter_add") == 0 ? "add" : tpu_lower_string(l, 4, NULL);
  bool include_self = strcmp(op, "scatter_reduce") != 0 || tpu_lower_bool(l, 5, true);
  tpu_lower_set_output(l, 0, reduce_into(l, hlo_scatter_elements, x, dim, index, updates, reduce, include_self));
  return NULL;
}

/* index_reduce(self, dim, index, source, reduce, include_self): source's
 * slices along dim reduced into self's slices at index. */
static tpu_status lower_index_reduce(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value x = at_least_1d(b, tpu_lower_tensor(l, 0));
  hlo_type xt = *hlo_type_of(b, x);
  int dim = wrap_dim(tpu_lower_int(l, 1, 0), xt.rank);
  hlo_type it = tpu_lower_arg_type(l, 2), ut = xt;
  ut.dims[dim] = hlo_type_numel(&it);
  if (hlo_type_numel(&ut) == 0) {
    tpu_lower_set_output(l, 0, x);
    return NULL;
  }
  hlo_value updates = hlo_reshape(b, hlo_convert(b, tpu_lower_tensor(l, 3), xt.dtype), ut.rank, ut.dims);
  tpu_lower_set_output(l, 0, reduce_into(l, hlo_put, x, dim, flat_index(l, 2, xt.dims[dim]), updates,
                                         tpu_lower_string(l, 4, NULL), tpu_lower_bool(l, 5, true)));
  return NULL;
}

/* masked_fill(self, mask, value): value where mask (broadcast to self). */
static tpu_status lower_masked_fill(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value x = tpu_lower_tensor(l, 0);
  hlo_type t = *hlo_type_of(b, x);
  hlo_value mask = hlo_convert(b, tpu_lower_tensor(l, 1), TPU_BOOL);
  mask = hlo_broadcast_to(b, mask, t.rank, t.dims);
  tpu_lower_set_output(l, 0, hlo_select(b, mask, tpu_lower_value_as(l, 2, &t), x));
  return NULL;
}

static tpu_status lower_flip(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value x = tpu_lower_tensor(l, 0);
  int rank = hlo_type_of(b, x)->rank;
  const int64_t* dims;
  int n = tpu_lower_int_list(l, 1, &dims);
  int64_t wrapped[TPU_MAX_RANK];
  int kept = 0;
  for (int i = 0; i < n && kept < TPU_MAX_RANK; i++)
    if (rank > 0) wrapped[kept++] = wrap_dim(dims[i], rank);
  tpu_lower_set_output(l, 0, hlo_reverse(b, x, wrapped, kept));
  return NULL;
}

/* channel_shuffle(self [N, C, *], groups): channels as [groups, C/groups],
 * transposed. */
static tpu_status lower_channel_shuffle(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type t = tpu_lower_arg_type(l, 0);
  int64_t groups = tpu_lower_int(l, 1, 1);
  if (t.rank < 3 || t.rank >= TPU_MAX_RANK || groups < 1 || t.dims[1] % groups) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::channel_shuffle: %d-d input with %lld channels "
                   "into %lld groups; expected [N, C, *] with C divisible by groups", t.rank,
                   (long long)(t.rank > 1 ? t.dims[1] : 0), (long long)groups);
    return NULL;
  }
  int64_t split[TPU_MAX_RANK], order[TPU_MAX_RANK];
  split[0] = t.dims[0];
  split[1] = groups;
  split[2] = t.dims[1] / groups;
  for (int d = 2; d < t.rank; d++) split[d + 1] = t.dims[d];
  for (int d = 0; d <= t.rank; d++) order[d] = d == 1 ? 2 : d == 2 ? 1 : d;
  hlo_value x = hlo_reshape(b, tpu_lower_tensor(l, 0), t.rank + 1, split);
  tpu_lower_set_output(l, 0, hlo_reshape(b, hlo_transpose(b, x, order), t.rank, t.dims));
  return NULL;
}

/* x rolled by `shift` along dim: the last `shift` entries move to the front. */
static hlo_value roll_one(hlo_builder* b, hlo_value x, int64_t shift, int dim) {
  hlo_type t = *hlo_type_of(b, x);
  int64_t n = t.dims[dim];
  if (n == 0) return x;
  int64_t s = ((shift % n) + n) % n;
  if (s == 0) return x;
  hlo_value parts[2] = {hlo_slice_dim(b, x, dim, n - s, n), hlo_slice_dim(b, x, dim, 0, n - s)};
  return hlo_concatenate(b, parts, 2, dim);
}

/* roll(self, shifts, dims): without dims, rolls the flattened tensor. */
static tpu_status lower_roll(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value x = tpu_lower_tensor(l, 0);
  hlo_type t = *hlo_type_of(b, x);
  const int64_t *shifts, *dims;
  int ns = tpu_lower_int_list(l, 1, &shifts);
  int nd = tpu_lower_int_list(l, 2, &dims);
  if (nd == 0) {
    int64_t numel = hlo_type_numel(&t);
    hlo_value flat = hlo_reshape(b, x, 1, &numel);
    tpu_lower_set_output(l, 0, ns ? roll_one(b, flat, shifts[0], 0) : flat);
    return NULL;
  }
  if (ns != nd) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::roll: %d shifts for %d dims", ns, nd);
    return NULL;
  }
  x = at_least_1d(b, x);
  for (int i = 0; i < nd; i++) x = roll_one(b, x, shifts[i], wrap_dim(dims[i], t.rank));
  tpu_lower_set_output(l, 0, x);
  return NULL;
}

/* tril / triu(self, diagonal): keep entries on the kept side of the
 * diagonal of the last two dims, zero the rest. */
static tpu_status lower_triangle(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value x = tpu_lower_tensor(l, 0);
  hlo_type t = *hlo_type_of(b, x);
  if (t.rank < 2) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::%s: needs at least 2 dims, got %d",
                   tpu_lower_op_name(l), t.rank);
    return NULL;
  }
  hlo_type it = t;
  it.dtype = TPU_I64;
  hlo_value above = hlo_binary(b, "subtract", hlo_iota(b, it, t.rank - 1), hlo_iota(b, it, t.rank - 2));
  hlo_value diagonal = hlo_constant_like(b, above, (double)tpu_lower_int(l, 1, 0));
  bool lower = strcmp(tpu_lower_op_name(l), "tril") == 0;
  hlo_value keep = hlo_compare(b, lower ? "LE" : "GE", above, diagonal);
  tpu_lower_set_output(l, 0, hlo_select(b, keep, x, hlo_constant_like(b, x, 0)));
  return NULL;
}

/* constant_pad_nd(self, pad, value): pad pairs start at the last dim;
 * negative pads crop. */
static tpu_status lower_constant_pad_nd(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value x = tpu_lower_tensor(l, 0);
  hlo_type t = *hlo_type_of(b, x);
  const int64_t* pad;
  int n = tpu_lower_int_list(l, 1, &pad);
  if (n % 2 != 0 || n / 2 > t.rank) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::constant_pad_nd: %d pads for rank %d", n, t.rank);
    return NULL;
  }
  int64_t low[TPU_MAX_RANK] = {0}, high[TPU_MAX_RANK] = {0}, interior[TPU_MAX_RANK] = {0};
  for (int i = 0; i < n / 2; i++) {
    low[t.rank - 1 - i] = pad[2 * i];
    high[t.rank - 1 - i] = pad[2 * i + 1];
  }
  hlo_value value =
      tpu_lower_is_none(l, 2) ? hlo_constant(b, t.dtype, 0) : tpu_lower_value(l, 2, t.dtype);
  tpu_lower_set_output(l, 0, hlo_pad(b, x, value, low, high, interior));
  return NULL;
}

/* narrow_copy(self, dim, start, length). */
static tpu_status lower_narrow_copy(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value x = tpu_lower_tensor(l, 0);
  hlo_type t = *hlo_type_of(b, x);
  int dim = wrap_dim(tpu_lower_int(l, 1, 0), t.rank);
  int64_t start = tpu_lower_int(l, 2, 0);
  if (start < 0) start += t.dims[dim];
  tpu_lower_set_output(l, 0, hlo_slice_dim(b, x, dim, start, start + tpu_lower_int(l, 3, 0)));
  return NULL;
}

/* tril_indices / triu_indices(row, col, offset): the (row, col) pairs of
 * the kept triangle in row-major order, as a [2, count] tensor. Each kept
 * grid position is scattered to its rank among the kept ones. */
static tpu_status lower_triangle_indices(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type out = tpu_lower_output_type(l, 0);
  int64_t cols = tpu_lower_int(l, 1, 0), n = tpu_lower_int(l, 0, 0) * cols;
  if (hlo_type_numel(&out) == 0 || out.rank != 2) {
    set_empty_output(l);
    return NULL;
  }
  hlo_value k = hlo_iota(b, hlo_type_make(TPU_I64, 1, &n), 0);
  hlo_value r = hlo_binary(b, "divide", k, hlo_constant_like(b, k, (double)cols));
  hlo_value c = hlo_binary(b, "remainder", k, hlo_constant_like(b, k, (double)cols));
  hlo_value above = hlo_binary(b, "subtract", c, r);
  bool lower = strcmp(tpu_lower_op_name(l), "tril_indices") == 0;
  hlo_value offset = hlo_constant_like(b, above, (double)tpu_lower_int(l, 2, 0));
  hlo_value keep = hlo_compare(b, lower ? "LE" : "GE", above, offset);
  /* Dropped positions go to slot `count`, past the end, which scatter skips. */
  hlo_value past_end = hlo_constant_like(b, k, (double)out.dims[1]);
  hlo_value slots = hlo_select(b, keep, hlo_true_ranks(b, keep), past_end);
  int64_t pair[2] = {1, n};
  hlo_value parts[2] = {hlo_reshape(b, r, 2, pair), hlo_reshape(b, c, 2, pair)};
  hlo_value zeros = hlo_filled(b, TPU_I64, 2, out.dims, 0);
  tpu_lower_set_output(l, 0, hlo_put(b, zeros, 1, slots, hlo_concatenate(b, parts, 2, 0), NULL));
  return NULL;
}

/* Advanced indexing: x[i0, :, i2] with integer index tensors, as the
 * dimension numbers shared by gather (read) and scatter (write). */
typedef struct adv_index {
  hlo_value coords;               /* broadcast index shape + [m], i64 */
  int64_t indexed[TPU_MAX_RANK];  /* x's m indexed dims, ascending */
  int m;
  int64_t window[TPU_MAX_RANK];   /* result positions of x's other dims */
  int w;
  int64_t slice_sizes[TPU_MAX_RANK];
  hlo_type result;                /* the shape x[indices] has */
} adv_index;

/* Fills `a` from the index list at argument `arg`; false (with the error
 * recorded) when it cannot. */
static bool adv_index_make(tpu_lowering* l, int arg, hlo_value x, adv_index* a) {
  hlo_builder* b = tpu_lower_builder(l);
  const char* op = tpu_lower_op_name(l);
  hlo_type xt = *hlo_type_of(b, x);
  int n = tpu_lower_tensor_list_count(l, arg);
  if (n > xt.rank) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::%s: %d indices for a tensor of rank %d", op, n,
                   xt.rank);
    return false;
  }
  hlo_value items[TPU_MAX_RANK];
  tpu_lower_tensor_list(l, arg, items, n);
  hlo_type batch = {TPU_I64, 0, {0}};
  a->m = 0;
  for (int d = 0; d < n; d++) {
    if (items[d] == HLO_INVALID) continue;
    hlo_type t = tpu_lower_tensor_list_type(l, arg, d);
    if (is_mask_dtype(t.dtype)) {
      tpu_lower_fail(l, TPU_UNIMPLEMENTED,
                     "aten::%s: boolean mask indices give a data-dependent shape, which tpu "
                     "programs cannot have; use torch.where or masked_fill, or index on the CPU",
                     op);
      return false;
    }
    /* Broadcast shapes, NumPy style. */
    int rank = t.rank > batch.rank ? t.rank : batch.rank;
    hlo_type next = {TPU_I64, rank, {0}};
    for (int k = 0; k < rank; k++) {
      int kb = k - (rank - batch.rank), kt = k - (rank - t.rank);
      int64_t db = kb >= 0 ? batch.dims[kb] : 1, dt = kt >= 0 ? t.dims[kt] : 1;
      next.dims[k] = db == 1 ? dt : db;
    }
    batch = next;
    a->indexed[a->m++] = d;
  }
  hlo_type one = batch;
  one.dims[one.rank++] = 1;
  hlo_value parts[TPU_MAX_RANK];
  for (int i = 0; i < a->m; i++) {
    int d = (int)a->indexed[i];
    hlo_value index = wrap_index(b, items[d], xt.dims[d]);
    index = hlo_broadcast_to(b, index, batch.rank, batch.dims);
    parts[i] = hlo_reshape(b, index, one.rank, one.dims);
  }
  a->coords = a->m ? hlo_concatenate(b, parts, a->m, batch.rank) : HLO_INVALID;
  /* Adjacent indexed dims keep their place in the result; separated ones
   * move to the front, as in NumPy. */
  bool adjacent = a->m > 0 && a->indexed[a->m - 1] - a->indexed[0] == a->m - 1;
  int at = adjacent ? (int)a->indexed[0] : 0;
  a->result = (hlo_type){xt.dtype, 0, {0}};
  a->w = 0;
  int next = 0;
  for (int d = 0; d <= xt.rank; d++) {
    if (d == at)
      for (int k = 0; k < batch.rank; k++) a->result.dims[next++] = batch.dims[k];
    if (d == xt.rank) break;
    bool is_indexed = false;
    for (int i = 0; i < a->m; i++) is_indexed = is_indexed || a->indexed[i] == d;
    a->slice_sizes[d] = is_indexed ? 1 : xt.dims[d];
    if (is_indexed) continue;
    a->window[a->w++] = next;
    a->result.dims[next++] = xt.dims[d];
  }
  a->result.rank = next;
  return true;
}

/* index.Tensor(self, indices): x[i0, :, i2]. */
static tpu_status lower_index(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value x = tpu_lower_tensor(l, 0);
  adv_index a;
  if (!adv_index_make(l, 1, x, &a)) return NULL;
  if (a.m == 0) {
    tpu_lower_set_output(l, 0, x);
  } else if (hlo_type_numel(&a.result) == 0) {
    set_empty_output(l);
  } else {
    int batch_rank = a.result.rank - a.w;
    hlo_gather_dims g = {a.window, a.w, a.indexed, a.m, a.indexed, a.m, batch_rank, a.slice_sizes};
    tpu_lower_set_output(l, 0, hlo_gather(b, x, a.coords, &g, a.result));
  }
  return NULL;
}

/* x[mask] = values with one boolean mask: the k-th true position takes
 * the k-th entry of values (broadcast along the other dims). The written
 * shape is x's, so unlike reading x[mask] this needs no data-dependent
 * shape. Returns false if the call is not of that form. */
static bool masked_put(tpu_lowering* l, hlo_value x, bool accumulate) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value items[TPU_MAX_RANK];
  int n = tpu_lower_tensor_list(l, 1, items, TPU_MAX_RANK), at = -1, present = 0;
  for (int d = 0; d < n; d++) {
    if (items[d] == HLO_INVALID) continue;
    present++;
    if (is_mask_dtype(tpu_lower_tensor_list_type(l, 1, d).dtype)) at = d;
  }
  if (present != 1 || at < 0) return false;
  /* The mask covers x's dims [at, at + k); values are packed along one dim
   * in their place. */
  hlo_type xt = *hlo_type_of(b, x);
  hlo_type mt = tpu_lower_tensor_list_type(l, 1, at), vt = tpu_lower_arg_type(l, 2);
  int post = xt.rank - at - mt.rank, packed_at = vt.rank - 1 - post;
  int64_t mn = hlo_type_numel(&mt);
  if (hlo_type_numel(&xt) == 0) {
    tpu_lower_set_output(l, 0, x);
    return true;
  }
  hlo_type packed = {xt.dtype, at + 1 + post, {0}};
  for (int d = 0; d < packed.rank; d++) {
    int from = d < at ? d : d == at ? -1 : d - 1 + mt.rank;
    packed.dims[d] = from >= 0 ? xt.dims[from] : packed_at >= 0 ? vt.dims[packed_at] : 1;
  }
  hlo_value values = tpu_lower_value_as(l, 2, &packed);
  hlo_value mask = hlo_convert(b, items[at], TPU_BOOL);
  values = hlo_take(b, values, at, hlo_true_ranks(b, hlo_reshape(b, mask, 1, &mn)));
  values = hlo_reshape(b, values, xt.rank, xt.dims);
  int64_t bdims[TPU_MAX_RANK];
  for (int k = 0; k < mt.rank; k++) bdims[k] = at + k;
  mask = hlo_broadcast_in_dim(b, mask, xt.rank, xt.dims, bdims);
  if (accumulate) values = hlo_binary(b, "add", x, values);
  tpu_lower_set_output(l, 0, hlo_select(b, mask, values, x));
  return true;
}

/* index_put(self, indices, values, accumulate[, unsafe]): x[i0, :, i2] = v. */
static tpu_status lower_index_put(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value x = tpu_lower_tensor(l, 0);
  bool accumulate = tpu_lower_bool(l, 3, false);
  if (masked_put(l, x, accumulate)) return NULL;
  adv_index a;
  if (!adv_index_make(l, 1, x, &a)) return NULL;
  hlo_value values = tpu_lower_value_as(l, 2, &a.result);
  if (a.m == 0) {
    tpu_lower_set_output(l, 0, accumulate ? hlo_binary(b, "add", x, values) : values);
    return NULL;
  }
  if (hlo_type_numel(&a.result) == 0) {
    tpu_lower_set_output(l, 0, x);
    return NULL;
  }
  hlo_scatter_dims s = {a.window, a.w, a.indexed, a.m, a.indexed, a.m, a.result.rank - a.w};
  tpu_lower_set_output(l, 0, hlo_scatter(b, x, a.coords, values, &s, accumulate ? "add" : NULL));
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"_index_put_impl", lower_index_put, TPU_OP_COMPLEX},
    {"_unique2", lower_unique, 0},
    {"_unsafe_index", lower_index, TPU_OP_COMPLEX},
    {"_unsafe_index_put", lower_index_put, 0},
    {"cat", lower_cat, TPU_OP_COMPLEX},
    {"constant_pad_nd", lower_constant_pad_nd, TPU_OP_COMPLEX},
    {"channel_shuffle", lower_channel_shuffle, TPU_OP_COMPLEX},
    {"flip", lower_flip, TPU_OP_COMPLEX},
    {"gather", lower_gather, TPU_OP_COMPLEX},
    {"index", lower_index, TPU_OP_COMPLEX},
    {"index_put", lower_index_put, TPU_OP_COMPLEX},
    {"index_add", lower_index_update, TPU_OP_COMPLEX},
    {"index_copy", lower_index_update, TPU_OP_COMPLEX},
    {"index_fill", lower_index_update, TPU_OP_COMPLEX},
    {"index_reduce", lower_index_reduce, 0},
    {"index_select", lower_index_select, TPU_OP_COMPLEX},
    {"masked_fill", lower_masked_fill, TPU_OP_COMPLEX},
    {"masked_scatter", lower_masked_scatter, TPU_OP_COMPLEX},
    {"masked_select", lower_masked_select, TPU_OP_COMPLEX},
    {"narrow_copy", lower_narrow_copy, TPU_OP_COMPLEX},
    {"nonzero", lower_nonzero, TPU_OP_COMPLEX},
    {"nonzero_static", lower_nonzero_static, TPU_OP_COMPLEX},
    {"put", lower_put, TPU_OP_COMPLEX},
    {"repeat_interleave", lower_repeat_interleave, 0},
    {"roll", lower_roll, TPU_OP_COMPLEX},
    {"scatter", lower_scatter, TPU_OP_COMPLEX},
    {"scatter_add", lower_scatter, TPU_OP_COMPLEX},
    {"scatter_reduce", lower_scatter, 0},
    {"take", lower_take, TPU_OP_COMPLEX},
    {"tril", lower_triangle, TPU_OP_COMPLEX},
    {"tril_indices", lower_triangle_indices, 0},
    {"triu", lower_triangle, TPU_OP_COMPLEX},
    {"triu_indices", lower_triangle_indices, 0},
    {"unique_consecutive", lower_unique_consecutive, 0},
};

TPU_OP_FAMILY(tpu_ops_indexing, entries);
