/* CTC loss (F.ctc_loss): _ctc_loss and _ctc_loss_backward, with the
 * lengths as int lists (compiled in) or as tensors (runtime values: batches
 * of other lengths reuse the program). The forward runs the alpha
 * recursion of Graves et al. (2006) in log space as one loop over time, all
 * samples and states at once; the backward runs beta the other way and
 * collects alpha * beta per class into PyTorch's gradient, exp(log_probs)
 * minus each class's occupancy (the gradient through the log_softmax that
 * CPU and CUDA assume made log_probs), zero past each input length.
 *
 * States: the extended target of 2S + 1 labels per sample (blank, t1,
 * blank, t2, ..., blank) for targets padded to S. A sample whose target has
 * L labels uses states 0..2L; the recursions never read a later state into
 * an earlier one, so the padding states are computed and ignored. S is the
 * longest target for int-list lengths (the shape PyTorch's meta kernel
 * gives log_alpha) and the targets' padded width for tensor lengths (the
 * whole 1-D targets when concatenated; torch_tpu/_meta.py). Values that
 * only a program sees (tensor lengths, target labels) are not checked. */
#include <stdio.h>
#include <stdlib.h>

#include "hlo/loop_ops.h"
#include "hlo/reduce_extra_ops.h"
#include "hlo/slice_ops.h"
#include "ops/families.h"

typedef struct ctc {
  tpu_lowering* l;
  hlo_builder* b;
  tpu_dtype dtype;
  int64_t T, N, C, states;
  hlo_value log_probs;      /* [T, N, C] */
  hlo_value input_lengths;  /* [N] i64 */
  hlo_value target_lengths; /* [N] i64 */
  hlo_value labels;         /* [N, states] i64: the extended targets */
  hlo_value label_probs;    /* [T, N, states]: log_probs at each state's label */
  hlo_value skip;           /* [N, states] bool: the state may be entered from two states back */
} ctc;

static hlo_value ctc_fail(ctc* c, const char* message, long long got, long long expected) {
  return tpu_lower_fail(c->l, TPU_INVALID_ARGUMENT,
                        "aten::%s: %s (got %lld, expected %lld) for log_probs [T=%lld, N=%lld, C=%lld]",
                        tpu_lower_op_name(c->l), message, got, expected, (long long)c->T, (long long)c->N,
                        (long long)c->C);
}

/* x [.., states] moved `by` states later (negative: earlier) along its
 * last dim, `fill` where nothing moved in. */
static hlo_value shifted(hlo_builder* b, hlo_value x, int64_t by, hlo_value fill) {
  hlo_type t = *hlo_type_of(b, x);
  int64_t low[TPU_MAX_RANK] = {0}, high[TPU_MAX_RANK] = {0}, interior[TPU_MAX_RANK] = {0};
  low[t.rank - 1] = by;
  high[t.rank - 1] = -by;
  return hlo_pad(b, x, fill, low, high, interior);
}

/* log(exp(x) + exp(y) + exp(z)), shifted by the largest; -inf when all are. */
static hlo_value log_add3(hlo_builder* b, hlo_value x, hlo_value y, hlo_value z) {
  hlo_value m = hlo_binary(b, "maximum", hlo_binary(b, "maximum", x, y), z);
  hlo_value none = hlo_compare(b, "EQ", m, hlo_constant_like(b, m, -__builtin_inf()));
  m = hlo_select(b, none, hlo_constant_like(b, m, 0), m);
  hlo_value sum = hlo_unary(b, "exponential", hlo_binary(b, "subtract", x, m));
  sum = hlo_binary(b, "add", sum, hlo_unary(b, "exponential", hlo_binary(b, "subtract", y, m)));
  sum = hlo_binary(b, "add", sum, hlo_unary(b, "exponential", hlo_binary(b, "subtract", z, m)));
  return hlo_binary(b, "add", hlo_unary(b, "log", sum), m);
}

