/* Loss lowerings and their backwards: nll_loss and nll_loss2d (what
 * cross_entropy becomes after log_softmax), multi_margin_loss,
 * multilabel_margin_loss, mse_loss, smooth_l1_loss,
 * huber_loss, binary_cross_entropy and the forward of
 * binary_cross_entropy_with_logits (its backward is a composite, as are
 * l1_loss and cross_entropy itself).
 *
 * `reduction` is ATen's enum: 0 none, 1 mean, 2 sum. Float16/bfloat16
 * compute in float32. What ATen's CPU kernels check on values (targets in
 * range, binary_cross_entropy's input in [0, 1]) cannot be checked inside a
 * program: out-of-range class targets pick nothing (a loss and gradient of
 * 0) and inputs outside [0, 1] give NaN. */
#include <string.h>

#include "hlo/elementwise_extra_ops.h"
#include "hlo/slice_ops.h"
#include "ops/families.h"

enum { REDUCTION_NONE, REDUCTION_MEAN, REDUCTION_SUM };

static hlo_value sum_all(hlo_builder* b, hlo_value x) {
  hlo_type t = *hlo_type_of(b, x);
  int64_t dims[TPU_MAX_RANK];
  for (int i = 0; i < t.rank; i++) dims[i] = i;
  return hlo_reduce(b, x, hlo_constant(b, t.dtype, 0), "add", dims, t.rank);
}

/* ---- pointwise losses ---- */

/* A pointwise loss call: forwards are (self, target, ...), backwards
 * (grad_output, self, target, ...), so arguments are read relative to
 * `self`. Values have the common shape of the tensor arguments and the
 * compute dtype. */
typedef struct pointwise {
  tpu_lowering* l;
  hlo_builder* b;
  hlo_type type;
  int self;         /* index of self: 0 in forwards, 1 in backwards */
  hlo_value x, y;   /* self and target */
} pointwise;

static hlo_value k(pointwise* p, double value) {
  hlo_value c = hlo_constant(p->b, p->type.dtype, value);
  return hlo_broadcast_in_dim(p->b, c, p->type.rank, p->type.dims, NULL);
}

static hlo_value bin(pointwise* p, const char* op, hlo_value x, hlo_value y) {
  return hlo_binary(p->b, op, x, y);
}

/* The optional tensor argument `offset` after self, times v. */
static hlo_value times_optional(pointwise* p, int offset, hlo_value v) {
  int index = p->self + offset;
  if (tpu_lower_is_none(p->l, index)) return v;
  return bin(p, "multiply", v, tpu_lower_value_as(p->l, index, &p->type));
}

/* The binary cross-entropies' optional weight (after target), times v. */
static hlo_value weighted(pointwise* p, hlo_value v) { return times_optional(p, 2, v); }

/* smooth_l1's beta and huber's delta, a float attribute after reduction. */
static double margin(pointwise* p) { return tpu_lower_float(p->l, p->self + 3, 1.0); }

static hlo_value mse(pointwise* p) {
  hlo_value d = bin(p, "subtract", p->x, p->y);
  return bin(p, "multiply", d, d);
}
static hlo_value mse_grad(pointwise* p) {
  return bin(p, "multiply", k(p, 2), bin(p, "subtract", p->x, p->y));
}

/* |d| < beta ? d^2 / (2 beta) : |d| - beta / 2; beta = 0 is l1. */
static hlo_value smooth_l1(pointwise* p) {
  double beta = margin(p);
  hlo_value z = hlo_unary(p->b, "abs", bin(p, "subtract", p->x, p->y));
  hlo_value half_square = bin(p, "multiply", k(p, 0.5), bin(p, "multiply", z, z));
  hlo_value quad = bin(p, "divide", half_square, k(p, beta));
  return hlo_select(p->b, hlo_compare(p->b, "LT", z, k(p, beta)), quad,
                    bin(p, "subtract", z, k(p, 0.5 * beta)));
}
static hlo_value smooth_l1_grad(pointwise* p) {
  double beta = margin(p);
  hlo_value d = bin(p, "subtract", p->x, p->y);
  hlo_value small = hlo_compare(p->b, "LT", hlo_unary(p->b, "abs", d), k(p, beta));
  return hlo_select(p->b, small, bin(p, "divide", d, k(p, beta)), hlo_sign(p->b, d));
}

