/* foreach lowerings: one program for a whole _foreach_ call, as the
 * optimizers and clip_grad_norm_ make them. Output k is item k's result
 * (for in-place ops, item k of the mutated list).
 *
 * Per item k an argument gives: a tensor list its item k; a list of
 * numbers (a Scalar[], or the CPU tensor addcmul/addcdiv take as `scalars`)
 * its k-th number; a Python number or a 0-d tensor one value for all items.
 * Numbers are runtime parameters: new values never recompile. Arithmetic
 * runs in the output's dtype, with float16/bfloat16 widened to float32 as
 * ATen's CPU kernels do. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hlo/elementwise_extra_ops.h"
#include "hlo/reduce_extra_ops.h"
#include "ops/families.h"

#define MAX_ARGS 4 /* addcdiv(self, tensor1, tensor2, scalars) has the most */

struct foreach_op;

typedef struct foreach_call {
  tpu_lowering* l;
  hlo_builder* b;
  const struct foreach_op* op;
  int count;                  /* items per list */
  hlo_value* lists[MAX_ARGS]; /* per tensor-list argument: its items */
} foreach_call;

/* Item k's result, computed in type t (output k's shape, widened dtype). */
typedef hlo_value (*item_fn)(foreach_call* c, int k, const hlo_type* t);

typedef struct foreach_op {
  const char* name;
  item_fn item;
  const char* hlo; /* the StableHLO op the item function applies */
} foreach_op;

/* Argument `arg` for item k, converted to t's dtype and broadcast to its shape. */
static hlo_value operand(foreach_call* c, int arg, int k, const hlo_type* t) {
  hlo_builder* b = c->b;
  hlo_value v;
  if (arg < MAX_ARGS && c->lists[arg]) {
    v = c->lists[arg][k];
  } else if (tpu_lower_arg_kind(c->l, arg) == TPU_ARG_SCALAR_LIST) {
    int64_t start = k, limit = k + 1, stride = 1;
    hlo_value all = tpu_lower_scalar_list(c->l, arg, t->dtype);
    v = hlo_reshape(b, hlo_slice(b, all, &start, &limit, &stride), 0, NULL);
  } else {
    v = tpu_lower_value(c->l, arg, t->dtype);
  }
  return hlo_broadcast_to(b, hlo_convert(b, v, t->dtype), t->rank, t->dims);
}

/* ---- item functions ---- */

/* add/sub(self, other, alpha): alpha only in the List and Tensor overloads. */
static hlo_value add_item(foreach_call* c, int k, const hlo_type* t) {
  hlo_value y = operand(c, 1, k, t);
  if (!tpu_lower_is_none(c->l, 2)) y = hlo_binary(c->b, "multiply", y, operand(c, 2, k, t));
  return hlo_binary(c->b, c->op->hlo, operand(c, 0, k, t), y);
}

static hlo_value binary_item(foreach_call* c, int k, const hlo_type* t) {
  return hlo_binary(c->b, c->op->hlo, operand(c, 0, k, t), operand(c, 1, k, t));
}

/* maximum/minimum and clamp_min/clamp_max: NaN propagates, as in PyTorch. */
static hlo_value min_max_item(foreach_call* c, int k, const hlo_type* t) {
  return hlo_min_max(c->b, c->op->hlo, operand(c, 0, k, t), operand(c, 1, k, t), true);
}

static hlo_value unary_item(foreach_call* c, int k, const hlo_type* t) {
  return hlo_unary(c->b, c->op->hlo, operand(c, 0, k, t));
}

static hlo_value abs_item(foreach_call* c, int k, const hlo_type* t) {
  hlo_value x = operand(c, 0, k, t);
  bool has_sign = tpu_dtype_is_float(t->dtype) || tpu_dtype_is_signed_int(t->dtype);
  return has_sign ? hlo_unary(c->b, "abs", x) : x; /* unsigned and bool: themselves */
}

static hlo_value sign_item(foreach_call* c, int k, const hlo_type* t) {
  return hlo_sign(c->b, operand(c, 0, k, t));
}

