/* Creation and random lowerings: arange, linspace, logspace, eye,
 * and the random ops (uniform_, normal_, log_normal_, bernoulli_, random_,
 * exponential_, geometric_, cauchy_, randperm, multinomial, native_dropout, rrelu_with_noise)
 * drawn from the generator argument with ThreeFry. */
#include <math.h>
#include <string.h>

#include "hlo/complex_ops.h"
#include "hlo/sort_ops.h"
#include "ops/families.h"

/* Output 0 set to a 0-d zero, which exec/ broadcasts to its shape: the
 * result of an op whose output is empty. */
static void set_zero_output(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  tpu_lower_set_output(l, 0, hlo_constant(b, tpu_lower_output_type(l, 0).dtype, 0));
}

/* The type float results for an output of dtype `t` are computed in. */
static tpu_dtype compute_type(tpu_dtype t) {
  return t == TPU_F64 || t == TPU_C128 ? TPU_F64 : TPU_F32;
}

/* An iota of the output's shape along `dim` in `dtype`. */
static hlo_value output_iota(tpu_lowering* l, tpu_dtype dtype, int dim) {
  hlo_type t = tpu_lower_output_type(l, 0);
  t.dtype = dtype;
  return hlo_iota(tpu_lower_builder(l), t, dim);
}

/* arange(start, end, step) (or arange(end)): start + i * step, in int64
 * for integer outputs and the compute type for floats. */
static tpu_status lower_arange(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type out = tpu_lower_output_type(l, 0);
  if (out.rank != 1 || out.dims[0] == 0) {
    set_zero_output(l);
    return NULL;
  }
  tpu_dtype t = tpu_dtype_is_float(out.dtype) ? compute_type(out.dtype) : TPU_I64;
  bool end_only = tpu_lower_arg_count(l) < 2;
  hlo_value start = end_only ? hlo_constant(b, t, 0) : tpu_lower_value(l, 0, t);
  hlo_value step =
      end_only || tpu_lower_is_none(l, 2) ? hlo_constant(b, t, 1) : tpu_lower_value(l, 2, t);
  hlo_value i = output_iota(l, t, 0);
  hlo_value v = hlo_binary(b, "multiply", i, hlo_broadcast_to(b, step, 1, out.dims));
  tpu_lower_set_output(l, 0, hlo_binary(b, "add", hlo_broadcast_to(b, start, 1, out.dims), v));
  return NULL;
}

/* The type linspace and logspace step in: float32 or float64 for float
 * outputs, float64 for integers (PyTorch's step type there). */
static tpu_dtype spacing_type(tpu_dtype out) {
  return tpu_dtype_is_float(out) ? compute_type(out) : TPU_F64;
}

/* Evenly spaced values from argument 0 to argument 1 over the output's
 * (non-empty) length, in spacing_type. The first half counts up from start,
 * the second half down from end, as PyTorch's kernel does, so both ends are
 * exact. */
static hlo_value spaced_values(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type out = tpu_lower_output_type(l, 0);
  tpu_dtype t = spacing_type(out.dtype);
  int64_t steps = out.dims[0];
  /* The ends are first rounded to the output's dtype, as in PyTorch. */
  hlo_value start = hlo_convert(b, tpu_lower_single(l, 0, out.dtype), t);
  hlo_value end = hlo_convert(b, tpu_lower_single(l, 1, out.dtype), t);
  if (steps == 1) return hlo_broadcast_to(b, start, 1, &steps);
  hlo_value step = hlo_binary(b, "divide", hlo_binary(b, "subtract", end, start),
                              hlo_constant(b, t, (double)(steps - 1)));
  hlo_value i = output_iota(l, t, 0);
  hlo_value rest = hlo_binary(b, "subtract", hlo_constant_like(b, i, (double)(steps - 1)), i);
  start = hlo_broadcast_to(b, start, 1, &steps);
  end = hlo_broadcast_to(b, end, 1, &steps);
  step = hlo_broadcast_to(b, step, 1, &steps);
  hlo_value up = hlo_binary(b, "add", start, hlo_binary(b, "multiply", step, i));
  hlo_value down = hlo_binary(b, "subtract", end, hlo_binary(b, "multiply", step, rest));
  hlo_value index = output_iota(l, TPU_I64, 0);
  hlo_value first_half = hlo_compare(b, "LT", index, hlo_constant_like(b, index, (double)(steps / 2)));
  return hlo_select(b, first_half, up, down);
}

