/* grid_sampler_2d and grid_sampler_3d(input, grid, interpolation,
 * padding, align_corners) and their backwards: F.grid_sample on 4-d and
 * 5-d input, which spatial transformers, optical flow, deformable
 * attention (Deformable DETR, Mask2Former) and volumetric warping use.
 * Interpolation bilinear (0; trilinear on volumes) or nearest (1);
 * padding zeros (0), border (1) or reflection (2).
 *
 * Each output position reads the input at a source point from the grid:
 * grid x, y (and z) in [-1, 1] are unnormalized to pixel coordinates and,
 * for border and reflection, folded into the image, with PyTorch's
 * formulas. The input is laid out as rows of channels, (N*H*W, C) or
 * (N*D*H*W, C), so each corner a position reads is one row, gathered
 * (forward) or added to (backward) at its flat index; corners outside the
 * image read 0 and receive nothing. The grid's gradient is the weights'
 * derivative times each coordinate's derivative through the unnormalizing
 * and folding (0 where a coordinate was clipped, the sign flipped where
 * reflected); nearest has none. Arithmetic in float32 (float64 for
 * double). */
#include "hlo/conv_ops.h"
#include "hlo/slice_ops.h"
#include "ops/families.h"

enum { BILINEAR = 0, NEAREST = 1 };
enum { PAD_ZEROS = 0, PAD_BORDER = 1, PAD_REFLECTION = 2 };

#define GRID_DIMS 3                   /* the most spatial dims: a volume's */
#define GRID_CORNERS (1 << GRID_DIMS) /* the most corners a position reads */

/* Spatial axes are numbered as the input's dims: (H, W) or (D, H, W); the
 * grid's last dim holds their coordinates the other way round, (x, y, z). */
typedef struct sampler {
  hlo_builder* b;
  tpu_dtype t;
  int n;                     /* spatial dims: 2 or 3 */
  int64_t c;                 /* channels */
  int64_t size[GRID_DIMS];   /* the input's spatial sizes */
  int64_t at[1 + GRID_DIMS]; /* the output positions' shape: (N, Ho, Wo) or (N, Do, Ho, Wo) */
  int mode;
  int padding;
  bool align_corners;
  hlo_value rows;            /* the input as (N*H*W, C) or (N*D*H*W, C) */
} sampler;

static hlo_value fill(const sampler* s, tpu_dtype t, double v) {
  return hlo_broadcast_in_dim(s->b, hlo_constant(s->b, t, v), s->n + 1, s->at, NULL);
}

/* PyTorch's clip_coordinates_set_grad: into [0, size - 1], the derivative
 * 0 where clipped. */
static hlo_value clip(const sampler* s, hlo_value x, int64_t size, hlo_value* grad) {
  hlo_builder* b = s->b;
  hlo_value zero = fill(s, s->t, 0), top = fill(s, s->t, (double)(size - 1));
  hlo_value inside = hlo_binary(b, "and", hlo_compare(b, "GT", x, zero), hlo_compare(b, "LT", x, top));
  *grad = hlo_select(b, inside, *grad, zero);
  return hlo_binary(b, "minimum", hlo_binary(b, "maximum", x, zero), top);
}

/* PyTorch's reflect_coordinates_set_grad: x folded into [low, high]
 * (given doubled), the derivative's sign flipped on odd reflections. */
static hlo_value reflect(const sampler* s, hlo_value x, double twice_low, double twice_high, hlo_value* grad) {
  hlo_builder* b = s->b;
  if (twice_low == twice_high) {
    *grad = fill(s, s->t, 0);
    return fill(s, s->t, 0);
  }
  double min = twice_low / 2, span = (twice_high - twice_low) / 2;
  hlo_value d = hlo_binary_constant(b, "subtract", x, min), zero = fill(s, s->t, 0);
  hlo_value negative = hlo_compare(b, "LT", d, zero);
  hlo_value sign = hlo_select(b, negative, fill(s, s->t, -1), fill(s, s->t, 1));
  d = hlo_unary(b, "abs", d);
  hlo_value spans = fill(s, s->t, span);
  hlo_value extra = hlo_binary(b, "remainder", d, spans);
  hlo_value flips = hlo_unary(b, "floor", hlo_binary(b, "divide", d, spans));
  hlo_value even = hlo_compare(b, "EQ", hlo_binary(b, "remainder", flips, fill(s, s->t, 2)), zero);
  *grad = hlo_binary(b, "multiply", *grad, hlo_select(b, even, sign, hlo_unary(b, "negate", sign)));
  hlo_value up = hlo_binary_constant(b, "add", extra, min);
  hlo_value down = hlo_binary_constant(b, "add", hlo_binary(b, "subtract", spans, extra), min);
  return hlo_select(b, even, up, down);
}

