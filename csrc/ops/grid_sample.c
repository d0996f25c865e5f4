/* grid_sampler_2d(input, grid, interpolation, padding, align_corners) and
 * its backward: F.grid_sample on 4-d input, which spatial transformers,
 * optical flow and deformable attention (Deformable DETR, Mask2Former)
 * use. Interpolation bilinear (0) or nearest (1); padding zeros (0),
 * border (1) or reflection (2).
 *
 * Each output position reads the input at a source point from the grid:
 * grid x, y in [-1, 1] are unnormalized to pixel coordinates and, for
 * border and reflection, folded into the image, with PyTorch's formulas.
 * The input is laid out as rows of channels, (N*H*W, C), so each corner a
 * position reads is one row, gathered (forward) or added to (backward)
 * at n*H*W + y*W + x; corners outside the image read 0 and receive
 * nothing. The grid's gradient is the bilinear weights' derivative times
 * each coordinate's derivative through the unnormalizing and folding
 * (0 where a coordinate was clipped, the sign flipped where reflected);
 * nearest has none. Arithmetic in float32 (float64 for double). */
#include "hlo/conv_ops.h"
#include "hlo/slice_ops.h"
#include "ops/families.h"

enum { BILINEAR = 0, NEAREST = 1 };
enum { PAD_ZEROS = 0, PAD_BORDER = 1, PAD_REFLECTION = 2 };

typedef struct sampler {
  hlo_builder* b;
  tpu_dtype t;
  int64_t n, c, h, w;
  int64_t at[3];      /* the output positions' shape: (N, Ho, Wo) */
  int mode;
  int padding;
  bool align_corners;
  hlo_value rows;     /* the input as (N*H*W, C) */
} sampler;