/* |d| < delta ? d^2 / 2 : delta (|d| - delta / 2). */
static hlo_value huber(pointwise* p) {
  double delta = margin(p);
  hlo_value z = hlo_unary(p->b, "abs", bin(p, "subtract", p->x, p->y));
  hlo_value quad = bin(p, "multiply", k(p, 0.5), bin(p, "multiply", z, z));
  hlo_value lin = bin(p, "multiply", k(p, delta), bin(p, "subtract", z, k(p, 0.5 * delta)));
  return hlo_select(p->b, hlo_compare(p->b, "LT", z, k(p, delta)), quad, lin);
}
static hlo_value huber_grad(pointwise* p) {
  double delta = margin(p);
  hlo_value d = bin(p, "subtract", p->x, p->y);
  hlo_value low = hlo_min_max(p->b, "maximum", d, k(p, -delta), true);
  return hlo_min_max(p->b, "minimum", low, k(p, delta), true);
}

/* (y - 1) max(log(1 - x), -100) - y max(log x, -100), NaN kept, weighted. */
static hlo_value bce(pointwise* p) {
  hlo_value floor = k(p, -100);
  hlo_value log_x = hlo_min_max(p->b, "maximum", hlo_unary(p->b, "log", p->x), floor, true);
  hlo_value log_rest = hlo_unary(p->b, "log_plus_one", hlo_unary(p->b, "negate", p->x));
  log_rest = hlo_min_max(p->b, "maximum", log_rest, floor, true);
  hlo_value rest = bin(p, "multiply", bin(p, "subtract", p->y, k(p, 1)), log_rest);
  hlo_value loss = bin(p, "subtract", rest, bin(p, "multiply", p->y, log_x));
  return weighted(p, loss);
}
/* (x - y) / max(x (1 - x), 1e-12), weighted. */
static hlo_value bce_grad(pointwise* p) {
  hlo_value var = bin(p, "multiply", bin(p, "subtract", k(p, 1), p->x), p->x);
  hlo_value denom = hlo_min_max(p->b, "maximum", var, k(p, 1e-12), true);
  return weighted(p, bin(p, "divide", bin(p, "subtract", p->x, p->y), denom));
}

/* (1 - y) x - log_sigmoid(x) (1 + (pos_weight - 1) y), weighted, with
 * log_sigmoid(x) = min(x, 0) - log(1 + exp(-|x|)), as ATen computes it. */
static hlo_value bce_logits(pointwise* p) {
  hlo_value x = p->x, y = p->y;
  hlo_value soft = hlo_unary(p->b, "log_plus_one", hlo_unary(p->b, "exponential",
                                                            hlo_unary(p->b, "negate", hlo_unary(p->b, "abs", x))));
  hlo_value log_sigmoid = bin(p, "subtract", hlo_min_max(p->b, "minimum", x, k(p, 0), true), soft);
  if (!tpu_lower_is_none(p->l, p->self + 3)) {
    hlo_value scale = bin(p, "add", times_optional(p, 3, y), bin(p, "subtract", k(p, 1), y));
    log_sigmoid = bin(p, "multiply", log_sigmoid, scale); /* pos_weight y + 1 - y */
  }
  return weighted(p, bin(p, "subtract", bin(p, "multiply", bin(p, "subtract", k(p, 1), y), x), log_sigmoid));
}

static const struct pointwise_loss {
  const char* name;
  hlo_value (*loss)(pointwise* p);
  hlo_value (*grad)(pointwise* p); /* d loss / d self, elementwise */
  int reduction;                   /* its argument's index after self */
  bool weighted;                   /* an optional weight follows target */
  bool pos_weighted;               /* and an optional pos_weight follows that */
} pointwise_losses[] = {
    {"binary_cross_entropy", bce, bce_grad, 3, true, false},
    {"binary_cross_entropy_with_logits", bce_logits, NULL, 4, true, true},
    {"huber_loss", huber, huber_grad, 2, false, false},
    {"mse_loss", mse, mse_grad, 2, false, false},
    {"smooth_l1_loss", smooth_l1, smooth_l1_grad, 2, false, false},
};

