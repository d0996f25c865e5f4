/* convolution and reduce_window (the ops with a sliding window), and index
 * arithmetic. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hlo/builder_impl.h"
#include "hlo/conv_ops.h"

/* ", padding = dense<[[lo, hi], ...]> : tensor<nx2xi64>" appended at len. */
static size_t padding_attr(char* buf, size_t size, size_t len, const int64_t* lo,
                           const int64_t* hi, int n) {
  len += (size_t)snprintf(buf + len, len < size ? size - len : 0, ", padding = dense<[");
  for (int i = 0; i < n; i++)
    len += (size_t)snprintf(buf + len, len < size ? size - len : 0, "%s[%lld, %lld]",
                            i ? ", " : "", (long long)lo[i], (long long)hi[i]);
  len += (size_t)snprintf(buf + len, len < size ? size - len : 0, "]> : tensor<%dx2xi64>", n);
  return len;
}

/* ", name = array<i64: ...>" appended at len. */
static size_t array_attr(char* buf, size_t size, size_t len, const char* name, const int64_t* v,
                         int n) {
  char a[256];
  attr_i64_array(a, sizeof a, name, v, n);
  return len + (size_t)snprintf(buf + len, len < size ? size - len : 0, ", %s", a);
}

/* "[b, f, 0, 1]": the two leading labels in the operand's order, then the
 * spatial dims. */
static size_t conv_layout(char* buf, size_t size, size_t len, char first, char second, int n) {
  len += (size_t)snprintf(buf + len, len < size ? size - len : 0, "[%c, %c", first, second);
  for (int i = 0; i < n; i++)
    len += (size_t)snprintf(buf + len, len < size ? size - len : 0, ", %d", i);
  return len + (size_t)snprintf(buf + len, len < size ? size - len : 0, "]");
}

/* Output size of a window sliding over `size` elements (dilated, padded). */
static int64_t window_count(int64_t size, int64_t lo, int64_t hi, int64_t base_dilation,
                            int64_t window, int64_t window_dilation, int64_t stride) {
  int64_t span = (size > 0 ? (size - 1) * base_dilation + 1 : 0) + lo + hi;
  int64_t extent = (window - 1) * window_dilation + 1;
  return span < extent ? 0 : (span - extent) / stride + 1;
}

hlo_value hlo_patches(hlo_builder* b, hlo_value x, int n, const int64_t* first, const int64_t* span,
                      const int64_t* dilation, const int64_t* stride, const int64_t* count) {
  if (!values_valid(b, &x, 1)) return HLO_INVALID;
  hlo_type t = *hlo_type_of(b, x);
  if (n < 1 || n > t.rank || t.rank >= TPU_MAX_RANK)
    return hlo_fail(b, TPU_INTERNAL, "patches over %d dims of a rank-%d value", n, t.rank);
  int lead = t.rank - n;
  int64_t positions = 1;
  for (int i = 0; i < n; i++) positions *= span[i];
  hlo_value* slices = malloc((size_t)positions * sizeof *slices);
  if (!slices) return hlo_fail(b, TPU_OUT_OF_MEMORY, "out of host memory building patches");
  int64_t start[TPU_MAX_RANK] = {0}, limit[TPU_MAX_RANK], step[TPU_MAX_RANK], stacked[TPU_MAX_RANK + 1];
  for (int d = 0; d < lead; d++) limit[d] = stacked[d] = t.dims[d], step[d] = 1;
  stacked[lead] = 1;
  for (int64_t k = 0; k < positions; k++) {
    int64_t rest = k;
    for (int i = n - 1; i >= 0; rest /= span[i], i--) {
      int d = lead + i;
      start[d] = (first[i] + rest % span[i]) * dilation[i];
      limit[d] = start[d] + (count[i] - 1) * stride[i] + 1;
      step[d] = stride[i];
      stacked[d + 1] = count[i];
    }
    slices[k] = hlo_reshape(b, hlo_slice(b, x, start, limit, step), t.rank + 1, stacked);
  }
  hlo_value patches = hlo_concatenate(b, slices, (int)positions, lead);
  free(slices);
  return patches;
}