static hlo_value fill(const sampler* s, tpu_dtype t, double v) {
  return hlo_broadcast_in_dim(s->b, hlo_constant(s->b, t, v), 3, s->at, NULL);
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

/* One corner (integer pixel coordinates, as the compute type): its row
 * index into s->rows, clamped, and whether it lies in the image. */
typedef struct corner {
  hlo_value index;
  hlo_value inside;
} corner;

static corner corner_at(const sampler* s, hlo_value y, hlo_value x) {
  hlo_builder* b = s->b;
  hlo_value zero = fill(s, s->t, 0);
  hlo_value inside = hlo_binary(b, "and",
                                hlo_binary(b, "and", hlo_compare(b, "GE", x, zero),
                                           hlo_compare(b, "LT", x, fill(s, s->t, (double)s->w))),
                                hlo_binary(b, "and", hlo_compare(b, "GE", y, zero),
                                           hlo_compare(b, "LT", y, fill(s, s->t, (double)s->h))));
  hlo_value xi = hlo_binary(b, "minimum", hlo_binary(b, "maximum", hlo_convert(b, x, TPU_I64), fill(s, TPU_I64, 0)),
                            fill(s, TPU_I64, (double)(s->w - 1)));
  hlo_value yi = hlo_binary(b, "minimum", hlo_binary(b, "maximum", hlo_convert(b, y, TPU_I64), fill(s, TPU_I64, 0)),
                            fill(s, TPU_I64, (double)(s->h - 1)));
  hlo_value batch = hlo_binary_constant(b, "multiply", hlo_iota(b, hlo_type_make(TPU_I64, 3, s->at), 0),
                                        (double)(s->h * s->w));
  hlo_value index = hlo_binary(b, "add", batch, hlo_binary(b, "add", hlo_binary_constant(b, "multiply", yi, (double)s->w), xi));
  return (corner){index, inside};
}

/* A per-position value broadcast over the channels: (N, Ho, Wo, C). */
static hlo_value per_channel(const sampler* s, hlo_value v) {
  int64_t dims[4] = {s->at[0], s->at[1], s->at[2], s->c}, keep[3] = {0, 1, 2};
  return hlo_broadcast_in_dim(s->b, v, 4, dims, keep);
}

/* The corner's rows, (N, Ho, Wo, C), 0 outside the image. */
static hlo_value read(const sampler* s, const corner* k) {
  hlo_value v = hlo_take(s->b, s->rows, 0, k->index);
  return hlo_select(s->b, per_channel(s, k->inside), v, hlo_constant_like(s->b, v, 0));
}

/* The corners a position reads and their weights (bilinear: four, in the
 * order nw, ne, sw, se; nearest: one), with the fractions fx, fy. */
typedef struct taps {
  corner at[4];
  hlo_value weight[4];
  int count;
  hlo_value fx, fy;
} taps;

static taps taps_of(const sampler* s, hlo_value x, hlo_value y) {
  hlo_builder* b = s->b;
  taps k = {.count = s->mode == NEAREST ? 1 : 4};
  if (s->mode == NEAREST) {
    k.at[0] = corner_at(s, hlo_unary(b, "round_nearest_even", y), hlo_unary(b, "round_nearest_even", x));
    k.weight[0] = fill(s, s->t, 1);
    return k;
  }
  hlo_value x0 = hlo_unary(b, "floor", x), y0 = hlo_unary(b, "floor", y);
  hlo_value x1 = hlo_binary_constant(b, "add", x0, 1), y1 = hlo_binary_constant(b, "add", y0, 1);
  k.fx = hlo_binary(b, "subtract", x, x0);
  k.fy = hlo_binary(b, "subtract", y, y0);
  hlo_value gx = hlo_binary(b, "subtract", x1, x), gy = hlo_binary(b, "subtract", y1, y);
  k.at[0] = corner_at(s, y0, x0);
  k.at[1] = corner_at(s, y0, x1);
  k.at[2] = corner_at(s, y1, x0);
  k.at[3] = corner_at(s, y1, x1);
  k.weight[0] = hlo_binary(b, "multiply", gx, gy);
  k.weight[1] = hlo_binary(b, "multiply", k.fx, gy);
  k.weight[2] = hlo_binary(b, "multiply", gx, k.fy);
  k.weight[3] = hlo_binary(b, "multiply", k.fx, k.fy);
  return k;
}

/* Reads the shared arguments: input at 0 or 1 (the backward's), grid
 * after it, then mode, padding and align_corners. Fills the sampler, the
 * taps and the source coordinates' derivatives by the grid's. */
static bool prepare(tpu_lowering* l, int input_at, sampler* s, taps* k, hlo_value* dx, hlo_value* dy) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type in = tpu_lower_arg_type(l, input_at), grid = tpu_lower_arg_type(l, input_at + 1);
  int mode = (int)tpu_lower_int(l, input_at + 2, BILINEAR);
  if (mode != BILINEAR && mode != NEAREST) {
    tpu_lower_fail(l, TPU_UNIMPLEMENTED,
                   "aten::%s: mode='bicubic' has no tpu lowering; use mode='bilinear' or 'nearest'",
                   tpu_lower_op_name(l));
    return false;
  }
  *s = (sampler){b, in.dtype == TPU_F64 ? TPU_F64 : TPU_F32, in.dims[0], in.dims[1], in.dims[2], in.dims[3],
                 {grid.dims[0], grid.dims[1], grid.dims[2]}, mode, (int)tpu_lower_int(l, input_at + 3, PAD_ZEROS),
                 tpu_lower_bool(l, input_at + 4, false), HLO_INVALID};
  static const int64_t channels_last[4] = {0, 2, 3, 1};
  int64_t rows[2] = {s->n * s->h * s->w, s->c};
  s->rows = hlo_reshape(b, hlo_transpose(b, tpu_lower_value(l, input_at, s->t), channels_last), 2, rows);
  hlo_value g = tpu_lower_value(l, input_at + 1, s->t);
  int64_t start[4] = {0, 0, 0, 0}, limit[4] = {s->at[0], s->at[1], s->at[2], 1}, step[4] = {1, 1, 1, 1};
  hlo_value gx = hlo_reshape(b, hlo_slice(b, g, start, limit, step), 3, s->at);
  start[3] = 1;
  limit[3] = 2;
  hlo_value gy = hlo_reshape(b, hlo_slice(b, g, start, limit, step), 3, s->at);
  hlo_value x = source(s, gx, s->w, dx), y = source(s, gy, s->h, dy);
  *k = taps_of(s, x, y);
  return true;
}