/* linspace(start, end, steps) and logspace(start, end, steps, base) =
 * base ** linspace. */
static tpu_status lower_spaced(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type out = tpu_lower_output_type(l, 0);
  if (out.rank != 1 || out.dims[0] == 0) {
    set_zero_output(l);
    return NULL;
  }
  hlo_value v = spaced_values(l);
  if (strcmp(tpu_lower_op_name(l), "logspace") == 0)
    v = hlo_binary(b, "power", hlo_constant_like(b, v, tpu_lower_float(l, 3, 10.0)), v);
  tpu_lower_set_output(l, 0, v);
  return NULL;
}

/* eye(n[, m]): ones where row == column. */
static tpu_status lower_eye(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type out = tpu_lower_output_type(l, 0);
  if (out.rank != 2 || hlo_type_numel(&out) == 0) {
    set_zero_output(l);
    return NULL;
  }
  hlo_value row = output_iota(l, TPU_I64, 0), col = output_iota(l, TPU_I64, 1);
  tpu_lower_set_output(l, 0, hlo_compare(b, "EQ", row, col));
  return NULL;
}

/* ---- random ---- */

/* `count` random words (U32 or U64) as a flat vector. The generator's
 * (seed, offset) is first hashed into a fresh ThreeFry key: ThreeFry counts
 * from the state's second word, so feeding (seed, offset) directly would
 * make calls at nearby offsets draw shifted copies of one stream. */
static hlo_value random_words(tpu_lowering* l, tpu_dtype word, int64_t count) {
  hlo_builder* b = tpu_lower_builder(l);
  int rng = -1;
  for (int i = 0; i < tpu_lower_arg_count(l) && rng < 0; i++)
    if (tpu_lower_arg_kind(l, i) == TPU_ARG_RNG) rng = i;
  if (rng < 0)
    return tpu_lower_fail(l, TPU_INTERNAL, "aten::%s: the call has no generator argument",
                          tpu_lower_op_name(l));
  int64_t one = 1;
  hlo_value state, key, bits;
  hlo_rng_bits(b, tpu_lower_rng_state(l, rng), hlo_type_make(TPU_U64, 1, &one), &state, &key);
  hlo_value fresh[2] = {key, hlo_reshape(b, hlo_constant_i64(b, TPU_U64, 0), 1, &one)};
  hlo_value seeded = hlo_concatenate(b, fresh, 2, 0);
  hlo_rng_bits(b, seeded, hlo_type_make(word, 1, &count), &state, &bits);
  return bits;
}

/* Random mantissa bits per float type, as PyTorch draws them. */
static int float_digits(tpu_dtype t) {
  switch (t) {
    case TPU_F64: return 53;
    case TPU_F16: return 11;
    case TPU_BF16: return 8;
    default: return 24;
  }
}

/* `count` uniform numbers in [0, 1) on a grid of 2^-digits, in f64 when
 * digits > 24 and f32 otherwise (exact either way). */
static hlo_value uniform_unit(tpu_lowering* l, int64_t count, int digits) {
  hlo_builder* b = tpu_lower_builder(l);
  tpu_dtype word = digits > 24 ? TPU_U64 : TPU_U32;
  hlo_value bits = random_words(l, word, count);
  hlo_value mask = hlo_constant_i64(b, word, ((int64_t)1 << digits) - 1);
  mask = hlo_broadcast_in_dim(b, mask, 1, &count, NULL);
  hlo_value u = hlo_convert(b, hlo_binary(b, "and", bits, mask), digits > 24 ? TPU_F64 : TPU_F32);
  return hlo_binary(b, "multiply", u, hlo_constant_like(b, u, ldexp(1.0, -digits)));
}

/* Uniform [0, 1) numbers in the output's shape and compute type, with
 * the random bits of the compute type or (output_grid) of the output's
 * own dtype, as uniform_ draws them. */
static hlo_value uniform_like_output(tpu_lowering* l, bool output_grid) {
  hlo_type out = tpu_lower_output_type(l, 0);
  int64_t count = hlo_type_numel(&out);
  tpu_dtype grid = output_grid && tpu_dtype_is_float(out.dtype) ? out.dtype : compute_type(out.dtype);
  hlo_value u = uniform_unit(l, count, float_digits(grid));
  return hlo_reshape(tpu_lower_builder(l), u, out.rank, out.dims);
}

