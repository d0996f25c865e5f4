/* Reductions: sum, nansum, mean, prod, amax/amin/aminmax, max/min,
 * argmax/argmin, var/std (and var_mean/std_mean), vector norms, all/any,
 * count_nonzero, logsumexp, cumsum/cumprod, cummax/cummin, logcumsumexp,
 * trace, softmax/log_softmax and their backwards.
 *
 * Output dtypes come from PyTorch's meta kernels (dtype= arguments, integer
 * sums promoting to int64, half_to_float), so lowerings read the output type
 * instead of dtype arguments. keepdim needs no code: exec/ reshapes a result
 * to the output's shape when the element counts match. */
#include <math.h>
#include <string.h>

#include "hlo/complex_ops.h"
#include "hlo/elementwise_extra_ops.h"
#include "hlo/reduce_extra_ops.h"
#include "ops/families.h"

/* float16/bfloat16 accumulate in float32, as PyTorch's CPU kernels do. */
/* What a reduction covers: its input's type and the dims it reduces. */
typedef struct reduction {
  hlo_type in;
  int64_t dims[TPU_MAX_RANK];
  int count;
} reduction;

/* The reduction of tensor argument `input` over the dims named by argument
 * `index` (an int or int list), wrapped. None, a non-dim argument (an
 * overload without dims) or, when empty_is_all, [] mean every dim. A 0-d
 * tensor accepts dim 0 or -1 and reduces nothing. */
static reduction reduction_of(tpu_lowering* l, int input, int index, bool empty_is_all) {
  reduction r = {tpu_lower_arg_type(l, input), {0}, 0};
  const int64_t* items;
  int n = tpu_lower_int_list(l, index, &items);
  if (n == 0 && (empty_is_all || tpu_lower_arg_kind(l, index) != TPU_ARG_INT_LIST)) {
    for (int i = 0; i < r.in.rank; i++) r.dims[r.count++] = i;
    return r;
  }
  int wrap = r.in.rank > 0 ? r.in.rank : 1;
  for (int i = 0; i < n; i++) {
    int64_t d = items[i] < 0 ? items[i] + wrap : items[i];
    if (d < 0 || d >= wrap || r.count == TPU_MAX_RANK) {
      tpu_lower_fail(l, TPU_INVALID_ARGUMENT,
                     "aten::%s: dim %lld is out of range for a %d-d tensor",
                     tpu_lower_op_name(l), (long long)items[i], r.in.rank);
      return r;
    }
    if (r.in.rank > 0) r.dims[r.count++] = d;
  }
  return r;
}

/* How many elements each result combines. */
static int64_t reduced_count(const reduction* r) {
  int64_t count = 1;
  for (int i = 0; i < r->count; i++) count *= r->in.dims[r->dims[i]];
  return count;
}

/* The reducer's identity, which is also what an empty reduction gives. */
static hlo_value identity(hlo_builder* b, tpu_dtype t, const char* reducer) {
  if (!strcmp(reducer, "add") || !strcmp(reducer, "or")) return hlo_constant(b, t, 0);
  if (!strcmp(reducer, "multiply") || !strcmp(reducer, "and")) return hlo_constant(b, t, 1);
  bool highest = !strcmp(reducer, "minimum");
  if (tpu_dtype_is_float(t)) return hlo_constant(b, t, highest ? INFINITY : -INFINITY);
  if (t == TPU_BOOL) return hlo_constant(b, t, highest);
  int bits = (int)tpu_dtype_size(t) * 8;
  if (!tpu_dtype_is_signed_int(t))
    return hlo_constant_i64(b, t, highest ? (int64_t)(UINT64_MAX >> (64 - bits)) : 0);
  int64_t top = (int64_t)(UINT64_MAX >> (65 - bits));
  return hlo_constant_i64(b, t, highest ? top : -top - 1);
}

/* x (of the input's shape) converted to t and reduced; max and min let NaN
 * win. */
