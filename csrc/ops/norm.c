/* Normalizations: batch norm forward (training with running-stat updates,
 * evaluation), layer, group and RMS norm forward, and their backwards.
 * (PyTorch's own forwards of layer and group norm for other devices are
 * composites, a batch norm over a reshaped input and then the affine part:
 * two and seven programs; rms_norm's is six, and its backward about a dozen.
 * The glue routes all three here.)
 *
 * Every normalization here is y = xhat * w + b with xhat = (x - mean) *
 * rstd (RMS norm: no mean, xhat = x * rstd, no bias); they differ only in
 * which dims of a working shape the statistics average over and which dims
 * the weight spans, so one layout type and one backward serve all four.
 * float16/bfloat16 compute in float32. */
#include <float.h>
#include <string.h>

#include "ops/families.h"

/* Where a normalization's statistics and parameters sit in x's working shape. */
typedef struct norm_layout {
  hlo_type shape;                   /* x as the lowering sees it, compute dtype */
  int64_t stat_dims[TPU_MAX_RANK];  /* dims each mean/rstd averages over */
  int stat_count;
  int64_t param_dims[TPU_MAX_RANK]; /* dims the weight and bias span */
  int param_count;
} norm_layout;

/* The dims of a rank-`rank` shape that are not in dims[0..count). */
static int complement(const int64_t* dims, int count, int rank, int64_t* out) {
  int n = 0;
  for (int d = 0; d < rank; d++) {
    bool in = false;
    for (int i = 0; i < count; i++) in = in || dims[i] == d;
    if (!in) out[n++] = d;
  }
  return n;
}

static hlo_value sum_over(hlo_builder* b, hlo_value x, const int64_t* dims, int count) {
  return hlo_reduce(b, x, hlo_constant(b, hlo_type_of(b, x)->dtype, 0), "add", dims, count);
}

/* v (any shape holding the sizes of the given dims of L's shape, in order)
 * broadcast to L's shape. */
static hlo_value spread(hlo_builder* b, hlo_value v, const norm_layout* L, const int64_t* dims,
                        int count) {
  int64_t sizes[TPU_MAX_RANK];
  for (int i = 0; i < count; i++) sizes[i] = L->shape.dims[dims[i]];
  v = hlo_reshape(b, v, count, sizes);
  return hlo_broadcast_in_dim(b, v, L->shape.rank, L->shape.dims, dims);
}

/* A per-statistic value (mean, rstd) broadcast to L's shape. */
static hlo_value spread_stat(hlo_builder* b, hlo_value v, const norm_layout* L) {
  int64_t kept[TPU_MAX_RANK];
  int n = complement(L->stat_dims, L->stat_count, L->shape.rank, kept);
  return spread(b, v, L, kept, n);
}

/* How many elements each statistic averages. */
static double stat_size(const norm_layout* L) {
  double n = 1;
  for (int i = 0; i < L->stat_count; i++) n *= (double)L->shape.dims[L->stat_dims[i]];
  return n;
}

/* The mean of x over the statistic dims (shaped like the kept dims). */
static hlo_value stat_mean(hlo_builder* b, hlo_value x, const norm_layout* L) {
  hlo_value sum = sum_over(b, x, L->stat_dims, L->stat_count);
  return hlo_binary(b, "divide", sum, hlo_constant_like(b, sum, stat_size(L)));
}

/* The variance of x about its `mean` over the statistic dims, biased (it
 * divides by the count), as every normalization here uses it. */
static hlo_value stat_var(hlo_builder* b, hlo_value x, hlo_value mean, const norm_layout* L) {
  hlo_value centered = hlo_binary(b, "subtract", x, spread_stat(b, mean, L));
  return stat_mean(b, hlo_binary(b, "multiply", centered, centered), L);
}

/* Tensor argument `index` converted to t and spread over L's param dims;
 * HLO_INVALID when absent. */
static hlo_value param_arg(tpu_lowering* l, int index, const norm_layout* L) {
  if (tpu_lower_arg_kind(l, index) != TPU_ARG_TENSOR) return HLO_INVALID;
  hlo_builder* b = tpu_lower_builder(l);
  return spread(b, tpu_lower_value(l, index, L->shape.dtype), L, L->param_dims, L->param_count);
}

/* Output k set to v reshaped to the output's shape (zeros if it is empty:
 * statistics PyTorch does not keep come back as empty tensors). */
static void put(tpu_lowering* l, int k, hlo_value v) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type out = tpu_lower_output_type(l, k);
  if (hlo_type_numel(&out) == 0)
    v = hlo_constant(b, out.dtype, 0);
  else
    v = hlo_reshape(b, v, out.rank, out.dims);
  tpu_lower_set_output(l, k, v);
}

