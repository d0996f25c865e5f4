/* Resampling and edge padding lowerings over the trailing 1-3 dims:
 * upsample_nearest{1,2,3}d, _upsample_nearest_exact{1,2,3}d,
 * upsample_{linear1d,bilinear2d,trilinear3d}, upsample_bicubic2d, their
 * antialiased forms _upsample_{bilinear,bicubic}2d_aa, reflection_pad{1,2,3}d,
 * replication_pad{1,2,3}d, and their backward ops.
 *
 * Each is separable: along every resampled dim an output position reads
 * one input position (nearest, pads) or blends two (linear) or four
 * (cubic, positions clamped to the edges). The positions
 * depend only on sizes and compile-time scales, so they are iota
 * arithmetic that XLA folds to constants; the forward gathers slices at
 * them and the backward adds gradient slices back at them. Antialiased
 * modes average a window that grows with the shrink factor, so they are a
 * product with an [out, in] weight matrix instead. Index and weight
 * arithmetic repeats PyTorch's CPU kernels' float rounding, so the same
 * input positions are picked. */
#include <string.h>

#include "hlo/conv_ops.h"
#include "hlo/slice_ops.h"
#include "ops/families.h"

#define MAX_SPATIAL 3

#define MAX_TAPS 4

/* Where output positions along one dim read from: index (i64 [out]) and,
 * for blending modes, more indices and a weight per index ([out], dtype
 * of the data). */
typedef struct taps {
  hlo_value index[MAX_TAPS];
  hlo_value weight[MAX_TAPS];
  int count;  /* 0 (the identity), 1, 2 (linear) or 4 (cubic) */
} taps;

typedef enum { NEAREST, NEAREST_EXACT, LINEAR, CUBIC, AA_LINEAR, AA_CUBIC, REFLECT, REPLICATE } resample_mode;

/* Output positions 0..out-1 as a [out] value of dtype t. */
static hlo_value positions(hlo_builder* b, int64_t out, tpu_dtype t) {
  return hlo_iota(b, hlo_type_make(t, 1, &out), 0);
}

/* PyTorch's compute_scales_value: input per output step, from the user's
 * scale factor when given, else from the sizes; in float. */
static float scale_value(double scale, int64_t in, int64_t out) {
  return scale > 0 ? (float)(1.0 / scale) : (float)in / (float)out;
}

/* floor of a float value as an index no larger than in - 1. */
static hlo_value floor_index(hlo_builder* b, hlo_value real, int64_t in) {
  hlo_value i = hlo_convert(b, hlo_unary(b, "floor", real), TPU_I64);
  return hlo_binary_constant(b, "minimum", i, (double)(in - 1));
}

/* nearest: floor(o * scale) in float, with PyTorch's exact shortcuts for
 * equal and doubled sizes; nearest-exact: floor((o + 0.5) * scale), which
 * PyTorch multiplies in double and rounds to float: the double product is
 * exact (below 2^28 positions), so one float multiply rounds the same. */
static hlo_value nearest_index(hlo_builder* b, bool exact, int64_t in, int64_t out, double scale) {
  float s = scale_value(scale, in, out);
  if (exact) {
    hlo_value o = positions(b, out, TPU_F32);
    hlo_value centre = hlo_binary_constant(b, "add", o, 0.5);
    return floor_index(b, hlo_binary_constant(b, "multiply", centre, (double)s), in);
  }
  hlo_value o = positions(b, out, TPU_I64);
  if (out == in) return o;
  if (out == 2 * in) return hlo_binary_constant(b, "divide", o, 2);
  hlo_value of = hlo_convert(b, o, TPU_F32);
  return floor_index(b, hlo_binary_constant(b, "multiply", of, (double)s), in);
}

/* The input position output positions map to, in t (float32, or float64
 * for double data), as PyTorch's area_pixel_compute_scale and
 * area_pixel_compute_source_index do; cubic keeps negative positions. */
static hlo_value source_position(hlo_builder* b, bool align_corners, bool cubic, int64_t in, int64_t out,
                                 double scale, tpu_dtype t) {
  double s;
  if (align_corners)
    s = out <= 1 ? 0 : t == TPU_F64 ? (double)(in - 1) / (double)(out - 1)
                                    : (double)((float)(in - 1) / (float)(out - 1));
  else
    s = t == TPU_F64 ? (scale > 0 ? 1.0 / scale : (double)in / (double)out)
                     : (double)scale_value(scale, in, out);
  hlo_value o = positions(b, out, t);
  if (align_corners) return hlo_binary_constant(b, "multiply", o, s);
  hlo_value centre = hlo_binary_constant(b, "add", o, 0.5);
  hlo_value real = hlo_binary_constant(b, "subtract", hlo_binary_constant(b, "multiply", centre, s), 0.5);
  if (cubic) return real;
  hlo_value zero = hlo_constant_like(b, o, 0);
  return hlo_select(b, hlo_compare(b, "LT", real, zero), zero, real);
}