static hlo_value reduce(hlo_builder* b, hlo_value x, tpu_dtype t, const char* reducer,
                        const reduction* r) {
  x = hlo_convert(b, x, t);
  hlo_value init = identity(b, t, reducer);
  bool is_max = !strcmp(reducer, "maximum");
  if (is_max || !strcmp(reducer, "minimum"))
    return hlo_reduce_extreme(b, x, init, is_max, r->dims, r->count);
  return hlo_reduce(b, x, init, reducer, r->dims, r->count);
}

/* A 0-d value broadcast to like's shape. */
static hlo_value splat(hlo_builder* b, hlo_value scalar, hlo_value like) {
  const hlo_type* t = hlo_type_of(b, like);
  return hlo_broadcast_in_dim(b, scalar, t->rank, t->dims, NULL);
}

/* A reduced value broadcast back to the input's shape. */
static hlo_value expand_back(hlo_builder* b, hlo_value v, const reduction* r) {
  int64_t kept[TPU_MAX_RANK];
  int k = 0;
  for (int i = 0; i < r->in.rank; i++) {
    bool reduced = false;
    for (int j = 0; j < r->count; j++) reduced = reduced || r->dims[j] == i;
    if (!reduced) kept[k++] = i;
  }
  return hlo_broadcast_in_dim(b, v, r->in.rank, r->in.dims, kept);
}

/* sum, nansum, prod (self, dims or dim, keepdim, dtype): the input is cast
 * to the output dtype first, as PyTorch casts it for dtype=. */
static tpu_status lower_sum_prod(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  const char* name = tpu_lower_op_name(l);
  reduction r = reduction_of(l, 0, 1, true);
  tpu_dtype out = tpu_lower_output_type(l, 0).dtype;
  hlo_value x = hlo_convert(b, tpu_lower_value(l, 0, out), tpu_dtype_compute(out));
  if (!strcmp(name, "nansum") && tpu_dtype_is_float(out))
    x = hlo_select(b, hlo_compare(b, "NE", x, x), hlo_constant_like(b, x, 0), x);
  const char* reducer = !strcmp(name, "prod") ? "multiply" : "add";
  tpu_lower_set_output(l, 0, reduce(b, x, tpu_dtype_compute(out), reducer, &r));
  return NULL;
}

/* mean: a wide sum divided by the count (0/0 = nan for empty inputs). The
 * input goes straight to the accumulation type, as in PyTorch's CPU mean. */
static tpu_status lower_mean(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  reduction r = reduction_of(l, 0, 1, true);
  tpu_dtype t = tpu_dtype_compute(tpu_lower_output_type(l, 0).dtype);
  hlo_value sum = reduce(b, tpu_lower_value(l, 0, t), t, "add", &r);
  hlo_value count = hlo_constant_like(b, sum, (double)reduced_count(&r));
  tpu_lower_set_output(l, 0, hlo_binary(b, "divide", sum, count));
  return NULL;
}

/* Value and first index of the extreme along the reduction's one dim, or
 * over the flattened input otherwise (argmax's dim=None, a 0-d input). */
static void arg_extreme(hlo_builder* b, hlo_value x, const reduction* r, bool is_max,
                        hlo_value* out_values, hlo_value* out_indices) {
  if (r->count != 1) {
    int64_t numel = hlo_type_numel(&r->in);
    x = hlo_reshape(b, x, 1, &numel);
  }
  hlo_arg_reduce(b, x, r->count == 1 ? (int)r->dims[0] : 0, is_max, out_values, out_indices);
}

/* amax/amin(self, dims=[] meaning all), max/min(self) over everything, and
 * max/min.dim(self, dim, keepdim) -> (values, indices). NaN wins. */
static tpu_status lower_extreme(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  bool is_max = strstr(tpu_lower_op_name(l), "max") != NULL;
  reduction r = reduction_of(l, 0, 1, true);
  hlo_value x = tpu_lower_tensor(l, 0);
  if (tpu_lower_output_count(l) == 2) {
    hlo_value values, indices;
    arg_extreme(b, x, &r, is_max, &values, &indices);
    tpu_lower_set_output(l, 0, values);
    tpu_lower_set_output(l, 1, indices);
    return NULL;
  }
  tpu_lower_set_output(l, 0, reduce(b, x, r.in.dtype, is_max ? "maximum" : "minimum", &r));
  return NULL;
}