/* Row t ([N, states]) of x [T, N, states], t a 0-d i64 value. */
static hlo_value time_row(hlo_builder* b, hlo_value x, hlo_value t) {
  hlo_type xt = *hlo_type_of(b, x);
  hlo_value zero = hlo_constant_i64(b, TPU_I64, 0);
  hlo_value starts[3] = {t, zero, zero};
  int64_t sizes[3] = {1, xt.dims[1], xt.dims[2]};
  return hlo_reshape(b, hlo_dynamic_slice(b, x, starts, sizes), 2, sizes + 1);
}

static hlo_value with_time_row(hlo_builder* b, hlo_value x, hlo_value row, hlo_value t) {
  hlo_type rt = *hlo_type_of(b, row);
  hlo_value zero = hlo_constant_i64(b, TPU_I64, 0);
  hlo_value starts[3] = {t, zero, zero};
  int64_t dims[3] = {1, rt.dims[0], rt.dims[1]};
  return hlo_dynamic_update_slice(b, x, hlo_reshape(b, row, 3, dims), starts);
}

/* The state index along `dim` of `type` (i64). */
static hlo_value state_iota(hlo_builder* b, int rank, const int64_t* dims, int dim) {
  return hlo_iota(b, hlo_type_make(TPU_I64, rank, dims), dim);
}

/* A length argument as a [N] i64 value: an int list (checked here against
 * [lowest, highest]) or an integer tensor of N entries. */
static hlo_value lengths(ctc* c, int index, const char* name, int64_t highest, int64_t* out_max,
                         int64_t* out_sum) {
  hlo_builder* b = c->b;
  *out_max = *out_sum = 0;
  if (tpu_lower_arg_kind(c->l, index) != TPU_ARG_INT_LIST) {
    hlo_type t = tpu_lower_arg_type(c->l, index);
    if (t.rank != 1 || t.dims[0] != c->N || !tpu_dtype_is_integral(t.dtype))
      return tpu_lower_fail(c->l, TPU_INVALID_ARGUMENT,
                            "aten::%s: expected %s as an integer tensor of %lld entries (one per sample), got "
                            "%s of rank %d", tpu_lower_op_name(c->l), name, (long long)c->N,
                            tpu_dtype_name(t.dtype), t.rank);
    return hlo_convert(b, tpu_lower_tensor(c->l, index), TPU_I64);
  }
  const int64_t* items;
  int n = tpu_lower_int_list(c->l, index, &items);
  if (n != c->N) return ctc_fail(c, name, n, c->N);
  if (n == 0) return hlo_filled(b, TPU_I64, 1, &c->N, 0);
  hlo_value* parts = malloc((size_t)n * sizeof *parts);
  if (!parts) return tpu_lower_fail(c->l, TPU_OUT_OF_MEMORY, "out of host memory lowering %s", name);
  static const int64_t one = 1;
  for (int i = 0; i < n; i++) {
    if (items[i] < 0 || items[i] > highest) {
      free(parts);
      char what[96];
      snprintf(what, sizeof what, "each of %s must be at least 0 and at most %lld", name, (long long)highest);
      return ctc_fail(c, what, items[i], items[i] < 0 ? 0 : highest);
    }
    if (items[i] > *out_max) *out_max = items[i];
    *out_sum += items[i];
    parts[i] = hlo_reshape(b, hlo_constant_i64(b, TPU_I64, items[i]), 1, &one);
  }
  hlo_value v = hlo_concatenate(b, parts, n, 0);
  free(parts);
  return v;
}

/* The targets as [N, S] labels (i64), S = (states - 1) / 2: a batch of
 * padded rows, or concatenated rows cut at the running sum of the target
 * lengths. */