/* Linear taps, as PyTorch's guard_index_and_lambda picks them. */
static taps linear_taps(hlo_builder* b, bool align_corners, int64_t in, int64_t out, double scale,
                        tpu_dtype t) {
  hlo_value real = source_position(b, align_corners, false, in, out, scale, t);
  hlo_value zero = hlo_constant_like(b, real, 0), one = hlo_constant_like(b, real, 1);
  taps k = {{floor_index(b, real, in)}, {HLO_INVALID}, 2};
  hlo_value frac = hlo_binary(b, "subtract", real, hlo_convert(b, k.index[0], t));
  k.weight[1] = hlo_binary(b, "minimum", hlo_binary(b, "maximum", frac, zero), one);
  k.weight[0] = hlo_binary(b, "subtract", one, k.weight[1]);
  hlo_value last = hlo_constant_like(b, k.index[0], (double)(in - 1));
  hlo_value step = hlo_convert(b, hlo_compare(b, "LT", k.index[0], last), TPU_I64);
  k.index[1] = hlo_binary(b, "add", k.index[0], step);
  return k;
}

/* Keys' cubic convolution weights, as PyTorch's cubic_convolution1
 * (|x| <= 1) and cubic_convolution2 (1 < |x| < 2): A = -0.75 for bicubic
 * upsampling, -0.5 (PIL's) for the antialiased filter. */
static hlo_value cubic_near(hlo_builder* b, hlo_value x, double a) {
  hlo_value p = hlo_binary_constant(b, "subtract", hlo_binary_constant(b, "multiply", x, a + 2), a + 3);
  return hlo_binary_constant(b, "add", hlo_binary(b, "multiply", hlo_binary(b, "multiply", p, x), x), 1);
}

static hlo_value cubic_far(hlo_builder* b, hlo_value x, double a) {
  hlo_value p = hlo_binary_constant(b, "subtract", hlo_binary_constant(b, "multiply", x, a), 5 * a);
  p = hlo_binary_constant(b, "add", hlo_binary(b, "multiply", p, x), 8 * a);
  return hlo_binary_constant(b, "subtract", hlo_binary(b, "multiply", p, x), 4 * a);
}

/* Cubic taps: floor(position) - 1 .. + 2, clamped to [0, in), weighted by
 * the distance t from the floor. */
static taps cubic_taps(hlo_builder* b, bool align_corners, int64_t in, int64_t out, double scale, tpu_dtype t) {
  hlo_value real = source_position(b, align_corners, true, in, out, scale, t);
  hlo_value base = hlo_unary(b, "floor", real);
  hlo_value frac = hlo_binary(b, "subtract", real, base);
  hlo_value rest = hlo_binary(b, "subtract", hlo_constant_like(b, frac, 1), frac);
  const double a = -0.75;
  taps k = {{HLO_INVALID}, {cubic_far(b, hlo_binary_constant(b, "add", frac, 1), a), cubic_near(b, frac, a),
                            cubic_near(b, rest, a), cubic_far(b, hlo_binary_constant(b, "add", rest, 1), a)}, 4};
  hlo_value first = hlo_convert(b, base, TPU_I64);
  for (int i = 0; i < 4; i++) {
    hlo_value at = hlo_binary_constant(b, "add", first, (double)(i - 1));
    k.index[i] = hlo_binary_constant(b, "minimum", hlo_binary_constant(b, "maximum", at, 0), (double)(in - 1));
  }
  return k;
}

/* The antialiased weights of output positions (rows) over input positions
 * (columns), in t, as PyTorch's CPU kernel (after PIL) computes them: each
 * output averages the inputs within `support` of its centre under the
 * triangle (linear) or Keys cubic (A = -0.5) filter, stretched by the
 * shrink factor, normalized to sum 1. Where PyTorch's float kernel
 * computes in double (the centre, the window's ends, the filter's
 * argument) this does too, rounding to t where it does. */