/* The table entry of name or name_backward. */
static const struct pointwise_loss* find_pointwise(tpu_lowering* l, bool* out_backward) {
  const char* name = tpu_lower_op_name(l);
  const char* suffix = strstr(name, "_backward");
  size_t base = suffix ? (size_t)(suffix - name) : strlen(name);
  *out_backward = suffix != NULL;
  for (size_t i = 0; i < sizeof pointwise_losses / sizeof pointwise_losses[0]; i++)
    if (strlen(pointwise_losses[i].name) == base && !strncmp(pointwise_losses[i].name, name, base))
      return &pointwise_losses[i];
  tpu_lower_fail(l, TPU_INTERNAL, "aten::%s is registered but missing from its loss table", name);
  return NULL;
}

/* A forward reduces the elementwise loss, rounded to the output dtype
 * first as ATen computes it in that dtype; a backward scales the
 * elementwise gradient by grad_output (divided by self's numel for mean). */
static tpu_status lower_pointwise(tpu_lowering* l) {
  bool backward;
  const struct pointwise_loss* op = find_pointwise(l, &backward);
  if (!op) return NULL;
  int self = backward ? 1 : 0;
  /* The tensors the loss broadcasts together: [grad_output,] self, target, weights. */
  int operands[5], count = 0;
  for (int i = 0; i < self + 2; i++) operands[count++] = i;
  if (op->weighted && !tpu_lower_is_none(l, self + 2)) operands[count++] = self + 2;
  if (op->pos_weighted && !tpu_lower_is_none(l, self + 3)) operands[count++] = self + 3;
  tpu_dtype out = tpu_lower_output_type(l, 0).dtype;
  hlo_type type = tpu_lower_broadcast_type(l, operands, count, tpu_dtype_compute(out));
  pointwise p = {l, tpu_lower_builder(l), type, self, HLO_INVALID, HLO_INVALID};
  p.x = tpu_lower_value_as(l, self, &p.type);
  p.y = tpu_lower_value_as(l, self + 1, &p.type);
  int64_t reduction = tpu_lower_int(l, self + op->reduction, REDUCTION_MEAN);
  if (backward) {
    hlo_value g = tpu_lower_value_as(l, 0, &p.type);
    hlo_type in = tpu_lower_arg_type(l, self);
    if (reduction == REDUCTION_MEAN) g = bin(&p, "divide", g, k(&p, (double)hlo_type_numel(&in)));
    tpu_lower_set_output(l, 0, bin(&p, "multiply", op->grad(&p), g));
    return NULL;
  }
  hlo_builder* b = p.b;
  hlo_value loss = op->loss(&p);
  if (reduction != REDUCTION_NONE) {
    loss = sum_all(b, hlo_convert(b, hlo_convert(b, loss, out), p.type.dtype));
    hlo_value numel = hlo_constant(b, p.type.dtype, (double)hlo_type_numel(&p.type));
    if (reduction == REDUCTION_MEAN) loss = hlo_binary(b, "divide", loss, numel);
  }
  tpu_lower_set_output(l, 0, loss);
  return NULL;
}

/* ---- nll_loss ---- */

/* The entry of self (C), (N, C) or (N, C, H, W) each target picks along
 * the class dim; a target equal to ignore_index picks nothing, wherever
 * it lies. Arguments, from `self`: self, target, weight, reduction,
 * ignore_index. */
typedef struct nll {
  hlo_type in;       /* self's type in the compute dtype */
  int class_dim;
  int64_t kept[TPU_MAX_RANK]; /* the other dims, the target's */
  hlo_type per_target; /* the target's shape in the compute dtype */
  hlo_value target;  /* i64, the target's shape; ignored ones read class 0 */
  hlo_value valid;   /* bool, the target's shape: not ignore_index */
  hlo_value picked_weight; /* per target: its class's weight (or 1), 0 if ignored */
} nll;

static hlo_value filled(hlo_builder* b, const hlo_type* type, double value) {
  return hlo_filled(b, type->dtype, type->rank, type->dims, value);
}

/* v (of the target's shape) broadcast along the class dim. */
static hlo_value across_classes(hlo_builder* b, const nll* n, hlo_value v) {
  return hlo_broadcast_in_dim(b, v, n->in.rank, n->in.dims, n->kept);
}

