/* Embeddings: the backward of embedding (its forward is composite over
 * index_select), embedding_bag forward and backward in sum, mean and max
 * modes, and the max_norm renormalization. one_hot is composite (zeros,
 * then scatter).
 *
 * A bag is a run of indices [offsets[b], offsets[b + 1]); entries equal to
 * padding_idx (when >= 0) take no part. Gradients accumulate in float32 for
 * float16/bfloat16. */
#include <string.h>

#include "hlo/reduce_extra_ops.h"
#include "hlo/slice_ops.h"
#include "ops/families.h"

enum { MODE_SUM, MODE_MEAN, MODE_MAX };

/* Dims 1.. of a rank-`rank` array: the window of a row gather/scatter. */
static int row_window(int rank, int64_t* out) {
  for (int d = 1; d < rank; d++) out[d - 1] = d;
  return rank - 1;
}

/* Rows x[index[j]] of x (rows along dim 0) for a 1-d i64 index. */
static hlo_value gather_rows(hlo_builder* b, hlo_value x, hlo_value index) {
  hlo_type out = *hlo_type_of(b, x);
  int64_t window[TPU_MAX_RANK], sizes[TPU_MAX_RANK], zero = 0;
  int w = row_window(out.rank, window);
  for (int d = 0; d < out.rank; d++) sizes[d] = d ? out.dims[d] : 1;
  out.dims[0] = hlo_type_of(b, index)->dims[0];
  hlo_gather_dims g = {window, w, &zero, 1, &zero, 1, 1, sizes};
  return hlo_gather(b, x, index, &g, out);
}

/* x with row index[j] combined with updates[j] (rows out of range skip). */
static hlo_value scatter_rows(hlo_builder* b, hlo_value x, hlo_value index, hlo_value updates,
                              const char* combiner) {
  int64_t window[TPU_MAX_RANK], zero = 0;
  int w = row_window(hlo_type_of(b, x)->rank, window);
  hlo_scatter_dims s = {window, w, &zero, 1, &zero, 1, 1};
  return hlo_scatter(b, x, index, updates, &s, combiner);
}

/* A per-row value [n] broadcast over the columns of rows [n, d]. */
static hlo_value per_row(hlo_builder* b, hlo_value v, hlo_value rows) {
  hlo_type t = *hlo_type_of(b, rows);
  int64_t zero = 0;
  return hlo_broadcast_in_dim(b, v, t.rank, t.dims, &zero);
}

/* rows [n, d] times (or divided by) a per-row value of any dtype. */
static hlo_value scale_rows(hlo_builder* b, const char* op, hlo_value rows, hlo_value v) {
  v = hlo_convert(b, v, hlo_type_of(b, rows)->dtype);
  return hlo_binary(b, op, rows, per_row(b, v, rows));
}

/* Tensor argument `index` flattened to 1-d int64. */
static hlo_value flat_i64(tpu_lowering* l, int index) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type t = tpu_lower_arg_type(l, index);
  int64_t n = hlo_type_numel(&t);
  return hlo_reshape(b, hlo_convert(b, tpu_lower_tensor(l, index), TPU_I64), 1, &n);
}

/* Whether each of the 1-d indices takes part (is not padding_idx). */
static hlo_value not_padding(hlo_builder* b, hlo_value indices, int64_t padding_idx) {
  hlo_value pad = hlo_constant_like(b, indices, padding_idx >= 0 ? (double)padding_idx : -1);
  return hlo_compare(b, "NE", indices, pad);
}

/* Gradient rows [n, d] summed into a [num_weights, d] table at the 1-d
 * indices, each scaled by 1 / (count of its index) when by_freq. */
static hlo_value accumulate_rows(hlo_builder* b, hlo_value indices, hlo_value rows,
                                 const hlo_type* table, bool by_freq) {
  hlo_value sums = scatter_rows(b, hlo_filled(b, hlo_type_of(b, rows)->dtype, table->rank, table->dims, 0),
                                indices, rows, "add");
  if (!by_freq) return sums;
  hlo_value ones = hlo_constant_like(b, indices, 1);
  hlo_value counts = scatter_rows(b, hlo_filled(b, TPU_I64, 1, table->dims, 0), indices, ones, "add");
  counts = hlo_binary(b, "maximum", counts, hlo_constant_like(b, counts, 1));
  return scale_rows(b, "divide", sums, counts);
}