/* The pixel coordinate a grid coordinate points at along an axis of
 * `size`, and its derivative by the grid coordinate. */
static hlo_value source(const sampler* s, hlo_value coord, int64_t size, hlo_value* grad) {
  hlo_builder* b = s->b;
  double n = (double)size;
  hlo_value x = s->align_corners
                    ? hlo_binary_constant(b, "multiply",
                                          hlo_binary_constant(b, "divide", hlo_binary_constant(b, "add", coord, 1), 2),
                                          n - 1)
                    : hlo_binary_constant(
                          b, "divide",
                          hlo_binary_constant(b, "subtract", hlo_binary_constant(b, "multiply",
                                                                                 hlo_binary_constant(b, "add", coord, 1), n),
                                              1),
                          2);
  *grad = fill(s, s->t, s->align_corners ? (n - 1) / 2 : n / 2);
  if (s->padding == PAD_REFLECTION) {
    x = s->align_corners ? reflect(s, x, 0, 2 * (n - 1), grad) : reflect(s, x, -1, 2 * n - 1, grad);
    return clip(s, x, size, grad);
  }
  return s->padding == PAD_BORDER ? clip(s, x, size, grad) : x;
}

/* One corner (integer pixel coordinates per axis, as the compute type):
 * its row index into s->rows, clamped, and whether it lies in the image. */
typedef struct corner {
  hlo_value index;
  hlo_value inside;
} corner;

static corner corner_at(const sampler* s, const hlo_value* p) {
  hlo_builder* b = s->b;
  hlo_value zero = fill(s, s->t, 0), inside = HLO_INVALID, index = HLO_INVALID;
  int64_t inner = 1;
  for (int i = s->n - 1; i >= 0; i--) {
    hlo_value in_axis = hlo_binary(b, "and", hlo_compare(b, "GE", p[i], zero),
                                   hlo_compare(b, "LT", p[i], fill(s, s->t, (double)s->size[i])));
    inside = inside == HLO_INVALID ? in_axis : hlo_binary(b, "and", inside, in_axis);
    hlo_value clamped = hlo_binary(b, "maximum", hlo_convert(b, p[i], TPU_I64), fill(s, TPU_I64, 0));
    clamped = hlo_binary(b, "minimum", clamped, fill(s, TPU_I64, (double)(s->size[i] - 1)));
    clamped = hlo_binary_constant(b, "multiply", clamped, (double)inner);
    index = index == HLO_INVALID ? clamped : hlo_binary(b, "add", index, clamped);
    inner *= s->size[i];
  }
  hlo_value batch = hlo_binary_constant(b, "multiply", hlo_iota(b, hlo_type_make(TPU_I64, s->n + 1, s->at), 0),
                                        (double)inner);
  return (corner){hlo_binary(b, "add", batch, index), inside};
}

/* A per-position value broadcast over the channels: (N, ..., C). */
static hlo_value per_channel(const sampler* s, hlo_value v) {
  int64_t dims[2 + GRID_DIMS], keep[1 + GRID_DIMS];
  for (int i = 0; i <= s->n; i++) dims[i] = s->at[i], keep[i] = i;
  dims[s->n + 1] = s->c;
  return hlo_broadcast_in_dim(s->b, v, s->n + 2, dims, keep);
}

/* The corner's rows, (N, ..., C), 0 outside the image. */
static hlo_value read(const sampler* s, const corner* k) {
  hlo_value v = hlo_take(s->b, s->rows, 0, k->index);
  return hlo_select(s->b, per_channel(s, k->inside), v, hlo_constant_like(s->b, v, 0));
}

/* The corners a position reads and their weights (bilinear: 2^n, bit
 * n-1-i of a corner's number set where it is the upper one along axis i,
 * PyTorch's order nw, ne, sw, se and then the same below; nearest: one).
 * Per axis, upper[i] = p - floor(p) and lower[i] = floor(p) + 1 - p, the
 * weights of the upper and the lower corner along it. */
typedef struct taps {
  corner at[GRID_CORNERS];
  hlo_value weight[GRID_CORNERS];
  int count;
  hlo_value upper[GRID_DIMS], lower[GRID_DIMS];
} taps;

/* Whether corner k is the upper one along axis i. */
static bool is_upper(const sampler* s, int k, int i) { return (k >> (s->n - 1 - i)) & 1; }

