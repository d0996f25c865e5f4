/* Attention. scaled_dot_product_attention reaches us as PyTorch's fused
 * form for other devices, _scaled_dot_product_fused_attention_overrideable
 * and its backward, where torch_tpu/csrc/attention_choice.cpp picks it
 * (float16, bfloat16 or float32, no dropout, as many key/value heads as query
 * heads); otherwise as its math
 * form: bmm, _softmax, where, tril and native_dropout, lowered elsewhere.
 * This file adds the fused form, dropout's backward, and the inference fast
 * paths of nn.MultiheadAttention and nn.TransformerEncoderLayer, each one
 * program. */
#include "hlo/elementwise_extra_ops.h"
#include "hlo/reduce_extra_ops.h"
#include "ops/families.h"

/* native_dropout_backward(grad_output, mask, scale): grad * mask * scale,
 * in float32 for float16/bfloat16 as PyTorch's opmath does. */
static tpu_status lower_native_dropout_backward(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  tpu_dtype t = tpu_dtype_compute(tpu_lower_output_type(l, 0).dtype);
  hlo_value grad = tpu_lower_value(l, 0, t);
  hlo_type shape = *hlo_type_of(b, grad);
  hlo_value kept = hlo_convert(b, tpu_lower_tensor(l, 1), t);
  kept = hlo_broadcast_to(b, kept, shape.rank, shape.dims);
  /* A product, not a select: an inf gradient where dropped gives NaN, as
   * on the CPU. */
  hlo_value masked = hlo_binary(b, "multiply", grad, kept);
  hlo_value scale = hlo_constant_like(b, grad, tpu_lower_float(l, 2, 1));
  tpu_lower_set_output(l, 0, hlo_binary(b, "multiply", masked, scale));
  return NULL;
}

/* x [B, T, E] through rows [first, first + n) of a [*, E] linear layer:
 * x w^T + bias, [B, T, n]. */
static hlo_value project(hlo_builder* b, hlo_value x, hlo_value w, hlo_value bias, int64_t first,
                         int64_t n) {
  hlo_type wt = *hlo_type_of(b, w);
  int64_t start[2] = {first, 0}, limit[2] = {first + n, wt.dims[1]}, step[2] = {1, 1};
  int64_t x_contract = 2, w_contract = 1;
  hlo_value y = hlo_dot_general(b, x, hlo_slice(b, w, start, limit, step), NULL, NULL, 0,
                                &x_contract, &w_contract, 1, wt.dtype);
  hlo_type yt = *hlo_type_of(b, y);
  hlo_value bias_rows = hlo_slice(b, bias, start, limit, step);
  int64_t last = 2;
  return hlo_binary(b, "add", y, hlo_broadcast_in_dim(b, bias_rows, 3, yt.dims, &last));
}

/* [B, T, H * d] as [B, H, T, d], and back. */
static hlo_value split_heads(hlo_builder* b, hlo_value x, int64_t heads) {
  hlo_type t = *hlo_type_of(b, x);
  int64_t dims[4] = {t.dims[0], t.dims[1], heads, t.dims[2] / heads};
  static const int64_t swap[4] = {0, 2, 1, 3};
  return hlo_transpose(b, hlo_reshape(b, x, 4, dims), swap);
}

static hlo_value merge_heads(hlo_builder* b, hlo_value x) {
  static const int64_t swap[4] = {0, 2, 1, 3};
  x = hlo_transpose(b, x, swap);
  hlo_type t = *hlo_type_of(b, x);
  int64_t dims[3] = {t.dims[0], t.dims[1], t.dims[2] * t.dims[3]};
  return hlo_reshape(b, x, 3, dims);
}

/* Argument `index`, a mask where nonzero means "masked out", as a bool
 * value broadcast to scores [B, H, T, S]: mask_type 0 is [T, S], 1 a key
 * padding mask [B, S], 2 (or none) broadcasts as it is. */
static hlo_value scores_mask(tpu_lowering* l, int index, int64_t mask_type,
                             const hlo_type* scores) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value mask = hlo_convert(b, tpu_lower_tensor(l, index), TPU_BOOL);
  if (mask_type == 1) {
    static const int64_t batch_and_key[2] = {0, 3};
    return hlo_broadcast_in_dim(b, mask, 4, scores->dims, batch_and_key);
  }
  return hlo_broadcast_to(b, mask, 4, scores->dims);
}

