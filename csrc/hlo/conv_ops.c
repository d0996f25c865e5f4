/* convolution and reduce_window (the ops with a sliding window), and index
 * arithmetic. */
#include <stdio.h>
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

hlo_value hlo_binary_constant(hlo_builder* b, const char* op, hlo_value x, double k) {
  return hlo_binary(b, op, x, hlo_constant_like(b, x, k));
}