/* Whether a convolution runs as patches: its window covers more positions
 * than its input has (a small image deep in a network, or the input grad of
 * a strided convolution into one), with enough arithmetic to matter. XLA
 * swaps the operands of such a convolution, and XLA CPU runs the swapped
 * form as a plain loop nest: a 3x3 convolution of 256 features over a 2x2
 * image took 34 ms there, ten times PyTorch's. As a matrix product of the
 * input's patches it takes a tenth of that, once it has over about 2^18
 * multiply-adds of the input's own elements: below that the loop nest is as
 * fast as the patches' several kernels. The patches also multiply the
 * zeros a dilated input (a strided convolution's input grad) holds between
 * its elements, which the loop nest skips, hence the threshold's factor.
 * Grouped convolutions keep the op (XLA leaves them unswapped), as do
 * windows of over 1,024 positions (a slice each makes a large program). */
static bool runs_as_patches(const hlo_conv* c, const hlo_type* l, const hlo_type* r,
                            const hlo_type* out) {
  if (c->feature_groups != 1 || c->batch_groups != 1 || c->spatial + 3 > TPU_MAX_RANK) return false;
  int64_t window = 1, input = 1;
  double multiply_adds = (double)out->dims[0] * (double)out->dims[1], threshold = 1 << 18;
  multiply_adds *= (double)l->dims[c->lhs_feature_first ? 0 : 1];
  for (int i = 0; i < c->spatial; i++) {
    window *= r->dims[i + 2];
    input *= l->dims[i + 2];
    multiply_adds *= (double)out->dims[i + 2] * (double)r->dims[i + 2];
    threshold *= (double)(c->lhs_dilation[i] * c->lhs_dilation[i]);
  }
  return window > input && window <= 1024 && multiply_adds >= threshold;
}

/* Dims 0 and 1 of x exchanged. */
static hlo_value swap_leading(hlo_builder* b, hlo_value x) {
  int64_t perm[TPU_MAX_RANK] = {1, 0};
  for (int i = 2; i < hlo_type_of(b, x)->rank; i++) perm[i] = i;
  return hlo_transpose(b, x, perm);
}

/* The input ([B, F, spatial...]) with the convolution's padding and its
 * lhs dilation (zeros between elements) applied. */
static hlo_value padded_input(hlo_builder* b, hlo_value lhs, const hlo_conv* c) {
  int64_t lo[TPU_MAX_RANK] = {0}, hi[TPU_MAX_RANK] = {0}, interior[TPU_MAX_RANK] = {0};
  for (int i = 0; i < c->spatial; i++) {
    lo[i + 2] = c->pad_lo[i];
    hi[i + 2] = c->pad_hi[i];
    interior[i + 2] = c->lhs_dilation[i] - 1;
  }
  return hlo_pad(b, lhs, hlo_constant(b, hlo_type_of(b, lhs)->dtype, 0), lo, hi, interior);
}

/* The kernel offsets along spatial dim i whose slices read at least one
 * input element rather than only padding (a one-pixel image under a 3x3
 * window reads through its centre alone): `*count` of them from `*first`,
 * or the whole kernel where none does (every output is then zero). */
static void offsets_reading_input(const hlo_conv* c, int i, int64_t input, int64_t kernel,
                                  int64_t outputs, int64_t* first, int64_t* count) {
  int64_t lowest = kernel, highest = -1;
  for (int64_t k = 0; k < kernel; k++)
    for (int64_t t = 0; t < outputs; t++) {
      int64_t at = k * c->rhs_dilation[i] + t * c->strides[i] - c->pad_lo[i];
      if (at >= 0 && at % c->lhs_dilation[i] == 0 && at / c->lhs_dilation[i] < input) {
        if (k < lowest) lowest = k;
        highest = k;
        break;
      }
    }
  if (highest < 0) lowest = 0, highest = kernel - 1;
  *first = lowest;
  *count = highest - lowest + 1;
}

/* A convolution written with other ops: lhs [B, F, spatial...] and rhs
 * [O, I, spatial...] in, the result's type `out` as [B, O, spatial...]. */
typedef hlo_value (*conv_form)(hlo_builder* b, hlo_value lhs, hlo_value rhs, const hlo_conv* c,
                               const hlo_type* out, tpu_dtype result_dtype);

/* The convolution as one dot: the input dilated and padded, one strided
 * slice per kernel offset that reads any input, stacked as [B, F, K,
 * out...] and contracted over F and K with the kernel's same offsets read
 * as [O, F, K]. */
