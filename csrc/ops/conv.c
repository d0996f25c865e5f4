/* Convolution lowerings: convolution (conv1d/2d/3d, grouped, transposed;
 * "same" padding arrives as explicit padding) and convolution_backward.
 *
 * Three convolutions serve every case. With x [N, C, H...], w [O, C/g,
 * K...] and y = conv(x, w) [N, O, Ho...]:
 *   forward:      y  = conv(x, w)
 *   input grad:   dx = conv of dy, dilated by the stride, with w flipped
 *                      and its in/out features swapped per group
 *   weight grad:  dw = conv of x (features as batch) with dy as the kernel,
 *                      dilated by the stride, the groups as batch groups
 * A transposed convolution is the input grad of the plain one with the same
 * parameters, so its forward, input grad and weight grad are the input
 * grad, forward and weight grad (with x and dy swapped) above.
 * float16/bfloat16 compute in float32 and round once. */
#include "hlo/conv_ops.h"
#include "ops/families.h"

typedef struct conv_params {
  int n; /* spatial dims */
  int64_t stride[HLO_MAX_SPATIAL];
  int64_t padding[HLO_MAX_SPATIAL];
  int64_t dilation[HLO_MAX_SPATIAL];
  int64_t groups;
  bool transposed;
} conv_params;

/* An int list of n entries; a single entry stands for all n. */
static bool read_list(tpu_lowering* l, int index, int n, int64_t fallback, int64_t* out) {
  const int64_t* items;
  int count = tpu_lower_int_list(l, index, &items);
  for (int i = 0; i < n; i++) out[i] = count == 0 ? fallback : items[count == 1 ? 0 : i];
  if (count == 0 || count == 1 || count == n) return true;
  tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::%s: %d values for %d spatial dims",
                 tpu_lower_op_name(l), count, n);
  return false;
}

/* Reads stride, padding, dilation, transposed and groups from position
 * `first` on (output_padding, at first + 4, only sets the transposed
 * output's size, which the output type gives), for a weight of rank n + 2. */
static bool read_params(tpu_lowering* l, int first, int weight_rank, conv_params* p) {
  p->n = weight_rank - 2;
  if (p->n < 1 || p->n > HLO_MAX_SPATIAL) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::%s: weight of rank %d; expected 3 to %d",
                   tpu_lower_op_name(l), weight_rank, HLO_MAX_SPATIAL + 2);
    return false;
  }
  p->transposed = tpu_lower_bool(l, first + 3, false);
  p->groups = tpu_lower_int(l, first + 5, 1);
  return read_list(l, first, p->n, 1, p->stride) && read_list(l, first + 1, p->n, 0, p->padding) &&
         read_list(l, first + 2, p->n, 1, p->dilation);
}

static hlo_conv base_conv(const conv_params* p) {
  hlo_conv c = {.spatial = p->n, .feature_groups = 1, .batch_groups = 1};
  for (int i = 0; i < p->n; i++) c.strides[i] = c.lhs_dilation[i] = c.rhs_dilation[i] = 1;
  return c;
}

/* y = conv(x, w): x [N, C, H...], w [O, C/g, K...]. */
static hlo_value conv_forward(hlo_builder* b, hlo_value x, hlo_value w, const conv_params* p) {
  hlo_conv c = base_conv(p);
  for (int i = 0; i < p->n; i++) {
    c.strides[i] = p->stride[i];
    c.pad_lo[i] = c.pad_hi[i] = p->padding[i];
    c.rhs_dilation[i] = p->dilation[i];
  }
  c.feature_groups = p->groups;
  return hlo_convolution(b, x, w, &c, hlo_type_of(b, x)->dtype);
}

/* dx of y = conv(x, w) from dy [N, O, Ho...], with x's spatial sizes
 * `size`: dy dilated by the stride, convolved with w flipped. The kernel's
 * input features must be dy's, per group: w [g*a, B, K...] becomes
 * [a, g*B, K...] read as [i, o]. */
static hlo_value conv_input_grad(hlo_builder* b, hlo_value dy, hlo_value w, const conv_params* p,
                                 const int64_t* size) {
  hlo_type wt = *hlo_type_of(b, w), dyt = *hlo_type_of(b, dy);
  int64_t g = p->groups, rank = wt.rank;
  if (g > 1) {
    int64_t split[TPU_MAX_RANK + 1] = {g, wt.dims[0] / g}, perm[TPU_MAX_RANK + 1] = {1, 0};
    for (int i = 1; i < rank; i++) split[i + 1] = wt.dims[i], perm[i + 1] = i + 1;
    w = hlo_transpose(b, hlo_reshape(b, w, (int)rank + 1, split), perm);
    int64_t merged[TPU_MAX_RANK] = {wt.dims[0] / g, g * wt.dims[1]};
    for (int i = 2; i < rank; i++) merged[i] = wt.dims[i];
    w = hlo_reshape(b, w, (int)rank, merged);
  }
  int64_t spatial[HLO_MAX_SPATIAL];
  for (int i = 0; i < p->n; i++) spatial[i] = i + 2;
  w = hlo_reverse(b, w, spatial, p->n);
  hlo_conv c = base_conv(p);
  c.rhs_input_first = true;
  c.feature_groups = g;
  for (int i = 0; i < p->n; i++) {
    int64_t extent = p->dilation[i] * (wt.dims[i + 2] - 1);
    c.lhs_dilation[i] = p->stride[i];
    c.rhs_dilation[i] = p->dilation[i];
    c.pad_lo[i] = extent - p->padding[i];
    c.pad_hi[i] = size[i] - 1 + p->padding[i] - (dyt.dims[i + 2] - 1) * p->stride[i];
  }
  return hlo_convolution(b, dy, w, &c, dyt.dtype);
}