/* Sets the gradients that bool[] argument `mask` asks for, in order: the
 * others are absent (None), not outputs. */
static void put_masked(tpu_lowering* l, int mask, const hlo_value* grads, int count) {
  const double* wanted;
  int n = tpu_lower_float_list(l, mask, &wanted);
  bool all = tpu_lower_output_count(l) == count;
  for (int i = 0, k = 0; i < count; i++)
    if (all || (i < n && wanted[i])) put(l, k++, grads[i]);
}

/* Batch norm's layout: statistics per channel (dim 1), over the rest. */
static norm_layout batch_layout(tpu_lowering* l, int input) {
  norm_layout L = {tpu_lower_arg_type(l, input), {0}, 0, {1}, 1};
  L.shape.dtype = tpu_dtype_compute(L.shape.dtype);
  L.stat_count = complement(L.param_dims, 1, L.shape.rank, L.stat_dims);
  return L;
}

/* xhat = (x - mean) * rstd, or x * rstd without a mean (RMS norm); mean
 * and rstd already spread. */
static hlo_value normalized_x(hlo_builder* b, hlo_value x, hlo_value mean, hlo_value rstd) {
  return hlo_binary(b, "multiply", mean != HLO_INVALID ? hlo_binary(b, "subtract", x, mean) : x, rstd);
}

/* y = xhat [* w] [+ b]. */
static hlo_value normalize(hlo_builder* b, hlo_value x, hlo_value mean, hlo_value rstd,
                           hlo_value w, hlo_value bias) {
  hlo_value y = normalized_x(b, x, mean, rstd);
  if (w != HLO_INVALID) y = hlo_binary(b, "multiply", y, w);
  if (bias != HLO_INVALID) y = hlo_binary(b, "add", y, bias);
  return y;
}

static hlo_value rstd_of_var(hlo_builder* b, hlo_value var, double eps) {
  return hlo_unary(b, "rsqrt", hlo_binary(b, "add", var, hlo_constant_like(b, var, eps)));
}

/* Where a batch norm forward keeps its arguments: the ops differ in which
 * they take and whether training is an argument or implied. */
typedef struct batch_norm_form {
  const char* name;
  const char* overload;
  int stats;    /* running_mean's position (running_var follows); -1: none */
  int training; /* the bool's position; -1: train_fixed */
  bool train_fixed;
  int momentum; /* eps follows */
  int returns;  /* fresh returns (after the mutated running stats) */
} batch_norm_form;

static const batch_norm_form batch_norm_forms[] = {
    {"native_batch_norm", NULL, 3, 5, false, 6, 3},
    {"_native_batch_norm_legit", "no_stats", -1, 3, false, 4, 3},
    {"_native_batch_norm_legit", NULL, 3, 5, false, 6, 3},
    {"_native_batch_norm_legit_no_training", NULL, 3, -1, false, 5, 3},
    {"_batch_norm_with_update", NULL, 3, -1, true, 5, 4},
};

static const batch_norm_form* batch_norm_form_of(tpu_lowering* l) {
  const char* name = tpu_lower_op_name(l);
  const char* overload = tpu_lower_overload(l);
  for (size_t i = 0; i < sizeof batch_norm_forms / sizeof batch_norm_forms[0]; i++) {
    const batch_norm_form* f = &batch_norm_forms[i];
    bool overload_fits = !f->overload || !strncmp(overload, f->overload, strlen(f->overload));
    if (!strcmp(f->name, name) && overload_fits) return f;
  }
  return NULL;
}

/* Batch norm forward -> ([new running_mean, new running_var,] out,
 * save_mean, save_invstd[, reserve]). Training (or no running stats)
 * normalizes by the batch's statistics and moves the running ones toward
 * them by momentum, the variance unbiased; evaluation uses the running ones. */