static tpu_status lower_grid_sampler(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  sampler s;
  taps k;
  hlo_value dx, dy;
  if (!prepare(l, 0, &s, &k, &dx, &dy)) return NULL;
  hlo_value out = HLO_INVALID;
  for (int i = 0; i < k.count; i++) {
    hlo_value v = hlo_binary(b, "multiply", read(&s, &k.at[i]), per_channel(&s, k.weight[i]));
    out = i ? hlo_binary(b, "add", out, v) : v;
  }
  static const int64_t channels_first[4] = {0, 3, 1, 2};
  tpu_lower_set_output(l, 0, hlo_transpose(b, out, channels_first));
  return NULL;
}

/* (grad_output, input, grid, mode, padding, align_corners, output_mask)
 * -> (grad_input, grad_grid); a result the mask turns off is skipped when
 * the call has fewer outputs, else 0. */
static tpu_status lower_grid_sampler_backward(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  sampler s;
  taps k;
  hlo_value dx, dy;
  if (!prepare(l, 1, &s, &k, &dx, &dy)) return NULL;
  static const int64_t channels_last[4] = {0, 2, 3, 1}, channels_first[4] = {0, 3, 1, 2};
  hlo_value g = hlo_transpose(b, tpu_lower_value(l, 0, s.t), channels_last); /* (N, Ho, Wo, C) */
  const double* mask;
  int mask_count = tpu_lower_float_list(l, 6, &mask), outputs = tpu_lower_output_count(l);
  for (int r = 0, slot = 0; r < 2 && slot < outputs; r++) {
    bool wanted = r >= mask_count || mask[r] != 0;
    if (!wanted && outputs < 2) continue;
    hlo_value result;
    if (!wanted || (r == 1 && s.mode == NEAREST)) {
      result = hlo_constant(b, tpu_lower_output_type(l, slot).dtype, 0);
    } else if (r == 0) {
      int64_t rows[2] = {s.n * s.h * s.w, s.c}, image[4] = {s.n, s.h, s.w, s.c};
      result = hlo_filled(b, s.t, 2, rows, 0);
      for (int i = 0; i < k.count; i++) {
        hlo_value weight = hlo_select(b, k.at[i].inside, k.weight[i], fill(&s, s.t, 0));
        result = hlo_put(b, result, 0, k.at[i].index, hlo_binary(b, "multiply", g, per_channel(&s, weight)), "add");
      }
      result = hlo_transpose(b, hlo_reshape(b, result, 4, image), channels_first);
    } else {
      /* d out / d x and d y: each corner's value weighted by its weight's
       * derivative in x (and y), summed with the gradient over channels. */
      static const double sx[4] = {-1, 1, -1, 1}, sy[4] = {-1, -1, 1, 1};
      hlo_value gfx = hlo_binary(b, "subtract", fill(&s, s.t, 1), k.fx);
      hlo_value gfy = hlo_binary(b, "subtract", fill(&s, s.t, 1), k.fy);
      hlo_value ddx = fill(&s, s.t, 0), ddy = fill(&s, s.t, 0);
      int64_t channel = 3;
      for (int i = 0; i < 4; i++) {
        hlo_value dot = hlo_reduce(b, hlo_binary(b, "multiply", read(&s, &k.at[i]), g), hlo_constant(b, s.t, 0),
                                   "add", &channel, 1);
        hlo_value along_y = i < 2 ? gfy : k.fy, along_x = i % 2 ? k.fx : gfx;
        ddx = hlo_binary(b, "add", ddx, hlo_binary_constant(b, "multiply", hlo_binary(b, "multiply", dot, along_y), sx[i]));
        ddy = hlo_binary(b, "add", ddy, hlo_binary_constant(b, "multiply", hlo_binary(b, "multiply", dot, along_x), sy[i]));
      }
      int64_t one[4] = {s.at[0], s.at[1], s.at[2], 1};
      hlo_value parts[2] = {hlo_reshape(b, hlo_binary(b, "multiply", ddx, dx), 4, one),
                            hlo_reshape(b, hlo_binary(b, "multiply", ddy, dy), 4, one)};
      result = hlo_concatenate(b, parts, 2, 3);
    }
    tpu_lower_set_output(l, slot++, result);
  }
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"grid_sampler_2d", lower_grid_sampler, 0},
    {"grid_sampler_2d_backward", lower_grid_sampler_backward, 0},
};

TPU_OP_FAMILY(tpu_ops_grid_sample, entries);