static hlo_value aa_weights(hlo_builder* b, bool cubic, bool align_corners, int64_t in, int64_t out, double scale,
                            tpu_dtype t) {
  bool wide = t == TPU_F64;
  double s;
  if (align_corners)
    s = out <= 1 ? 0 : wide ? (double)(in - 1) / (double)(out - 1) : (double)((float)(in - 1) / (float)(out - 1));
  else
    s = wide ? (scale > 0 ? 1.0 / scale : (double)in / (double)out) : (double)scale_value(scale, in, out);
  double taps = cubic ? 4 : 2;
  double support = s >= 1 ? taps * 0.5 * s : taps * 0.5, invscale = s >= 1 ? 1.0 / s : 1.0;
  if (!wide) support = (float)support, invscale = (float)invscale;
  int64_t widest = (int64_t)__builtin_ceil(support) * 2 + 1;
  int64_t dims[2] = {out, in};
  hlo_type real = hlo_type_make(TPU_F64, 2, dims);
  hlo_value centre = hlo_convert(b, hlo_binary_constant(b, "multiply", hlo_binary_constant(b, "add", hlo_iota(b, real, 0), 0.5), s), t);
  /* The window's ends: (centre -+ support) in t, + 0.5 in double, truncated. */
  hlo_value start = hlo_convert(b, hlo_binary_constant(b, "subtract", centre, support), TPU_F64);
  start = hlo_binary_constant(b, "maximum", hlo_convert(b, hlo_binary_constant(b, "add", start, 0.5), TPU_I64), 0);
  hlo_value end = hlo_convert(b, hlo_binary_constant(b, "add", centre, support), TPU_F64);
  end = hlo_binary_constant(b, "minimum", hlo_convert(b, hlo_binary_constant(b, "add", end, 0.5), TPU_I64), (double)in);
  hlo_value size = hlo_binary(b, "subtract", end, start);
  size = hlo_binary_constant(b, "minimum", hlo_binary_constant(b, "maximum", size, 0), (double)widest);
  hlo_value k = hlo_iota(b, hlo_type_make(TPU_I64, 2, dims), 1);
  hlo_value inside = hlo_binary(b, "and", hlo_compare(b, "GE", k, start),
                                hlo_compare(b, "LT", k, hlo_binary(b, "add", start, size)));
  hlo_value x = hlo_convert(b, hlo_binary(b, "subtract", hlo_convert(b, k, t), centre), TPU_F64);
  x = hlo_unary(b, "abs", hlo_convert(b, hlo_binary_constant(b, "multiply", hlo_binary_constant(b, "add", x, 0.5), invscale), t));
  hlo_value zero = hlo_constant_like(b, x, 0), one = hlo_constant_like(b, x, 1);
  hlo_value w = cubic ? hlo_select(b, hlo_compare(b, "LT", x, one), cubic_near(b, x, -0.5),
                                   hlo_select(b, hlo_compare(b, "LT", x, hlo_constant_like(b, x, 2)),
                                              cubic_far(b, x, -0.5), zero))
                      : hlo_select(b, hlo_compare(b, "LT", x, one), hlo_binary(b, "subtract", one, x), zero);
  w = hlo_select(b, inside, w, zero);
  static const int64_t row = 0, columns = 1;
  hlo_value total = hlo_reduce(b, w, hlo_constant(b, t, 0), "add", &columns, 1);
  total = hlo_broadcast_in_dim(b, total, 2, dims, &row);
  return hlo_select(b, hlo_compare(b, "NE", total, zero), hlo_binary(b, "divide", w, total), w);
}

/* x times the weight matrix w along dim d: the forward contracts x's d
 * with w's input positions (dim 1), the backward with its outputs (dim 0);
 * the other of w's dims takes d's place. */
static hlo_value weigh_along(hlo_builder* b, hlo_value x, int d, hlo_value w, int64_t w_dim) {
  hlo_type xt = *hlo_type_of(b, x);
  int64_t dim = d;
  hlo_value y = hlo_dot_general(b, x, w, NULL, NULL, 0, &dim, &w_dim, 1, xt.dtype);
  int64_t order[TPU_MAX_RANK];
  for (int i = 0, j = 0; i < xt.rank; i++) order[i] = i == d ? xt.rank - 1 : j++;
  return hlo_transpose(b, y, order);
}

/* Edge padding: position o reads o - lo reflected about (reflect) or
 * clamped to (replicate) the ends of [0, in). */
static hlo_value pad_index(hlo_builder* b, bool reflect, int64_t in, int64_t out, int64_t lo) {
  hlo_value o = positions(b, out, TPU_I64);
  hlo_value j = hlo_binary_constant(b, "subtract", o, (double)lo);
  hlo_value last = hlo_constant_like(b, o, (double)(in - 1));
  if (reflect) {
    hlo_value inner = hlo_unary(b, "abs", hlo_binary(b, "subtract", last, hlo_unary(b, "abs", j)));
    return hlo_binary(b, "subtract", last, inner);
  }
  return hlo_binary(b, "minimum", hlo_binary_constant(b, "maximum", j, 0), last);
}