/* Argument `index` (a tensor, a number or a float attribute; `fallback`
 * when absent) broadcast to `type`. */
static hlo_value operand_as(tpu_lowering* l, int index, const hlo_type* type, double fallback) {
  tpu_arg_kind kind = tpu_lower_arg_kind(l, index);
  if (kind == TPU_ARG_TENSOR || kind == TPU_ARG_SCALAR) return tpu_lower_value_as(l, index, type);
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value c = hlo_constant(b, type->dtype, tpu_lower_float(l, index, fallback));
  return hlo_broadcast_in_dim(b, c, type->rank, type->dims, NULL);
}

/* A random op on an empty output has nothing to draw (ThreeFry needs at
 * least one word); true when it set the output. */
static bool empty_random(tpu_lowering* l) {
  hlo_type out = tpu_lower_output_type(l, 0);
  if (hlo_type_numel(&out) != 0) return false;
  set_zero_output(l);
  return true;
}

/* uniform_(self, from, to): from + u * (to - from). */
static tpu_status lower_uniform(tpu_lowering* l) {
  if (empty_random(l)) return NULL;
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value u = uniform_like_output(l, true);
  hlo_type t = *hlo_type_of(b, u);
  hlo_value from = operand_as(l, 1, &t, 0), to = operand_as(l, 2, &t, 1);
  hlo_value span = hlo_binary(b, "subtract", to, from);
  tpu_lower_set_output(l, 0, hlo_binary(b, "add", hlo_binary(b, "multiply", u, span), from));
  return NULL;
}

/* log(1 - u), finite for u in [0, 1). */
static hlo_value log_one_minus(hlo_builder* b, hlo_value u) {
  return hlo_unary(b, "log", hlo_binary(b, "subtract", hlo_constant_like(b, u, 1), u));
}

/* Standard normal numbers in the output's shape and compute type:
 * Box-Muller over two uniforms per element. */
static hlo_value standard_normal(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type out = tpu_lower_output_type(l, 0);
  int64_t count = hlo_type_numel(&out), both = 2 * count, zero = 0, one = 1;
  hlo_value u = uniform_unit(l, both, float_digits(compute_type(out.dtype)));
  hlo_value u1 = hlo_reshape(b, hlo_slice(b, u, &zero, &count, &one), out.rank, out.dims);
  hlo_value u2 = hlo_reshape(b, hlo_slice(b, u, &count, &both, &one), out.rank, out.dims);
  hlo_value r = log_one_minus(b, u1);
  r = hlo_unary(b, "sqrt", hlo_binary(b, "multiply", hlo_constant_like(b, r, -2), r));
  hlo_value theta = hlo_binary(b, "multiply", hlo_constant_like(b, u2, 2 * M_PI), u2);
  if (!tpu_dtype_is_complex(out.dtype)) return hlo_binary(b, "multiply", r, hlo_unary(b, "cosine", theta));
  /* Both of Box-Muller's normals, each of variance 1/2 as PyTorch draws
   * complex normals: E|z|^2 = 1. */
  r = hlo_binary(b, "multiply", r, hlo_constant_like(b, r, M_SQRT1_2));
  return hlo_complex(b, hlo_binary(b, "multiply", r, hlo_unary(b, "cosine", theta)),
                     hlo_binary(b, "multiply", r, hlo_unary(b, "sine", theta)));
}

/* mean + std * z for normal_(self, mean, std), normal(mean, std) with
 * tensor or float mean/std, and log_normal_(self, mean, std) = exp of it. */
static tpu_status lower_normal(tpu_lowering* l) {
  if (empty_random(l)) return NULL;
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value z = standard_normal(l);
  hlo_type t = *hlo_type_of(b, z);
  /* The in-place forms have self first; normal.Tensor_float and the other
   * functional overloads start with mean. */
  const char* overload = tpu_lower_overload(l);
  int at = strncmp(overload, "Tensor_", 7) == 0 || strncmp(overload, "float_", 6) == 0 ? 0 : 1;
  bool log_normal = strcmp(tpu_lower_op_name(l), "log_normal") == 0;
  hlo_value mean = operand_as(l, at, &t, log_normal ? 1 : 0);
  hlo_value std = operand_as(l, at + 1, &t, log_normal ? 2 : 1);
  hlo_value v = hlo_binary(b, "add", mean, hlo_binary(b, "multiply", std, z));
  tpu_lower_set_output(l, 0, log_normal ? hlo_unary(b, "exponential", v) : v);
  return NULL;
}

