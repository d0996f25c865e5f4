/* Pooling lowerings over the last two dims of [C, H, W] or [N, C, H, W]
 * inputs (the 2d ops; max_pool1d and avg_pool1d arrive as these) or the
 * last three of [C, D, H, W] or [N, C, D, H, W] (the 3d ops):
 * max_pool{2,3}d_with_indices, avg_pool{2,3}d, _adaptive_avg_pool{2,3}d,
 * adaptive_max_pool{2,3}d, fractional_max_pool{2,3}d and their backward
 * ops. Output sizes come from PyTorch's meta kernels; sums run in float32
 * for float16/bfloat16. */
#include <stdlib.h>
#include <string.h>

#include "hlo/conv_ops.h"
#include "hlo/elementwise_extra_ops.h"
#include "hlo/slice_ops.h"
#include "ops/families.h"

#define POOL_DIMS 3 /* the most spatial dims an op pools */

typedef struct pool_params {
  int rank; /* of the input */
  int n;    /* spatial dims pooled: the last n */
  int64_t kernel[POOL_DIMS], stride[POOL_DIMS], padding[POOL_DIMS], dilation[POOL_DIMS];
  int64_t in[POOL_DIMS], out[POOL_DIMS]; /* spatial sizes */
} pool_params;

/* How many trailing dims the op pools: 3 for the 3d ops, else 2. */
static int spatial_dims(tpu_lowering* l) { return strstr(tpu_lower_op_name(l), "3d") ? 3 : 2; }

/* An int list of n entries: one entry stands for all; empty gives
 * `fallback` (NULL: zeros). */
static bool read_sizes(tpu_lowering* l, int index, int n, const int64_t* fallback, int64_t* out) {
  const int64_t* items;
  int count = tpu_lower_int_list(l, index, &items);
  if (count > n || (count > 1 && count < n)) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::%s: %d values where 1 or %d were expected",
                   tpu_lower_op_name(l), count, n);
    return false;
  }
  for (int i = 0; i < n; i++) out[i] = count ? items[count == 1 ? 0 : i] : fallback ? fallback[i] : 0;
  return true;
}

/* Kernel, stride, padding (and dilation if `dilated`) from position `first`
 * on, for an input of type `in` pooled to `out`. */
static bool read_params(tpu_lowering* l, int first, bool dilated, const hlo_type* in,
                        const hlo_type* out, pool_params* p) {
  p->rank = in->rank;
  p->n = spatial_dims(l);
  for (int i = 0; i < p->n; i++) {
    p->in[i] = in->dims[in->rank - p->n + i];
    p->out[i] = out->dims[out->rank - p->n + i];
    p->dilation[i] = 1;
  }
  return read_sizes(l, first, p->n, NULL, p->kernel) && read_sizes(l, first + 1, p->n, p->kernel, p->stride) &&
         read_sizes(l, first + 2, p->n, NULL, p->padding) &&
         (!dilated || read_sizes(l, first + 3, p->n, p->dilation, p->dilation));
}

/* The pooling window: padding `padding` before, and after as much as the
 * last window needs (ceil_mode windows may pass the padded end). */
static hlo_window pool_window(const pool_params* p) {
  hlo_window w = hlo_window_identity(p->rank);
  for (int i = 0; i < p->n; i++) {
    int d = p->rank - p->n + i;
    int64_t end = (p->out[i] - 1) * p->stride[i] + (p->kernel[i] - 1) * p->dilation[i] + 1;
    w.dims[d] = p->kernel[i];
    w.strides[d] = p->stride[i];
    w.dilations[d] = p->dilation[i];
    w.pad_lo[d] = p->padding[i];
    w.pad_hi[d] = end - p->in[i] - p->padding[i] > 0 ? end - p->in[i] - p->padding[i] : 0;
  }
  return w;
}

/* A value of the n output spatial sizes ([Ho, Wo] or [Do, Ho, Wo])
 * broadcast to `t`. */
static hlo_value spread(hlo_builder* b, hlo_value v, int n, const hlo_type* t) {
  int64_t dims[POOL_DIMS];
  for (int i = 0; i < n; i++) dims[i] = t->rank - n + i;
  return hlo_broadcast_in_dim(b, v, t->rank, t->dims, dims);
}

/* Each element's index in its plane (n = 2) or volume (n = 3), i64 of t's
 * shape: what max pooling returns as indices. */