/* Softmax of scores [B, H, T, S] over the keys, shifted by each row's max.
 * A row of only -inf gives NaN, as PyTorch's multi-head attention kernels
 * do, or with `empty_rows_zero` zeros, as _safe_softmax does; *out_lse (if
 * asked) gets each row's log-sum-exp [B, H, T]. */
static hlo_value softmax_keys(hlo_builder* b, hlo_value scores, bool empty_rows_zero, hlo_value* out_lse) {
  hlo_type st = *hlo_type_of(b, scores);
  static const int64_t keys = 3, rows[3] = {0, 1, 2};
  hlo_value max = hlo_reduce_extreme(b, scores, hlo_constant(b, st.dtype, -__builtin_inf()), true, &keys, 1);
  if (empty_rows_zero) {
    hlo_value empty = hlo_compare(b, "EQ", max, hlo_constant_like(b, max, -__builtin_inf()));
    max = hlo_select(b, empty, hlo_constant_like(b, max, 0), max);
  }
  hlo_value e = hlo_unary(b, "exponential",
                          hlo_binary(b, "subtract", scores, hlo_broadcast_in_dim(b, max, 4, st.dims, rows)));
  hlo_value sum = hlo_reduce(b, e, hlo_constant(b, st.dtype, 0), "add", &keys, 1);
  if (out_lse) *out_lse = hlo_binary(b, "add", hlo_unary(b, "log", sum), max);
  hlo_value inverse = hlo_binary(b, "divide", hlo_constant_like(b, sum, 1), sum);
  if (empty_rows_zero)
    inverse = hlo_select(b, hlo_compare(b, "EQ", sum, hlo_constant_like(b, sum, 0)),
                         hlo_constant_like(b, sum, 0), inverse);
  return hlo_binary(b, "multiply", e, hlo_broadcast_in_dim(b, inverse, 4, st.dims, rows));
}

/* Where an attention block's arguments sit in an op's schema. */
typedef struct block_args {
  int embed;      /* embed_dim; num_head follows */
  int qkv_weight; /* qkv_bias, proj_weight, proj_bias follow */
  int mask;       /* mask_type is `mask_type` */
  int mask_type;
} block_args;

/* How both fused forms start: embed_dim and num_head read and checked
 * against the output [B, T, embed_dim], and the type they compute in.
 * False when there is nothing to compute: the error is recorded, or the
 * outputs are empty (and set here). */
static bool block_begin(tpu_lowering* l, const block_args* a, int64_t* out_embed, int64_t* out_heads,
                        tpu_dtype* out_type) {
  hlo_type x = tpu_lower_output_type(l, 0);
  *out_type = tpu_dtype_compute(x.dtype);
  *out_embed = tpu_lower_int(l, a->embed, 0);
  *out_heads = tpu_lower_int(l, a->embed + 1, 1);
  if (x.rank != 3 || *out_heads <= 0 || *out_embed % *out_heads != 0 || x.dims[2] != *out_embed) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT,
                   "aten::%s: embed_dim %lld, %lld heads for a %d-d input; expected [batch, seq, "
                   "embed_dim] with embed_dim divisible by the heads",
                   tpu_lower_op_name(l), (long long)*out_embed, (long long)*out_heads, x.rank);
    return false;
  }
  if (hlo_type_numel(&x) > 0) return true;
  for (int j = 0; j < tpu_lower_output_count(l); j++)
    tpu_lower_set_output(l, j, hlo_constant(tpu_lower_builder(l), tpu_lower_output_type(l, j).dtype, 0));
  return false;
}

/* nn.MultiheadAttention's computation as PyTorch's kernel does it: q, k, v
 * projected with the packed weight, q scaled by 1/sqrt(head dim) after its
 * bias, masked scores set to -inf (a fully masked row gives NaN), softmax,
 * heads merged and projected out. *out_p gets the probabilities [B, H, T, S]. */