/* A [n] weight broadcast along dim d of shape t. */
static hlo_value along(hlo_builder* b, hlo_value w, int d, const hlo_type* t) {
  int64_t dim = d;
  return hlo_broadcast_in_dim(b, w, t->rank, t->dims, &dim);
}

/* Forward along dim d: x's slices at the taps, blended by their weights. */
static hlo_value gather_taps(hlo_builder* b, hlo_value x, int d, const taps* k) {
  if (k->count == 0) return x;
  if (k->count == 1) return hlo_take(b, x, d, k->index[0]);
  hlo_value y = HLO_INVALID;
  for (int i = 0; i < k->count; i++) {
    hlo_value yi = hlo_take(b, x, d, k->index[i]);
    hlo_type t = *hlo_type_of(b, yi);
    yi = hlo_binary(b, "multiply", yi, along(b, k->weight[i], d, &t));
    y = i ? hlo_binary(b, "add", y, yi) : yi;
  }
  return y;
}

/* Backward along dim d (input size `in`): each gradient slice, weighted,
 * added at its taps. */
static hlo_value scatter_taps(hlo_builder* b, hlo_value g, int d, int64_t in, const taps* k) {
  if (k->count == 0) return g;
  hlo_type t = *hlo_type_of(b, g), target = t;
  target.dims[d] = in;
  hlo_value zeros =
      hlo_filled(b, t.dtype, target.rank, target.dims, 0);
  if (k->count == 1) return hlo_put(b, zeros, d, k->index[0], g, "add");
  hlo_value updates[MAX_TAPS];
  for (int i = 0; i < k->count; i++) updates[i] = hlo_binary(b, "multiply", g, along(b, k->weight[i], d, &t));
  return hlo_put(b, zeros, d, hlo_concatenate(b, k->index, k->count, 0),
                 hlo_concatenate(b, updates, k->count, d), "add");
}

/* Forward: (self, output_size | padding, [align_corners,] scales...);
 * upsample backward: (grad, output_size, input_size, [align_corners,]
 * scales...); pad backward: (grad, self, padding). Sizes come from the
 * types: `src` is the forward's input side, `dst` its output side. */
static tpu_status lower_resample(tpu_lowering* l, resample_mode mode) {
  hlo_builder* b = tpu_lower_builder(l);
  const char* name = tpu_lower_op_name(l);
  bool backward = strstr(name, "_backward") != NULL;
  bool is_pad = mode == REFLECT || mode == REPLICATE, aa = mode == AA_LINEAR || mode == AA_CUBIC;
  bool blends = aa || mode == LINEAR || mode == CUBIC;
  hlo_type out = tpu_lower_output_type(l, 0);
  hlo_type dst = backward ? tpu_lower_arg_type(l, 0) : out;
  hlo_type src = backward ? out : tpu_lower_arg_type(l, 0);
  int first_scale = (backward ? 3 : 2) + blends;
  const int64_t* sizes;
  int dims = tpu_lower_int_list(l, is_pad && backward ? 2 : 1, &sizes) / (is_pad ? 2 : 1);
  if (dims < 1 || dims > MAX_SPATIAL || dims > src.rank) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::%s: %d resampled dims for rank %d", name, dims,
                   src.rank);
    return NULL;
  }
  if (blends && !tpu_dtype_is_float(out.dtype)) {
    tpu_lower_fail(l, TPU_UNIMPLEMENTED,
                   "aten::%s: %s input is not supported on tpu; convert it to float", name,
                   tpu_dtype_name(out.dtype));
    return NULL;
  }
  tpu_dtype t = tpu_dtype_compute(out.dtype);
  bool align_corners = blends && tpu_lower_bool(l, first_scale - 1, false);
  taps k[MAX_SPATIAL];
  hlo_value weights[MAX_SPATIAL];
  for (int i = 0; i < dims; i++) {
    int d = src.rank - dims + i;
    int64_t in = src.dims[d], n = dst.dims[d];
    double scale = is_pad ? 0 : tpu_lower_float(l, first_scale + i, 0);
    k[i].count = 1;
    if (blends && in == n)
      k[i].count = 0;
    else if (aa)
      weights[i] = aa_weights(b, mode == AA_CUBIC, align_corners, in, n, scale, t);
    else if (mode == LINEAR)
      k[i] = linear_taps(b, align_corners, in, n, scale, t);
    else if (mode == CUBIC)
      k[i] = cubic_taps(b, align_corners, in, n, scale, t);
    else if (is_pad) /* pads are listed from the last dim */
      k[i].index[0] = pad_index(b, mode == REFLECT, in, n, sizes[2 * (dims - 1 - i)]);
    else
      k[i].index[0] = nearest_index(b, mode == NEAREST_EXACT, in, n, scale);
  }
  hlo_value x = backward || blends ? tpu_lower_value(l, 0, t) : tpu_lower_tensor(l, 0);
  /* The forward blends from the last dim in, as PyTorch does; the backward
   * undoes it from the first. */
  for (int j = 0; j < dims; j++) {
    int i = backward ? j : dims - 1 - j;
    int d = src.rank - dims + i;
    if (aa && k[i].count)
      x = weigh_along(b, x, d, weights[i], backward ? 0 : 1);
    else
      x = backward ? scatter_taps(b, x, d, src.dims[d], &k[i]) : gather_taps(b, x, d, &k[i]);
  }
  tpu_lower_set_output(l, 0, x);
  return NULL;
}