static hlo_value flat_index(hlo_builder* b, const hlo_type* t, int n) {
  hlo_type it = *t;
  it.dtype = TPU_I64;
  hlo_value index = hlo_iota(b, it, t->rank - n);
  for (int i = 1; i < n; i++)
    index = hlo_binary(b, "add", hlo_binary_constant(b, "multiply", index, t->dims[t->rank - n + i]),
                       hlo_iota(b, it, t->rank - n + i));
  return index;
}

/* Windows of at most this many positions are pooled one position at a
 * time: XLA CPU runs a reduce_window of value and index together as a
 * scalar loop nest, three times slower at ResNet's 3x3 windows than the
 * strided slices and selects below, which it fuses into loops over the
 * output. Past it the slices would make too large a program. */
#define MAX_POOL_SLICED_POSITIONS 64

/* The max of each window of x (padding takes `lowest`) and its index in
 * x's plane or volume, from one strided slice per window position. The
 * index is PyTorch's scan's: the first position (row-major) holding the
 * max, not counting padding, or where the max is NaN the last NaN. Both
 * come from selects in a fixed order, not from a running comparison of
 * value and index pairs (a third slower). Indices come from iotas of the
 * output's shape, so XLA fuses them in rather than reading them. */
static void max_pool_sliced(hlo_builder* b, hlo_value x, hlo_value lowest, const hlo_window* w,
                            const pool_params* p, hlo_value* values, hlo_value* indices) {
  int64_t zero[TPU_MAX_RANK] = {0}, start[TPU_MAX_RANK] = {0}, limit[TPU_MAX_RANK], step[TPU_MAX_RANK];
  hlo_type t = *hlo_type_of(b, x), grid = t;
  grid.dtype = TPU_I64;
  hlo_value padded = hlo_pad(b, x, lowest, w->pad_lo, w->pad_hi, zero);
  /* first[i]: where each window starts along spatial dim i (negative in
   * the padding); first_flat: the same as an index into the plane. */
  hlo_value first[POOL_DIMS], first_flat = HLO_INVALID;
  int64_t inner[POOL_DIMS], positions = 1;
  for (int i = p->n - 1; i >= 0; i--) {
    grid.dims[p->rank - p->n + i] = p->out[i];
    inner[i] = i == p->n - 1 ? 1 : inner[i + 1] * p->in[i + 1];
    positions *= p->kernel[i];
  }
  for (int i = 0; i < p->n; i++) {
    first[i] = hlo_binary_constant(b, "multiply", hlo_iota(b, grid, p->rank - p->n + i), p->stride[i]);
    first[i] = hlo_binary_constant(b, "subtract", first[i], p->padding[i]);
    hlo_value scaled = hlo_binary_constant(b, "multiply", first[i], inner[i]);
    first_flat = i ? hlo_binary(b, "add", first_flat, scaled) : scaled;
  }
  hlo_value* v = malloc((size_t)positions * 3 * sizeof *v);
  if (!v) {
    *values = *indices = hlo_fail(b, TPU_OUT_OF_MEMORY, "out of host memory pooling");
    return;
  }
  hlo_value *at = v + positions, *inside = at + positions; /* inside: HLO_INVALID where always */
  for (int i = 0; i < p->rank; i++) limit[i] = t.dims[i], step[i] = 1;
  for (int64_t k = 0; k < positions; k++) {
    int64_t rest = k, shift = 0;
    inside[k] = HLO_INVALID;
    for (int i = p->n - 1; i >= 0; rest /= p->kernel[i], i--) {
      int d = p->rank - p->n + i;
      int64_t offset = rest % p->kernel[i] * p->dilation[i];
      start[d] = offset;
      limit[d] = offset + (p->out[i] - 1) * p->stride[i] + 1;
      step[d] = p->stride[i];
      shift += offset * inner[i];
      if (w->pad_lo[d] == 0 && w->pad_hi[d] == 0) continue;
      /* first + offset in [0, in) */
      hlo_value lo = hlo_constant_like(b, first[i], (double)-offset);
      hlo_value hi = hlo_constant_like(b, first[i], (double)(p->in[i] - offset));
      hlo_value in_dim =
          hlo_binary(b, "and", hlo_compare(b, "GE", first[i], lo), hlo_compare(b, "LT", first[i], hi));
      inside[k] = inside[k] == HLO_INVALID ? in_dim : hlo_binary(b, "and", inside[k], in_dim);
    }
    v[k] = hlo_slice(b, padded, start, limit, step);
    at[k] = hlo_binary_constant(b, "add", first_flat, (double)shift);
  }
  hlo_value max = v[0];
  for (int64_t k = 1; k < positions; k++) max = hlo_min_max(b, "maximum", max, v[k], true);
  /* Last to first, so the first match is selected last. */
  hlo_value index = at[positions - 1];
  for (int64_t k = positions - 2; k >= 0; k--) {
    hlo_value match = hlo_compare(b, "EQ", v[k], max);
    if (inside[k] != HLO_INVALID) match = hlo_binary(b, "and", match, inside[k]);
    index = hlo_select(b, match, at[k], index);
  }
  if (tpu_dtype_is_float(t.dtype)) {
    hlo_value nan_index = at[0];
    for (int64_t k = 1; k < positions; k++)
      nan_index = hlo_select(b, hlo_compare(b, "NE", v[k], v[k]), at[k], nan_index);
    index = hlo_select(b, hlo_compare(b, "NE", max, max), nan_index, index);
  }
  free(v);
  *values = max;
  *indices = index;
}