/* aminmax(self, dim=None, keepdim) -> (min, max). */
static tpu_status lower_aminmax(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  reduction r = reduction_of(l, 0, 1, true);
  hlo_value x = tpu_lower_tensor(l, 0);
  tpu_lower_set_output(l, 0, reduce(b, x, r.in.dtype, "minimum", &r));
  tpu_lower_set_output(l, 1, reduce(b, x, r.in.dtype, "maximum", &r));
  return NULL;
}

/* argmax/argmin(self, dim=None, keepdim): the first index of the extreme. */
static tpu_status lower_arg_extreme(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  reduction r = reduction_of(l, 0, 1, true);
  hlo_value values, indices;
  arg_extreme(b, tpu_lower_tensor(l, 0), &r, !strcmp(tpu_lower_op_name(l), "argmax"),
              &values, &indices);
  tpu_lower_set_output(l, 0, indices);
  return NULL;
}

/* var/std(self, dims, correction, keepdim) and var_mean/std_mean, which
 * also output the mean. Two passes (mean, then centered squares) divided by
 * max(N - correction, 0) as PyTorch does, so too few elements give inf or
 * nan. correction is a runtime scalar; None means 1. A complex input's
 * variance is that of its parts summed (its squares are |x - mean|^2), and
 * its mean stays complex. */
static tpu_status lower_moments(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  reduction r = reduction_of(l, 0, 1, true);
  tpu_dtype t = tpu_dtype_compute(tpu_lower_output_type(l, 0).dtype);
  tpu_dtype in = tpu_lower_arg_type(l, 0).dtype, mean_type = tpu_dtype_is_complex(in) ? in : t;
  hlo_value x = tpu_lower_value(l, 0, mean_type);
  hlo_value count = hlo_constant(b, mean_type, (double)reduced_count(&r));
  hlo_value sum = reduce(b, x, mean_type, "add", &r);
  hlo_value mean = hlo_binary(b, "divide", sum, splat(b, count, sum));
  hlo_value centered = hlo_binary(b, "subtract", x, expand_back(b, mean, &r));
  hlo_value square = tpu_dtype_is_complex(in)
                         ? hlo_binary(b, "add", hlo_binary(b, "multiply", hlo_real(b, centered), hlo_real(b, centered)),
                                      hlo_binary(b, "multiply", hlo_imag(b, centered), hlo_imag(b, centered)))
                         : hlo_binary(b, "multiply", centered, centered);
  count = hlo_constant(b, t, (double)reduced_count(&r));
  hlo_value m2 = reduce(b, hlo_convert(b, square, t), t, "add", &r);
  hlo_value correction =
      tpu_lower_is_none(l, 2) ? hlo_constant(b, t, 1) : tpu_lower_value(l, 2, t);
  hlo_value divisor = hlo_binary(b, "maximum", hlo_binary(b, "subtract", count, correction),
                                 hlo_constant(b, t, 0));
  hlo_value var = hlo_binary(b, "divide", m2, splat(b, divisor, m2));
  tpu_lower_set_output(l, 0, tpu_lower_op_name(l)[0] == 's' ? hlo_unary(b, "sqrt", var) : var);
  if (tpu_lower_output_count(l) == 2) tpu_lower_set_output(l, 1, mean);
  return NULL;
}

/* Vector norms: linalg_vector_norm(self, ord, dims, keepdim, dtype) and
 * norm(self, p, [dims, keepdim,] [dtype]). The order picks the formula, so
 * it is compiled in (these entries set TPU_OP_SCALARS_IN_KEY). */