static hlo_value reciprocal_item(foreach_call* c, int k, const hlo_type* t) {
  hlo_value x = operand(c, 0, k, t);
  return hlo_binary(c->b, "divide", hlo_constant_like(c->b, x, 1), x);
}

/* lerp(self, end, weight). */
static hlo_value lerp_item(foreach_call* c, int k, const hlo_type* t) {
  return hlo_lerp(c->b, operand(c, 0, k, t), operand(c, 1, k, t), operand(c, 2, k, t));
}

/* addcmul/addcdiv(self, tensor1, tensor2, value) = self + value * t1 (*|/) t2,
 * grouped as ATen's CPU kernels do. */
static hlo_value addc_item(foreach_call* c, int k, const hlo_type* t) {
  hlo_value scaled = hlo_binary(c->b, "multiply", operand(c, 3, k, t), operand(c, 1, k, t));
  hlo_value term = hlo_binary(c->b, c->op->hlo, scaled, operand(c, 2, k, t));
  return hlo_binary(c->b, "add", operand(c, 0, k, t), term);
}

/* norm(self, ord, dtype): ord is compiled in (the entry sets TPU_OP_SCALARS_IN_KEY).
 * inf/-inf: max/min of |x| (NaN wins); 0: the nonzero count; otherwise
 * (sum |x|^p)^(1/p), with p = 1 and 2 done without pow. */
static hlo_value norm_item(foreach_call* c, int k, const hlo_type* t) {
  hlo_builder* b = c->b;
  double p = tpu_lower_scalar_constant(c->l, 1);
  hlo_value x = hlo_convert(b, c->lists[0][k], t->dtype);
  int rank = hlo_type_of(b, x)->rank;
  int64_t dims[TPU_MAX_RANK];
  for (int i = 0; i < rank; i++) dims[i] = i;
  hlo_value ax = hlo_unary(b, "abs", x);
  if (isinf(p))
    return hlo_reduce_extreme(b, ax, hlo_constant(b, t->dtype, p > 0 ? 0 : INFINITY), p > 0,
                              dims, rank);
  hlo_value terms;
  if (p == 0)
    terms = hlo_convert(b, hlo_compare(b, "NE", x, hlo_constant_like(b, x, 0)), t->dtype);
  else if (p == 1)
    terms = ax;
  else if (p == 2)
    terms = hlo_binary(b, "multiply", x, x);
  else
    terms = hlo_binary(b, "power", ax, hlo_constant_like(b, ax, p));
  hlo_value sum = hlo_reduce(b, terms, hlo_constant(b, t->dtype, 0), "add", dims, rank);
  if (p == 0 || p == 1) return sum;
  if (p == 2) return hlo_unary(b, "sqrt", sum);
  return hlo_binary(b, "power", sum, hlo_constant_like(b, sum, 1 / p));
}

/* copy(self, src): src's item; exec/ converts it to the output's dtype. */
static hlo_value copy_item(foreach_call* c, int k, const hlo_type* t) { return c->lists[1][k]; }

static hlo_value zero_item(foreach_call* c, int k, const hlo_type* t) {
  return hlo_constant(c->b, t->dtype, 0);
}

static const foreach_op ops[] = {
    {"_foreach_abs", abs_item, NULL},
    {"_foreach_add", add_item, "add"},
    {"_foreach_addcdiv", addc_item, "divide"},
    {"_foreach_addcmul", addc_item, "multiply"},
    {"_foreach_clamp_max", min_max_item, "minimum"},
    {"_foreach_clamp_min", min_max_item, "maximum"},
    {"_foreach_copy", copy_item, NULL},
    {"_foreach_div", binary_item, "divide"},
    {"_foreach_exp", unary_item, "exponential"},
    {"_foreach_lerp", lerp_item, NULL},
    {"_foreach_maximum", min_max_item, "maximum"},
    {"_foreach_minimum", min_max_item, "minimum"},
    {"_foreach_mul", binary_item, "multiply"},
    {"_foreach_neg", unary_item, "negate"},
    {"_foreach_norm", norm_item, NULL},
    {"_foreach_pow", binary_item, "power"},
    {"_foreach_reciprocal", reciprocal_item, NULL},
    {"_foreach_sign", sign_item, NULL},
    {"_foreach_sqrt", unary_item, "sqrt"},
    {"_foreach_sub", add_item, "subtract"},
    {"_foreach_zero", zero_item, NULL},
};