/* v (self's shape) at each target, in the target's shape: a gather of one
 * entry per target, so the cost does not grow with the class count. */
static hlo_value pick(hlo_builder* b, const nll* n, hlo_value v) {
  const hlo_type* pt = &n->per_target;
  if (hlo_type_numel(&n->in) == 0) return filled(b, pt, 0); /* nothing to gather from */
  hlo_type one = n->in;
  one.dims[n->class_dim] = 1;
  hlo_value index = hlo_reshape(b, n->target, one.rank, one.dims);
  return hlo_reshape(b, hlo_gather_elements(b, v, n->class_dim, index), pt->rank, pt->dims);
}

static nll nll_of(tpu_lowering* l, int self) {
  hlo_builder* b = tpu_lower_builder(l);
  nll n = {tpu_lower_arg_type(l, self), 0, {0}, {0}, HLO_INVALID, HLO_INVALID, HLO_INVALID};
  n.in.dtype = tpu_dtype_compute(n.in.dtype);
  n.class_dim = n.in.rank == 1 ? 0 : 1;
  for (int i = 0, j = 0; i < n.in.rank; i++)
    if (i != n.class_dim) n.kept[j++] = i;
  hlo_value target = hlo_convert(b, tpu_lower_tensor(l, self + 1), TPU_I64);
  if (n.in.rank == 1 && tpu_lower_arg_type(l, self + 1).rank == 1) {
    /* Unbatched self with a 1-element target: ATen reads target[0]. */
    int64_t start = 0, limit = 1, stride = 1;
    target = hlo_reshape(b, hlo_slice(b, target, &start, &limit, &stride), 0, NULL);
  }
  hlo_value ignore = hlo_constant_i64(b, TPU_I64, tpu_lower_int(l, self + 4, -100));
  hlo_type tt = *hlo_type_of(b, target);
  n.valid = hlo_compare(b, "NE", target, hlo_broadcast_in_dim(b, ignore, tt.rank, tt.dims, NULL));
  n.target = hlo_select(b, n.valid, target, filled(b, &tt, 0));
  n.per_target = tt;
  n.per_target.dtype = n.in.dtype;
  hlo_value weight = filled(b, &n.per_target, 1);
  if (!tpu_lower_is_none(l, self + 2))
    weight = hlo_take(b, tpu_lower_value(l, self + 2, n.in.dtype), 0, n.target);
  n.picked_weight = hlo_select(b, n.valid, weight, filled(b, &n.per_target, 0));
  return n;
}

/* nll_loss_forward / nll_loss2d_forward(self, target, weight, reduction,
 * ignore_index) -> (output, total_weight): -weight[t] * self[t] per
 * target; total_weight sums the picked weights (0 for a batched 'none'). */
static tpu_status lower_nll_forward(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  nll n = nll_of(l, 0);
  hlo_value x = pick(b, &n, tpu_lower_value(l, 0, n.in.dtype));
  /* A select, not a product with the zero weight: an ignored entry adds 0
   * even where self holds inf or NaN. */
  hlo_value weighted = hlo_unary(b, "negate", hlo_binary(b, "multiply", x, n.picked_weight));
  hlo_value loss = hlo_select(b, n.valid, weighted, filled(b, &n.per_target, 0));
  hlo_value total = sum_all(b, n.picked_weight);
  int64_t reduction = tpu_lower_int(l, 3, REDUCTION_MEAN);
  if (reduction == REDUCTION_NONE && n.in.rank > 1) total = hlo_constant(b, n.in.dtype, 0);
  if (reduction != REDUCTION_NONE) loss = sum_all(b, loss);
  if (reduction == REDUCTION_MEAN) loss = hlo_binary(b, "divide", loss, total);
  tpu_lower_set_output(l, 0, loss);
  tpu_lower_set_output(l, 1, total);
  return NULL;
}

/* nll_loss_backward / nll_loss2d_backward(grad, self, target, weight,
 * reduction, ignore_index, total_weight): -weight[t] * grad at each
 * target entry (grad / total_weight for mean), 0 elsewhere. Written as a
 * select over self's shape rather than a scatter, so that in a fused or
 * compiled program XLA folds it into its consumer (log_softmax's
 * backward) instead of writing it out. */