static tpu_status lower_norm(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  double p = tpu_lower_is_none(l, 1) ? 2 : tpu_lower_scalar_constant(l, 1);
  reduction r = reduction_of(l, 0, 2, true);
  tpu_dtype out = tpu_lower_output_type(l, 0).dtype, t = tpu_dtype_compute(out);
  hlo_value x = tpu_lower_tensor(l, 0);
  if (tpu_dtype_is_complex(hlo_type_of(b, x)->dtype)) x = hlo_unary(b, "abs", x); /* the norm of the magnitudes */
  x = hlo_convert(b, hlo_convert(b, x, out), t);
  tpu_lower_set_output(l, 0, hlo_vector_norm(b, x, p, r.dims, r.count));
  return NULL;
}

/* renorm(self, p, dim, maxnorm): each slice along dim whose p-norm over the
 * other dims (in float32 or wider) exceeds maxnorm is scaled by
 * maxnorm / (norm + 1e-7), the factor rounded to self's dtype first, as in
 * PyTorch's kernels; other slices stay. p is compiled in (TPU_OP_SCALARS_IN_KEY). */
static tpu_status lower_renorm(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type in = tpu_lower_arg_type(l, 0);
  if (!tpu_dtype_is_float(in.dtype)) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::renorm: expected a floating point tensor, got %s; "
                   "convert it with .float() first", tpu_dtype_name(in.dtype));
    return NULL;
  }
  tpu_dtype t = tpu_dtype_compute(in.dtype);
  int64_t dim = tpu_lower_int(l, 2, 0), dims[TPU_MAX_RANK];
  if (dim < 0) dim += in.rank;
  int count = 0;
  for (int i = 0; i < in.rank; i++)
    if (i != dim) dims[count++] = i;
  hlo_value x = tpu_lower_value(l, 0, t);
  hlo_value norm = hlo_vector_norm(b, x, tpu_lower_scalar_constant(l, 1), dims, count);
  hlo_value maxnorm = splat(b, tpu_lower_value(l, 3, t), norm);
  hlo_value shrink = hlo_binary(b, "divide", maxnorm, hlo_binary(b, "add", norm, hlo_constant_like(b, norm, 1e-7)));
  hlo_value factor = hlo_select(b, hlo_compare(b, "GT", norm, maxnorm), shrink, hlo_constant_like(b, norm, 1));
  factor = hlo_convert(b, hlo_convert(b, factor, in.dtype), t);
  hlo_value spread = hlo_broadcast_in_dim(b, factor, in.rank, in.dims, &dim);
  tpu_lower_set_output(l, 0, hlo_binary(b, "multiply", x, spread));
  return NULL;
}

/* all/any(self, [dim or dims], keepdim): each element's truth (x != 0, so
 * NaN is true) combined by and/or. all.dims with dim=[] reduces nothing. */
static tpu_status lower_all_any(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  reduction r = reduction_of(l, 0, 1, false);
  hlo_value x = hlo_convert(b, tpu_lower_tensor(l, 0), TPU_BOOL);
  const char* reducer = !strcmp(tpu_lower_op_name(l), "all") ? "and" : "or";
  tpu_lower_set_output(l, 0, reduce(b, x, TPU_BOOL, reducer, &r));
  return NULL;
}

/* count_nonzero(self, dim=None) and count_nonzero.dim_IntList(self, dims). */
static tpu_status lower_count_nonzero(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  reduction r = reduction_of(l, 0, 1, true);
  hlo_value nonzero = hlo_convert(b, tpu_lower_tensor(l, 0), TPU_BOOL);
  tpu_lower_set_output(l, 0, reduce(b, nonzero, TPU_I64, "add", &r));
  return NULL;
}

/* x minus its max over dims: the shift that keeps exp from overflowing.
 * With finite_only an infinite max shifts by 0 instead (logsumexp's rule,
 * so a row of -inf gives -inf rather than nan). *out_max (optional) gets
 * the shift. Unless nan_max, the max may skip a NaN (XLA's plain maximum,
 * several times cheaper on XLA CPU than one letting NaN win): a NaN in a
 * row still makes the row's exp sum, so every result of it, NaN. */
