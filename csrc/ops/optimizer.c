/* Fused optimizer steps: _fused_adam_, _fused_adamw_, _fused_sgd_ and
 * _fused_adagrad_, which torch.optim calls for Adam, AdamW, SGD and Adagrad
 * built with fused=True (Hugging Face's Trainer picks fused AdamW by
 * default). One program updates every parameter and its state, with the
 * arithmetic of PyTorch's fused kernels: per element, in the parameter's
 * dtype, float16/bfloat16 widened to float32.
 *
 * Arguments: lists of tensors first (params, grads, then the optimizer's
 * state; item k of each belongs to parameter k), then hyperparameters,
 * which the glue passes as runtime numbers so that a learning-rate
 * schedule never recompiles. Outputs are the lists the op writes, item by
 * item in argument order. Gradients are written only when a grad_scale
 * unscales them; a found_inf of 1 (a GradScaler's overflow) leaves every
 * tensor as it was. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hlo/elementwise_extra_ops.h"
#include "ops/families.h"

#define MAX_LISTS 6 /* Adam: params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps */

/* Argument positions shared by every fused step. */
enum { PARAMS = 0, GRADS = 1 };

typedef struct step_call {
  tpu_lowering* l;
  hlo_builder* b;
  int count;                   /* parameters */
  hlo_value* lists[MAX_LISTS]; /* items of each list argument; NULL for an empty list */
  int first_output[MAX_LISTS]; /* output index of item 0 (of the lists the step writes) */
  hlo_value grad_scale;        /* 0-d float32, or HLO_INVALID */
  hlo_value skip;              /* 0-d bool: found_inf is 1; or HLO_INVALID */
  bool maximize;
} step_call;

/* What one parameter's update reads: its shape in the compute dtype. */
typedef struct step_item {
  int k;
  hlo_type t;
} step_item;

static hlo_value item(step_call* c, int list, const step_item* it) {
  return hlo_convert(c->b, c->lists[list][it->k], it->t.dtype);
}

/* A 0-d value in the item's shape. Per-parameter numbers (bias corrections,
 * Adagrad's decayed lr) are computed 0-d first and spread once. */
static hlo_value spread(step_call* c, hlo_value scalar, const step_item* it) {
  return hlo_broadcast_to(c->b, scalar, it->t.rank, it->t.dims);
}

/* Hyperparameter `arg` (a runtime number, or a tensor lr), 0-d. */
static hlo_value scalar(step_call* c, int arg, const step_item* it) {
  return tpu_lower_single(c->l, arg, it->t.dtype);
}

static hlo_value hyper(step_call* c, int arg, const step_item* it) { return spread(c, scalar(c, arg, it), it); }

/* Parameter k's step counter (one number, already counting this step), 0-d. */
static hlo_value step_count(step_call* c, int list, const step_item* it) {
  return hlo_reshape(c->b, item(c, list, it), 0, NULL);
}

static hlo_value mul(step_call* c, hlo_value x, hlo_value y) { return hlo_binary(c->b, "multiply", x, y); }
static hlo_value add(step_call* c, hlo_value x, hlo_value y) { return hlo_binary(c->b, "add", x, y); }
static hlo_value sub(step_call* c, hlo_value x, hlo_value y) { return hlo_binary(c->b, "subtract", x, y); }
static hlo_value div_(step_call* c, hlo_value x, hlo_value y) { return hlo_binary(c->b, "divide", x, y); }

/* `x` where the runtime number at `arg` is nonzero, else `otherwise`: the
 * kernels skip a term whose factor is 0 (so an inf parameter stays inf). */
static hlo_value where_nonzero(step_call* c, int arg, const step_item* it, hlo_value x, hlo_value otherwise) {
  hlo_value nonzero = hlo_compare(c->b, "NE", scalar(c, arg, it), hlo_constant(c->b, it->t.dtype, 0));
  return hlo_select(c->b, nonzero, x, otherwise); /* a 0-d predicate picks whole tensors */
}

/* Sets item k of `list` to `value`, or to its old value when found_inf is 1. */
static void write(step_call* c, int list, const step_item* it, hlo_value value) {
  if (c->skip != HLO_INVALID) value = hlo_select(c->b, c->skip, item(c, list, it), value);
  tpu_lower_set_output(c->l, c->first_output[list] + it->k, value);
}

/* The gradient the update uses: unscaled by grad_scale (and written back,
 * as the kernels do), negated for maximize, plus weight decay at
 * `decay_arg` times the parameter (no decay term: decay_arg < 0). */