static hlo_value attention_block(tpu_lowering* l, const block_args* a, int64_t embed,
                                 int64_t heads, hlo_value query, hlo_value key, hlo_value value,
                                 hlo_value* out_p) {
  hlo_builder* b = tpu_lower_builder(l);
  tpu_dtype t = hlo_type_of(b, query)->dtype;
  hlo_value w = tpu_lower_value(l, a->qkv_weight, t);
  hlo_value bias = tpu_lower_value(l, a->qkv_weight + 1, t);
  hlo_value q = project(b, query, w, bias, 0, embed);
  double scale = 1 / __builtin_sqrt((double)(embed / heads));
  q = split_heads(b, hlo_binary(b, "multiply", q, hlo_constant_like(b, q, scale)), heads);
  hlo_value k = split_heads(b, project(b, key, w, bias, embed, embed), heads);
  hlo_value v = split_heads(b, project(b, value, w, bias, 2 * embed, embed), heads);
  static const int64_t batch[2] = {0, 1}, last = 3, rows = 2;
  hlo_value scores = hlo_dot_general(b, q, k, batch, batch, 2, &last, &last, 1, t);
  if (tpu_lower_arg_kind(l, a->mask) == TPU_ARG_TENSOR) {
    hlo_type st = *hlo_type_of(b, scores);
    hlo_value masked = scores_mask(l, a->mask, tpu_lower_int(l, a->mask_type, 2), &st);
    scores = hlo_select(b, masked, hlo_constant_like(b, scores, -__builtin_inf()), scores);
  }
  *out_p = softmax_keys(b, scores, false, NULL);
  hlo_value context = hlo_dot_general(b, *out_p, v, batch, batch, 2, &last, &rows, 1, t);
  context = merge_heads(b, context);
  return project(b, context, tpu_lower_value(l, a->qkv_weight + 2, t),
                 tpu_lower_value(l, a->qkv_weight + 3, t), 0, embed);
}

/* _native_multi_head_attention(query, key, value, embed_dim, num_head,
 * qkv_weight, qkv_bias, proj_weight, proj_bias, mask, need_weights,
 * average_attn_weights, mask_type) -> (out, weights): nn.MultiheadAttention
 * without autograd. The weights are averaged over heads, per head, or empty
 * without need_weights. */
static tpu_status lower_multi_head_attention(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  static const block_args args = {3, 5, 9, 12};
  int64_t embed, heads;
  tpu_dtype t;
  if (!block_begin(l, &args, &embed, &heads, &t)) return NULL;
  hlo_value p;
  hlo_value query = tpu_lower_value(l, 0, t), key = tpu_lower_value(l, 1, t);
  hlo_value y = attention_block(l, &args, embed, heads, query, key, tpu_lower_value(l, 2, t), &p);
  tpu_lower_set_output(l, 0, y);
  if (tpu_lower_bool(l, 10, true) && tpu_lower_bool(l, 11, true)) {
    static const int64_t head = 1;
    p = hlo_reduce(b, p, hlo_constant(b, t, 0), "add", &head, 1);
    p = hlo_binary(b, "divide", p, hlo_constant_like(b, p, (double)heads));
  }
  hlo_type wt = tpu_lower_output_type(l, 1);
  tpu_lower_set_output(l, 1, hlo_type_numel(&wt) ? p : hlo_constant(b, wt.dtype, 0));
  return NULL;
}

/* Layer norm of x [B, T, E] over E with the weight and bias at arguments
 * `weight` and `weight + 1`. */