static hlo_value shift_by_max(hlo_builder* b, hlo_value x, const reduction* r, bool finite_only,
                              bool nan_max, hlo_value* out_max) {
  tpu_dtype t = hlo_type_of(b, x)->dtype;
  hlo_value m = nan_max ? reduce(b, x, t, "maximum", r)
                        : hlo_reduce(b, x, identity(b, t, "maximum"), "maximum", r->dims, r->count);
  if (finite_only) m = hlo_select(b, hlo_unary(b, "is_finite", m), m, hlo_constant_like(b, m, 0));
  if (out_max) *out_max = m;
  return hlo_binary(b, "subtract", x, expand_back(b, m, r));
}

/* logsumexp(self, dims, keepdim) = max + log(sum(exp(x - max))); integer
 * inputs compute in the output's float dtype, complex ones shift by the
 * largest real part, as the CPU does. */
static tpu_status lower_logsumexp(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  reduction r = reduction_of(l, 0, 1, true);
  tpu_dtype t = tpu_dtype_compute(tpu_lower_output_type(l, 0).dtype);
  hlo_value x = tpu_lower_value(l, 0, t), m;
  hlo_value shifted = shift_by_max(b, hlo_real(b, x), &r, true, false, &m);
  if (tpu_dtype_is_complex(t)) {
    shifted = hlo_complex(b, shifted, hlo_imag(b, x));
    m = hlo_convert(b, m, t);
  }
  hlo_value sum = reduce(b, hlo_unary(b, "exponential", shifted), t, "add", &r);
  tpu_lower_set_output(l, 0, hlo_binary(b, "add", hlo_unary(b, "log", sum), m));
  return NULL;
}

/* _softmax/_log_softmax(self, dim, half_to_float) and _safe_softmax(self,
 * dim, dtype): stable (the max is subtracted first); half_to_float only
 * changes the output dtype, dtype converts the input first. _safe_softmax
 * gives 0 for a row whose every entry is -inf (attention that lets a query
 * see no key), where softmax gives NaN. */
static tpu_status lower_softmax(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  const char* name = tpu_lower_op_name(l);
  bool safe = !strcmp(name, "_safe_softmax");
  reduction r = reduction_of(l, 0, 1, true);
  tpu_dtype t = tpu_dtype_compute(safe ? tpu_lower_output_type(l, 0).dtype : r.in.dtype);
  hlo_value m;
  /* _safe_softmax's empty rows are those whose max is -inf, so there a NaN
   * must win the max. */
  hlo_value shifted = shift_by_max(b, tpu_lower_value(l, 0, t), &r, false, safe, &m);
  hlo_value e = hlo_unary(b, "exponential", shifted);
  hlo_value sum = expand_back(b, reduce(b, e, t, "add", &r), &r);
  hlo_value result = !strcmp(name, "_log_softmax") ? hlo_binary(b, "subtract", shifted, hlo_unary(b, "log", sum))
                                                   : hlo_binary(b, "divide", e, sum);
  if (safe) {
    hlo_value empty = hlo_compare(b, "EQ", m, hlo_constant_like(b, m, -__builtin_inf()));
    result = hlo_select(b, expand_back(b, empty, &r), hlo_constant_like(b, result, 0), result);
  }
  tpu_lower_set_output(l, 0, result);
  return NULL;
}

/* _softmax_backward_data(grad, output, dim, input_dtype):
 *   softmax:     output * (grad - sum(grad * output))
 *   log_softmax: grad - exp(output) * sum(grad) */