static hlo_value padded_targets(ctc* c, int index, bool listed, int64_t longest, int64_t total) {
  hlo_builder* b = c->b;
  int64_t S = (c->states - 1) / 2, dims[2] = {c->N, S};
  hlo_type t = tpu_lower_arg_type(c->l, index);
  if (t.rank == 2) {
    if (t.dims[0] != c->N) return ctc_fail(c, "targets [N, S] must have a row per sample", t.dims[0], c->N);
    if (listed && t.dims[1] < longest)
      return ctc_fail(c, "targets [N, S] must be as wide as the longest target", t.dims[1], longest);
    return hlo_slice_dim(b, hlo_convert(b, tpu_lower_tensor(c->l, index), TPU_I64), 1, 0, S);
  }
  if (t.rank != 1) return ctc_fail(c, "targets must be [N, S] or 1-D, but have rank", t.rank, 2);
  if (listed && t.dims[0] != total)
    return ctc_fail(c, "concatenated targets must hold the sum of target_lengths", t.dims[0], total);
  if (S == 0 || t.dims[0] == 0) return hlo_filled(b, TPU_I64, 2, dims, 0);
  static const int64_t batch = 0;
  hlo_value ends = hlo_cumulative(b, c->target_lengths, hlo_constant(b, TPU_I64, 0), "add", 0);
  hlo_value starts = hlo_binary(b, "subtract", ends, c->target_lengths);
  hlo_value at = hlo_binary(b, "add", hlo_broadcast_in_dim(b, starts, 2, dims, &batch), state_iota(b, 2, dims, 1));
  return hlo_take(b, hlo_convert(b, tpu_lower_tensor(c->l, index), TPU_I64), 0, at);
}

/* Reads log_probs (argument `first`), the targets and both lengths after it
 * and blank (argument `blank_arg`), with `states` extended labels, and
 * derives the labels, their log-probabilities and the skips. False after an
 * error. */
static bool ctc_begin(ctc* c, tpu_lowering* l, int first, int blank_arg, int64_t states) {
  c->l = l;
  c->b = tpu_lower_builder(l);
  hlo_builder* b = c->b;
  hlo_type lp = tpu_lower_arg_type(l, first);
  if (lp.rank != 3) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::%s: expected log_probs [T, N, C], got rank %d",
                   tpu_lower_op_name(l), lp.rank);
    return false;
  }
  c->T = lp.dims[0], c->N = lp.dims[1], c->C = lp.dims[2], c->states = states;
  if (hlo_type_numel(&lp) == 0) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::%s: log_probs must not be empty, got [T=%lld, N=%lld, C=%lld]",
                   tpu_lower_op_name(l), (long long)c->T, (long long)c->N, (long long)c->C);
    return false;
  }
  if (lp.dtype != TPU_F32 && lp.dtype != TPU_F64) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::%s: expected float32 or float64 log_probs, got %s; convert "
                   "them with .float()", tpu_lower_op_name(l), tpu_dtype_name(lp.dtype));
    return false;
  }
  c->dtype = lp.dtype;
  int64_t blank = tpu_lower_int(l, blank_arg, 0);
  if (blank < 0 || blank >= c->C) {
    ctc_fail(c, "blank must be a class index", blank, c->C - 1);
    return false;
  }
  bool listed = tpu_lower_arg_kind(l, first + 2) == TPU_ARG_INT_LIST;
  int64_t longest_input, inputs_total, longest, total;
  c->input_lengths = lengths(c, first + 2, "input_lengths", c->T, &longest_input, &inputs_total);
  c->target_lengths = lengths(c, first + 3, "target_lengths", INT64_MAX / 4, &longest, &total);
  if (hlo_failed(b)) return false;
  c->log_probs = tpu_lower_tensor(l, first);
  hlo_value targets = padded_targets(c, first + 1, listed, longest, total);

  int64_t dims[2] = {c->N, states};
  hlo_value s = state_iota(b, 2, dims, 1);
  hlo_value odd = hlo_compare(b, "EQ", hlo_binary(b, "remainder", s, hlo_constant_like(b, s, 2)),
                              hlo_constant_like(b, s, 1));
  hlo_value blanks = hlo_filled(b, TPU_I64, 2, dims, (double)blank);
  int64_t label_at_dims[1] = {states};
  hlo_value label_at = hlo_binary(b, "divide", state_iota(b, 1, label_at_dims, 0),
                                  hlo_filled(b, TPU_I64, 1, label_at_dims, 2)); /* (s - 1) / 2 for odd s */
  c->labels = states > 1 ? hlo_select(b, odd, hlo_take(b, targets, 1, label_at), blanks) : blanks;
  hlo_value two_back = shifted(b, c->labels, 2, hlo_constant(b, TPU_I64, (double)blank));
  c->skip = hlo_binary(b, "and", odd, hlo_compare(b, "NE", c->labels, two_back));
  int64_t all[3] = {c->T, c->N, states};
  static const int64_t sample_state[2] = {1, 2};
  c->label_probs = hlo_gather_elements(b, c->log_probs, 2, hlo_broadcast_in_dim(b, c->labels, 3, all, sample_state));
  return !hlo_failed(b);
}