static tpu_status lower_batch_norm(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  const batch_norm_form* f = batch_norm_form_of(l);
  if (!f) return TPU_ERROR(TPU_INTERNAL, "aten::%s has no batch norm form", tpu_lower_op_name(l));
  norm_layout L = batch_layout(l, 0);
  tpu_dtype t = L.shape.dtype;
  bool has_stats = f->stats >= 0 && tpu_lower_arg_kind(l, f->stats) == TPU_ARG_TENSOR &&
                   tpu_lower_arg_kind(l, f->stats + 1) == TPU_ARG_TENSOR;
  bool training = f->training >= 0 ? tpu_lower_bool(l, f->training, true) : f->train_fixed;
  double momentum = tpu_lower_float(l, f->momentum, 0.1);
  double eps = tpu_lower_float(l, f->momentum + 1, 1e-5);
  hlo_value x = tpu_lower_value(l, 0, t);
  hlo_value mean, var;
  if (training || !has_stats) {
    mean = stat_mean(b, x, &L);
    var = stat_var(b, x, mean, &L);
  } else {
    mean = tpu_lower_value(l, f->stats, t);
    var = tpu_lower_value(l, f->stats + 1, t);
  }
  hlo_value rstd = rstd_of_var(b, var, eps);
  int k = tpu_lower_output_count(l) - f->returns; /* mutated running stats first */
  if (k == 2) {
    hlo_value running_mean = tpu_lower_value(l, f->stats, t);
    hlo_value running_var = tpu_lower_value(l, f->stats + 1, t);
    if (training) {
      double n = stat_size(&L);
      hlo_value unbiased = hlo_binary(b, "multiply", var, hlo_constant_like(b, var, n / (n - 1)));
      hlo_value keep = hlo_constant_like(b, mean, 1 - momentum);
      hlo_value take = hlo_constant_like(b, mean, momentum);
      running_mean = hlo_binary(b, "add", hlo_binary(b, "multiply", keep, running_mean),
                                hlo_binary(b, "multiply", take, mean));
      running_var = hlo_binary(b, "add", hlo_binary(b, "multiply", keep, running_var),
                               hlo_binary(b, "multiply", take, unbiased));
    }
    put(l, 0, running_mean);
    put(l, 1, running_var);
  } else if (k != 0) {
    return TPU_ERROR(TPU_INTERNAL, "aten::%s: %d outputs", tpu_lower_op_name(l),
                     tpu_lower_output_count(l));
  }
  hlo_value y = normalize(b, x, spread_stat(b, mean, &L), spread_stat(b, rstd, &L),
                          param_arg(l, 1, &L), param_arg(l, 2, &L));
  put(l, k, y);
  put(l, k + 1, mean);
  put(l, k + 2, rstd);
  if (f->returns == 4) put(l, k + 3, hlo_constant(b, TPU_U8, 0)); /* reserve: empty */
  return NULL;
}

/* Gradients of y = xhat * w + b, xhat = (x - mean) * rstd, for dy, x of
 * L's shape: grads[0..2] = dx, dw, db (dw and db over L's param dims).
 * mean and rstd are spread; w is spread or HLO_INVALID; mean HLO_INVALID
 * is RMS norm's xhat = x * rstd. With fixed_stats mean and rstd are
 * constants (batch norm in evaluation); otherwise they are x's statistics
 * over L's stat dims and carry gradient too. */
static void norm_backward(hlo_builder* b, const norm_layout* L, hlo_value dy, hlo_value x,
                          hlo_value mean, hlo_value rstd, hlo_value w, bool fixed_stats,
                          hlo_value* grads) {
  int64_t rest[TPU_MAX_RANK];
  int n = complement(L->param_dims, L->param_count, L->shape.rank, rest);
  hlo_value xhat = normalized_x(b, x, mean, rstd);
  grads[1] = sum_over(b, hlo_binary(b, "multiply", dy, xhat), rest, n);
  grads[2] = sum_over(b, dy, rest, n);
  hlo_value g = w != HLO_INVALID ? hlo_binary(b, "multiply", dy, w) : dy;
  if (fixed_stats) {
    grads[0] = hlo_binary(b, "multiply", g, rstd);
    return;
  }
  /* dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), means over the stat
   * dims; without a mean in xhat, no mean(g) term. */
  hlo_value gx_mean = spread_stat(b, stat_mean(b, hlo_binary(b, "multiply", g, xhat), L), L);
  if (mean != HLO_INVALID) g = hlo_binary(b, "subtract", g, spread_stat(b, stat_mean(b, g, L), L));
  hlo_value centered = hlo_binary(b, "subtract", g, hlo_binary(b, "multiply", xhat, gx_mean));
  grads[0] = hlo_binary(b, "multiply", rstd, centered);
}

/* native_batch_norm_backward(grad_out, input, weight, running_mean,
 * running_var, save_mean, save_invstd, train, eps, output_mask) and
 * batch_norm_backward (the same, then reserve). */