/* embedding_dense_backward(grad_output, indices, num_weights, padding_idx,
 * scale_grad_by_freq). */
static tpu_status lower_embedding_backward(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type table = tpu_lower_output_type(l, 0);
  hlo_value indices = flat_i64(l, 1);
  int64_t n = hlo_type_of(b, indices)->dims[0];
  if (n == 0 || hlo_type_numel(&table) == 0) {
    tpu_lower_set_output(l, 0, hlo_constant(b, table.dtype, 0));
    return NULL;
  }
  int64_t rows_dims[2] = {n, table.dims[1]};
  hlo_value rows = hlo_reshape(b, tpu_lower_value(l, 0, tpu_dtype_compute(table.dtype)), 2, rows_dims);
  hlo_value keep = not_padding(b, indices, tpu_lower_int(l, 3, -1));
  rows = hlo_select(b, per_row(b, keep, rows), rows, hlo_constant_like(b, rows, 0));
  table.dtype = tpu_dtype_compute(table.dtype);
  bool by_freq = tpu_lower_bool(l, 4, false);
  tpu_lower_set_output(l, 0, accumulate_rows(b, indices, rows, &table, by_freq));
  return NULL;
}

/* How the indices of an embedding bag call fall into bags. */
typedef struct bags {
  hlo_value indices; /* [n] i64 */
  hlo_value bag;     /* [n] i64: each index's bag (offset2bag) */
  hlo_value used;    /* [n] bool: not padding and inside one of the bags */
  hlo_value size;    /* [count] i64: used indices per bag */
  int64_t count;     /* bags */
} bags;

/* Bags from 1-d offsets (sorted; an index belongs to the last bag that
 * starts at or before it): a mark at each bag start, summed up. Indices
 * past the last bag (include_last_offset's tail) are unused. */
static hlo_value bags_of_offsets(hlo_builder* b, hlo_value offsets, int64_t n) {
  hlo_value marks = hlo_filled(b, TPU_I64, 1, &n, 0);
  marks = scatter_rows(b, marks, offsets, hlo_constant_like(b, offsets, 1), "add");
  hlo_value bag = hlo_cumulative(b, marks, hlo_constant(b, TPU_I64, 0), "add", 0);
  return hlo_binary(b, "subtract", bag, hlo_constant_like(b, bag, 1));
}

/* Fills everything but `bag` from it. */
static bags bags_make(hlo_builder* b, hlo_value indices, hlo_value bag, int64_t count,
                      int64_t padding_idx) {
  bags g = {indices, bag, HLO_INVALID, HLO_INVALID, count};
  hlo_value after_first = hlo_compare(b, "GE", bag, hlo_constant_like(b, bag, 0));
  hlo_value before_end = hlo_compare(b, "LT", bag, hlo_constant_like(b, bag, (double)count));
  g.used = hlo_binary(b, "and", hlo_binary(b, "and", after_first, before_end),
                      not_padding(b, indices, padding_idx));
  hlo_value ones = hlo_convert(b, g.used, TPU_I64);
  g.size = scatter_rows(b, hlo_filled(b, TPU_I64, 1, &count, 0), bag, ones, "add");
  return g;
}

/* rows [n, d] with unused entries replaced by `fill`. */
static hlo_value where_used(hlo_builder* b, const bags* g, hlo_value rows, double fill) {
  return hlo_select(b, per_row(b, g->used, rows), rows, hlo_constant_like(b, rows, fill));
}

/* Each bag's largest row entries, and for each the first position (in the
 * index list) that holds it; empty bags give 0 and position n (none). */