static tpu_status lower_nll_backward(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  nll n = nll_of(l, 1);
  hlo_value g = tpu_lower_value(l, 0, n.in.dtype);
  if (tpu_lower_int(l, 4, REDUCTION_MEAN) == REDUCTION_MEAN)
    g = hlo_binary(b, "divide", g, tpu_lower_value(l, 6, n.in.dtype));
  const hlo_type* pt = &n.per_target;
  if (hlo_type_of(b, g)->rank == 0) g = hlo_broadcast_in_dim(b, g, pt->rank, pt->dims, NULL);
  hlo_value update = hlo_unary(b, "negate", hlo_binary(b, "multiply", g, n.picked_weight));
  hlo_type classes = n.in;
  classes.dtype = TPU_I64;
  hlo_value hit = hlo_binary(b, "and", hlo_compare(b, "EQ", hlo_iota(b, classes, n.class_dim),
                                                    across_classes(b, &n, n.target)),
                             across_classes(b, &n, n.valid));
  hlo_value spread = across_classes(b, &n, update);
  tpu_lower_set_output(l, 0, hlo_select(b, hit, spread, filled(b, &n.in, 0)));
  return NULL;
}

/* ---- multi_margin_loss ---- */

/* A multi_margin_loss call seen as [N, C] samples by classes. Arguments,
 * from `self`: self ([N, C] or [C]), target, p (1 or 2, compiled in),
 * margin, weight, reduction. A target outside [0, C) counts nothing. */
typedef struct margins {
  hlo_type in;      /* [N, C] in the compute dtype */
  hlo_value other;  /* bool [N, C]: not the sample's target class */
  hlo_value z;      /* [N, C]: margin - x[target] + x[j] */
  hlo_value weight; /* [N]: weight[target] (or 1) / C, 0 for a target out of range */
  double p;
} margins;

static margins margins_of(tpu_lowering* l, int self) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type given = tpu_lower_arg_type(l, self);
  int64_t classes = given.rank == 0 ? 1 : given.dims[given.rank - 1];
  int64_t n = classes ? hlo_type_numel(&given) / classes : 0;
  margins m = {hlo_type_make(tpu_dtype_compute(given.dtype), 2, (int64_t[]){n, classes}), HLO_INVALID, HLO_INVALID,
               HLO_INVALID, tpu_lower_scalar_constant(l, self + 2)};
  hlo_value x = hlo_reshape(b, tpu_lower_value(l, self, m.in.dtype), 2, m.in.dims);
  hlo_value target = hlo_reshape(b, hlo_convert(b, tpu_lower_tensor(l, self + 1), TPU_I64), 1, &n);
  hlo_value valid = hlo_binary(b, "and", hlo_compare(b, "GE", target, hlo_constant_like(b, target, 0)),
                               hlo_compare(b, "LT", target, hlo_constant_like(b, target, (double)classes)));
  target = hlo_select(b, valid, target, hlo_constant_like(b, target, 0));
  hlo_value target_x = n ? hlo_gather_elements(b, x, 1, hlo_reshape(b, target, 2, (int64_t[]){n, 1}))
                        : hlo_filled(b, m.in.dtype, 2, (int64_t[]){0, 1}, 0); /* XLA rejects gathering from none */
  hlo_value margin = hlo_broadcast_in_dim(b, tpu_lower_value(l, self + 3, m.in.dtype), 2, m.in.dims, NULL);
  m.z = hlo_binary(b, "add", hlo_binary(b, "subtract", margin, hlo_broadcast_to(b, target_x, 2, m.in.dims)), x);
  hlo_value class_ids = hlo_iota(b, hlo_type_make(TPU_I64, 2, m.in.dims), 1);
  m.other = hlo_compare(b, "NE", class_ids, hlo_broadcast_in_dim(b, target, 2, m.in.dims, (int64_t[]){0}));
  hlo_value weight = hlo_filled(b, m.in.dtype, 1, &n, 1);
  if (!tpu_lower_is_none(l, self + 4)) weight = hlo_take(b, tpu_lower_value(l, self + 4, m.in.dtype), 0, target);
  weight = hlo_binary(b, "divide", weight, hlo_constant_like(b, weight, (double)classes));
  m.weight = hlo_select(b, valid, weight, hlo_constant_like(b, weight, 0));
  return m;
}