/* One step of alpha: carried {alpha at t - 1, log_alpha [T, N, states],
 * label_probs, skip}, t = step + 1. */
static void alpha_step(hlo_builder* b, hlo_value step, const hlo_value* in, hlo_value* out, const void* context) {
  (void)context;
  hlo_value t = hlo_binary(b, "add", step, hlo_constant_i64(b, TPU_I64, 1));
  hlo_value none = hlo_constant(b, hlo_type_of(b, in[0])->dtype, -__builtin_inf());
  hlo_value from_skip = hlo_select(b, in[3], shifted(b, in[0], 2, none), hlo_constant_like(b, in[0], -__builtin_inf()));
  hlo_value alpha = hlo_binary(b, "add", log_add3(b, in[0], shifted(b, in[0], 1, none), from_skip),
                               time_row(b, in[2], t));
  out[0] = alpha;
  out[1] = with_time_row(b, in[1], alpha, t);
  out[2] = in[2];
  out[3] = in[3];
}

/* log_alpha [T, N, states]: the first two states at t = 0, then the loop. */
static hlo_value alphas(ctc* c) {
  hlo_builder* b = c->b;
  int64_t dims[2] = {c->N, c->states};
  hlo_value first = time_row(b, c->label_probs, hlo_constant_i64(b, TPU_I64, 0));
  hlo_value starts = hlo_compare(b, "LT", state_iota(b, 2, dims, 1), hlo_filled(b, TPU_I64, 2, dims, 2));
  first = hlo_select(b, starts, first, hlo_filled(b, c->dtype, 2, dims, -__builtin_inf()));
  int64_t row[3] = {1, c->N, c->states}, low[3] = {0}, high[3] = {c->T - 1, 0, 0}, interior[3] = {0};
  hlo_value all = hlo_pad(b, hlo_reshape(b, first, 3, row), hlo_constant(b, c->dtype, -__builtin_inf()), low,
                          high, interior);
  hlo_value init[4] = {first, all, c->label_probs, c->skip}, out[4];
  hlo_counted_loop(b, hlo_constant_i64(b, TPU_I64, c->T - 1), init, 4, alpha_step, NULL, out);
  return out[1];
}

/* x [N] broadcast along dim 1 of [T, N, states] (or any rank-3 dims). */
static hlo_value per_sample(hlo_builder* b, hlo_value x, const int64_t* dims) {
  static const int64_t sample = 1;
  return hlo_broadcast_in_dim(b, x, 3, dims, &sample);
}

/* Whether state s is one of the two a target of `length` labels ends in
 * (2L and 2L - 1); s and length of one shape. */
static hlo_value final_state(hlo_builder* b, hlo_value s, hlo_value length) {
  hlo_value end = hlo_binary(b, "add", length, length);
  return hlo_binary(b, "or", hlo_compare(b, "EQ", s, end),
                    hlo_compare(b, "EQ", s, hlo_binary(b, "subtract", end, hlo_constant_like(b, end, 1))));
}

/* Whether (t, s) is one of a sample's final states at its last input step,
 * over [T, N, states]. */
static hlo_value final_states(ctc* c) {
  hlo_builder* b = c->b;
  int64_t dims[3] = {c->T, c->N, c->states};
  hlo_value last_t = hlo_binary(b, "subtract", per_sample(b, c->input_lengths, dims), hlo_filled(b, TPU_I64, 3, dims, 1));
  return hlo_binary(b, "and", hlo_compare(b, "EQ", state_iota(b, 3, dims, 0), last_t),
                    final_state(b, state_iota(b, 3, dims, 2), per_sample(b, c->target_lengths, dims)));
}