static void bag_max(hlo_builder* b, const bags* g, hlo_value rows, hlo_value* out_max,
                    hlo_value* out_position) {
  hlo_type t = *hlo_type_of(b, rows);
  int64_t out_dims[2] = {g->count, t.dims[1]};
  hlo_value lowest = hlo_constant(b, t.dtype, -__builtin_inf());
  hlo_value start = hlo_broadcast_in_dim(b, lowest, 2, out_dims, NULL);
  hlo_value max =
      scatter_rows(b, start, g->bag, where_used(b, g, rows, -__builtin_inf()), "maximum");
  hlo_value hit = hlo_binary(b, "and", hlo_compare(b, "EQ", rows, gather_rows(b, max, g->bag)),
                             per_row(b, g->used, rows));
  hlo_type it = t;
  it.dtype = TPU_I64;
  hlo_value none = hlo_constant(b, TPU_I64, (double)t.dims[0]);
  hlo_value nowhere = hlo_broadcast_in_dim(b, none, 2, t.dims, NULL);
  hlo_value position = hlo_select(b, hit, hlo_iota(b, it, 0), nowhere);
  hlo_value first = hlo_broadcast_in_dim(b, none, 2, out_dims, NULL);
  *out_position = scatter_rows(b, first, g->bag, position, "minimum");
  hlo_value empty = hlo_compare(b, "EQ", g->size, hlo_constant_like(b, g->size, 0));
  empty = per_row(b, empty, max);
  *out_max = hlo_select(b, empty, hlo_constant_like(b, max, 0), max);
}

/* _embedding_bag / _embedding_bag_forward_only(weight, indices, offsets,
 * scale_grad_by_freq, mode, sparse, per_sample_weights, include_last_offset,
 * padding_idx) -> (output, offset2bag, bag_size, max_indices). */
static tpu_status lower_embedding_bag(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type out = tpu_lower_output_type(l, 0);
  int64_t mode = tpu_lower_int(l, 4, MODE_SUM);
  hlo_value weight = tpu_lower_value(l, 0, tpu_dtype_compute(out.dtype));
  hlo_value indices = flat_i64(l, 1);
  int64_t n = hlo_type_of(b, indices)->dims[0];
  if (out.rank != 2 || hlo_type_numel(&out) == 0 || n == 0) {
    for (int k = 0; k < tpu_lower_output_count(l); k++)
      tpu_lower_set_output(l, k, hlo_constant(b, tpu_lower_output_type(l, k).dtype, 0));
    return NULL;
  }
  bags g = bags_make(b, indices, bags_of_offsets(b, flat_i64(l, 2), n), out.dims[0],
                     tpu_lower_int(l, 8, -1));
  hlo_value rows = gather_rows(b, weight, indices);
  if (mode == MODE_SUM && tpu_lower_arg_kind(l, 6) == TPU_ARG_TENSOR)
    rows = scale_rows(b, "multiply", rows, tpu_lower_tensor(l, 6));
  hlo_value result, max_indices = hlo_constant(b, TPU_I64, 0);
  if (mode == MODE_MAX) {
    hlo_value position;
    bag_max(b, &g, rows, &result, &position);
    /* The weight row at each max's position; 0 for empty bags (position n). */
    int64_t low = 0, high = 1, interior = 0, flat = hlo_type_numel(&out);
    hlo_value lookup = hlo_pad(b, indices, hlo_constant(b, TPU_I64, 0), &low, &high, &interior);
    max_indices = gather_rows(b, lookup, hlo_reshape(b, position, 1, &flat));
  } else {
    result = scatter_rows(b, hlo_filled(b, hlo_type_of(b, rows)->dtype, 2, out.dims, 0), g.bag,
                          where_used(b, &g, rows, 0), "add");
    if (mode == MODE_MEAN) {
      hlo_value size = hlo_binary(b, "maximum", g.size, hlo_constant_like(b, g.size, 1));
      result = scale_rows(b, "divide", result, size);
    }
  }
  tpu_lower_set_output(l, 0, result);
  tpu_lower_set_output(l, 1, g.bag);
  /* bag_size may list one entry per offset, past the bags. */
  hlo_type sizes = tpu_lower_output_type(l, 2);
  int64_t pad_low = 0, pad_high = sizes.dims[0] - g.count, interior = 0;
  hlo_value size = g.size;
  if (sizes.rank == 1 && pad_high > 0)
    size = hlo_pad(b, size, hlo_constant(b, TPU_I64, 0), &pad_low, &pad_high, &interior);
  tpu_lower_set_output(l, 2, size);
  tpu_lower_set_output(l, 3, max_indices); /* empty unless mode is max */
  return NULL;
}

/* Where the embedding bag backwards keep their arguments. */
typedef struct bag_backward_form {
  const char* name;
  int offsets;     /* -1: none, bags come from offset2bag */
  int offset2bag, max_indices, by_freq, mode, weights, padding_idx;
} bag_backward_form;