/* max_pool{2,3}d_with_indices(self, kernel, stride, padding, dilation,
 * ceil_mode) -> (values, indices into each H*W plane or D*H*W volume) */
static tpu_status lower_max_pool(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type in = tpu_lower_arg_type(l, 0), out = tpu_lower_output_type(l, 0);
  pool_params p;
  if (!read_params(l, 1, true, &in, &out, &p)) return NULL;
  hlo_value x = tpu_lower_tensor(l, 0);
  hlo_value lowest = hlo_constant_extreme(b, in.dtype, false);
  hlo_window w = pool_window(&p);
  /* The slices need positive sizes (PyTorch's checks see to it; the
   * reduce_window takes any), each at most the bound so the product
   * cannot overflow. */
  int64_t positions = 1;
  bool sliced = true;
  for (int i = 0; i < p.n; i++) {
    sliced = sliced && p.kernel[i] > 0 && p.kernel[i] <= MAX_POOL_SLICED_POSITIONS && p.out[i] > 0;
    if (sliced) positions *= p.kernel[i];
  }
  hlo_value values, indices;
  if (sliced && positions <= MAX_POOL_SLICED_POSITIONS)
    max_pool_sliced(b, x, lowest, &w, &p, &values, &indices);
  else
    hlo_reduce_window_argmax(b, x, flat_index(b, &in, p.n), lowest,
                             hlo_constant_i64(b, TPU_I64, INT64_MAX), &w, &values, &indices);
  tpu_lower_set_output(l, 0, values);
  tpu_lower_set_output(l, 1, indices);
  return NULL;
}

/* The values of argument `from` put at the indices of argument `at` (same
 * shape) in the output's planes (or volumes), each flattened to one dim;
 * combiner "add" sums values that meet, NULL keeps one of them. XLA drops
 * an update whose index is out of range. */
static tpu_status put_in_planes(tpu_lowering* l, int from, int at, const char* combiner) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type out = tpu_lower_output_type(l, 0), in = tpu_lower_arg_type(l, from);
  tpu_dtype t = tpu_dtype_compute(out.dtype);
  int64_t plane = 1, windows = 1;
  for (int i = 1; i <= spatial_dims(l); i++) {
    plane *= out.dims[out.rank - i];
    windows *= in.dims[in.rank - i];
  }
  int64_t planes = plane ? hlo_type_numel(&out) / plane : 0, flat = planes * plane;
  int64_t shape[2] = {planes, windows};
  hlo_value values = hlo_reshape(b, tpu_lower_value(l, from, t), 2, shape);
  hlo_value index = hlo_reshape(b, tpu_lower_value(l, at, TPU_I64), 2, shape);
  hlo_value base = hlo_iota(b, hlo_type_make(TPU_I64, 2, shape), 0);
  index = hlo_binary(b, "add", index, hlo_binary_constant(b, "multiply", base, plane));
  hlo_value placed = hlo_put(b, hlo_filled(b, t, 1, &flat, 0), 0, index, values, combiner);
  tpu_lower_set_output(l, 0, hlo_reshape(b, placed, out.rank, out.dims));
  return NULL;
}

/* max_pool{2,3}d_with_indices_backward(grad_output, self, kernel, stride,
 * padding, dilation, ceil_mode, indices),
 * adaptive_max_pool{2,3}d_backward(grad_output, self, indices) and
 * fractional_max_pool{2,3}d_backward(grad_output, self, kernel,
 * output_size, indices): each gradient added at its index. */
static tpu_status lower_max_pool_backward(tpu_lowering* l) {
  return put_in_planes(l, 0, tpu_lower_arg_count(l) - 1, "add");
}