/* bernoulli_(self, p) with float or tensor p, and bernoulli(p): u < p. */
static tpu_status lower_bernoulli(tpu_lowering* l) {
  if (empty_random(l)) return NULL;
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value u = uniform_like_output(l, false);
  hlo_type t = *hlo_type_of(b, u);
  tpu_arg_kind kind = tpu_lower_arg_kind(l, 1);
  int at = kind == TPU_ARG_TENSOR || kind == TPU_ARG_FLOAT ? 1 : 0;
  tpu_lower_set_output(l, 0, hlo_compare(b, "LT", u, operand_as(l, at, &t, 0.5)));
  return NULL;
}

/* exponential_(self, lambd): -log(1 - u) / lambd. */
static tpu_status lower_exponential(tpu_lowering* l) {
  if (empty_random(l)) return NULL;
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value u = uniform_like_output(l, false);
  hlo_type t = *hlo_type_of(b, u);
  hlo_value e = hlo_unary(b, "negate", log_one_minus(b, u));
  tpu_lower_set_output(l, 0, hlo_binary(b, "divide", e, operand_as(l, 1, &t, 1)));
  return NULL;
}

/* geometric_(self, p): trials until the first success, ceil(log(1 - u) /
 * log(1 - p)), at least 1. */
static tpu_status lower_geometric(tpu_lowering* l) {
  if (empty_random(l)) return NULL;
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value u = uniform_like_output(l, false);
  hlo_value scale = hlo_constant_like(b, u, log1p(-tpu_lower_float(l, 1, 0.5)));
  hlo_value k = hlo_unary(b, "ceil", hlo_binary(b, "divide", log_one_minus(b, u), scale));
  tpu_lower_set_output(l, 0, hlo_binary(b, "maximum", k, hlo_constant_like(b, k, 1)));
  return NULL;
}

/* cauchy_(self, median, sigma): median + sigma * tan(pi * (u - 1/2)). */
static tpu_status lower_cauchy(tpu_lowering* l) {
  if (empty_random(l)) return NULL;
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value u = uniform_like_output(l, false);
  hlo_type t = *hlo_type_of(b, u);
  hlo_value angle = hlo_binary(b, "multiply", hlo_constant_like(b, u, M_PI),
                               hlo_binary(b, "subtract", u, hlo_constant_like(b, u, 0.5)));
  hlo_value tan =
      hlo_binary(b, "divide", hlo_unary(b, "sine", angle), hlo_unary(b, "cosine", angle));
  hlo_value v = hlo_binary(b, "multiply", operand_as(l, 2, &t, 1), tan);
  tpu_lower_set_output(l, 0, hlo_binary(b, "add", operand_as(l, 1, &t, 0), v));
  return NULL;
}

/* The default range of random_() for dtype t: [0, 2^digits] for floats,
 * [0, max] for integers; returns its size (0 meaning 2^64). */
static uint64_t default_random_range(tpu_dtype t) {
  if (tpu_dtype_is_float(t)) return ((uint64_t)1 << float_digits(t)) + 1;
  if (t == TPU_BOOL) return 2;
  int bits = (int)tpu_dtype_size(t) * 8 - (tpu_dtype_is_signed_int(t) ? 1 : 0);
  return bits >= 64 ? 0 : (uint64_t)1 << bits;
}

/* random_(self), random_(self, to), random_(self, from, to?): integers in
 * [from, to), drawn as 64-bit words modulo the range like PyTorch. */