static hlo_value conv_as_patches(hlo_builder* b, hlo_value lhs, hlo_value rhs, const hlo_conv* c,
                                 const hlo_type* out, tpu_dtype result_dtype) {
  int n = c->spatial, rank = n + 2;
  hlo_type l = *hlo_type_of(b, lhs), r = *hlo_type_of(b, rhs);
  int64_t first[HLO_MAX_SPATIAL], span[HLO_MAX_SPATIAL], positions = 1;
  /* The kernel's part at those offsets: [O, F, span...]. */
  int64_t start[TPU_MAX_RANK] = {0}, limit[TPU_MAX_RANK] = {r.dims[0], r.dims[1]}, unit[TPU_MAX_RANK];
  for (int i = 0; i < rank; i++) unit[i] = 1;
  for (int i = 0; i < n; i++) {
    offsets_reading_input(c, i, l.dims[i + 2], r.dims[i + 2], out->dims[i + 2], &first[i], &span[i]);
    start[i + 2] = first[i];
    limit[i + 2] = first[i] + span[i];
    positions *= span[i];
  }
  hlo_value padded = padded_input(b, lhs, c);
  hlo_value patches = hlo_patches(b, padded, n, first, span, c->rhs_dilation, c->strides, out->dims + 2);
  int64_t kernel[3] = {r.dims[0], r.dims[1], positions}, contract[2] = {1, 2};
  rhs = hlo_reshape(b, hlo_slice(b, rhs, start, limit, unit), 3, kernel);
  hlo_value y = hlo_dot_general(b, patches, rhs, NULL, NULL, 0, contract, contract, 2, result_dtype);
  /* y is [B, out..., O]. */
  int64_t perm[TPU_MAX_RANK] = {0, n + 1};
  for (int i = 0; i < n; i++) perm[i + 2] = i + 1;
  return hlo_transpose(b, y, perm);
}

/* Whether a convolution runs as taps: a few input features per group
 * under a small window, where XLA CPU's convolution kernel does badly (a
 * depthwise 3x3 over 64 channels took 35 times as long as the taps, an RGB
 * stem twice as long). Each (input feature, kernel offset) pair is one
 * multiply-add over the whole output, so the rule caps those pairs at 72:
 * past that the kernel wins. Ungrouped convolutions also need few input
 * features and unit strides (strided slices of a wide image cost more than
 * the kernel saves), and every convolution a non-empty output. */
static bool runs_as_taps(const hlo_conv* c, const hlo_type* r, const hlo_type* out) {
  if (c->batch_groups != 1) return false;
  int64_t in_group = r->dims[c->rhs_input_first ? 0 : 1], taps = in_group;
  for (int i = 0; i < c->spatial; i++) taps *= r->dims[i + 2];
  for (int i = 0; i < out->rank; i++)
    if (out->dims[i] == 0) return false;
  if (c->feature_groups == 1) {
    if (in_group > 4) return false;
    for (int i = 0; i < c->spatial; i++)
      if (c->strides[i] != 1 || c->lhs_dilation[i] != 1) return false;
  }
  return taps >= 1 && taps <= 72;
}

/* The convolution as a sum of taps: for each input feature within a group
 * and each kernel offset that reads any input, the strided slice of the
 * (dilated, padded) input that offset reads, its G group features widened
 * to the O outputs they feed, times the kernel's value for each output. */