/* max_unpool2d(self, indices, output_size) and max_unpool3d(self, indices,
 * output_size, stride, padding): each value at its index in a zero output.
 * An index out of range is dropped (PyTorch's CPU raises, as debug mode's
 * index check does). Its gradient is a gather. */
static tpu_status lower_max_unpool(tpu_lowering* l) {
  tpu_dtype t = tpu_lower_arg_type(l, 0).dtype;
  if (!tpu_dtype_is_float(t)) {
    tpu_lower_fail(l, TPU_UNIMPLEMENTED, "aten::%s is not implemented for %s, as on the CPU; convert to a float type",
                   tpu_lower_op_name(l), tpu_dtype_name(t));
    return NULL;
  }
  return put_in_planes(l, 0, 1, NULL);
}

/* How many elements each avg_pool window divides by, in dtype t and of the
 * output's spatial sizes:
 * the window clipped to the padded input (count_include_pad) or to the
 * input, or divisor_override. */
static hlo_value avg_divisor(hlo_builder* b, const pool_params* p, bool include_pad,
                             int64_t divisor_override, tpu_dtype t) {
  if (divisor_override) return hlo_constant(b, t, (double)divisor_override);
  hlo_value counts = HLO_INVALID;
  for (int i = 0; i < p->n; i++) {
    hlo_type grid = hlo_type_make(TPU_I64, p->n, p->out);
    hlo_value start = hlo_binary_constant(b, "multiply", hlo_iota(b, grid, i), p->stride[i]);
    start = hlo_binary_constant(b, "subtract", start, p->padding[i]);
    hlo_value end = hlo_binary_constant(b, "add", start, p->kernel[i]);
    end = hlo_binary_constant(b, "minimum", end, p->in[i] + p->padding[i]);
    if (!include_pad) {
      start = hlo_binary_constant(b, "maximum", start, 0);
      end = hlo_binary_constant(b, "minimum", end, p->in[i]);
    }
    hlo_value count = hlo_binary(b, "subtract", end, start);
    counts = i ? hlo_binary(b, "multiply", counts, count) : count;
  }
  return hlo_convert(b, counts, t);
}

/* avg_pool{2,3}d(self, kernel, stride, padding, ceil_mode,
 * count_include_pad, divisor_override?) */
static tpu_status lower_avg_pool(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type in = tpu_lower_arg_type(l, 0), out = tpu_lower_output_type(l, 0);
  tpu_dtype t = tpu_dtype_compute(out.dtype);
  pool_params p;
  if (!read_params(l, 1, false, &in, &out, &p)) return NULL;
  hlo_window w = pool_window(&p);
  hlo_value sum = hlo_reduce_window(b, tpu_lower_value(l, 0, t), hlo_constant(b, t, 0), "add", &w);
  hlo_type st = *hlo_type_of(b, sum);
  hlo_value divisor = avg_divisor(b, &p, tpu_lower_bool(l, 5, true), tpu_lower_int(l, 6, 0), t);
  tpu_lower_set_output(l, 0, hlo_binary(b, "divide", sum, spread(b, divisor, p.n, &st)));
  return NULL;
}

/* avg_pool{2,3}d_backward(grad_output, self, kernel, stride, padding,
 * ceil_mode, count_include_pad, divisor_override?): each input element
 * sums grad/divisor over the windows holding it. The grads, spaced by the
 * stride and padded by kernel - 1, summed over kernel-sized windows give
 * that sum at every padded input position. */
static tpu_status lower_avg_pool_backward(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type in = tpu_lower_arg_type(l, 1), dyt = tpu_lower_arg_type(l, 0);
  tpu_dtype t = tpu_dtype_compute(tpu_lower_output_type(l, 0).dtype);
  pool_params p;
  if (!read_params(l, 2, false, &in, &dyt, &p)) return NULL;
  hlo_value dy = tpu_lower_value(l, 0, t);
  hlo_value divisor = avg_divisor(b, &p, tpu_lower_bool(l, 6, true), tpu_lower_int(l, 7, 0), t);
  hlo_value g = hlo_binary(b, "divide", dy, spread(b, divisor, p.n, &dyt));
  hlo_window fwd = pool_window(&p), w = hlo_window_identity(in.rank);
  int64_t lo[TPU_MAX_RANK] = {0}, hi[TPU_MAX_RANK] = {0}, interior[TPU_MAX_RANK] = {0};
  int64_t start[TPU_MAX_RANK] = {0}, limit[TPU_MAX_RANK], step[TPU_MAX_RANK];
  for (int d = 0; d < in.rank; d++) limit[d] = in.dims[d], step[d] = 1;
  for (int i = 0; i < p.n; i++) {
    int d = in.rank - p.n + i;
    int64_t padded = p.padding[i] + p.in[i] + fwd.pad_hi[d];
    lo[d] = p.kernel[i] - 1;
    hi[d] = padded - (p.out[i] - 1) * p.stride[i] - 1;
    interior[d] = p.stride[i] - 1;
    w.dims[d] = p.kernel[i];
    start[d] = p.padding[i];
    limit[d] = p.padding[i] + p.in[i];
  }
  hlo_value spaced = hlo_pad(b, g, hlo_constant(b, t, 0), lo, hi, interior);
  hlo_value sums = hlo_reduce_window(b, spaced, hlo_constant(b, t, 0), "add", &w);
  tpu_lower_set_output(l, 0, hlo_slice(b, sums, start, limit, step));
  return NULL;
}