/* The product of corner k's weight factors along every axis but `skip`
 * (-1: none), x first as PyTorch multiplies them; HLO_INVALID if none. */
static hlo_value factors(const sampler* s, const taps* t, int k, int skip) {
  hlo_value w = HLO_INVALID;
  for (int i = s->n - 1; i >= 0; i--) {
    if (i == skip) continue;
    hlo_value f = is_upper(s, k, i) ? t->upper[i] : t->lower[i];
    w = w == HLO_INVALID ? f : hlo_binary(s->b, "multiply", w, f);
  }
  return w;
}

static taps taps_of(const sampler* s, const hlo_value* p) {
  hlo_builder* b = s->b;
  taps t = {.count = s->mode == NEAREST ? 1 : 1 << s->n};
  hlo_value q[GRID_DIMS];
  if (s->mode == NEAREST) {
    for (int i = 0; i < s->n; i++) q[i] = hlo_unary(b, "round_nearest_even", p[i]);
    t.at[0] = corner_at(s, q);
    t.weight[0] = fill(s, s->t, 1);
    return t;
  }
  hlo_value low[GRID_DIMS], high[GRID_DIMS];
  for (int i = 0; i < s->n; i++) {
    low[i] = hlo_unary(b, "floor", p[i]);
    high[i] = hlo_binary_constant(b, "add", low[i], 1);
    t.upper[i] = hlo_binary(b, "subtract", p[i], low[i]);
    t.lower[i] = hlo_binary(b, "subtract", high[i], p[i]);
  }
  for (int k = 0; k < t.count; k++) {
    for (int i = 0; i < s->n; i++) q[i] = is_upper(s, k, i) ? high[i] : low[i];
    t.at[k] = corner_at(s, q);
    t.weight[k] = factors(s, &t, k, -1);
  }
  return t;
}

/* Permutations between (N, C, ...) and (N, ..., C) for n spatial dims. */
static void channel_moves(int n, int64_t* to_last, int64_t* to_first) {
  to_last[0] = to_first[0] = 0;
  for (int i = 1; i <= n; i++) to_last[i] = i + 1, to_first[i + 1] = i;
  to_last[n + 1] = 1;
  to_first[1] = n + 1;
}

/* Reads the shared arguments: input at 0 or 1 (the backward's), grid
 * after it, then mode, padding and align_corners. Fills the sampler, the
 * taps and the source coordinates' derivatives by the grid's, per axis. */
static bool prepare(tpu_lowering* l, int input_at, sampler* s, taps* t, hlo_value* d) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type in = tpu_lower_arg_type(l, input_at), grid = tpu_lower_arg_type(l, input_at + 1);
  int mode = (int)tpu_lower_int(l, input_at + 2, BILINEAR);
  if (mode != BILINEAR && mode != NEAREST) {
    tpu_lower_fail(l, TPU_UNIMPLEMENTED,
                   "aten::%s: mode='bicubic' has no tpu lowering; use mode='bilinear' or 'nearest'",
                   tpu_lower_op_name(l));
    return false;
  }
  *s = (sampler){b, in.dtype == TPU_F64 ? TPU_F64 : TPU_F32, in.rank - 2, in.dims[1], {0}, {0}, mode,
                 (int)tpu_lower_int(l, input_at + 3, PAD_ZEROS), tpu_lower_bool(l, input_at + 4, false),
                 HLO_INVALID};
  int64_t volume = 1, to_last[2 + GRID_DIMS], to_first[2 + GRID_DIMS];
  for (int i = 0; i < s->n; i++) volume *= s->size[i] = in.dims[2 + i];
  for (int i = 0; i <= s->n; i++) s->at[i] = grid.dims[i];
  channel_moves(s->n, to_last, to_first);
  int64_t rows[2] = {in.dims[0] * volume, s->c};
  s->rows = hlo_reshape(b, hlo_transpose(b, tpu_lower_value(l, input_at, s->t), to_last), 2, rows);
  hlo_value g = tpu_lower_value(l, input_at + 1, s->t), p[GRID_DIMS];
  for (int i = 0; i < s->n; i++) {
    int component = s->n - 1 - i;
    hlo_value coord = hlo_reshape(b, hlo_slice_dim(b, g, s->n + 1, component, component + 1), s->n + 1, s->at);
    p[i] = source(s, coord, s->size[i], &d[i]);
  }
  *t = taps_of(s, p);
  return true;
}