static tpu_status lower_random(tpu_lowering* l) {
  if (empty_random(l)) return NULL;
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type out = tpu_lower_output_type(l, 0);
  const char* overload = tpu_lower_overload(l);
  int64_t from = 0;
  uint64_t range = default_random_range(out.dtype);
  if (strncmp(overload, "from", 4) == 0) {
    from = tpu_lower_int(l, 1, 0);
    if (tpu_lower_arg_kind(l, 2) == TPU_ARG_INT)
      range = (uint64_t)tpu_lower_int(l, 2, 0) - (uint64_t)from;
    else if (from == INT64_MIN)
      range = 0;
    else /* up to the dtype's largest value, inclusive */
      range = default_random_range(out.dtype) - (uint64_t)from;
  } else if (strncmp(overload, "to", 2) == 0) {
    range = (uint64_t)tpu_lower_int(l, 1, 0);
  }
  int64_t count = hlo_type_numel(&out);
  hlo_value words = random_words(l, TPU_U64, count);
  if (range != 0) {
    hlo_value r = hlo_constant_i64(b, TPU_U64, (int64_t)range);
    words = hlo_binary(b, "remainder", words, hlo_broadcast_in_dim(b, r, 1, &count, NULL));
  }
  hlo_value base = hlo_broadcast_in_dim(b, hlo_constant_i64(b, TPU_U64, from), 1, &count, NULL);
  hlo_value v = hlo_bitcast_convert(b, hlo_binary(b, "add", words, base), TPU_I64);
  tpu_lower_set_output(l, 0, hlo_reshape(b, v, out.rank, out.dims));
  return NULL;
}

/* randperm(n): positions sorted by random 64-bit keys (ties, about n^2 /
 * 2^65 likely, keep their order). */
static tpu_status lower_randperm(tpu_lowering* l) {
  if (empty_random(l)) return NULL;
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type out = tpu_lower_output_type(l, 0);
  int64_t n = hlo_type_numel(&out);
  hlo_value pair[2] = {random_words(l, TPU_U64, n), hlo_iota(b, hlo_type_make(TPU_I64, 1, &n), 0)};
  hlo_value sorted[2];
  hlo_sort(b, pair, 2, 0, false, sorted);
  tpu_lower_set_output(l, 0, sorted[1]);
  return NULL;
}

/* multinomial(probs, num_samples, replacement): indices drawn with the
 * probabilities of the last dim (weights need not sum to 1), by the
 * exponential race: category k's key is log p_k - log E_k with E_k ~
 * Exp(1), and the largest key wins, with probability p_k / sum p. With
 * replacement every sample runs its own race (argmax); without, one race
 * ranks every category and the first num_samples win, each in order of
 * its key, as sequential draws without replacement would give them.
 * Zero weights never win. PyTorch's checks on the weights (no negative,
 * inf or NaN, enough nonzero ones) read them on the host; these do not. */
static tpu_status lower_multinomial(tpu_lowering* l) {
  if (empty_random(l)) return NULL;
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type in = tpu_lower_arg_type(l, 0), out = tpu_lower_output_type(l, 0);
  tpu_dtype t = compute_type(in.dtype);
  int64_t rows = in.rank == 2 ? in.dims[0] : 1, k = in.dims[in.rank - 1], samples = out.dims[out.rank - 1];
  bool replacement = tpu_lower_bool(l, 2, false);
  int64_t races = replacement ? samples : 1, race[3] = {rows, races, k}, weight_dims[2] = {0, 2};
  int64_t count = rows * races * k;
  /* Uniforms in (0, 1), half a grid step off 0, so each E is finite and positive. */
  int digits = float_digits(t);
  hlo_value u = hlo_reshape(b, uniform_unit(l, count, digits), 3, race);
  u = hlo_binary(b, "add", u, hlo_constant_like(b, u, ldexp(1.0, -digits - 1)));
  hlo_value e = hlo_unary(b, "negate", hlo_unary(b, "log", u));
  int64_t weights_shape[2] = {rows, k};
  hlo_value p = hlo_reshape(b, tpu_lower_value(l, 0, t), 2, weights_shape);
  hlo_value keys = hlo_binary(b, "subtract", hlo_broadcast_in_dim(b, hlo_unary(b, "log", p), 3, race, weight_dims),
                              hlo_unary(b, "log", e));
  hlo_value picked;
  if (replacement) {
    hlo_value best;
    hlo_arg_reduce(b, keys, 2, true, &best, &picked);
  } else {
    int64_t ranked[2] = {rows, k}, start[2] = {0, 0}, limit[2] = {rows, samples}, step[2] = {1, 1};
    hlo_value pair[2] = {hlo_reshape(b, keys, 2, ranked), hlo_iota(b, hlo_type_make(TPU_I64, 2, ranked), 1)};
    hlo_value sorted[2];
    hlo_sort(b, pair, 2, 1, true, sorted);
    picked = hlo_slice(b, sorted[1], start, limit, step);
  }
  tpu_lower_set_output(l, 0, hlo_reshape(b, picked, out.rank, out.dims));
  return NULL;
}