/* Adaptive pooling windows along one axis: output o averages input
 * [floor(o*in/out), ceil((o+1)*in/out)). index [out, m] holds each
 * window's positions (m the widest window; past its end, clamped) and mask
 * [out, m] which of them are inside; count [out] (dtype t) the sizes. */
typedef struct adaptive_axis {
  hlo_value index, mask, count;
  int64_t m;
} adaptive_axis;

static adaptive_axis adaptive_windows(hlo_builder* b, int64_t in, int64_t out, tpu_dtype t) {
  adaptive_axis a = {HLO_INVALID, HLO_INVALID, HLO_INVALID, 1};
  for (int64_t o = 0; o < out; o++) {
    int64_t size = ((o + 1) * in + out - 1) / out - o * in / out;
    if (size > a.m) a.m = size;
  }
  int64_t dims[2] = {out, a.m};
  hlo_type grid = hlo_type_make(TPU_I64, 2, dims);
  hlo_value o = hlo_iota(b, grid, 0), j = hlo_iota(b, grid, 1);
  hlo_value scaled = hlo_binary_constant(b, "multiply", o, in);
  hlo_value start = hlo_binary_constant(b, "divide", scaled, out);
  hlo_value end = hlo_binary_constant(b, "add", scaled, in + out - 1);
  end = hlo_binary_constant(b, "divide", end, out);
  hlo_value size = hlo_binary(b, "subtract", end, start);
  a.mask = hlo_compare(b, "LT", j, size);
  a.index = hlo_binary_constant(b, "minimum", hlo_binary(b, "add", start, j), in - 1);
  int64_t first[2] = {0, 0}, limit[2] = {out, 1}, step[2] = {1, 1};
  a.count = hlo_convert(b, hlo_reshape(b, hlo_slice(b, size, first, limit, step), 1, &out), t);
  return a;
}

/* The n axes' windows and the product of their counts, of the output's
 * spatial sizes. */
static hlo_value adaptive_setup(hlo_builder* b, int n, const int64_t* in, const int64_t* out, tpu_dtype t,
                                adaptive_axis* axes) {
  hlo_value counts = HLO_INVALID;
  for (int64_t i = 0; i < n; i++) {
    axes[i] = adaptive_windows(b, in[i], out[i], t);
    hlo_value count = hlo_broadcast_in_dim(b, axes[i].count, n, out, &i);
    counts = i ? hlo_binary(b, "multiply", counts, count) : count;
  }
  return counts;
}

/* The last n sizes of a type. */
static void spatial_sizes(const hlo_type* t, int n, int64_t* out) {
  for (int i = 0; i < n; i++) out[i] = t->dims[t->rank - n + i];
}

/* _adaptive_avg_pool{2,3}d(self, output_size): per axis, take each window's
 * positions, zero those past its end (a select, so inf and nan stay in
 * their windows) and sum; then divide by the window sizes. */
static tpu_status lower_adaptive_avg_pool(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type in = tpu_lower_arg_type(l, 0), out = tpu_lower_output_type(l, 0);
  tpu_dtype t = tpu_dtype_compute(out.dtype);
  int n = spatial_dims(l);
  int64_t sin[POOL_DIMS], sout[POOL_DIMS];
  spatial_sizes(&in, n, sin);
  spatial_sizes(&out, n, sout);
  adaptive_axis axes[POOL_DIMS];
  hlo_value counts = adaptive_setup(b, n, sin, sout, t, axes);
  hlo_value x = tpu_lower_value(l, 0, t);
  for (int i = 0; i < n; i++) {
    int d = in.rank - n + i;
    hlo_value taken = hlo_take(b, x, d, axes[i].index);
    hlo_type tt = *hlo_type_of(b, taken);
    int64_t at[2] = {d, d + 1};
    hlo_value mask = hlo_broadcast_in_dim(b, axes[i].mask, tt.rank, tt.dims, at);
    taken = hlo_select(b, mask, taken, hlo_constant_like(b, taken, 0));
    int64_t window_dim = d + 1;
    x = hlo_reduce(b, taken, hlo_constant(b, t, 0), "add", &window_dim, 1);
  }
  hlo_type xt = *hlo_type_of(b, x);
  tpu_lower_set_output(l, 0, hlo_binary(b, "divide", x, spread(b, counts, n, &xt)));
  return NULL;
}