static tpu_status lower_softmax_backward(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  reduction r = reduction_of(l, 1, 2, true);
  tpu_dtype t = tpu_dtype_compute(r.in.dtype);
  hlo_value grad = tpu_lower_value(l, 0, t), y = tpu_lower_value(l, 1, t);
  hlo_value result;
  if (!strcmp(tpu_lower_op_name(l), "_log_softmax_backward_data")) {
    hlo_value sum = expand_back(b, reduce(b, grad, t, "add", &r), &r);
    hlo_value scaled = hlo_binary(b, "multiply", hlo_unary(b, "exponential", y), sum);
    result = hlo_binary(b, "subtract", grad, scaled);
  } else {
    hlo_value gy = hlo_binary(b, "multiply", grad, y);
    hlo_value sum = expand_back(b, reduce(b, gy, t, "add", &r), &r);
    result = hlo_binary(b, "multiply", y, hlo_binary(b, "subtract", grad, sum));
  }
  tpu_lower_set_output(l, 0, result);
  return NULL;
}

/* cumsum/cumprod(self, dim, dtype): a running sum/product in the output
 * dtype (integer inputs give int64), accumulated wider for half types. */
static tpu_status lower_cumulative(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  reduction r = reduction_of(l, 0, 1, true);
  tpu_dtype out = tpu_lower_output_type(l, 0).dtype, t = tpu_dtype_compute(out);
  hlo_value x = hlo_convert(b, tpu_lower_value(l, 0, out), t);
  const char* reducer = !strcmp(tpu_lower_op_name(l), "cumprod") ? "multiply" : "add";
  if (r.count == 1) x = hlo_cumulative(b, x, identity(b, t, reducer), reducer, (int)r.dims[0]);
  tpu_lower_set_output(l, 0, x);
  return NULL;
}

/* _cummax_helper/_cummin_helper(self, values!, indices!, dim): the running
 * max (min) and the index where it was last reached, as PyTorch's scan
 * gives them: a tie takes the later index, and a NaN stays, with the last
 * NaN's index. A position holding the running value (or a NaN) is a
 * record; the index is the running max of the records' positions. */
static tpu_status lower_cumulative_extreme(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  reduction r = reduction_of(l, 0, 3, true);
  bool is_max = strstr(tpu_lower_op_name(l), "cummax") != NULL;
  hlo_value x = tpu_lower_tensor(l, 0);
  if (r.count != 1) { /* a 0-d input: itself, at index 0 */
    tpu_lower_set_output(l, 0, x);
    tpu_lower_set_output(l, 1, hlo_constant(b, TPU_I64, 0));
    return NULL;
  }
  int dim = (int)r.dims[0];
  hlo_value init = identity(b, r.in.dtype, is_max ? "maximum" : "minimum");
  hlo_value values = hlo_cumulative_extreme(b, x, init, is_max, dim);
  hlo_value record = hlo_compare(b, "EQ", x, values);
  if (tpu_dtype_is_float(r.in.dtype)) record = hlo_binary(b, "or", record, hlo_compare(b, "NE", x, x));
  hlo_type it = r.in;
  it.dtype = TPU_I64;
  hlo_value position = hlo_iota(b, it, dim);
  hlo_value marked = hlo_select(b, record, position, hlo_constant_like(b, position, -1));
  tpu_lower_set_output(l, 0, values);
  tpu_lower_set_output(l, 1, hlo_cumulative(b, marked, hlo_constant_i64(b, TPU_I64, -1), "maximum", dim));
  return NULL;
}

/* log(exp(x) + exp(y)) as PyTorch's logcumsumexp combines two terms:
 * max + log1p(exp(min - max)); the same infinity twice gives itself, a
 * NaN gives NaN. */
static hlo_value log_add_exp(hlo_builder* b, hlo_value x, hlo_value y, const void* unused) {
  hlo_value big = hlo_min_max(b, "maximum", x, y, true), small = hlo_min_max(b, "minimum", x, y, true);
  hlo_value gap = hlo_unary(b, "exponential", hlo_binary(b, "subtract", small, big));
  hlo_value sum = hlo_binary(b, "add", big, hlo_unary(b, "log_plus_one", gap));
  hlo_value same_infinity = hlo_binary(b, "and", hlo_compare(b, "EQ", small, big),
                                       hlo_unary(b, "not", hlo_unary(b, "is_finite", small)));
  return hlo_select(b, same_infinity, big, sum);
}