static hlo_value conv_as_taps(hlo_builder* b, hlo_value lhs, hlo_value rhs, const hlo_conv* c,
                              const hlo_type* out, tpu_dtype result_dtype) {
  int n = c->spatial, rank = n + 2;
  hlo_type l = *hlo_type_of(b, lhs), r = *hlo_type_of(b, rhs);
  int64_t groups = c->feature_groups, in_group = r.dims[1], outputs = r.dims[0];
  int64_t first[HLO_MAX_SPATIAL], span[HLO_MAX_SPATIAL], positions = 1;
  for (int i = 0; i < n; i++) {
    offsets_reading_input(c, i, l.dims[i + 2], r.dims[i + 2], out->dims[i + 2], &first[i], &span[i]);
    positions *= span[i];
  }
  hlo_value padded = padded_input(b, lhs, c);
  /* y's dims [N, O, out...], and a tap's [N, G, O/G, out...] before it
   * merges G and O/G. */
  int64_t y_dims[TPU_MAX_RANK] = {out->dims[0], outputs};
  int64_t wide[TPU_MAX_RANK + 1] = {y_dims[0], groups, outputs / groups}, keep[TPU_MAX_RANK] = {0, 1};
  for (int i = 0; i < n; i++) {
    y_dims[i + 2] = wide[i + 3] = out->dims[i + 2];
    keep[i + 2] = i + 3;
  }
  int64_t x_start[TPU_MAX_RANK] = {0}, x_limit[TPU_MAX_RANK] = {l.dims[0], l.dims[1]};
  int64_t x_step[TPU_MAX_RANK] = {1, in_group}, w_start[TPU_MAX_RANK] = {0};
  int64_t w_limit[TPU_MAX_RANK] = {outputs}, unit[TPU_MAX_RANK], feature_dim = 1;
  for (int i = 0; i < rank; i++) unit[i] = 1;
  hlo_value y = HLO_INVALID;
  for (int64_t k = 0; k < in_group * positions; k++) {
    int64_t rest = k / in_group;
    x_start[1] = w_start[1] = k % in_group;
    w_limit[1] = w_start[1] + 1;
    for (int i = n - 1; i >= 0; rest /= span[i], i--) {
      int64_t offset = first[i] + rest % span[i];
      x_start[i + 2] = offset * c->rhs_dilation[i];
      x_limit[i + 2] = x_start[i + 2] + (out->dims[i + 2] - 1) * c->strides[i] + 1;
      x_step[i + 2] = c->strides[i];
      w_start[i + 2] = offset;
      w_limit[i + 2] = offset + 1;
    }
    hlo_value x = hlo_slice(b, padded, x_start, x_limit, x_step);
    if (outputs != groups)
      x = hlo_reshape(b, hlo_broadcast_in_dim(b, x, rank + 1, wide, keep), rank, y_dims);
    hlo_value w = hlo_reshape(b, hlo_slice(b, rhs, w_start, w_limit, unit), 1, &outputs);
    hlo_value tap = hlo_binary(b, "multiply", x, hlo_broadcast_in_dim(b, w, rank, y_dims, &feature_dim));
    y = k ? hlo_binary(b, "add", y, tap) : tap;
  }
  return hlo_convert(b, y, result_dtype);
}

/* dims with dim 0 split into [groups, dims[0] / groups]; returns the new
 * rank. */
static int split_groups(const int64_t* dims, int rank, int64_t groups, int64_t* split) {
  split[0] = groups;
  split[1] = dims[0] / groups;
  for (int d = 1; d < rank; d++) split[d + 1] = dims[d];
  return rank + 1;
}

/* The batch-grouped convolution as one dot per output position: the
 * input as [B, F, ...], padded, the strided slice that position's window
 * reads as [G, B/G, F, window...], contracted over F and the window with
 * the kernel as [G, O/G, I, window...], batched over G; the [G, B/G, O/G]
 * results stacked on a last dim. One dot over all positions' slices at
 * once took longer on XLA CPU (6 ms against 4 for groups of 8). */
static hlo_value conv_as_grouped_dot(hlo_builder* b, hlo_value lhs, hlo_value rhs, const hlo_conv* c,
                                     const hlo_type* out, tpu_dtype result_dtype) {
  int n = c->spatial;
  hlo_type l = *hlo_type_of(b, lhs), r = *hlo_type_of(b, rhs);
  int64_t groups = c->batch_groups, positions = 1;
  int64_t window[TPU_MAX_RANK] = {l.dims[0], l.dims[1]}, start[TPU_MAX_RANK] = {0};
  int64_t limit[TPU_MAX_RANK] = {l.dims[0], l.dims[1]}, step[TPU_MAX_RANK] = {1, 1};
  int64_t batch = 0, contract[HLO_MAX_SPATIAL + 1] = {2};
  for (int i = 0; i < n; i++) {
    positions *= out->dims[i + 2];
    window[i + 2] = r.dims[i + 2];
    contract[i + 1] = i + 3;
  }
  hlo_value padded = padded_input(b, lhs, c);
  int64_t split[TPU_MAX_RANK], stacked[4] = {groups, l.dims[0] / groups, r.dims[0] / groups, 1};
  rhs = hlo_reshape(b, rhs, split_groups(r.dims, n + 2, groups, split), split);
  int split_rank = split_groups(window, n + 2, groups, split);
  hlo_value* dots = malloc((size_t)positions * sizeof *dots);
  if (!dots) return hlo_fail(b, TPU_OUT_OF_MEMORY, "out of host memory building a convolution");
  for (int64_t k = 0; k < positions; k++) {
    int64_t rest = k;
    for (int i = n - 1; i >= 0; rest /= out->dims[i + 2], i--) {
      start[i + 2] = (rest % out->dims[i + 2]) * c->strides[i];
      limit[i + 2] = start[i + 2] + (r.dims[i + 2] - 1) * c->rhs_dilation[i] + 1;
      step[i + 2] = c->rhs_dilation[i];
    }
    hlo_value x = hlo_reshape(b, hlo_slice(b, padded, start, limit, step), split_rank, split);
    hlo_value y = hlo_dot_general(b, x, rhs, &batch, &batch, 1, contract, contract, n + 1, result_dtype);
    dots[k] = hlo_reshape(b, y, 4, stacked);
  }
  hlo_value y = hlo_concatenate(b, dots, (int)positions, 3);
  free(dots);
  int64_t perm[4] = {1, 0, 2, 3};
  return hlo_reshape(b, hlo_transpose(b, y, perm), out->rank, out->dims);
}