static const bag_backward_form bag_backward_forms[] = {
    {"_embedding_bag_backward", 2, 3, 5, 7, 8, 10, 11},
    {"_embedding_bag_dense_backward", -1, 2, 4, 6, 7, 8, 9},
};

/* The bags a backward call's grad [count, d] covers. */
static bags bags_of_call(tpu_lowering* l, int offsets, int offset2bag, int indices, int padding_idx,
                         int64_t count) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value flat = flat_i64(l, indices);
  int64_t n = hlo_type_of(b, flat)->dims[0];
  hlo_value bag =
      offsets >= 0 ? bags_of_offsets(b, flat_i64(l, offsets), n) : flat_i64(l, offset2bag);
  return bags_make(b, flat, bag, count, tpu_lower_int(l, padding_idx, -1));
}

/* _embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size,
 * maximum_indices, num_weights, scale_grad_by_freq, mode, sparse,
 * per_sample_weights, padding_idx) and _embedding_bag_dense_backward (no
 * offsets or sparse): the weight's gradient. Sum and mean send each bag's
 * grad row to its used indices (scaled by the sample weight, or divided by
 * the bag size); max sends each entry to the row that won it. */
static tpu_status lower_embedding_bag_backward(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  bool dense = !strcmp(tpu_lower_op_name(l), bag_backward_forms[1].name);
  const bag_backward_form* f = &bag_backward_forms[dense];
  hlo_type table = tpu_lower_output_type(l, 0);
  hlo_type gt = tpu_lower_arg_type(l, 0), it = tpu_lower_arg_type(l, 1);
  if (hlo_type_numel(&table) == 0 || hlo_type_numel(&gt) == 0 || hlo_type_numel(&it) == 0) {
    tpu_lower_set_output(l, 0, hlo_constant(b, table.dtype, 0));
    return NULL;
  }
  if (!dense && tpu_lower_bool(l, 9, false)) {
    tpu_lower_fail(l, TPU_UNIMPLEMENTED,
                   "aten::_embedding_bag_backward: tpu has no sparse tensors; use sparse=False");
    return NULL;
  }
  table.dtype = tpu_dtype_compute(table.dtype);
  hlo_value grad = tpu_lower_value(l, 0, table.dtype);
  bags g = bags_of_call(l, f->offsets, f->offset2bag, 1, f->padding_idx, gt.dims[0]);
  int64_t mode = tpu_lower_int(l, f->mode, MODE_SUM);
  if (mode == MODE_MAX) {
    /* Entry (b, j) goes to (maximum_indices[b, j], j); empty bags send nothing. */
    hlo_type ct = gt;
    ct.dtype = TPU_I64;
    ct.dims[ct.rank++] = 1;
    hlo_value coords[2] = {
        hlo_reshape(b, hlo_convert(b, tpu_lower_tensor(l, f->max_indices), TPU_I64), 3, ct.dims),
        hlo_iota(b, ct, 1)};
    hlo_value empty = hlo_compare(b, "EQ", g.size, hlo_constant_like(b, g.size, 0));
    grad = hlo_select(b, per_row(b, empty, grad), hlo_constant_like(b, grad, 0), grad);
    static const int64_t both[2] = {0, 1};
    hlo_scatter_dims s = {NULL, 0, both, 2, both, 2, 2};
    hlo_value start = hlo_filled(b, table.dtype, 2, table.dims, 0);
    hlo_value at = hlo_concatenate(b, coords, 2, 2);
    tpu_lower_set_output(l, 0, hlo_scatter(b, start, at, grad, &s, "add"));
    return NULL;
  }
  hlo_value rows = gather_rows(b, grad, g.bag);
  if (mode == MODE_MEAN) {
    hlo_value size = gather_rows(b, g.size, g.bag);
    size = hlo_binary(b, "maximum", size, hlo_constant_like(b, size, 1));
    rows = scale_rows(b, "divide", rows, size);
  } else if (tpu_lower_arg_kind(l, f->weights) == TPU_ARG_TENSOR) {
    rows = scale_rows(b, "multiply", rows, tpu_lower_tensor(l, f->weights));
  }
  rows = where_used(b, &g, rows, 0);
  tpu_lower_set_output(l, 0, accumulate_rows(b, g.indices, rows, &table,
                                             tpu_lower_bool(l, f->by_freq, false)));
  return NULL;
}