/* _adaptive_avg_pool{2,3}d_backward(grad_output, self): grad/size added back
 * at every position of each window, one axis at a time. */
static tpu_status lower_adaptive_avg_pool_backward(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type in = tpu_lower_arg_type(l, 1), dyt = tpu_lower_arg_type(l, 0);
  tpu_dtype t = tpu_dtype_compute(tpu_lower_output_type(l, 0).dtype);
  int n = spatial_dims(l);
  int64_t sin[POOL_DIMS], sout[POOL_DIMS];
  spatial_sizes(&in, n, sin);
  spatial_sizes(&dyt, n, sout);
  adaptive_axis axes[POOL_DIMS];
  hlo_value counts = adaptive_setup(b, n, sin, sout, t, axes);
  hlo_value g = hlo_binary(b, "divide", tpu_lower_value(l, 0, t), spread(b, counts, n, &dyt));
  for (int i = n - 1; i >= 0; i--) {
    int d = in.rank - n + i;
    hlo_type gt = *hlo_type_of(b, g), wide = gt, target = gt;
    int64_t keep[TPU_MAX_RANK];
    wide.rank++;
    for (int k = 0; k < gt.rank; k++) {
      keep[k] = k <= d ? k : k + 1;
      wide.dims[keep[k]] = gt.dims[k];
    }
    wide.dims[d + 1] = axes[i].m;
    target.dims[d] = sin[i];
    int64_t at[2] = {d, d + 1};
    hlo_value spread_g = hlo_broadcast_in_dim(b, g, wide.rank, wide.dims, keep);
    hlo_value mask = hlo_broadcast_in_dim(b, axes[i].mask, wide.rank, wide.dims, at);
    spread_g = hlo_select(b, mask, spread_g, hlo_constant_like(b, spread_g, 0));
    g = hlo_put(b, hlo_filled(b, t, target.rank, target.dims, 0), d, axes[i].index, spread_g, "add");
  }
  tpu_lower_set_output(l, 0, g);
  return NULL;
}

/* adaptive_max_pool{2,3}d(self, output_size) -> (values, indices into
 * each plane or volume). One axis at a time from the last: take each
 * window's positions (those past its end as the lowest value) and keep
 * the max and its index, the first one or the last NaN. Windows end with
 * their masked positions, so reducing the last axis first, then the ones
 * before, finds the row-major first max (last NaN) of PyTorch's scan. */
static tpu_status lower_adaptive_max_pool(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type in = tpu_lower_arg_type(l, 0), out = tpu_lower_output_type(l, 0);
  int n = spatial_dims(l);
  int64_t sin[POOL_DIMS], sout[POOL_DIMS];
  spatial_sizes(&in, n, sin);
  spatial_sizes(&out, n, sout);
  hlo_value values = tpu_lower_tensor(l, 0), index = flat_index(b, &in, n);
  hlo_value lowest = hlo_constant_extreme(b, in.dtype, false), no_index = hlo_constant_i64(b, TPU_I64, INT64_MAX);
  for (int i = n - 1; i >= 0; i--) {
    int d = in.rank - n + i;
    adaptive_axis axis = adaptive_windows(b, sin[i], sout[i], TPU_F32);
    hlo_value taken = hlo_take(b, values, d, axis.index), where = hlo_take(b, index, d, axis.index);
    hlo_type tt = *hlo_type_of(b, taken);
    int64_t at[2] = {d, d + 1};
    hlo_value mask = hlo_broadcast_in_dim(b, axis.mask, tt.rank, tt.dims, at);
    taken = hlo_select(b, mask, taken, hlo_broadcast_in_dim(b, lowest, tt.rank, tt.dims, NULL));
    hlo_window w = hlo_window_identity(tt.rank);
    w.dims[d + 1] = axis.m;
    hlo_reduce_window_argmax(b, taken, where, lowest, no_index, &w, &values, &index);
    for (int k = d + 1; k + 1 < tt.rank; k++) tt.dims[k] = tt.dims[k + 1]; /* drop the window dim, now 1 */
    tt.rank--;
    values = hlo_reshape(b, values, tt.rank, tt.dims);
    index = hlo_reshape(b, index, tt.rank, tt.dims);
  }
  tpu_lower_set_output(l, 0, values);
  tpu_lower_set_output(l, 1, index);
  return NULL;
}