static hlo_value gradient(step_call* c, const step_item* it, hlo_value param, int decay_arg) {
  hlo_value g = item(c, GRADS, it);
  if (c->grad_scale != HLO_INVALID) {
    g = div_(c, g, spread(c, hlo_convert(c->b, c->grad_scale, it->t.dtype), it));
    write(c, GRADS, it, g);
  }
  if (c->maximize) g = hlo_unary(c->b, "negate", g);
  if (decay_arg < 0) return g;
  return where_nonzero(c, decay_arg, it, add(c, g, mul(c, param, hyper(c, decay_arg, it))), g);
}

/* ---- Adam and AdamW ---- */

enum { ADAM_EXP_AVG = 2, ADAM_EXP_AVG_SQ = 3, ADAM_MAX_EXP_AVG_SQ = 4, ADAM_STEPS = 5 };
enum { ADAM_LR = 6, ADAM_BETA1, ADAM_BETA2, ADAM_WEIGHT_DECAY, ADAM_EPS, ADAM_AMSGRAD, ADAM_MAXIMIZE, ADAM_GRAD_SCALE };

/* 1 - beta^step, the bias correction of a moment, 0-d. */
static hlo_value bias_correction(step_call* c, int beta_arg, hlo_value step, const step_item* it) {
  return sub(c, hlo_constant(c->b, it->t.dtype, 1), hlo_binary(c->b, "power", scalar(c, beta_arg, it), step));
}

static void adam_item(step_call* c, const step_item* it, bool decoupled) {
  hlo_value param = item(c, PARAMS, it);
  hlo_value grad = gradient(c, it, param, decoupled ? -1 : ADAM_WEIGHT_DECAY);
  if (decoupled) {
    hlo_value lr_decay = spread(c, mul(c, scalar(c, ADAM_LR, it), scalar(c, ADAM_WEIGHT_DECAY, it)), it);
    param = where_nonzero(c, ADAM_WEIGHT_DECAY, it, sub(c, param, mul(c, lr_decay, param)), param);
  }
  hlo_value one = hlo_constant(c->b, it->t.dtype, 1);
  hlo_value beta1 = scalar(c, ADAM_BETA1, it), beta2 = scalar(c, ADAM_BETA2, it);
  hlo_value exp_avg = add(c, mul(c, spread(c, beta1, it), item(c, ADAM_EXP_AVG, it)),
                          mul(c, spread(c, sub(c, one, beta1), it), grad));
  hlo_value exp_avg_sq = add(c, mul(c, spread(c, beta2, it), item(c, ADAM_EXP_AVG_SQ, it)),
                             mul(c, mul(c, spread(c, sub(c, one, beta2), it), grad), grad));
  hlo_value step = step_count(c, ADAM_STEPS, it);
  hlo_value step_size = spread(c, div_(c, scalar(c, ADAM_LR, it), bias_correction(c, ADAM_BETA1, step, it)), it);
  hlo_value correction2_sqrt = spread(c, hlo_unary(c->b, "sqrt", bias_correction(c, ADAM_BETA2, step, it)), it);
  hlo_value second = exp_avg_sq;
  if (tpu_lower_bool(c->l, ADAM_AMSGRAD, false)) {
    if (!c->lists[ADAM_MAX_EXP_AVG_SQ]) {
      tpu_lower_fail(c->l, TPU_INVALID_ARGUMENT, "aten::%s_: amsgrad=True needs max_exp_avg_sqs, one per "
                     "parameter; the list is empty", tpu_lower_op_name(c->l));
      return;
    }
    second = hlo_min_max(c->b, "maximum", item(c, ADAM_MAX_EXP_AVG_SQ, it), exp_avg_sq, true);
    write(c, ADAM_MAX_EXP_AVG_SQ, it, second);
  }
  hlo_value denom = add(c, div_(c, hlo_unary(c->b, "sqrt", second), correction2_sqrt), hyper(c, ADAM_EPS, it));
  write(c, PARAMS, it, sub(c, param, div_(c, mul(c, step_size, exp_avg), denom)));
  write(c, ADAM_EXP_AVG, it, exp_avg);
  write(c, ADAM_EXP_AVG_SQ, it, exp_avg_sq);
}

static void adam_step_item(step_call* c, const step_item* it) { adam_item(c, it, false); }
static void adamw_step_item(step_call* c, const step_item* it) { adam_item(c, it, true); }

/* ---- SGD ---- */

enum { SGD_MOMENTUM_BUFFERS = 2 };
enum {
  SGD_WEIGHT_DECAY = 3, SGD_MOMENTUM, SGD_LR, SGD_DAMPENING, SGD_NESTEROV, SGD_MAXIMIZE, SGD_FIRST_STEP, SGD_GRAD_SCALE
};

