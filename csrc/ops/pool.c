/* Pooling lowerings over the last two dims of [C, H, W] or [N, C, H, W]
 * inputs: max_pool2d_with_indices, avg_pool2d, _adaptive_avg_pool2d and
 * their backward ops (max_pool1d and avg_pool1d arrive as these).
 * Output sizes come from PyTorch's meta kernels; sums run in float32 for
 * float16/bfloat16. */
#include "hlo/conv_ops.h"
#include "hlo/slice_ops.h"
#include "ops/families.h"

#define POOL_DIMS 2

typedef struct pool_params {
  int rank; /* of the input */
  int64_t kernel[POOL_DIMS], stride[POOL_DIMS], padding[POOL_DIMS], dilation[POOL_DIMS];
  int64_t in[POOL_DIMS], out[POOL_DIMS]; /* spatial sizes */
} pool_params;

/* Zeros of dtype t and the given shape. */
static hlo_value zeros(hlo_builder* b, tpu_dtype t, int rank, const int64_t* dims) {
  return hlo_broadcast_in_dim(b, hlo_constant(b, t, 0), rank, dims, NULL);
}

/* An int list of POOL_DIMS entries: one entry stands for both; empty
 * gives `fallback` (NULL: zeros). */
static bool read_pair(tpu_lowering* l, int index, const int64_t* fallback, int64_t* out) {
  const int64_t* items;
  int count = tpu_lower_int_list(l, index, &items);
  if (count > POOL_DIMS) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::%s: %d values where %d were expected",
                   tpu_lower_op_name(l), count, POOL_DIMS);
    return false;
  }
  for (int i = 0; i < POOL_DIMS; i++)
    out[i] = count ? items[count == 1 ? 0 : i] : fallback ? fallback[i] : 0;
  return true;
}

/* Kernel, stride, padding (and dilation if `dilated`) from position `first`
 * on, for an input of type `in` pooled to `out`. */
static bool read_params(tpu_lowering* l, int first, bool dilated, const hlo_type* in,
                        const hlo_type* out, pool_params* p) {
  p->rank = in->rank;
  for (int i = 0; i < POOL_DIMS; i++) {
    p->in[i] = in->dims[in->rank - POOL_DIMS + i];
    p->out[i] = out->dims[out->rank - POOL_DIMS + i];
    p->dilation[i] = 1;
  }
  return read_pair(l, first, NULL, p->kernel) && read_pair(l, first + 1, p->kernel, p->stride) &&
         read_pair(l, first + 2, NULL, p->padding) &&
         (!dilated || read_pair(l, first + 3, p->dilation, p->dilation));
}

/* The pooling window: padding `padding` before, and after as much as the
 * last window needs (ceil_mode windows may pass the padded end). */
static hlo_window pool_window(const pool_params* p) {
  hlo_window w = hlo_window_identity(p->rank);
  for (int i = 0; i < POOL_DIMS; i++) {
    int d = p->rank - POOL_DIMS + i;
    int64_t end = (p->out[i] - 1) * p->stride[i] + (p->kernel[i] - 1) * p->dilation[i] + 1;
    w.dims[d] = p->kernel[i];
    w.strides[d] = p->stride[i];
    w.dilations[d] = p->dilation[i];
    w.pad_lo[d] = p->padding[i];
    w.pad_hi[d] = end - p->in[i] - p->padding[i] > 0 ? end - p->in[i] - p->padding[i] : 0;
  }
  return w;
}

/* A [Ho, Wo] value broadcast to `t`. */
static hlo_value spread(hlo_builder* b, hlo_value v, const hlo_type* t) {
  int64_t dims[POOL_DIMS] = {t->rank - 2, t->rank - 1};
  return hlo_broadcast_in_dim(b, v, t->rank, t->dims, dims);
}

/* The smallest value of dtype t: what max pooling pads with. */
static hlo_value lowest_value(hlo_builder* b, tpu_dtype t) {
  if (tpu_dtype_is_float(t)) return hlo_constant(b, t, -__builtin_inf());
  if (!tpu_dtype_is_signed_int(t)) return hlo_constant(b, t, 0);
  int bits = (int)tpu_dtype_size(t) * 8;
  return hlo_constant_i64(b, t, bits == 64 ? INT64_MIN : -((int64_t)1 << (bits - 1)));
}