/* _logcumsumexp(self, dim): a running log_add_exp, in float32 for
 * float16/bfloat16. */
static tpu_status lower_logcumsumexp(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  reduction r = reduction_of(l, 0, 1, true);
  tpu_dtype t = tpu_dtype_compute(tpu_lower_output_type(l, 0).dtype);
  hlo_value x = tpu_lower_value(l, 0, t);
  if (r.count == 1) x = hlo_scan(b, x, hlo_constant(b, t, -INFINITY), log_add_exp, NULL, (int)r.dims[0]);
  tpu_lower_set_output(l, 0, x);
  return NULL;
}

/* trace(self): the sum of a matrix's diagonal, in the output's dtype (int64
 * for integers) or float32 for float16/bfloat16, as PyTorch accumulates. */
static tpu_status lower_trace(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type in = tpu_lower_arg_type(l, 0);
  if (in.rank != 2) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::trace: expected a matrix, got %d dims", in.rank);
    return NULL;
  }
  tpu_dtype t = tpu_dtype_compute(tpu_lower_output_type(l, 0).dtype);
  hlo_value x = tpu_lower_value(l, 0, t);
  hlo_type grid = hlo_type_make(TPU_I64, 2, in.dims);
  hlo_value diagonal = hlo_compare(b, "EQ", hlo_iota(b, grid, 0), hlo_iota(b, grid, 1));
  hlo_value kept = hlo_select(b, diagonal, x, hlo_constant_like(b, x, 0));
  int64_t dims[2] = {0, 1};
  tpu_lower_set_output(l, 0, hlo_reduce(b, kept, hlo_constant(b, t, 0), "add", dims, 2));
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"_cummax_helper", lower_cumulative_extreme, 0},
    {"_cummin_helper", lower_cumulative_extreme, 0},
    {"_log_softmax", lower_softmax, 0},
    {"_log_softmax_backward_data", lower_softmax_backward, 0},
    {"_safe_softmax", lower_softmax, 0},
    {"_softmax", lower_softmax, 0},
    {"_logcumsumexp", lower_logcumsumexp, 0},
    {"_softmax_backward_data", lower_softmax_backward, 0},
    {"all", lower_all_any, TPU_OP_COMPLEX},
    {"amax", lower_extreme, 0},
    {"amin", lower_extreme, 0},
    {"aminmax", lower_aminmax, 0},
    {"any", lower_all_any, TPU_OP_COMPLEX},
    {"argmax", lower_arg_extreme, 0},
    {"argmin", lower_arg_extreme, 0},
    {"count_nonzero", lower_count_nonzero, TPU_OP_COMPLEX},
    {"cumprod", lower_cumulative, TPU_OP_COMPLEX},
    {"cumsum", lower_cumulative, TPU_OP_COMPLEX},
    {"linalg_vector_norm", lower_norm, TPU_OP_SCALARS_IN_KEY | TPU_OP_COMPLEX},
    {"logsumexp", lower_logsumexp, TPU_OP_COMPLEX},
    {"max", lower_extreme, 0},
    {"mean", lower_mean, TPU_OP_COMPLEX},
    {"min", lower_extreme, 0},
    {"nansum", lower_sum_prod, 0},
    {"norm", lower_norm, TPU_OP_SCALARS_IN_KEY | TPU_OP_COMPLEX},
    {"prod", lower_sum_prod, TPU_OP_COMPLEX},
    {"renorm", lower_renorm, TPU_OP_SCALARS_IN_KEY},
    {"std", lower_moments, TPU_OP_COMPLEX},
    {"std_mean", lower_moments, TPU_OP_COMPLEX},
    {"sum", lower_sum_prod, TPU_OP_COMPLEX},
    {"trace", lower_trace, TPU_OP_COMPLEX},
    {"var", lower_moments, TPU_OP_COMPLEX},
    {"var_mean", lower_moments, TPU_OP_COMPLEX},
};

TPU_OP_FAMILY(tpu_ops_reduce, entries);