static void sgd_step_item(step_call* c, const step_item* it) {
  hlo_value param = item(c, PARAMS, it);
  hlo_value grad = gradient(c, it, param, SGD_WEIGHT_DECAY);
  if (c->lists[SGD_MOMENTUM_BUFFERS]) {
    hlo_value momentum = hyper(c, SGD_MOMENTUM, it);
    hlo_value buffer = grad;
    if (!tpu_lower_bool(c->l, SGD_FIRST_STEP, false)) {
      hlo_value undamped = sub(c, hlo_constant(c->b, it->t.dtype, 1), scalar(c, SGD_DAMPENING, it));
      buffer = add(c, mul(c, item(c, SGD_MOMENTUM_BUFFERS, it), momentum), mul(c, grad, spread(c, undamped, it)));
    }
    /* With momentum 0 the kernels leave the buffers alone. */
    write(c, SGD_MOMENTUM_BUFFERS, it,
          where_nonzero(c, SGD_MOMENTUM, it, buffer, item(c, SGD_MOMENTUM_BUFFERS, it)));
    hlo_value moved = tpu_lower_bool(c->l, SGD_NESTEROV, false) ? add(c, grad, mul(c, buffer, momentum)) : buffer;
    grad = where_nonzero(c, SGD_MOMENTUM, it, moved, grad);
  }
  write(c, PARAMS, it, sub(c, param, mul(c, grad, hyper(c, SGD_LR, it))));
}

/* ---- Adagrad ---- */

enum { ADAGRAD_STATE_SUMS = 2, ADAGRAD_STEPS = 3 };
enum { ADAGRAD_LR = 4, ADAGRAD_LR_DECAY, ADAGRAD_WEIGHT_DECAY, ADAGRAD_EPS, ADAGRAD_MAXIMIZE, ADAGRAD_GRAD_SCALE };

static void adagrad_step_item(step_call* c, const step_item* it) {
  hlo_value param = item(c, PARAMS, it);
  hlo_value grad = gradient(c, it, param, ADAGRAD_WEIGHT_DECAY);
  hlo_value one = hlo_constant(c->b, it->t.dtype, 1);
  /* lr / (1 + (step - 1) lr_decay) */
  hlo_value decays = mul(c, sub(c, step_count(c, ADAGRAD_STEPS, it), one), scalar(c, ADAGRAD_LR_DECAY, it));
  hlo_value clr = spread(c, div_(c, scalar(c, ADAGRAD_LR, it), add(c, one, decays)), it);
  hlo_value state_sum = add(c, item(c, ADAGRAD_STATE_SUMS, it), mul(c, grad, grad));
  write(c, ADAGRAD_STATE_SUMS, it, state_sum);
  hlo_value std = add(c, hlo_unary(c->b, "sqrt", state_sum), hyper(c, ADAGRAD_EPS, it));
  write(c, PARAMS, it, sub(c, param, div_(c, mul(c, clr, grad), std)));
}

/* ---- the shared driver ---- */

typedef struct fused_step {
  const char* name;
  void (*update)(step_call* c, const step_item* it);
  const char* lists[MAX_LISTS]; /* the list arguments' names, from position 0 */
  int list_count;
  int written_lists;    /* the first lists, which the step updates */
  unsigned optional;    /* lists that may be empty (bit i: list i) */
  unsigned scalar_list; /* lists whose items hold one number (step counters) */
  int maximize_arg;
  int grad_scale_arg;   /* found_inf follows it */
} fused_step;

#define ADAM_LISTS {"self", "grads", "exp_avgs", "exp_avg_sqs", "max_exp_avg_sqs", "state_steps"}, 6, 5, \
                   1u << ADAM_MAX_EXP_AVG_SQ, 1u << ADAM_STEPS, ADAM_MAXIMIZE, ADAM_GRAD_SCALE

static const fused_step steps[] = {
    {"_fused_adam", adam_step_item, ADAM_LISTS},
    {"_fused_adamw", adamw_step_item, ADAM_LISTS},
    {"_fused_sgd", sgd_step_item, {"self", "grads", "momentum_buffer_list"}, 3, 3, 1u << SGD_MOMENTUM_BUFFERS, 0,
     SGD_MAXIMIZE, SGD_GRAD_SCALE},
    {"_fused_adagrad", adagrad_step_item, {"self", "grads", "state_sums", "state_steps"}, 4, 3, 0,
     1u << ADAGRAD_STEPS, ADAGRAD_MAXIMIZE, ADAGRAD_GRAD_SCALE},
};

/* Checks the lists as PyTorch's fused kernels do: equal lengths (an
 * optional list may be empty), item k of each state list shaped like
 * parameter k, a step counter one number. Reads the lists' items. */