/* The batch-grouped convolution as the ungrouped one (every batch element
 * against every output, XLA's op at full speed), keeping the diagonal
 * blocks, where the element's group is the output's: [G, B/G, G, O/G,
 * out...] summed over the first G with the others masked to zero. */
static hlo_value conv_as_block_diagonal(hlo_builder* b, hlo_value lhs, hlo_value rhs, const hlo_conv* c,
                                        const hlo_type* out, tpu_dtype result_dtype) {
  hlo_conv whole = *c;
  whole.batch_groups = 1;
  whole.lhs_feature_first = whole.rhs_input_first = whole.out_feature_first = false;
  hlo_value y = hlo_convolution(b, lhs, rhs, &whole, result_dtype);
  int64_t groups = c->batch_groups;
  hlo_type blocks = {result_dtype, out->rank + 2, {groups, out->dims[0], groups, out->dims[1] / groups}};
  for (int i = 2; i < out->rank; i++) blocks.dims[i + 2] = out->dims[i];
  y = hlo_reshape(b, y, blocks.rank, blocks.dims);
  hlo_value diagonal = hlo_compare(b, "EQ", hlo_iota(b, blocks, 0), hlo_iota(b, blocks, 2));
  int64_t first = 0;
  y = hlo_reduce(b, hlo_select(b, diagonal, y, hlo_constant_like(b, y, 0)), hlo_constant(b, result_dtype, 0),
                 "add", &first, 1);
  return hlo_reshape(b, y, out->rank, out->dims);
}

/* How a batch-grouped convolution (a grouped convolution's weight grad)
 * runs, or NULL for XLA's op. XLA CPU runs the op as a scalar loop nest:
 * 3x3 over [16, 64, 16, 16] in groups of 8 features took 133 ms, of 2
 * 514 ms. The ungrouped convolution's diagonal blocks took 1.7 ms for
 * either, as it does G times the work at XLA's full speed, while the dots
 * batched over groups (4.2 and 6.5 ms) do only the needed work at a low
 * rate; with 128 outputs in groups of 4 over 8x8 images the dots won (1.3
 * ms against 1.6), so the blocks serve up to 64 outputs. Depthwise ones
 * (one batch element and one output per group) keep the op: 1.6 ms there
 * against 5.7 as dots. The dots take one slice per output position, so at
 * most 1,024 of them; both need a non-empty result from non-empty
 * operands. */
static conv_form batch_grouped_form(const hlo_conv* c, const hlo_type* l, const hlo_type* r,
                                    const hlo_type* out) {
  if (c->batch_groups == 1 || c->feature_groups != 1 || c->spatial + 4 > TPU_MAX_RANK) return NULL;
  int64_t positions = 1;
  for (int i = 0; i < c->spatial; i++) positions *= out->dims[i + 2];
  for (int i = 0; i < out->rank; i++)
    if (l->dims[i] == 0 || r->dims[i] == 0 || out->dims[i] == 0) return NULL;
  int64_t batch = l->dims[c->lhs_feature_first ? 1 : 0], outputs = r->dims[c->rhs_input_first ? 1 : 0];
  if (batch == c->batch_groups && outputs == c->batch_groups) return NULL;
  if (outputs <= 64) return conv_as_block_diagonal;
  return positions <= 1024 ? conv_as_grouped_dot : NULL;
}