static tpu_status lower_grid_sampler(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  sampler s;
  taps t;
  hlo_value d[GRID_DIMS];
  if (!prepare(l, 0, &s, &t, d)) return NULL;
  hlo_value out = HLO_INVALID;
  for (int k = 0; k < t.count; k++) {
    hlo_value v = hlo_binary(b, "multiply", read(&s, &t.at[k]), per_channel(&s, t.weight[k]));
    out = k ? hlo_binary(b, "add", out, v) : v;
  }
  int64_t to_last[2 + GRID_DIMS], to_first[2 + GRID_DIMS];
  channel_moves(s.n, to_last, to_first);
  tpu_lower_set_output(l, 0, hlo_transpose(b, out, to_first));
  return NULL;
}

/* d out / d p along each axis, times the coordinate's derivative d: each
 * corner's value dotted with the gradient over channels, times its
 * weight's derivative along the axis (+ or - the other axes' factors).
 * (N, ..., n) with the grid's component order (x, y, z). */
static hlo_value grid_gradient(const sampler* s, const taps* t, hlo_value g, const hlo_value* d) {
  hlo_builder* b = s->b;
  hlo_value dot[GRID_CORNERS], parts[GRID_DIMS];
  int64_t channel = s->n + 1, one[2 + GRID_DIMS];
  for (int i = 0; i <= s->n; i++) one[i] = s->at[i];
  one[s->n + 1] = 1;
  for (int k = 0; k < t->count; k++)
    dot[k] = hlo_reduce(b, hlo_binary(b, "multiply", read(s, &t->at[k]), g), hlo_constant(b, s->t, 0), "add",
                        &channel, 1);
  for (int i = 0; i < s->n; i++) {
    hlo_value sum = fill(s, s->t, 0);
    for (int k = 0; k < t->count; k++) {
      hlo_value along = hlo_binary(b, "multiply", dot[k], factors(s, t, k, i));
      sum = hlo_binary(b, is_upper(s, k, i) ? "add" : "subtract", sum, along);
    }
    parts[s->n - 1 - i] = hlo_reshape(b, hlo_binary(b, "multiply", sum, d[i]), s->n + 2, one);
  }
  return hlo_concatenate(b, parts, s->n, s->n + 1);
}

/* (grad_output, input, grid, mode, padding, align_corners, output_mask)
 * -> (grad_input, grad_grid); a result the mask turns off is skipped when
 * the call has fewer outputs, else 0. */
static tpu_status lower_grid_sampler_backward(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  sampler s;
  taps t;
  hlo_value d[GRID_DIMS];
  if (!prepare(l, 1, &s, &t, d)) return NULL;
  int64_t to_last[2 + GRID_DIMS], to_first[2 + GRID_DIMS];
  channel_moves(s.n, to_last, to_first);
  hlo_value g = hlo_transpose(b, tpu_lower_value(l, 0, s.t), to_last); /* (N, ..., C) */
  const double* mask;
  int mask_count = tpu_lower_float_list(l, 6, &mask), outputs = tpu_lower_output_count(l);
  for (int r = 0, slot = 0; r < 2 && slot < outputs; r++) {
    bool wanted = r >= mask_count || mask[r] != 0;
    if (!wanted && outputs < 2) continue;
    hlo_value result;
    if (!wanted || (r == 1 && s.mode == NEAREST)) {
      result = hlo_constant(b, tpu_lower_output_type(l, slot).dtype, 0);
    } else if (r == 0) {
      hlo_type in = tpu_lower_arg_type(l, 1), image = in, rows = *hlo_type_of(b, s.rows);
      for (int i = 0; i < image.rank; i++) image.dims[i] = in.dims[to_last[i]]; /* (N, ..., C) */
      result = hlo_filled(b, s.t, 2, rows.dims, 0);
      for (int k = 0; k < t.count; k++) {
        hlo_value weight = hlo_select(b, t.at[k].inside, t.weight[k], fill(&s, s.t, 0));
        result = hlo_put(b, result, 0, t.at[k].index, hlo_binary(b, "multiply", g, per_channel(&s, weight)), "add");
      }
      result = hlo_transpose(b, hlo_reshape(b, result, image.rank, image.dims), to_first);
    } else {
      result = grid_gradient(&s, &t, g, d);
    }
    tpu_lower_set_output(l, slot++, result);
  }
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"grid_sampler_2d", lower_grid_sampler, 0},
    {"grid_sampler_2d_backward", lower_grid_sampler_backward, 0},
    {"grid_sampler_3d", lower_grid_sampler, 0},
    {"grid_sampler_3d_backward", lower_grid_sampler_backward, 0},
};

TPU_OP_FAMILY(tpu_ops_grid_sample, entries);