static tpu_status lower_batch_norm_backward(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  norm_layout L = batch_layout(l, 1);
  tpu_dtype t = L.shape.dtype;
  bool train = tpu_lower_bool(l, 7, true);
  int stats = train ? 5 : 3;
  if (tpu_lower_arg_kind(l, stats) != TPU_ARG_TENSOR ||
      tpu_lower_arg_kind(l, stats + 1) != TPU_ARG_TENSOR) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::%s: needs %s", tpu_lower_op_name(l),
                   train ? "save_mean and save_invstd in training"
                         : "running_mean and running_var in evaluation");
    return NULL;
  }
  hlo_value mean = tpu_lower_value(l, stats, t), rstd = tpu_lower_value(l, stats + 1, t);
  if (!train) rstd = rstd_of_var(b, rstd, tpu_lower_float(l, 8, 1e-5));
  hlo_value grads[3];
  norm_backward(b, &L, tpu_lower_value(l, 0, t), tpu_lower_value(l, 1, t),
                spread_stat(b, mean, &L), spread_stat(b, rstd, &L), param_arg(l, 2, &L), !train,
                grads);
  put_masked(l, 9, grads, 3);
  return NULL;
}

/* x's statistics over L's stat dims, then y; sets outputs 0..2 to y, mean
 * and rstd. */
static void normalize_by_own_stats(tpu_lowering* l, const norm_layout* L, hlo_value x, double eps,
                                   hlo_value w, hlo_value bias) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value mean = stat_mean(b, x, L);
  hlo_value rstd = rstd_of_var(b, stat_var(b, x, mean, L), eps);
  put(l, 0, normalize(b, x, spread_stat(b, mean, L), spread_stat(b, rstd, L), w, bias));
  put(l, 1, mean);
  put(l, 2, rstd);
}

/* Layer norm's layout from (input, normalized_shape) at `input`, `input + 1`:
 * statistics and weight both span the trailing normalized dims. False (the
 * error recorded) when there are more normalized dims than input dims. */
static bool layer_layout(tpu_lowering* l, int input, norm_layout* L) {
  *L = (norm_layout){tpu_lower_arg_type(l, input), {0}, 0, {0}, 0};
  L->shape.dtype = tpu_dtype_compute(L->shape.dtype);
  const int64_t* normalized;
  int count = tpu_lower_int_list(l, input + 1, &normalized);
  if (count > L->shape.rank) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::%s: %d normalized dims for a %d-d input",
                   tpu_lower_op_name(l), count, L->shape.rank);
    return false;
  }
  for (int d = L->shape.rank - count; d < L->shape.rank; d++)
    L->stat_dims[L->stat_count++] = L->param_dims[L->param_count++] = d;
  return true;
}

/* native_layer_norm(input, normalized_shape, weight, bias, eps) -> (out,
 * mean, rstd). */
static tpu_status lower_layer_norm(tpu_lowering* l) {
  norm_layout L;
  if (!layer_layout(l, 0, &L)) return NULL;
  normalize_by_own_stats(l, &L, tpu_lower_value(l, 0, L.shape.dtype), tpu_lower_float(l, 4, 1e-5),
                         param_arg(l, 2, &L), param_arg(l, 3, &L));
  return NULL;
}

/* The backward of a norm over the trailing normalized dims (layer and RMS
 * norm): grad_out, input and normalized_shape at 0..2; the mean (-1: none,
 * RMS norm), rstd, weight and output_mask at the given positions; the first
 * grad_count of dx, dw, db. */
static tpu_status trailing_norm_backward(tpu_lowering* l, int mean, int rstd, int weight, int mask,
                                         int grad_count) {
  hlo_builder* b = tpu_lower_builder(l);
  norm_layout L;
  if (!layer_layout(l, 1, &L)) return NULL;
  tpu_dtype t = L.shape.dtype;
  hlo_value grads[3];
  hlo_value spread_mean = mean >= 0 ? spread_stat(b, tpu_lower_value(l, mean, t), &L) : HLO_INVALID;
  norm_backward(b, &L, tpu_lower_value(l, 0, t), tpu_lower_value(l, 1, t), spread_mean,
                spread_stat(b, tpu_lower_value(l, rstd, t), &L), param_arg(l, weight, &L), false, grads);
  put_masked(l, mask, grads, grad_count);
  return NULL;
}

/* native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd,
 * weight, bias, output_mask). */
static tpu_status lower_layer_norm_backward(tpu_lowering* l) {
  return trailing_norm_backward(l, 3, 4, 5, 7, 3);
}

/* RMS norm's eps when the call gives none: the compute dtype's epsilon. */
static double rms_eps(tpu_lowering* l, int index, tpu_dtype compute) {
  return tpu_lower_float(l, index, compute == TPU_F64 ? DBL_EPSILON : FLT_EPSILON);
}

