/* Creation and random lowerings: zero, arange, linspace, eye, and the
 * random fills (uniform_, normal_, bernoulli_, random_, exponential_) drawn
 * from the generator argument with ThreeFry. */
#include <math.h>
#include <string.h>

#include "ops/families.h"

/* zero_(self): a 0-d zero that exec/ broadcasts to the output. */
static tpu_status lower_zero(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  tpu_lower_set_output(l, 0, hlo_constant(b, tpu_lower_output_type(l, 0).dtype, 0));
  return NULL;
}

/* The type float results for an output of dtype `t` are computed in. */
static tpu_dtype compute_type(tpu_dtype t) { return t == TPU_F64 ? TPU_F64 : TPU_F32; }

/* An iota of the output's shape along `dim` in `dtype`. */
static hlo_value output_iota(tpu_lowering* l, tpu_dtype dtype, int dim) {
  hlo_type t = tpu_lower_output_type(l, 0);
  t.dtype = dtype;
  return hlo_iota(tpu_lower_builder(l), t, dim);
}

/* arange(start, end, step) (or arange(end)): start + i * step, in int64 for
 * integer outputs and float64 otherwise, as PyTorch's accumulate types. */
static tpu_status lower_arange(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type out = tpu_lower_output_type(l, 0);
  if (out.rank != 1 || out.dims[0] == 0) {
    tpu_lower_set_output(l, 0, hlo_constant(b, out.dtype, 0));
    return NULL;
  }
  tpu_dtype t = tpu_dtype_is_float(out.dtype) ? TPU_F64 : TPU_I64;
  bool end_only = tpu_lower_arg_count(l) < 2;
  hlo_value start = end_only ? hlo_constant(b, t, 0) : tpu_lower_value(l, 0, t);
  hlo_value step = end_only || tpu_lower_is_none(l, 2) ? hlo_constant(b, t, 1) : tpu_lower_value(l, 2, t);
  hlo_value i = output_iota(l, t, 0);
  hlo_value v = hlo_binary(b, "multiply", i, hlo_broadcast_to(b, step, 1, out.dims));
  tpu_lower_set_output(l, 0, hlo_binary(b, "add", hlo_broadcast_to(b, start, 1, out.dims), v));
  return NULL;
}

/* linspace(start, end, steps): the first half counts up from start, the
 * second half down from end, as PyTorch's kernel does, so both ends are
 * exact. float64 and integers step in float64 (PyTorch's step type for
 * integers), other floats in float32. */
static tpu_status lower_linspace(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type out = tpu_lower_output_type(l, 0);
  int64_t steps = out.rank == 1 ? out.dims[0] : 0;
  if (steps == 0) {
    tpu_lower_set_output(l, 0, hlo_constant(b, out.dtype, 0));
    return NULL;
  }
  tpu_dtype t = tpu_dtype_is_float(out.dtype) ? compute_type(out.dtype) : TPU_F64;
  hlo_value start = hlo_convert(b, hlo_reshape(b, tpu_lower_value(l, 0, out.dtype), 0, NULL), t);
  hlo_value end = hlo_convert(b, hlo_reshape(b, tpu_lower_value(l, 1, out.dtype), 0, NULL), t);
  if (steps == 1) {
    tpu_lower_set_output(l, 0, start);
    return NULL;
  }
  hlo_value step = hlo_binary(b, "divide", hlo_binary(b, "subtract", end, start),
                              hlo_constant(b, t, (double)(steps - 1)));
  hlo_value i = output_iota(l, t, 0);
  hlo_value rest = hlo_binary(b, "subtract", hlo_constant_like(b, i, (double)(steps - 1)), i);
  hlo_value ones[3] = {start, end, step};
  for (int k = 0; k < 3; k++) ones[k] = hlo_broadcast_to(b, ones[k], 1, &steps);
  hlo_value up = hlo_binary(b, "add", ones[0], hlo_binary(b, "multiply", ones[2], i));
  hlo_value down = hlo_binary(b, "subtract", ones[1], hlo_binary(b, "multiply", ones[2], rest));
  hlo_value first_half = hlo_compare(b, "LT", output_iota(l, TPU_I64, 0),
                                     hlo_constant_like(b, output_iota(l, TPU_I64, 0), (double)(steps / 2)));
  tpu_lower_set_output(l, 0, hlo_select(b, first_half, up, down));
  return NULL;
}

/* eye(n[, m]): ones where row == column. */
static tpu_status lower_eye(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type out = tpu_lower_output_type(l, 0);
  if (out.rank != 2 || hlo_type_numel(&out) == 0) {
    tpu_lower_set_output(l, 0, hlo_constant(b, out.dtype, 0));
    return NULL;
  }
  tpu_lower_set_output(l, 0, hlo_compare(b, "EQ", output_iota(l, TPU_I64, 0), output_iota(l, TPU_I64, 1)));
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
  hlo_value mask = hlo_broadcast_in_dim(b, hlo_constant_i64(b, word, ((int64_t)1 << digits) - 1), 1, &count, NULL);
  hlo_value u = hlo_convert(b, hlo_binary(b, "and", bits, mask), digits > 24 ? TPU_F64 : TPU_F32);
  return hlo_binary(b, "multiply", u, hlo_constant_like(b, u, ldexp(1.0, -digits)));
}