hlo_value hlo_convolution(hlo_builder* b, hlo_value lhs, hlo_value rhs, const hlo_conv* c,
                          tpu_dtype result_dtype) {
  hlo_value operands[2] = {lhs, rhs};
  if (!values_valid(b, operands, 2)) return HLO_INVALID;
  hlo_type l = *hlo_type_of(b, lhs), r = *hlo_type_of(b, rhs);
  int n = c->spatial;
  if (n < 1 || n > HLO_MAX_SPATIAL || l.rank != n + 2 || r.rank != n + 2)
    return hlo_fail(b, TPU_INTERNAL, "convolution over %d spatial dims of ranks %d and %d", n,
                    l.rank, r.rank);
  int64_t batch = l.dims[c->lhs_feature_first ? 1 : 0] / c->batch_groups;
  int64_t features = r.dims[c->rhs_input_first ? 1 : 0];
  hlo_type out = {result_dtype, n + 2, {0}};
  out.dims[0] = c->out_feature_first ? features : batch;
  out.dims[1] = c->out_feature_first ? batch : features;
  for (int i = 0; i < n; i++)
    out.dims[i + 2] = window_count(l.dims[i + 2], c->pad_lo[i], c->pad_hi[i], c->lhs_dilation[i],
                                   r.dims[i + 2], c->rhs_dilation[i], c->strides[i]);
  conv_form form = runs_as_patches(c, &l, &r, &out) ? conv_as_patches : batch_grouped_form(c, &l, &r, &out);
  if (!form && runs_as_taps(c, &r, &out)) form = conv_as_taps;
  if (form) {
    hlo_type batch_first = out;
    batch_first.dims[0] = batch;
    batch_first.dims[1] = features;
    hlo_value y = form(b, c->lhs_feature_first ? swap_leading(b, lhs) : lhs,
                       c->rhs_input_first ? swap_leading(b, rhs) : rhs, c, &batch_first, result_dtype);
    return c->out_feature_first ? swap_leading(b, y) : y;
  }
  char attrs[1024];
  size_t len = (size_t)snprintf(attrs, sizeof attrs, "dimension_numbers = #stablehlo.conv<");
  len = conv_layout(attrs, sizeof attrs, len, c->lhs_feature_first ? 'f' : 'b',
                    c->lhs_feature_first ? 'b' : 'f', n);
  len += (size_t)snprintf(attrs + len, len < sizeof attrs ? sizeof attrs - len : 0, "x");
  len = conv_layout(attrs, sizeof attrs, len, c->rhs_input_first ? 'i' : 'o',
                    c->rhs_input_first ? 'o' : 'i', n);
  len += (size_t)snprintf(attrs + len, len < sizeof attrs ? sizeof attrs - len : 0, "->");
  len = conv_layout(attrs, sizeof attrs, len, c->out_feature_first ? 'f' : 'b',
                    c->out_feature_first ? 'b' : 'f', n);
  len += (size_t)snprintf(attrs + len, len < sizeof attrs ? sizeof attrs - len : 0,
                          ">, feature_group_count = %lld : i64, batch_group_count = %lld : i64",
                          (long long)c->feature_groups, (long long)c->batch_groups);
  len = array_attr(attrs, sizeof attrs, len, "window_strides", c->strides, n);
  len = array_attr(attrs, sizeof attrs, len, "lhs_dilation", c->lhs_dilation, n);
  len = array_attr(attrs, sizeof attrs, len, "rhs_dilation", c->rhs_dilation, n);
  len = padding_attr(attrs, sizeof attrs, len, c->pad_lo, c->pad_hi, n);
  len = precision_attr(b, lhs, rhs, attrs, sizeof attrs, len);
  if (len >= sizeof attrs) return hlo_fail(b, TPU_INTERNAL, "convolution attributes too long");
  return emit_op(b, "stablehlo.convolution", operands, 2, attrs, out);
}

hlo_window hlo_window_identity(int rank) {
  hlo_window w;
  memset(&w, 0, sizeof w);
  for (int i = 0; i < rank; i++) w.dims[i] = w.strides[i] = w.dilations[i] = 1;
  return w;
}