/* native_dropout(input, p, train) -> (output, mask): each element is kept
 * with probability 1 - p and scaled by 1 / (1 - p). */
static tpu_status lower_native_dropout(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value x = tpu_lower_tensor(l, 0);
  hlo_type t = *hlo_type_of(b, x);
  double keep = 1.0 - tpu_lower_float(l, 1, 0.5);
  if (!tpu_lower_bool(l, 2, true) || hlo_type_numel(&t) == 0) {
    tpu_lower_set_output(l, 0, x);
    tpu_lower_set_output(l, 1, hlo_constant(b, TPU_BOOL, 1));
    return NULL;
  }
  hlo_value u = uniform_like_output(l, false);
  hlo_value mask = hlo_compare(b, "LT", u, hlo_constant_like(b, u, keep));
  t.dtype = compute_type(t.dtype);
  hlo_value kept =
      hlo_binary(b, "multiply", hlo_convert(b, x, t.dtype), hlo_convert(b, mask, t.dtype));
  /* Multiplying (not selecting) keeps NaN inputs NaN, as PyTorch does. */
  hlo_value scale = hlo_constant_like(b, kept, keep > 0 ? 1.0 / keep : 0.0);
  tpu_lower_set_output(l, 0, hlo_binary(b, "multiply", kept, scale));
  tpu_lower_set_output(l, 1, mask);
  return NULL;
}

/* rrelu_with_noise(self, noise, lower, upper, training, generator) ->
 * (noise, result), nn.RReLU. Training: each element <= 0 takes a slope
 * drawn uniformly from [lower, upper), recorded in noise (1 elsewhere), and
 * the result is self * noise, as in PyTorch's kernel (whose backward
 * multiplies by noise). Evaluation: the slope (lower + upper) / 2, noise
 * left as it is. */
static tpu_status lower_rrelu_with_noise(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type t = tpu_lower_arg_type(l, 0);
  t.dtype = compute_type(t.dtype);
  hlo_value x = tpu_lower_value(l, 0, t.dtype);
  hlo_value lo = operand_as(l, 2, &t, 1.0 / 8), hi = operand_as(l, 3, &t, 1.0 / 3);
  hlo_value negative = hlo_compare(b, "LE", x, hlo_constant_like(b, x, 0));
  if (!tpu_lower_bool(l, 4, false) || hlo_type_numel(&t) == 0) {
    hlo_value slope = hlo_binary(b, "multiply", hlo_binary(b, "add", lo, hi), hlo_constant_like(b, lo, 0.5));
    tpu_lower_keep_output(l, 0);
    tpu_lower_set_output(l, 1, hlo_select(b, negative, hlo_binary(b, "multiply", x, slope), x));
    return NULL;
  }
  hlo_value u = hlo_convert(b, uniform_like_output(l, false), t.dtype);
  hlo_value slope = hlo_binary(b, "add", lo, hlo_binary(b, "multiply", u, hlo_binary(b, "subtract", hi, lo)));
  hlo_value noise = hlo_select(b, negative, slope, hlo_constant_like(b, slope, 1));
  tpu_lower_set_output(l, 0, noise);
  tpu_lower_set_output(l, 1, hlo_binary(b, "multiply", x, noise));
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"arange", lower_arange, TPU_OP_SCALARS_IN_KEY}, /* the output's length depends on the scalars */
    {"bernoulli", lower_bernoulli, 0},
    {"cauchy", lower_cauchy, 0},
    {"exponential", lower_exponential, 0},
    {"eye", lower_eye, TPU_OP_COMPLEX},
    {"geometric", lower_geometric, 0},
    {"linspace", lower_spaced, 0},
    {"log_normal", lower_normal, 0},
    {"logspace", lower_spaced, 0},
    {"multinomial", lower_multinomial, 0},
    {"native_dropout", lower_native_dropout, 0},
    {"normal", lower_normal, TPU_OP_COMPLEX},
    {"random", lower_random, 0},
    {"randperm", lower_randperm, 0},
    {"rrelu_with_noise", lower_rrelu_with_noise, 0},
    {"uniform", lower_uniform, 0},
};

TPU_OP_FAMILY(tpu_ops_creation, entries);