/* _fused_rms_norm(input, normalized_shape, weight, eps) -> (out, rstd):
 * rstd = 1 / sqrt(mean(x^2) + eps) over the normalized dims. */
static tpu_status lower_rms_norm(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  norm_layout L;
  if (!layer_layout(l, 0, &L)) return NULL;
  hlo_value x = tpu_lower_value(l, 0, L.shape.dtype);
  hlo_value mean_square = stat_mean(b, hlo_binary(b, "multiply", x, x), &L);
  hlo_value rstd = rstd_of_var(b, mean_square, rms_eps(l, 3, L.shape.dtype));
  put(l, 0, normalize(b, x, HLO_INVALID, spread_stat(b, rstd, &L), param_arg(l, 2, &L), HLO_INVALID));
  put(l, 1, rstd);
  return NULL;
}

/* _fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight,
 * output_mask) -> (grad_input, grad_weight). */
static tpu_status lower_rms_norm_backward(tpu_lowering* l) {
  return trailing_norm_backward(l, -1, 3, 4, 5, 2);
}

/* Group norm's layout from (N, C, HxW, group) at `sizes`..: the input
 * (at `input`) worked as (N, group, C / group, HxW), the statistics per
 * (N, group), the weight per channel. False (the error recorded) when the
 * sizes do not fit the input. */
static bool group_layout(tpu_lowering* l, int input, int sizes, norm_layout* L) {
  int64_t n = tpu_lower_int(l, sizes, 0), c = tpu_lower_int(l, sizes + 1, 0), hw = tpu_lower_int(l, sizes + 2, 0);
  int64_t groups = tpu_lower_int(l, sizes + 3, 1);
  hlo_type in = tpu_lower_arg_type(l, input);
  if (groups <= 0 || c % groups != 0 || n * c * hw != hlo_type_numel(&in)) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT,
                   "aten::%s: N=%lld, C=%lld, HxW=%lld, group=%lld do not fit an input of %lld elements",
                   tpu_lower_op_name(l), (long long)n, (long long)c, (long long)hw, (long long)groups,
                   (long long)hlo_type_numel(&in));
    return false;
  }
  int64_t dims[4] = {n, groups, c / groups, hw};
  *L = (norm_layout){hlo_type_make(tpu_dtype_compute(in.dtype), 4, dims), {2, 3}, 2, {1, 2}, 2};
  return true;
}

/* Tensor argument `index` in L's (group norm's) working shape. */
static hlo_value grouped(tpu_lowering* l, int index, const norm_layout* L) {
  return hlo_reshape(tpu_lower_builder(l), tpu_lower_value(l, index, L->shape.dtype), 4, L->shape.dims);
}

/* native_group_norm(input, weight, bias, N, C, HxW, group, eps) -> (out,
 * mean [N, group], rstd [N, group]). */
static tpu_status lower_group_norm(tpu_lowering* l) {
  norm_layout L;
  if (!group_layout(l, 0, 3, &L)) return NULL;
  normalize_by_own_stats(l, &L, grouped(l, 0, &L), tpu_lower_float(l, 7, 1e-5), param_arg(l, 1, &L),
                         param_arg(l, 2, &L));
  return NULL;
}

/* native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C,
 * HxW, group, output_mask). */
static tpu_status lower_group_norm_backward(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  norm_layout L;
  if (!group_layout(l, 1, 5, &L)) return NULL;
  tpu_dtype t = L.shape.dtype;
  hlo_value grads[3];
  norm_backward(b, &L, grouped(l, 0, &L), grouped(l, 1, &L), spread_stat(b, tpu_lower_value(l, 2, t), &L),
                spread_stat(b, tpu_lower_value(l, 3, t), &L), param_arg(l, 4, &L), false, grads);
  put_masked(l, 9, grads, 3);
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"_fused_rms_norm", lower_rms_norm, 0},
    {"_fused_rms_norm_backward", lower_rms_norm_backward, 0},
    {"_batch_norm_with_update", lower_batch_norm, 0},
    {"_native_batch_norm_legit", lower_batch_norm, 0},
    {"_native_batch_norm_legit_no_training", lower_batch_norm, 0},
    {"batch_norm_backward", lower_batch_norm_backward, 0},
    {"native_batch_norm", lower_batch_norm, 0},
    {"native_batch_norm_backward", lower_batch_norm_backward, 0},
    {"native_group_norm", lower_group_norm, 0},
    {"native_group_norm_backward", lower_group_norm_backward, 0},
    {"native_layer_norm", lower_layer_norm, 0},
    {"native_layer_norm_backward", lower_layer_norm_backward, 0},
};

TPU_OP_FAMILY(tpu_ops_norm, entries);