/* _ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
 * zero_infinity) -> (neg_log_likelihood [N], log_alpha [N, T, states]).
 * A sample with no input steps gives 0 for an empty target and inf
 * otherwise, as CPU. */
static tpu_status lower_ctc_loss(tpu_lowering* l) {
  ctc c;
  if (!ctc_begin(&c, l, 0, 4, tpu_lower_output_type(l, 1).dims[2])) return NULL;
  hlo_builder* b = c.b;
  hlo_value log_alpha = alphas(&c);
  static const int64_t time_state[2] = {0, 2}, to_batch_major[3] = {1, 0, 2};
  hlo_value ends = hlo_select(b, final_states(&c), log_alpha, hlo_constant_like(b, log_alpha, -__builtin_inf()));
  hlo_value m = hlo_reduce(b, ends, hlo_constant(b, c.dtype, -__builtin_inf()), "maximum", time_state, 2);
  m = hlo_select(b, hlo_compare(b, "EQ", m, hlo_constant_like(b, m, -__builtin_inf())), hlo_constant_like(b, m, 0), m);
  int64_t dims[3] = {c.T, c.N, c.states};
  hlo_value sum = hlo_reduce(b, hlo_unary(b, "exponential", hlo_binary(b, "subtract", ends, per_sample(b, m, dims))),
                             hlo_constant(b, c.dtype, 0), "add", time_state, 2);
  hlo_value nll = hlo_unary(b, "negate", hlo_binary(b, "add", hlo_unary(b, "log", sum), m));
  hlo_value no_input = hlo_compare(b, "EQ", c.input_lengths, hlo_constant_like(b, c.input_lengths, 0));
  hlo_value empty_target = hlo_compare(b, "EQ", c.target_lengths, hlo_constant_like(b, c.target_lengths, 0));
  nll = hlo_select(b, hlo_binary(b, "and", no_input, empty_target), hlo_constant_like(b, nll, 0), nll);
  tpu_lower_set_output(l, 0, nll);
  tpu_lower_set_output(l, 1, hlo_transpose(b, log_alpha, to_batch_major));
  return NULL;
}

/* One step of beta, t = T - 1 - step: carried {beta at t + 1, log_beta,
 * label_probs, skip from two states on, input_lengths, target_lengths}. A
 * sample's beta starts at its last input step from its two final states
 * and is -inf after it. */
static void beta_step(hlo_builder* b, hlo_value step, const hlo_value* in, hlo_value* out, const void* context) {
  const ctc* c = context;
  hlo_value t = hlo_binary(b, "subtract", hlo_constant_i64(b, TPU_I64, c->T - 1), step);
  hlo_type bt = *hlo_type_of(b, in[0]);
  hlo_value none = hlo_constant(b, bt.dtype, -__builtin_inf()), nones = hlo_filled(b, bt.dtype, 2, bt.dims, -__builtin_inf());
  hlo_value row = time_row(b, in[2], t);
  hlo_value from_skip = hlo_select(b, in[3], shifted(b, in[0], -2, none), nones);
  hlo_value onward = hlo_binary(b, "add", log_add3(b, in[0], shifted(b, in[0], -1, none), from_skip), row);
  static const int64_t sample = 0;
  hlo_value last_t = hlo_binary(b, "subtract", hlo_broadcast_in_dim(b, in[4], 2, bt.dims, &sample),
                                hlo_filled(b, TPU_I64, 2, bt.dims, 1));
  hlo_value final = final_state(b, state_iota(b, 2, bt.dims, 1), hlo_broadcast_in_dim(b, in[5], 2, bt.dims, &sample));
  hlo_value ts = hlo_broadcast_in_dim(b, t, 2, bt.dims, NULL);
  hlo_value beta = hlo_select(b, hlo_compare(b, "LT", ts, last_t), onward, nones);
  beta = hlo_select(b, hlo_compare(b, "EQ", ts, last_t), hlo_select(b, final, row, nones), beta);
  out[0] = beta;
  out[1] = with_time_row(b, in[1], beta, t);
  for (int i = 2; i < 6; i++) out[i] = in[i];
}