/* Emits a reduce_window of the n operands (then their n inits) with the
 * region already built; returns the first of n results. */
static hlo_value emit_reduce_window(hlo_builder* b, const hlo_value* operands, int n,
                                    const hlo_window* w) {
  if (!values_valid(b, operands, 2 * n)) return HLO_INVALID;
  hlo_type types[2]; /* n is 1 or 2 */
  for (int k = 0; k < n; k++) {
    hlo_type t = *hlo_type_of(b, operands[k]);
    for (int i = 0; i < t.rank; i++)
      t.dims[i] = window_count(t.dims[i], w->pad_lo[i], w->pad_hi[i], 1, w->dims[i],
                               w->dilations[i], w->strides[i]);
    types[k] = t;
  }
  int rank = types[0].rank;
  char attrs[1024];
  attr_i64_array(attrs, sizeof attrs, "window_dimensions", w->dims, rank);
  size_t len = strlen(attrs);
  len = array_attr(attrs, sizeof attrs, len, "window_strides", w->strides, rank);
  len = array_attr(attrs, sizeof attrs, len, "window_dilations", w->dilations, rank);
  len = padding_attr(attrs, sizeof attrs, len, w->pad_lo, w->pad_hi, rank);
  if (len >= sizeof attrs) return hlo_fail(b, TPU_INTERNAL, "reduce_window attributes too long");
  if (n == 1) return emit_op(b, "stablehlo.reduce_window", operands, 2, attrs, types[0]);
  hlo_value first = new_results(b, types, n);
  if (first != HLO_INVALID)
    emit_op_results(b, "stablehlo.reduce_window", operands, 2 * n, attrs, types, n, first);
  return first;
}

hlo_value hlo_reduce_window(hlo_builder* b, hlo_value x, hlo_value init, const char* reducer,
                            const hlo_window* w) {
  hlo_value operands[2] = {x, init};
  if (!values_valid(b, operands, 2)) return HLO_INVALID;
  hlo_type s = {hlo_type_of(b, x)->dtype, 0, {0}};
  hlo_type types[2] = {s, s};
  hlo_value a[2];
  region_begin(b, types, 2, a);
  hlo_value r = hlo_binary(b, reducer, a[0], a[1]);
  region_end(b, &r, 1);
  return emit_reduce_window(b, operands, 1, w);
}

void hlo_reduce_window_argmax(hlo_builder* b, hlo_value x, hlo_value index, hlo_value x_init,
                              hlo_value index_init, const hlo_window* w, hlo_value* out_values,
                              hlo_value* out_indices) {
  *out_values = *out_indices = HLO_INVALID;
  hlo_value operands[4] = {x, index, x_init, index_init};
  if (!values_valid(b, operands, 4)) return;
  tpu_dtype dtype = hlo_type_of(b, x)->dtype;
  hlo_type s = {dtype, 0, {0}}, si = {TPU_I64, 0, {0}};
  hlo_type types[4] = {s, si, s, si};
  hlo_value a[4];
  region_begin(b, types, 4, a);
  /* a wins if larger, or NaN against a number; among equal numbers the
   * first index wins and among NaNs the last, as in PyTorch's scan. */
  hlo_value pick = hlo_binary(b, "or", hlo_compare(b, "GT", a[0], a[2]),
                              hlo_binary(b, "and", hlo_compare(b, "EQ", a[0], a[2]),
                                         hlo_compare(b, "LT", a[1], a[3])));
  if (tpu_dtype_is_float(dtype)) {
    hlo_value a_nan = hlo_compare(b, "NE", a[0], a[0]), b_nan = hlo_compare(b, "NE", a[2], a[2]);
    hlo_value nan_wins = hlo_binary(b, "and", a_nan, hlo_binary(b, "or", hlo_unary(b, "not", b_nan),
                                                                hlo_compare(b, "GT", a[1], a[3])));
    pick = hlo_binary(b, "or", pick, nan_wins);
  }
  hlo_value results[2] = {hlo_select(b, pick, a[0], a[2]), hlo_select(b, pick, a[1], a[3])};
  region_end(b, results, 2);
  hlo_value r = emit_reduce_window(b, operands, 2, w);
  if (r == HLO_INVALID) return;
  *out_values = r;
  *out_indices = r + 1;
}