/* dw [O, C/g, K...] of y = conv(x, w) from dy, for kernel sizes `kernel`:
 * x read as [f, b] (its batch is contracted), dy as the kernel [i, o]
 * dilated by the stride, each group of x's channels a batch group. */
static hlo_value conv_weight_grad(hlo_builder* b, hlo_value x, hlo_value dy, const conv_params* p,
                                  const int64_t* kernel) {
  hlo_type xt = *hlo_type_of(b, x), dyt = *hlo_type_of(b, dy);
  hlo_conv c = base_conv(p);
  c.lhs_feature_first = c.rhs_input_first = c.out_feature_first = true;
  c.batch_groups = p->groups;
  for (int i = 0; i < p->n; i++) {
    c.strides[i] = p->dilation[i];
    c.rhs_dilation[i] = p->stride[i];
    c.pad_lo[i] = p->padding[i];
    /* Exactly `kernel` outputs: rows of x past the last window drop. */
    c.pad_hi[i] = (kernel[i] - 1) * p->dilation[i] + (dyt.dims[i + 2] - 1) * p->stride[i] + 1 -
                  xt.dims[i + 2] - p->padding[i];
  }
  return hlo_convolution(b, x, dy, &c, xt.dtype);
}

/* Bias [O] added along dim 1 of y. */
static hlo_value add_bias(hlo_builder* b, hlo_value y, hlo_value bias) {
  hlo_type t = *hlo_type_of(b, y);
  int64_t dim = 1;
  return hlo_binary(b, "add", y, hlo_broadcast_in_dim(b, bias, t.rank, t.dims, &dim));
}

/* Spatial sizes (dims 2..) of a type. */
static const int64_t* spatial_dims(const hlo_type* t) { return t->dims + 2; }

/* convolution(input, weight, bias?, stride, padding, dilation, transposed,
 * output_padding, groups) */
static tpu_status lower_convolution(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type out = tpu_lower_output_type(l, 0);
  tpu_dtype t = tpu_dtype_compute(out.dtype);
  conv_params p;
  if (!read_params(l, 3, tpu_lower_arg_type(l, 1).rank, &p)) return NULL;
  hlo_value x = tpu_lower_value(l, 0, t), w = tpu_lower_value(l, 1, t);
  hlo_value y = p.transposed ? conv_input_grad(b, x, w, &p, spatial_dims(&out))
                             : conv_forward(b, x, w, &p);
  if (!tpu_lower_is_none(l, 2)) y = add_bias(b, y, tpu_lower_value(l, 2, t));
  tpu_lower_set_output(l, 0, y);
  return NULL;
}

/* convolution_backward(grad_output, input, weight, bias_sizes?, stride,
 * padding, dilation, transposed, output_padding, groups, output_mask)
 * -> (grad_input, grad_weight, grad_bias). Masked-off results are zeros
 * when they keep their output slot, and skipped when the call has fewer
 * than three outputs. */
static tpu_status lower_convolution_backward(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type wt = tpu_lower_arg_type(l, 2);
  tpu_dtype t = tpu_dtype_compute(wt.dtype);
  conv_params p;
  if (!read_params(l, 4, wt.rank, &p)) return NULL;
  const double* mask;
  int mask_count = tpu_lower_float_list(l, 10, &mask), outputs = tpu_lower_output_count(l);
  hlo_value dy = tpu_lower_value(l, 0, t), x = tpu_lower_value(l, 1, t);
  hlo_type xt = *hlo_type_of(b, x);
  for (int k = 0, slot = 0; k < 3 && slot < outputs; k++) {
    bool wanted = k >= mask_count || mask[k] != 0;
    if (!wanted && outputs < 3) continue;
    hlo_value r;
    if (!wanted) {
      r = hlo_constant(b, tpu_lower_output_type(l, slot).dtype, 0);
    } else if (k == 0) {
      hlo_value w = tpu_lower_value(l, 2, t);
      r = p.transposed ? conv_forward(b, dy, w, &p)
                       : conv_input_grad(b, dy, w, &p, spatial_dims(&xt));
    } else if (k == 1) {
      r = p.transposed ? conv_weight_grad(b, dy, x, &p, spatial_dims(&wt))
                       : conv_weight_grad(b, x, dy, &p, spatial_dims(&wt));
    } else {
      int64_t dims[TPU_MAX_RANK] = {0}; /* all but the features */
      for (int i = 1; i <= p.n; i++) dims[i] = i + 1;
      r = hlo_reduce(b, dy, hlo_constant(b, t, 0), "add", dims, p.n + 1);
    }
    tpu_lower_set_output(l, slot++, r);
  }
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"convolution", lower_convolution, 0},
    {"convolution_backward", lower_convolution_backward, 0},
};

TPU_OP_FAMILY(tpu_ops_conv, entries);