/* multi_margin_loss(self, target, p, margin, weight, reduction): per
 * sample, the sum over the other classes of max(0, z)^p times
 * weight[target] / C, as ATen's kernels. */
static tpu_status lower_multi_margin(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  margins m = margins_of(l, 0);
  hlo_value zero = hlo_constant_like(b, m.z, 0);
  hlo_value counted = hlo_binary(b, "and", m.other, hlo_compare(b, "GT", m.z, zero));
  hlo_value h = hlo_select(b, counted, m.p == 1 ? m.z : hlo_binary(b, "multiply", m.z, m.z), zero);
  hlo_value loss = hlo_binary(b, "multiply", hlo_reduce(b, h, hlo_constant(b, m.in.dtype, 0), "add", (int64_t[]){1}, 1),
                              m.weight);
  int64_t reduction = tpu_lower_int(l, 5, REDUCTION_MEAN);
  if (reduction != REDUCTION_NONE) loss = sum_all(b, loss);
  if (reduction == REDUCTION_MEAN) loss = hlo_binary(b, "divide", loss, hlo_constant(b, m.in.dtype, (double)m.in.dims[0]));
  hlo_type out = tpu_lower_output_type(l, 0);
  tpu_lower_set_output(l, 0, hlo_reshape(b, loss, out.rank, out.dims));
  return NULL;
}

/* multi_margin_loss_backward(grad, self, target, p, margin, weight,
 * reduction): each counted class gets the sample's scaled gradient times
 * dz^p/dz, and the target class minus their sum. */
static tpu_status lower_multi_margin_backward(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  margins m = margins_of(l, 1);
  int64_t n = m.in.dims[0];
  hlo_value g = tpu_lower_value(l, 0, m.in.dtype);
  int64_t reduction = tpu_lower_int(l, 6, REDUCTION_MEAN);
  if (reduction == REDUCTION_MEAN) g = hlo_binary(b, "divide", g, hlo_constant_like(b, g, (double)n));
  /* One gradient per sample ('none') or one for all. */
  g = reduction == REDUCTION_NONE ? hlo_reshape(b, g, 1, &n) : hlo_broadcast_in_dim(b, g, 1, &n, NULL);
  g = hlo_binary(b, "multiply", g, m.weight);
  hlo_value zero = hlo_constant_like(b, m.z, 0);
  hlo_value counted = hlo_binary(b, "and", m.other, hlo_compare(b, "GT", m.z, zero));
  hlo_value slope = m.p == 1 ? hlo_constant_like(b, m.z, 1) : hlo_binary(b, "multiply", hlo_constant_like(b, m.z, 2), m.z);
  hlo_value d = hlo_select(b, counted, hlo_binary(b, "multiply", slope, hlo_broadcast_in_dim(b, g, 2, m.in.dims, (int64_t[]){0})),
                           zero);
  hlo_value total = hlo_reduce(b, d, hlo_constant(b, m.in.dtype, 0), "add", (int64_t[]){1}, 1);
  hlo_value own = hlo_select(b, m.other, zero, hlo_broadcast_in_dim(b, total, 2, m.in.dims, (int64_t[]){0}));
  hlo_type out = tpu_lower_output_type(l, 0);
  tpu_lower_set_output(l, 0, hlo_reshape(b, hlo_binary(b, "subtract", d, own), out.rank, out.dims));
  return NULL;
}

/* ---- multilabel_margin_loss ---- */

/* A multilabel_margin_loss call seen as [N, C] samples by classes (self
 * [C] or 0-d is one sample); each sample's target row lists its classes
 * up to the first negative entry. Built as [N, C, C] comparisons of entry
 * j against class i, C^2 work per sample as ATen's kernels do, with
 * selects rather than gathers so an empty batch needs no special case. */
typedef struct multilabel {
  hlo_type in;         /* [N, C] in the compute dtype */
  hlo_value picks;     /* bool [N, C, C]: entry j comes before the first negative one and names class i */
  hlo_value is_target; /* bool [N, C]: class i is listed */
  hlo_value counted;   /* bool [N, C, C]: entry j listed, class i not, and z > 0 */
  hlo_value z;         /* [N, C, C]: 1 - x[class of entry j] + x[i] */
} multilabel;