/* max_pool2d_with_indices(self, kernel, stride, padding, dilation,
 * ceil_mode) -> (values, indices into each H*W plane) */
static tpu_status lower_max_pool(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type in = tpu_lower_arg_type(l, 0), out = tpu_lower_output_type(l, 0);
  pool_params p;
  if (!read_params(l, 1, true, &in, &out, &p)) return NULL;
  hlo_value x = tpu_lower_tensor(l, 0);
  hlo_type it = in;
  it.dtype = TPU_I64;
  hlo_value rows = hlo_iota(b, it, in.rank - 2), cols = hlo_iota(b, it, in.rank - 1);
  hlo_value index = hlo_binary(b, "add", hlo_binary_constant(b, "multiply", rows, p.in[1]), cols);
  hlo_window w = pool_window(&p);
  hlo_value values, indices;
  hlo_reduce_window_argmax(b, x, index, lowest_value(b, in.dtype),
                           hlo_constant_i64(b, TPU_I64, INT64_MAX), &w, &values, &indices);
  tpu_lower_set_output(l, 0, values);
  tpu_lower_set_output(l, 1, indices);
  return NULL;
}

/* max_pool2d_with_indices_backward(grad_output, self, kernel, stride,
 * padding, dilation, ceil_mode, indices): each gradient added at its
 * index, planes flattened to one dim. */
static tpu_status lower_max_pool_backward(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type out = tpu_lower_output_type(l, 0), dyt = tpu_lower_arg_type(l, 0);
  tpu_dtype t = tpu_dtype_compute(out.dtype);
  int64_t plane = out.dims[out.rank - 2] * out.dims[out.rank - 1];
  int64_t windows = dyt.dims[dyt.rank - 2] * dyt.dims[dyt.rank - 1];
  int64_t planes = plane ? hlo_type_numel(&out) / plane : 0, flat = planes * plane;
  int64_t shape[2] = {planes, windows};
  hlo_value dy = hlo_reshape(b, tpu_lower_value(l, 0, t), 2, shape);
  hlo_value index = hlo_reshape(b, tpu_lower_value(l, 7, TPU_I64), 2, shape);
  hlo_value base = hlo_iota(b, hlo_type_make(TPU_I64, 2, shape), 0);
  index = hlo_binary(b, "add", index, hlo_binary_constant(b, "multiply", base, plane));
  hlo_value dx = hlo_put(b, zeros(b, t, 1, &flat), 0, index, dy, "add");
  tpu_lower_set_output(l, 0, hlo_reshape(b, dx, out.rank, out.dims));
  return NULL;
}

/* How many elements each avg_pool window divides by, [Ho, Wo] in dtype t:
 * the window clipped to the padded input (count_include_pad) or to the
 * input, or divisor_override. */