/* x `op` y, rounded to `dtype` when the values are wider: ATen computes
 * fractional pooling's windows in the samples' dtype, rounding each step
 * (bfloat16 and float16 too), and a window one position off is a
 * different result, not a rounding error. */
static hlo_value round_to(hlo_builder* b, hlo_value x, tpu_dtype dtype) {
  tpu_dtype wide = hlo_type_of(b, x)->dtype;
  return wide == dtype ? x : hlo_convert(b, hlo_convert(b, x, dtype), wide);
}

static hlo_value rounded_op(hlo_builder* b, const char* op, hlo_value x, hlo_value y, tpu_dtype dtype) {
  return round_to(b, hlo_binary(b, op, x, y), dtype);
}

/* Where each of `out` fractional windows of size `kernel` starts along an
 * axis of `in`, for each plane's sample u ([planes], dtype's compute
 * type): trunc((o + u) alpha) - trunc(u alpha) with alpha = (in - kernel)
 * / (out - 1), the last window ending at the axis' end. [planes, out] i64. */
static hlo_value fractional_starts(hlo_builder* b, hlo_value u, int64_t planes, int64_t in, int64_t out,
                                   int64_t kernel, tpu_dtype dtype) {
  int64_t dims[2] = {planes, out}, along_planes = 0;
  hlo_type grid = hlo_type_make(TPU_I64, 2, dims);
  hlo_value last = hlo_filled(b, TPU_I64, 2, dims, (double)(in - kernel));
  if (out == 1) return last;
  tpu_dtype t = tpu_dtype_compute(dtype);
  hlo_value alpha = rounded_op(b, "divide", round_to(b, hlo_constant(b, t, (double)(in - kernel)), dtype),
                               round_to(b, hlo_constant(b, t, (double)(out - 1)), dtype), dtype);
  alpha = hlo_broadcast_in_dim(b, alpha, 2, dims, NULL);
  u = hlo_broadcast_in_dim(b, u, 2, dims, &along_planes);
  hlo_value o = hlo_iota(b, grid, 1);
  hlo_value shifted = rounded_op(b, "add", round_to(b, hlo_convert(b, o, t), dtype), u, dtype);
  hlo_value end = hlo_convert(b, rounded_op(b, "multiply", shifted, alpha, dtype), TPU_I64);
  hlo_value begin = hlo_convert(b, rounded_op(b, "multiply", u, alpha, dtype), TPU_I64);
  hlo_value is_last = hlo_compare(b, "EQ", o, hlo_constant_like(b, o, (double)(out - 1)));
  return hlo_select(b, is_last, last, hlo_binary(b, "subtract", end, begin));
}

/* fractional_max_pool{2,3}d(self, kernel, output_size, random_samples) ->
 * (values, indices into each plane or volume). random_samples [N', C, n]
 * (N' at least the batch, 1 when unbatched) places each plane's windows
 * along each axis (fractional_starts); ATen reads a 2d plane's samples
 * as (w, h) and a 3d volume's as (t, h, w). Each window's positions are
 * gathered and one reduce_window over them keeps the max and its index,
 * the first one or the last NaN, as ATen's scan. */