/* Arguments from `self`: self, target; is_target the backward's argument
 * (the forward's result), or -1 to find the targets from the entries. */
static multilabel multilabel_of(tpu_lowering* l, int self, int is_target) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type given = tpu_lower_arg_type(l, self);
  int64_t n = given.rank == 2 ? given.dims[0] : 1, classes = given.rank == 0 ? 1 : given.dims[given.rank - 1];
  int64_t cube[3] = {n, classes, classes}, rows[2] = {0, 1}, columns[2] = {0, 2}, per_sample = 0, entries = 1;
  multilabel m = {hlo_type_make(tpu_dtype_compute(given.dtype), 2, (int64_t[]){n, classes}), HLO_INVALID,
                  HLO_INVALID, HLO_INVALID, HLO_INVALID};
  hlo_value x = hlo_reshape(b, tpu_lower_value(l, self, m.in.dtype), 2, m.in.dims);
  hlo_value target = hlo_reshape(b, hlo_convert(b, tpu_lower_tensor(l, self + 1), TPU_I64), 2, m.in.dims);
  hlo_value entry = hlo_iota(b, hlo_type_make(TPU_I64, 2, m.in.dims), 1);
  hlo_value past = hlo_filled(b, TPU_I64, 2, m.in.dims, (double)classes);
  hlo_value negative = hlo_compare(b, "LT", target, hlo_constant_like(b, target, 0));
  hlo_value end = hlo_reduce(b, hlo_select(b, negative, entry, past), hlo_constant_i64(b, TPU_I64, classes), "minimum",
                             &entries, 1);
  hlo_value listed = hlo_compare(b, "LT", entry, hlo_broadcast_in_dim(b, end, 2, m.in.dims, &per_sample));
  hlo_value names = hlo_compare(b, "EQ", hlo_broadcast_in_dim(b, target, 3, cube, rows),
                                hlo_iota(b, hlo_type_make(TPU_I64, 3, cube), 2));
  m.picks = hlo_binary(b, "and", names, hlo_broadcast_in_dim(b, listed, 3, cube, rows));
  if (is_target < 0) {
    m.is_target = hlo_reduce(b, m.picks, hlo_constant(b, TPU_BOOL, 0), "or", &entries, 1);
  } else {
    hlo_value given_targets = hlo_reshape(b, tpu_lower_value(l, is_target, m.in.dtype), 2, m.in.dims);
    m.is_target = hlo_compare(b, "NE", given_targets, hlo_constant_like(b, given_targets, 0));
  }
  hlo_value x_i = hlo_broadcast_in_dim(b, x, 3, cube, columns), zero = hlo_constant_like(b, x_i, 0);
  int64_t class_dim = 2;
  hlo_value x_entry = hlo_reduce(b, hlo_select(b, m.picks, x_i, zero), hlo_constant(b, m.in.dtype, 0), "add",
                                 &class_dim, 1);
  hlo_value one_less = hlo_binary(b, "subtract", hlo_constant_like(b, x_entry, 1), x_entry);
  m.z = hlo_binary(b, "add", hlo_broadcast_in_dim(b, one_less, 3, cube, rows), x_i);
  hlo_value other = hlo_unary(b, "not", hlo_broadcast_in_dim(b, m.is_target, 3, cube, columns));
  m.counted = hlo_binary(b, "and", hlo_binary(b, "and", hlo_broadcast_in_dim(b, listed, 3, cube, rows), other),
                         hlo_compare(b, "GT", m.z, zero));
  return m;
}

/* multilabel_margin_loss_forward(self, target, reduction) -> (output,
 * is_target): per sample, the sum of the counted z over C; 'none' of one
 * sample is 0-d, as ATen makes it. */