static hlo_value avg_divisor(hlo_builder* b, const pool_params* p, bool include_pad,
                             int64_t divisor_override, tpu_dtype t) {
  if (divisor_override) return hlo_constant(b, t, (double)divisor_override);
  hlo_value counts = HLO_INVALID;
  for (int i = 0; i < POOL_DIMS; i++) {
    hlo_type grid = hlo_type_make(TPU_I64, POOL_DIMS, p->out);
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

/* avg_pool2d(self, kernel, stride, padding, ceil_mode, count_include_pad,
 * divisor_override?) */
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
  tpu_lower_set_output(l, 0, hlo_binary(b, "divide", sum, spread(b, divisor, &st)));
  return NULL;
}

/* avg_pool2d_backward(grad_output, self, kernel, stride, padding,
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
  hlo_value g = hlo_binary(b, "divide", dy, spread(b, divisor, &dyt));
  hlo_window fwd = pool_window(&p), w = hlo_window_identity(in.rank);
  int64_t lo[TPU_MAX_RANK] = {0}, hi[TPU_MAX_RANK] = {0}, interior[TPU_MAX_RANK] = {0};
  int64_t start[TPU_MAX_RANK] = {0}, limit[TPU_MAX_RANK], step[TPU_MAX_RANK];
  for (int d = 0; d < in.rank; d++) limit[d] = in.dims[d], step[d] = 1;
  for (int i = 0; i < POOL_DIMS; i++) {
    int d = in.rank - POOL_DIMS + i;
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

/* The two axes' windows and the product of their counts [Ho, Wo]. */
static hlo_value adaptive_setup(hlo_builder* b, const int64_t* in, const int64_t* out, tpu_dtype t,
                                adaptive_axis* axes) {
  for (int i = 0; i < POOL_DIMS; i++) axes[i] = adaptive_windows(b, in[i], out[i], t);
  int64_t d0 = 0, d1 = 1;
  return hlo_binary(b, "multiply", hlo_broadcast_in_dim(b, axes[0].count, 2, out, &d0),
                    hlo_broadcast_in_dim(b, axes[1].count, 2, out, &d1));
}

/* Spatial sizes of a type. */
static void spatial_sizes(const hlo_type* t, int64_t* out) {
  for (int i = 0; i < POOL_DIMS; i++) out[i] = t->dims[t->rank - POOL_DIMS + i];
}

/* _adaptive_avg_pool2d(self, output_size): per axis, take each window's
 * positions, zero those past its end (a select, so inf and nan stay in
 * their windows) and sum; then divide by the window sizes. */
static tpu_status lower_adaptive_avg_pool(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type in = tpu_lower_arg_type(l, 0), out = tpu_lower_output_type(l, 0);
  tpu_dtype t = tpu_dtype_compute(out.dtype);
  int64_t sin[POOL_DIMS], sout[POOL_DIMS];
  spatial_sizes(&in, sin);
  spatial_sizes(&out, sout);
  adaptive_axis axes[POOL_DIMS];
  hlo_value counts = adaptive_setup(b, sin, sout, t, axes);
  hlo_value x = tpu_lower_value(l, 0, t);
  for (int i = 0; i < POOL_DIMS; i++) {
    int d = in.rank - POOL_DIMS + i;
    hlo_value taken = hlo_take(b, x, d, axes[i].index);
    hlo_type tt = *hlo_type_of(b, taken);
    int64_t at[2] = {d, d + 1};
    hlo_value mask = hlo_broadcast_in_dim(b, axes[i].mask, tt.rank, tt.dims, at);
    taken = hlo_select(b, mask, taken, hlo_constant_like(b, taken, 0));
    int64_t window_dim = d + 1;
    x = hlo_reduce(b, taken, hlo_constant(b, t, 0), "add", &window_dim, 1);
  }
  hlo_type xt = *hlo_type_of(b, x);
  tpu_lower_set_output(l, 0, hlo_binary(b, "divide", x, spread(b, counts, &xt)));
  return NULL;
}

/* _adaptive_avg_pool2d_backward(grad_output, self): grad/size added back
 * at every position of each window, one axis at a time. */
static tpu_status lower_adaptive_avg_pool_backward(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type in = tpu_lower_arg_type(l, 1), dyt = tpu_lower_arg_type(l, 0);
  tpu_dtype t = tpu_dtype_compute(tpu_lower_output_type(l, 0).dtype);
  int64_t sin[POOL_DIMS], sout[POOL_DIMS];
  spatial_sizes(&in, sin);
  spatial_sizes(&dyt, sout);
  adaptive_axis axes[POOL_DIMS];
  hlo_value counts = adaptive_setup(b, sin, sout, t, axes);
  hlo_value g = hlo_binary(b, "divide", tpu_lower_value(l, 0, t), spread(b, counts, &dyt));
  for (int i = POOL_DIMS - 1; i >= 0; i--) {
    int d = in.rank - POOL_DIMS + i;
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
    g = hlo_put(b, zeros(b, t, target.rank, target.dims), d, axes[i].index, spread_g, "add");
  }
  tpu_lower_set_output(l, 0, g);
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"_adaptive_avg_pool2d", lower_adaptive_avg_pool, false},
    {"_adaptive_avg_pool2d_backward", lower_adaptive_avg_pool_backward, false},
    {"avg_pool2d", lower_avg_pool, false},
    {"avg_pool2d_backward", lower_avg_pool_backward, false},
    {"max_pool2d_with_indices", lower_max_pool, false},
    {"max_pool2d_with_indices_backward", lower_max_pool_backward, false},
};

TPU_OP_FAMILY(tpu_ops_pool, entries);