static tpu_status lower_nearest(tpu_lowering* l) { return lower_resample(l, NEAREST); }
static tpu_status lower_nearest_exact(tpu_lowering* l) { return lower_resample(l, NEAREST_EXACT); }
static tpu_status lower_linear(tpu_lowering* l) { return lower_resample(l, LINEAR); }
static tpu_status lower_cubic(tpu_lowering* l) { return lower_resample(l, CUBIC); }
static tpu_status lower_aa_linear(tpu_lowering* l) { return lower_resample(l, AA_LINEAR); }
static tpu_status lower_aa_cubic(tpu_lowering* l) { return lower_resample(l, AA_CUBIC); }
static tpu_status lower_reflect(tpu_lowering* l) { return lower_resample(l, REFLECT); }
static tpu_status lower_replicate(tpu_lowering* l) { return lower_resample(l, REPLICATE); }

static const tpu_op_entry entries[] = {
    {"_upsample_bicubic2d_aa", lower_aa_cubic, 0},
    {"_upsample_bicubic2d_aa_backward", lower_aa_cubic, 0},
    {"_upsample_bilinear2d_aa", lower_aa_linear, 0},
    {"_upsample_bilinear2d_aa_backward", lower_aa_linear, 0},
    {"_upsample_nearest_exact1d", lower_nearest_exact, 0},
    {"_upsample_nearest_exact1d_backward", lower_nearest_exact, 0},
    {"_upsample_nearest_exact2d", lower_nearest_exact, 0},
    {"_upsample_nearest_exact2d_backward", lower_nearest_exact, 0},
    {"_upsample_nearest_exact3d", lower_nearest_exact, 0},
    {"_upsample_nearest_exact3d_backward", lower_nearest_exact, 0},
    {"reflection_pad1d", lower_reflect, TPU_OP_COMPLEX},
    {"reflection_pad1d_backward", lower_reflect, TPU_OP_COMPLEX},
    {"reflection_pad2d", lower_reflect, TPU_OP_COMPLEX},
    {"reflection_pad2d_backward", lower_reflect, TPU_OP_COMPLEX},
    {"reflection_pad3d", lower_reflect, TPU_OP_COMPLEX},
    {"reflection_pad3d_backward", lower_reflect, TPU_OP_COMPLEX},
    {"replication_pad1d", lower_replicate, TPU_OP_COMPLEX},
    {"replication_pad1d_backward", lower_replicate, TPU_OP_COMPLEX},
    {"replication_pad2d", lower_replicate, TPU_OP_COMPLEX},
    {"replication_pad2d_backward", lower_replicate, TPU_OP_COMPLEX},
    {"replication_pad3d", lower_replicate, TPU_OP_COMPLEX},
    {"replication_pad3d_backward", lower_replicate, TPU_OP_COMPLEX},
    {"upsample_bicubic2d", lower_cubic, 0},
    {"upsample_bicubic2d_backward", lower_cubic, 0},
    {"upsample_bilinear2d", lower_linear, 0},
    {"upsample_bilinear2d_backward", lower_linear, 0},
    {"upsample_linear1d", lower_linear, 0},
    {"upsample_linear1d_backward", lower_linear, 0},
    {"upsample_nearest1d", lower_nearest, 0},
    {"upsample_nearest1d_backward", lower_nearest, 0},
    {"upsample_nearest2d", lower_nearest, 0},
    {"upsample_nearest2d_backward", lower_nearest, 0},
    {"upsample_nearest3d", lower_nearest, 0},
    {"upsample_nearest3d_backward", lower_nearest, 0},
    {"upsample_trilinear3d", lower_linear, 0},
    {"upsample_trilinear3d_backward", lower_linear, 0},
};

TPU_OP_FAMILY(tpu_ops_resample, entries);