/* Uniform [0, 1) numbers in the output's shape and compute type. */
static hlo_value uniform_like_output(tpu_lowering* l) {
  hlo_type out = tpu_lower_output_type(l, 0);
  int64_t count = hlo_type_numel(&out);
  int digits = tpu_dtype_is_float(out.dtype) ? float_digits(out.dtype) : 24;
  hlo_value u = uniform_unit(l, count, digits);
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
  tpu_lower_set_output(l, 0, hlo_constant(tpu_lower_builder(l), out.dtype, 0));
  return true;
}

/* uniform_(self, from, to): from + u * (to - from). */
static tpu_status lower_uniform(tpu_lowering* l) {
  if (empty_random(l)) return NULL;
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value u = uniform_like_output(l);
  hlo_type t = *hlo_type_of(b, u);
  hlo_value from = operand_as(l, 1, &t, 0), to = operand_as(l, 2, &t, 1);
  hlo_value span = hlo_binary(b, "subtract", to, from);
  tpu_lower_set_output(l, 0, hlo_binary(b, "add", hlo_binary(b, "multiply", u, span), from));
  return NULL;
}

/* normal_(self, mean, std) and normal(mean, std) with tensor or float
 * mean/std: Box-Muller over two uniforms per element. */
static tpu_status lower_normal(tpu_lowering* l) {
  if (empty_random(l)) return NULL;
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type out = tpu_lower_output_type(l, 0);
  hlo_type t = out;
  t.dtype = compute_type(out.dtype);
  int64_t count = hlo_type_numel(&out), both = 2 * count;
  hlo_value u = uniform_unit(l, both, float_digits(t.dtype));
  int64_t zero = 0, one = 1;
  hlo_value u1 = hlo_reshape(b, hlo_slice(b, u, &zero, &count, &one), out.rank, out.dims);
  hlo_value u2 = hlo_reshape(b, hlo_slice(b, u, &count, &both, &one), out.rank, out.dims);
  /* 1 - u1 is in (0, 1], so the log is finite. */
  hlo_value r = hlo_binary(b, "subtract", hlo_constant_like(b, u1, 1), u1);
  r = hlo_unary(b, "sqrt", hlo_binary(b, "multiply", hlo_constant_like(b, r, -2), hlo_unary(b, "log", r)));
  hlo_value theta = hlo_binary(b, "multiply", hlo_constant_like(b, u2, 2 * M_PI), u2);
  hlo_value z = hlo_binary(b, "multiply", r, hlo_unary(b, "cosine", theta));
  /* normal_(self, mean, std) has self first; normal.Tensor_float and the
   * other functional overloads start with mean. */
  const char* overload = tpu_lower_overload(l);
  int at = strncmp(overload, "Tensor_", 7) == 0 || strncmp(overload, "float_", 6) == 0 ? 0 : 1;
  hlo_value mean = operand_as(l, at, &t, 0), std = operand_as(l, at + 1, &t, 1);
  tpu_lower_set_output(l, 0, hlo_binary(b, "add", mean, hlo_binary(b, "multiply", std, z)));
  return NULL;
}

/* bernoulli_(self, p) with float or tensor p, and bernoulli(p): u < p. */
static tpu_status lower_bernoulli(tpu_lowering* l) {
  if (empty_random(l)) return NULL;
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value u = uniform_like_output(l);
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
  hlo_value u = uniform_like_output(l);
  hlo_type t = *hlo_type_of(b, u);
  hlo_value e = hlo_unary(b, "negate", hlo_unary(b, "log", hlo_binary(b, "subtract", hlo_constant_like(b, u, 1), u)));
  tpu_lower_set_output(l, 0, hlo_binary(b, "divide", e, operand_as(l, 1, &t, 1)));
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
    if (!tpu_lower_is_none(l, 2) && tpu_lower_arg_kind(l, 2) == TPU_ARG_INT)
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

static const tpu_op_entry entries[] = {
    {"arange", lower_arange, true}, /* the output's length depends on the scalars */
    {"bernoulli", lower_bernoulli, false},
    {"exponential", lower_exponential, false},
    {"eye", lower_eye, false},
    {"linspace", lower_linspace, false},
    {"normal", lower_normal, false},
    {"random", lower_random, false},
    {"uniform", lower_uniform, false},
    {"zero", lower_zero, false},
};

TPU_OP_FAMILY(tpu_ops_creation, entries);