static tpu_status lower_fractional_max_pool(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type in = tpu_lower_arg_type(l, 0), out = tpu_lower_output_type(l, 0), st = tpu_lower_arg_type(l, 3);
  int n = spatial_dims(l);
  int64_t kernel[POOL_DIMS], sin[POOL_DIMS], sout[POOL_DIMS];
  if (!read_sizes(l, 1, n, NULL, kernel)) return NULL;
  spatial_sizes(&in, n, sin);
  spatial_sizes(&out, n, sout);
  if (hlo_type_numel(&out) == 0) { /* XLA rejects gathering from nothing */
    tpu_lower_set_output(l, 0, hlo_filled(b, out.dtype, out.rank, out.dims, 0));
    tpu_lower_set_output(l, 1, hlo_filled(b, TPU_I64, out.rank, out.dims, 0));
    return NULL;
  }
  int64_t plane = 1, windows = 1, positions = 1;
  for (int i = 0; i < n; i++) plane *= sin[i], windows *= sout[i], positions *= kernel[i];
  int64_t planes = hlo_type_numel(&in) / plane, channels = in.dims[in.rank - n - 1];
  tpu_dtype dtype = st.dtype;
  int64_t first[3] = {0, 0, 0}, limit[3] = {planes / channels, channels, n}, step[3] = {1, 1, 1};
  int64_t per_plane[2] = {planes, n};
  hlo_value samples = hlo_slice(b, tpu_lower_value(l, 3, tpu_dtype_compute(dtype)), first, limit, step);
  samples = hlo_reshape(b, samples, 2, per_plane);
  /* index [planes, out..., kernel...]: each window position's place in its plane. */
  int64_t shape[1 + 2 * POOL_DIMS] = {planes}, inner = plane;
  for (int i = 0; i < n; i++) shape[1 + i] = sout[i], shape[1 + n + i] = kernel[i];
  hlo_value index = HLO_INVALID;
  for (int i = 0; i < n; i++) {
    int column = n == 2 ? n - 1 - i : i;
    inner /= sin[i];
    hlo_value u = hlo_reshape(b, hlo_slice_dim(b, samples, 1, column, column + 1), 1, &planes);
    hlo_value starts = fractional_starts(b, u, planes, sin[i], sout[i], kernel[i], dtype);
    int64_t axis[3] = {planes, sout[i], kernel[i]}, keep[2] = {0, 1}, at[3] = {0, 1 + i, 1 + n + i};
    hlo_value pos = hlo_binary(b, "add", hlo_broadcast_in_dim(b, starts, 3, axis, keep),
                               hlo_iota(b, hlo_type_make(TPU_I64, 3, axis), 2));
    pos = hlo_broadcast_in_dim(b, hlo_binary_constant(b, "multiply", pos, (double)inner), 1 + 2 * n, shape, at);
    index = i ? hlo_binary(b, "add", index, pos) : pos;
  }
  int64_t flat[2] = {planes, windows * positions}, grouped[3] = {planes, windows, positions}, x_dims[2] = {planes, plane};
  hlo_value x = hlo_reshape(b, tpu_lower_tensor(l, 0), 2, x_dims);
  hlo_value taken = hlo_gather_elements(b, x, 1, hlo_reshape(b, index, 2, flat));
  hlo_window w = hlo_window_identity(3);
  w.dims[2] = positions;
  hlo_value values, indices;
  hlo_reduce_window_argmax(b, hlo_reshape(b, taken, 3, grouped), hlo_reshape(b, index, 3, grouped),
                           hlo_constant_extreme(b, in.dtype, false), hlo_constant_i64(b, TPU_I64, INT64_MAX), &w,
                           &values, &indices);
  tpu_lower_set_output(l, 0, hlo_reshape(b, values, out.rank, out.dims));
  tpu_lower_set_output(l, 1, hlo_reshape(b, indices, out.rank, out.dims));
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"_adaptive_avg_pool2d", lower_adaptive_avg_pool, 0},
    {"_adaptive_avg_pool2d_backward", lower_adaptive_avg_pool_backward, 0},
    {"_adaptive_avg_pool3d", lower_adaptive_avg_pool, 0},
    {"_adaptive_avg_pool3d_backward", lower_adaptive_avg_pool_backward, 0},
    {"adaptive_max_pool2d", lower_adaptive_max_pool, 0},
    {"adaptive_max_pool2d_backward", lower_max_pool_backward, 0},
    {"adaptive_max_pool3d", lower_adaptive_max_pool, 0},
    {"adaptive_max_pool3d_backward", lower_max_pool_backward, 0},
    {"avg_pool2d", lower_avg_pool, 0},
    {"avg_pool2d_backward", lower_avg_pool_backward, 0},
    {"avg_pool3d", lower_avg_pool, 0},
    {"avg_pool3d_backward", lower_avg_pool_backward, 0},
    {"fractional_max_pool2d", lower_fractional_max_pool, 0},
    {"fractional_max_pool2d_backward", lower_max_pool_backward, 0},
    {"fractional_max_pool3d", lower_fractional_max_pool, 0},
    {"fractional_max_pool3d_backward", lower_max_pool_backward, 0},
    {"max_pool2d_with_indices", lower_max_pool, 0},
    {"max_pool2d_with_indices_backward", lower_max_pool_backward, 0},
    {"max_pool3d_with_indices", lower_max_pool, 0},
    {"max_pool3d_with_indices_backward", lower_max_pool_backward, 0},
    {"max_unpool2d", lower_max_unpool, 0},
    {"max_unpool3d", lower_max_unpool, 0},
};

TPU_OP_FAMILY(tpu_ops_pool, entries);