static hlo_value layer_norm_last(tpu_lowering* l, hlo_value x, int weight, double eps) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type xt = *hlo_type_of(b, x);
  static const int64_t last = 2, rest[2] = {0, 1};
  hlo_value zero = hlo_constant(b, xt.dtype, 0);
  hlo_value mean = hlo_reduce(b, x, zero, "add", &last, 1);
  mean = hlo_binary(b, "divide", mean, hlo_constant_like(b, mean, (double)xt.dims[2]));
  mean = hlo_broadcast_in_dim(b, mean, 3, xt.dims, rest);
  hlo_value centered = hlo_binary(b, "subtract", x, mean);
  hlo_value squares = hlo_binary(b, "multiply", centered, centered);
  hlo_value var = hlo_reduce(b, squares, zero, "add", &last, 1);
  var = hlo_binary(b, "divide", var, hlo_constant_like(b, var, (double)xt.dims[2]));
  hlo_value rstd = hlo_unary(b, "rsqrt", hlo_binary(b, "add", var, hlo_constant_like(b, var, eps)));
  rstd = hlo_broadcast_in_dim(b, rstd, 3, xt.dims, rest);
  hlo_value y = hlo_binary(b, "multiply", centered, rstd);
  hlo_value w = tpu_lower_value(l, weight, xt.dtype);
  hlo_value shift = tpu_lower_value(l, weight + 1, xt.dtype);
  y = hlo_binary(b, "multiply", y, hlo_broadcast_in_dim(b, w, 3, xt.dims, &last));
  return hlo_binary(b, "add", y, hlo_broadcast_in_dim(b, shift, 3, xt.dims, &last));
}

/* _transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight,
 * qkv_bias, proj_weight, proj_bias, use_gelu, norm_first, eps,
 * norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1,
 * ffn_bias_1, ffn_weight_2, ffn_bias_2, mask, mask_type):
 * nn.TransformerEncoderLayer without autograd. Each sublayer (self
 * attention, then linear-activation-linear) adds to its input, with the
 * layer norm before it (norm_first) or after the sum. */
static tpu_status lower_transformer_encoder_layer(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  static const block_args args = {1, 3, 18, 19};
  int64_t embed, heads;
  tpu_dtype t;
  if (!block_begin(l, &args, &embed, &heads, &t)) return NULL;
  bool norm_first = tpu_lower_bool(l, 8, false);
  double eps = tpu_lower_float(l, 9, 1e-5);
  hlo_value x = tpu_lower_value(l, 0, t), p;
  hlo_value h = norm_first ? layer_norm_last(l, x, 10, eps) : x;
  x = hlo_binary(b, "add", x, attention_block(l, &args, embed, heads, h, h, h, &p));
  if (!norm_first) x = layer_norm_last(l, x, 10, eps);
  h = norm_first ? layer_norm_last(l, x, 12, eps) : x;
  hlo_value w1 = tpu_lower_value(l, 14, t);
  h = project(b, h, w1, tpu_lower_value(l, 15, t), 0, hlo_type_of(b, w1)->dims[0]);
  if (tpu_lower_bool(l, 7, false)) { /* exact gelu: x * (1 + erf(x / sqrt 2)) / 2 */
    hlo_value e = hlo_binary(b, "multiply", h, hlo_constant_like(b, h, 0.70710678118654752440));
    e = hlo_binary(b, "add", hlo_erf(b, e), hlo_constant_like(b, e, 1));
    h = hlo_binary(b, "multiply", hlo_binary(b, "multiply", h, hlo_constant_like(b, h, 0.5)), e);
  } else {
    h = hlo_binary(b, "maximum", h, hlo_constant_like(b, h, 0));
  }
  h = project(b, h, tpu_lower_value(l, 16, t), tpu_lower_value(l, 17, t), 0, embed);
  x = hlo_binary(b, "add", x, h);
  tpu_lower_set_output(l, 0, norm_first ? x : layer_norm_last(l, x, 12, eps));
  return NULL;
}

/* The fused form's operands: q [B, H, L, E], k [B, H, S, E], v [B, H, S, Ev]
 * in their own dtype, and the scores' type (float32 for half inputs, as a
 * GPU's flash attention keeps them). */
typedef struct fused_attention {
  hlo_value q, k, v;
  tpu_dtype type, acc;
  double scale;
  hlo_type scores; /* [B, H, L, S] in acc */
} fused_attention;

static const int64_t batch_heads[2] = {0, 1};

/* Reads q, k, v from arguments first..first+2 and the scale (None:
 * 1/sqrt(E)) from `scale`. False, with the error recorded, for shapes the
 * op cannot take. */