static bool read_lists(step_call* c, const fused_step* s, hlo_value** items) {
  c->count = tpu_lower_tensor_list_count(c->l, PARAMS);
  for (int i = 0; i < s->list_count; i++) {
    int n = tpu_lower_tensor_list_count(c->l, i);
    if (n == 0 && (s->optional >> i & 1)) continue;
    if (n != c->count) {
      tpu_lower_fail(c->l, TPU_INVALID_ARGUMENT, "aten::%s_: %s has %d tensors but self has %d; pass one "
                     "per parameter", s->name, s->lists[i], n, c->count);
      return false;
    }
    for (int k = 0; k < n; k++) {
      hlo_type want = tpu_lower_tensor_list_type(c->l, PARAMS, k);
      hlo_type have = tpu_lower_tensor_list_type(c->l, i, k);
      bool fits = (s->scalar_list >> i & 1) ? hlo_type_numel(&have) == 1 : hlo_type_equal(&have, &want);
      if (!fits) {
        char want_text[96], have_text[96];
        tpu_lower_fail(c->l, TPU_INVALID_ARGUMENT, "aten::%s_: %s[%d] has shape %s and dtype %s, but self[%d] "
                       "has shape %s and dtype %s; %s", s->name, s->lists[i], k,
                       hlo_shape_print(&have, have_text, sizeof have_text), tpu_dtype_name(have.dtype), k,
                       hlo_shape_print(&want, want_text, sizeof want_text), tpu_dtype_name(want.dtype),
                       (s->scalar_list >> i & 1) ? "a step counter holds one number"
                                                 : "optimizer state must match its parameter");
        return false;
      }
    }
    if (!(items[i] = malloc((size_t)(n ? n : 1) * sizeof(hlo_value)))) {
      hlo_fail(c->b, TPU_OUT_OF_MEMORY, "out of host memory lowering aten::%s_", s->name);
      return false;
    }
    tpu_lower_tensor_list(c->l, i, items[i], n);
    c->lists[i] = n ? items[i] : NULL;
  }
  return true;
}

static tpu_status lower_fused_step(tpu_lowering* l) {
  const fused_step* s = NULL;
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
    if (strcmp(steps[i].name, tpu_lower_op_name(l)) == 0) s = &steps[i];
  if (!s) {
    tpu_lower_fail(l, TPU_INTERNAL, "aten::%s is registered but missing from the fused-step table",
                   tpu_lower_op_name(l));
    return NULL;
  }
  step_call c = {l, tpu_lower_builder(l), 0, {NULL}, {0}, HLO_INVALID, HLO_INVALID,
                 tpu_lower_bool(l, s->maximize_arg, false)};
  hlo_value* items[MAX_LISTS] = {NULL};
  if (!read_lists(&c, s, items)) goto done;
  /* Outputs: the written lists' items, in order. Adagrad's default
   * overload also declares its step counters written; Python has already
   * added 1 to them, so they are kept as they are, as is every output the
   * step leaves unchanged. */
  int written = 0;
  for (int i = 0; i < s->written_lists; i++) {
    c.first_output[i] = written;
    written += tpu_lower_tensor_list_count(l, i);
  }
  if (written > tpu_lower_output_count(l)) {
    tpu_lower_fail(l, TPU_INTERNAL, "aten::%s_: %d outputs for %d written list items", s->name,
                   tpu_lower_output_count(l), written);
    goto done;
  }
  for (int k = 0; k < tpu_lower_output_count(l); k++) tpu_lower_keep_output(l, k);
  /* grad_scale and found_inf hold one float32 each (0-d or [1]). */
  if (!tpu_lower_is_none(l, s->grad_scale_arg)) c.grad_scale = tpu_lower_single(l, s->grad_scale_arg, TPU_F32);
  if (!tpu_lower_is_none(l, s->grad_scale_arg + 1))
    c.skip = hlo_compare(c.b, "EQ", tpu_lower_single(l, s->grad_scale_arg + 1, TPU_F32), hlo_constant(c.b, TPU_F32, 1));
  for (int k = 0; k < c.count && !hlo_failed(c.b); k++) {
    step_item it = {k, tpu_lower_tensor_list_type(l, PARAMS, k)};
    it.t.dtype = tpu_dtype_compute(it.t.dtype);
    s->update(&c, &it);
  }
done:
  for (int i = 0; i < MAX_LISTS; i++) free(items[i]);
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"_fused_adam", lower_fused_step, 0},
    {"_fused_adamw", lower_fused_step, 0},
    {"_fused_sgd", lower_fused_step, 0},
    {"_fused_adagrad", lower_fused_step, 0},
};

TPU_OP_FAMILY(tpu_ops_optimizer, entries);