static tpu_status lower_multilabel_margin(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  multilabel m = multilabel_of(l, 0, -1);
  int64_t pairs[2] = {1, 2};
  hlo_value loss = hlo_reduce(b, hlo_select(b, m.counted, m.z, hlo_constant_like(b, m.z, 0)),
                              hlo_constant(b, m.in.dtype, 0), "add", pairs, 2);
  int64_t reduction = tpu_lower_int(l, 2, REDUCTION_MEAN);
  if (reduction != REDUCTION_NONE) loss = sum_all(b, loss);
  loss = hlo_binary(b, "divide", loss, hlo_constant_like(b, loss, (double)m.in.dims[1]));
  if (reduction == REDUCTION_MEAN) loss = hlo_binary(b, "divide", loss, hlo_constant_like(b, loss, (double)m.in.dims[0]));
  hlo_type out = tpu_lower_output_type(l, 0), targets = tpu_lower_output_type(l, 1);
  tpu_lower_set_output(l, 0, hlo_reshape(b, loss, out.rank, out.dims));
  tpu_lower_set_output(l, 1, hlo_reshape(b, hlo_convert(b, m.is_target, m.in.dtype), targets.rank, targets.dims));
  return NULL;
}

/* multilabel_margin_loss_backward(grad, self, target, reduction,
 * is_target): each counted pair adds the sample's scaled gradient to
 * class i and takes it from the entry's class. */
static tpu_status lower_multilabel_margin_backward(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  multilabel m = multilabel_of(l, 1, 4);
  int64_t n = m.in.dims[0], classes = m.in.dims[1], cube[3] = {n, classes, classes}, rows[2] = {0, 1};
  int64_t entry_dim = 1, class_dim = 2, per_sample = 0;
  hlo_value zero = hlo_constant(b, m.in.dtype, 0), zeros = hlo_constant_like(b, m.z, 0);
  hlo_value counts = hlo_select(b, m.counted, hlo_constant_like(b, m.z, 1), zeros);
  hlo_value gained = hlo_reduce(b, counts, zero, "add", &entry_dim, 1);
  hlo_value per_entry = hlo_broadcast_in_dim(b, hlo_reduce(b, counts, zero, "add", &class_dim, 1), 3, cube, rows);
  hlo_value lost = hlo_reduce(b, hlo_select(b, m.picks, per_entry, zeros), zero, "add", &entry_dim, 1);
  bool mean = tpu_lower_int(l, 3, REDUCTION_MEAN) == REDUCTION_MEAN;
  hlo_value g = tpu_lower_value(l, 0, m.in.dtype);
  /* One gradient per sample ('none' of a batch) or one for all. */
  g = hlo_type_of(b, g)->rank ? hlo_broadcast_in_dim(b, hlo_reshape(b, g, 1, &n), 2, m.in.dims, &per_sample)
                              : hlo_broadcast_in_dim(b, g, 2, m.in.dims, NULL);
  g = hlo_binary(b, "multiply", g, hlo_constant_like(b, g, 1.0 / (double)(mean ? n * classes : classes)));
  hlo_type out = tpu_lower_output_type(l, 0);
  hlo_value grad = hlo_binary(b, "multiply", hlo_binary(b, "subtract", gained, lost), g);
  tpu_lower_set_output(l, 0, hlo_reshape(b, grad, out.rank, out.dims));
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"binary_cross_entropy", lower_pointwise, 0},
    {"binary_cross_entropy_backward", lower_pointwise, 0},
    {"binary_cross_entropy_with_logits", lower_pointwise, 0},
    {"huber_loss", lower_pointwise, 0},
    {"huber_loss_backward", lower_pointwise, 0},
    {"mse_loss", lower_pointwise, 0},
    {"mse_loss_backward", lower_pointwise, 0},
    {"multi_margin_loss", lower_multi_margin, TPU_OP_SCALARS_IN_KEY},
    {"multi_margin_loss_backward", lower_multi_margin_backward, TPU_OP_SCALARS_IN_KEY},
    {"multilabel_margin_loss_backward", lower_multilabel_margin_backward, 0},
    {"multilabel_margin_loss_forward", lower_multilabel_margin, 0},
    {"nll_loss2d_backward", lower_nll_backward, 0},
    {"nll_loss2d_forward", lower_nll_forward, 0},
    {"nll_loss_backward", lower_nll_backward, 0},
    {"nll_loss_forward", lower_nll_forward, 0},
    {"smooth_l1_loss", lower_pointwise, 0},
    {"smooth_l1_loss_backward", lower_pointwise, 0},
};

TPU_OP_FAMILY(tpu_ops_loss, entries);