static bool fused_attention_begin(tpu_lowering* l, int first, int scale, fused_attention* a) {
  hlo_type qt = tpu_lower_arg_type(l, first), kt = tpu_lower_arg_type(l, first + 1),
           vt = tpu_lower_arg_type(l, first + 2);
  if (qt.rank != 4 || kt.rank != 4 || vt.rank != 4 || kt.dims[0] != qt.dims[0] || kt.dims[1] != qt.dims[1] ||
      kt.dims[3] != qt.dims[3] ||
      vt.dims[0] != qt.dims[0] || vt.dims[1] != qt.dims[1] || vt.dims[2] != kt.dims[2]) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT,
                   "aten::%s: expected query [B, H, L, E], key [B, H, S, E] and value [B, H, S, Ev], "
                   "got ranks %d, %d, %d with query [%lld, %lld, ...], key [%lld, %lld, %lld, %lld]",
                   tpu_lower_op_name(l), qt.rank, kt.rank, vt.rank, (long long)qt.dims[0],
                   (long long)qt.dims[1], (long long)kt.dims[0], (long long)kt.dims[1],
                   (long long)kt.dims[2], (long long)kt.dims[3]);
    return false;
  }
  a->type = qt.dtype;
  a->acc = tpu_dtype_compute(qt.dtype);
  a->q = tpu_lower_value(l, first, a->type);
  a->k = tpu_lower_value(l, first + 1, a->type);
  a->v = tpu_lower_value(l, first + 2, a->type);
  a->scale = tpu_lower_is_none(l, scale) ? 1 / __builtin_sqrt((double)qt.dims[3]) : tpu_lower_float(l, scale, 1);
  int64_t dims[4] = {qt.dims[0], qt.dims[1], qt.dims[2], kt.dims[2]};
  a->scores = hlo_type_make(a->acc, 4, dims);
  return true;
}

/* q k^T * scale, plus the additive bias at argument `bias` (if any), with
 * keys after the query's position set to -inf when causal (the top-left
 * triangle, as PyTorch's is_causal). */
static hlo_value fused_attention_scores(tpu_lowering* l, const fused_attention* a, int bias, bool causal) {
  hlo_builder* b = tpu_lower_builder(l);
  static const int64_t features = 3;
  hlo_value s = hlo_dot_general(b, a->q, a->k, batch_heads, batch_heads, 2, &features, &features, 1, a->acc);
  s = hlo_binary(b, "multiply", s, hlo_constant_like(b, s, a->scale));
  if (!tpu_lower_is_none(l, bias)) s = hlo_binary(b, "add", s, tpu_lower_value_as(l, bias, &a->scores));
  if (causal) {
    hlo_type positions = hlo_type_make(TPU_I64, 4, a->scores.dims);
    hlo_value later = hlo_compare(b, "GT", hlo_iota(b, positions, 3), hlo_iota(b, positions, 2));
    s = hlo_select(b, later, hlo_constant_like(b, s, -__builtin_inf()), s);
  }
  return s;
}

/* x [B, H, M, N] (contracting x_dim) with y (contracting y_dim), the
 * operands in the inputs' dtype and the sums in acc. */
static hlo_value fused_attention_product(hlo_builder* b, const fused_attention* a, hlo_value x, int64_t x_dim,
                                         hlo_value y, int64_t y_dim) {
  return hlo_dot_general(b, hlo_convert(b, x, a->type), y, batch_heads, batch_heads, 2, &x_dim, &y_dim, 1, a->acc);
}

/* _scaled_dot_product_fused_attention_overrideable(query, key, value,
 * attn_bias, dropout_p, is_causal, return_debug_mask, scale) -> (output,
 * logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, philox_seed,
 * philox_offset, debug_attn_mask); the glue returns the sequence lengths
 * and Nones, so the outputs here are output, logsumexp and the two seeds
 * (zero: no dropout). */
static tpu_status lower_fused_attention(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  if (tpu_lower_float(l, 4, 0) != 0)
    return TPU_ERROR(TPU_UNIMPLEMENTED, "aten::%s: dropout is not supported in the fused form; "
                     "scaled_dot_product_attention with dropout_p > 0 takes the math form", tpu_lower_op_name(l));
  fused_attention a;
  if (!fused_attention_begin(l, 0, 7, &a)) return NULL;
  hlo_value lse;
  hlo_value p = softmax_keys(b, fused_attention_scores(l, &a, 3, tpu_lower_bool(l, 5, false)), true, &lse);
  static const int64_t keys = 3, rows = 2;
  tpu_lower_set_output(l, 0, fused_attention_product(b, &a, p, keys, a.v, rows));
  tpu_lower_set_output(l, 1, lse);
  for (int j = 2; j < tpu_lower_output_count(l); j++)
    tpu_lower_set_output(l, j, hlo_constant(b, tpu_lower_output_type(l, j).dtype, 0));
  return NULL;
}