/* _embedding_bag_per_sample_weights_backward(grad, weight, indices,
 * offsets, offset2bag, mode, padding_idx): each sample weight's gradient,
 * the dot of its bag's grad row with its weight row (sum mode only). */
static tpu_status lower_per_sample_weights_backward(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type out = tpu_lower_output_type(l, 0), gt = tpu_lower_arg_type(l, 0);
  if (tpu_lower_int(l, 5, MODE_SUM) != MODE_SUM) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT,
                   "aten::_embedding_bag_per_sample_weights_backward: per_sample_weights need "
                   "mode='sum'");
    return NULL;
  }
  if (hlo_type_numel(&out) == 0 || hlo_type_numel(&gt) == 0) {
    tpu_lower_set_output(l, 0, hlo_constant(b, out.dtype, 0));
    return NULL;
  }
  tpu_dtype t = tpu_dtype_compute(out.dtype);
  bags g = bags_of_call(l, 3, 4, 2, 6, gt.dims[0]);
  hlo_value grad_rows = gather_rows(b, tpu_lower_value(l, 0, t), g.bag);
  hlo_value weight_rows = gather_rows(b, tpu_lower_value(l, 1, t), g.indices);
  int64_t columns = 1;
  hlo_value dots = hlo_reduce(b, hlo_binary(b, "multiply", grad_rows, weight_rows),
                              hlo_constant(b, t, 0), "add", &columns, 1);
  tpu_lower_set_output(l, 0, hlo_select(b, g.used, dots, hlo_constant_like(b, dots, 0)));
  return NULL;
}

/* embedding_renorm_(self, indices, max_norm, norm_type), what
 * nn.Embedding(max_norm=) runs before each lookup: every row that indices
 * name (once, however often named) whose p-norm exceeds max_norm is scaled
 * by max_norm / (norm + 1e-7), as in PyTorch's kernels; other rows stay. */
static tpu_status lower_embedding_renorm(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type wt = tpu_lower_arg_type(l, 0), it = tpu_lower_arg_type(l, 1);
  int64_t rows = wt.dims[0], n = hlo_type_numel(&it), row_dims[TPU_MAX_RANK];
  if (n == 0 || wt.rank == 0) {
    tpu_lower_keep_output(l, 0);
    return NULL;
  }
  tpu_dtype t = tpu_dtype_compute(wt.dtype);
  double max_norm = tpu_lower_float(l, 2, 0), p = tpu_lower_float(l, 3, 2);
  hlo_value w = tpu_lower_value(l, 0, t);
  hlo_value norm = hlo_vector_norm(b, w, p, row_dims, row_window(wt.rank, row_dims));
  hlo_value index = hlo_reshape(b, tpu_lower_value(l, 1, TPU_I64), 1, &n);
  hlo_value named = hlo_put(b, hlo_filled(b, TPU_BOOL, 1, &rows, 0), 0, index,
                            hlo_filled(b, TPU_BOOL, 1, &n, 1), NULL);
  hlo_value over = hlo_binary(b, "and", named, hlo_compare(b, "GT", norm, hlo_constant_like(b, norm, max_norm)));
  hlo_value shrink = hlo_binary(b, "divide", hlo_constant_like(b, norm, max_norm),
                                hlo_binary(b, "add", norm, hlo_constant_like(b, norm, 1e-7)));
  hlo_value scale = hlo_select(b, over, shrink, hlo_constant_like(b, norm, 1));
  tpu_lower_set_output(l, 0, scale_rows(b, "multiply", w, scale));
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"_embedding_bag", lower_embedding_bag, 0},
    {"_embedding_bag_backward", lower_embedding_bag_backward, 0},
    {"_embedding_bag_dense_backward", lower_embedding_bag_backward, 0},
    {"_embedding_bag_forward_only", lower_embedding_bag, 0},
    {"_embedding_bag_per_sample_weights_backward", lower_per_sample_weights_backward, 0},
    {"embedding_dense_backward", lower_embedding_backward, 0},
    {"embedding_renorm", lower_embedding_renorm, 0},
};

TPU_OP_FAMILY(tpu_ops_embedding, entries);