static const foreach_op* find_op(tpu_lowering* l) {
  const char* name = tpu_lower_op_name(l);
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (strcmp(ops[i].name, name) == 0) return &ops[i];
  tpu_lower_fail(l, TPU_INTERNAL, "aten::%s is registered but missing from the foreach table",
                 name);
  return NULL;
}

static tpu_status lower_foreach(tpu_lowering* l) {
  foreach_call c = {l, tpu_lower_builder(l), find_op(l), -1, {NULL}};
  if (!c.op) return NULL;
  int args = tpu_lower_arg_count(l) < MAX_ARGS ? tpu_lower_arg_count(l) : MAX_ARGS;
  for (int i = 0; i < args; i++) {
    if (tpu_lower_arg_kind(l, i) != TPU_ARG_TENSOR_LIST) continue;
    int n = tpu_lower_tensor_list_count(l, i);
    if (c.count >= 0 && n != c.count) {
      tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::%s: tensor lists have %d and %d items; "
                     "pass lists of equal length", tpu_lower_op_name(l), c.count, n);
      goto done;
    }
    c.count = n;
    c.lists[i] = malloc((size_t)(n ? n : 1) * sizeof(hlo_value));
    if (!c.lists[i]) {
      hlo_fail(c.b, TPU_OUT_OF_MEMORY, "out of host memory lowering aten::%s",
               tpu_lower_op_name(l));
      goto done;
    }
    tpu_lower_tensor_list(l, i, c.lists[i], n);
  }
  if (c.count != tpu_lower_output_count(l)) {
    tpu_lower_fail(l, TPU_INTERNAL, "aten::%s: %d list items but %d outputs", tpu_lower_op_name(l),
                   c.count, tpu_lower_output_count(l));
    goto done;
  }
  for (int k = 0; k < c.count && !hlo_failed(c.b); k++) {
    hlo_type t = tpu_lower_output_type(l, k);
    t.dtype = tpu_dtype_compute(t.dtype);
    tpu_lower_set_output(l, k, c.op->item(&c, k, &t));
  }
done:
  for (int i = 0; i < MAX_ARGS; i++) free(c.lists[i]);
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"_foreach_abs", lower_foreach, 0},
    {"_foreach_add", lower_foreach, 0},
    {"_foreach_addcdiv", lower_foreach, 0},
    {"_foreach_addcmul", lower_foreach, 0},
    {"_foreach_clamp_max", lower_foreach, 0},
    {"_foreach_clamp_min", lower_foreach, 0},
    {"_foreach_copy", lower_foreach, 0},
    {"_foreach_div", lower_foreach, 0},
    {"_foreach_exp", lower_foreach, 0},
    {"_foreach_lerp", lower_foreach, 0},
    {"_foreach_maximum", lower_foreach, 0},
    {"_foreach_minimum", lower_foreach, 0},
    {"_foreach_mul", lower_foreach, 0},
    {"_foreach_neg", lower_foreach, 0},
    {"_foreach_norm", lower_foreach, TPU_OP_SCALARS_IN_KEY},
    {"_foreach_pow", lower_foreach, 0},
    {"_foreach_reciprocal", lower_foreach, 0},
    {"_foreach_sign", lower_foreach, 0},
    {"_foreach_sqrt", lower_foreach, 0},
    {"_foreach_sub", lower_foreach, 0},
    {"_foreach_zero", lower_foreach, 0},
};

TPU_OP_FAMILY(tpu_ops_foreach, entries);