/* _scaled_dot_product_fused_attention_overrideable_backward(grad_out, query,
 * key, value, attn_bias, grad_input_mask, out, logsumexp, cum_seq_q,
 * cum_seq_k, max_q, max_k, dropout_p, is_causal, philox_seed,
 * philox_offset, scale) -> (grad_query, grad_key, grad_value,
 * grad_attn_bias). The probabilities are recomputed from the scores and the
 * float32 logsumexp (float64 inputs get float32's precision there). */
static tpu_status lower_fused_attention_backward(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  fused_attention a;
  if (!fused_attention_begin(l, 1, 16, &a)) return NULL;
  const double* mask = NULL;
  int mask_count = tpu_lower_float_list(l, 5, &mask);
  if (mask_count > 3 && mask[3] != 0 && !tpu_lower_is_none(l, 4))
    return TPU_ERROR(TPU_UNIMPLEMENTED, "aten::%s: the gradient of attn_mask is not supported in the fused "
                     "form; scaled_dot_product_attention takes the math form for a mask that requires grad",
                     tpu_lower_op_name(l));
  static const int64_t rows = 2, keys = 3, three[3] = {0, 1, 2};
  /* P = exp(S - logsumexp); a row with nothing to attend to (-inf) gives 0. */
  hlo_value lse = tpu_lower_value(l, 7, a.acc);
  lse = hlo_select(b, hlo_compare(b, "EQ", lse, hlo_constant_like(b, lse, -__builtin_inf())),
                   hlo_constant_like(b, lse, 0), lse);
  hlo_value scores = fused_attention_scores(l, &a, 4, tpu_lower_bool(l, 13, false));
  hlo_value p = hlo_unary(b, "exponential",
                          hlo_binary(b, "subtract", scores, hlo_broadcast_in_dim(b, lse, 4, a.scores.dims, three)));
  hlo_value grad = tpu_lower_value(l, 0, a.type);
  /* dV = P^T dO; dP = dO V^T; dS = P (dP - rowsum(P dP)); dQ = dS K s; dK = dS^T Q s. */
  hlo_value grad_v = fused_attention_product(b, &a, p, rows, grad, rows);
  hlo_value grad_p = fused_attention_product(b, &a, grad, keys, a.v, keys);
  hlo_value row = hlo_reduce(b, hlo_binary(b, "multiply", p, grad_p), hlo_constant(b, a.acc, 0), "add", &keys, 1);
  row = hlo_broadcast_in_dim(b, row, 4, a.scores.dims, three);
  hlo_value grad_s = hlo_binary(b, "multiply", p, hlo_binary(b, "subtract", grad_p, row));
  grad_s = hlo_binary(b, "multiply", grad_s, hlo_constant_like(b, grad_s, a.scale));
  hlo_value grads[3] = {fused_attention_product(b, &a, grad_s, keys, a.k, rows),
                        fused_attention_product(b, &a, grad_s, rows, a.q, rows), grad_v};
  for (int j = 0; j < tpu_lower_output_count(l); j++) {
    bool wanted = j < 3 && (j >= mask_count || mask[j] != 0);
    tpu_lower_set_output(l, j, wanted ? grads[j] : hlo_constant(b, tpu_lower_output_type(l, j).dtype, 0));
  }
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"_scaled_dot_product_fused_attention_overrideable", lower_fused_attention, 0},
    {"_scaled_dot_product_fused_attention_overrideable_backward", lower_fused_attention_backward, 0},
    {"_native_multi_head_attention", lower_multi_head_attention, 0},
    {"_transformer_encoder_layer_fwd", lower_transformer_encoder_layer, 0},
    {"native_dropout_backward", lower_native_dropout_backward, 0},
};

TPU_OP_FAMILY(tpu_ops_attention, entries);