/* _ctc_loss_backward(grad, log_probs, targets, input_lengths,
 * target_lengths, neg_log_likelihood, log_alpha, blank, zero_infinity) ->
 * grad of log_probs [T, N, C]. */
static tpu_status lower_ctc_loss_backward(tpu_lowering* l) {
  hlo_type alpha_type = tpu_lower_arg_type(l, 6);
  ctc c;
  if (!ctc_begin(&c, l, 1, 7, alpha_type.rank == 3 ? alpha_type.dims[2] : 1)) return NULL;
  hlo_builder* b = c.b;
  if (alpha_type.rank != 3 || alpha_type.dims[0] != c.N || alpha_type.dims[1] != c.T) {
    ctc_fail(&c, "log_alpha must be the forward's [N, T, 2S + 1], but has rank", alpha_type.rank, 3);
    return NULL;
  }
  int64_t dims[3] = {c.T, c.N, c.states}, grad_dims[3] = {c.T, c.N, c.C};
  static const int64_t to_time_major[3] = {1, 0, 2};
  hlo_value nll = tpu_lower_value(l, 5, c.dtype);
  int64_t sample_dims[2] = {c.N, c.states};
  hlo_value nones = hlo_filled(b, c.dtype, 2, sample_dims, -__builtin_inf());
  hlo_value all = hlo_filled(b, c.dtype, 3, dims, -__builtin_inf());
  hlo_value skip_on = shifted(b, c.skip, -2, hlo_constant(b, TPU_BOOL, 0));
  hlo_value init[6] = {nones, all, c.label_probs, skip_on, c.input_lengths, c.target_lengths}, out[6];
  hlo_counted_loop(b, hlo_constant_i64(b, TPU_I64, c.T), init, 6, beta_step, &c, out);
  hlo_value log_alpha = hlo_transpose(b, tpu_lower_value(l, 6, c.dtype), to_time_major);
  /* Each state's share of the paths through it, exp(alpha + beta - log p(target)), per label. */
  hlo_value share = hlo_binary(b, "add", hlo_binary(b, "add", log_alpha, out[1]), per_sample(b, nll, dims));
  share = hlo_unary(b, "exponential", hlo_binary(b, "subtract", share, c.label_probs));
  int64_t onehot_dims[3] = {c.N, c.states, c.C};
  static const int64_t sample_state[2] = {0, 1};
  hlo_value is_label = hlo_compare(b, "EQ", hlo_broadcast_in_dim(b, c.labels, 3, onehot_dims, sample_state),
                                   state_iota(b, 3, onehot_dims, 2));
  static const int64_t batch_lhs = 1, batch_rhs = 0, state_lhs = 2, state_rhs = 1;
  hlo_value occupancy = hlo_dot_general(b, share, hlo_convert(b, is_label, c.dtype), &batch_lhs, &batch_rhs, 1,
                                        &state_lhs, &state_rhs, 1, c.dtype);
  hlo_value grad = hlo_binary(b, "subtract", hlo_unary(b, "exponential", c.log_probs),
                              hlo_transpose(b, occupancy, to_time_major));
  grad = hlo_binary(b, "multiply", grad, per_sample(b, tpu_lower_value(l, 0, c.dtype), grad_dims));
  hlo_value inside = hlo_compare(b, "LT", state_iota(b, 3, grad_dims, 0), per_sample(b, c.input_lengths, grad_dims));
  if (tpu_lower_bool(l, 8, false)) {
    hlo_value finite = hlo_compare(b, "NE", nll, hlo_constant_like(b, nll, __builtin_inf()));
    inside = hlo_binary(b, "and", inside, per_sample(b, finite, grad_dims));
  }
  tpu_lower_set_output(l, 0, hlo_select(b, inside, grad, hlo_constant_like(b, grad, 0)));
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"_ctc_loss", lower_ctc_loss, 0},
    {"_ctc_loss_backward", lower_ctc_loss_backward, 0},
};

TPU_OP_FAMILY(tpu_ops_ctc_loss, entries);
