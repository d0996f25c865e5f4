/* Activation lowerings and their backwards: relu, threshold, gelu, silu,
 * softplus, leaky_relu, elu (also selu and celu), hardtanh (also relu6),
 * hardswish, hardsigmoid, mish, log_sigmoid, hardshrink, softshrink, prelu,
 * logit (sigmoid's inverse), glu, and the backwards of sigmoid and tanh, whose
 * forwards are elementwise.c's.
 *
 * Formulas follow ATen's CPU kernels, down to which side of a boundary a
 * tie falls on (hardswish_backward at exactly -3 and 3). Float16/bfloat16
 * compute in float32 and exec/ rounds the result. silu_backward and
 * mish_backward need no lowering: PyTorch decomposes them into ops that
 * have one (they are CompositeImplicitAutograd). */
#include <math.h>
#include <string.h>

#include "hlo/elementwise_extra_ops.h"
#include "ops/families.h"

/* What every activation works with: the output's shape in the dtype it
 * computes in. Tensor and scalar arguments are read in that type. */
typedef struct act {
  tpu_lowering* l;
  hlo_builder* b;
  hlo_type type;
} act;

static act act_of(tpu_lowering* l) {
  act a = {l, tpu_lower_builder(l), tpu_lower_output_type(l, 0)};
  a.type.dtype = tpu_dtype_compute(a.type.dtype);
  return a;
}

/* Argument i (a tensor or a runtime scalar) in the activation's type. */
static hlo_value arg(act* a, int i) { return tpu_lower_value_as(a->l, i, &a->type); }

static hlo_value k(act* a, double value) {
  hlo_value c = hlo_constant(a->b, a->type.dtype, value);
  return hlo_broadcast_in_dim(a->b, c, a->type.rank, a->type.dims, NULL);
}

static hlo_value add(act* a, hlo_value x, hlo_value y) { return hlo_binary(a->b, "add", x, y); }
static hlo_value sub(act* a, hlo_value x, hlo_value y) {
  return hlo_binary(a->b, "subtract", x, y);
}
static hlo_value mul(act* a, hlo_value x, hlo_value y) {
  return hlo_binary(a->b, "multiply", x, y);
}
static hlo_value divide(act* a, hlo_value x, hlo_value y) {
  return hlo_binary(a->b, "divide", x, y);
}
static hlo_value fn(act* a, const char* op, hlo_value x) { return hlo_unary(a->b, op, x); }
static hlo_value sel(act* a, hlo_value pred, hlo_value x, hlo_value y) {
  return hlo_select(a->b, pred, x, y);
}
static hlo_value cmp(act* a, const char* direction, hlo_value x, hlo_value y) {
  return hlo_compare(a->b, direction, x, y);
}
static hlo_value cmp_k(act* a, const char* direction, hlo_value x, double c) {
  return hlo_compare(a->b, direction, x, k(a, c));
}
static hlo_value both(act* a, hlo_value p, hlo_value q) { return hlo_binary(a->b, "and", p, q); }

/* min(max(x, lo), hi) where NaN propagates, as ATen's clamp. */
static hlo_value clamp(act* a, hlo_value x, hlo_value lo, hlo_value hi) {
  return hlo_min_max(a->b, "minimum", hlo_min_max(a->b, "maximum", x, lo, true), hi, true);
}

/* ---- forwards ---- */

static hlo_value relu(act* a) { return hlo_min_max(a->b, "maximum", arg(a, 0), k(a, 0), true); }

/* threshold(self, threshold, value): x <= threshold ? value : x. */
static hlo_value threshold(act* a) {
  hlo_value x = arg(a, 0);
  return sel(a, cmp(a, "LE", x, arg(a, 1)), arg(a, 2), x);
}

/* The tanh approximation's inner term sqrt(2/pi) * (x + 0.044715 x^3). */
static const double gelu_beta = 0.79788456080286535588, gelu_kappa = 0.044715;

/* The approximate= argument of gelu and gelu_backward: "none" or "tanh";
 * NULL (with the error recorded) for anything else. */
static const char* gelu_mode(act* a, int index) {
  const char* mode = tpu_lower_string(a->l, index, "none");
  if (strcmp(mode, "none") && strcmp(mode, "tanh")) {
    tpu_lower_fail(a->l, TPU_INVALID_ARGUMENT,
                   "aten::%s: approximate must be 'none' or 'tanh', not '%s'",
                   tpu_lower_op_name(a->l), mode);
    return NULL;
  }
  return mode;
}

static hlo_value gelu(act* a) {
  const char* mode = gelu_mode(a, 1);
  if (!mode) return HLO_INVALID;
  hlo_value x = arg(a, 0), half_x = mul(a, x, k(a, 0.5));
  hlo_value inner;
  if (!strcmp(mode, "tanh")) {
    hlo_value cube = mul(a, mul(a, x, x), x);
    inner = fn(a, "tanh", mul(a, k(a, gelu_beta), add(a, x, mul(a, k(a, gelu_kappa), cube))));
  } else {
    inner = hlo_erf(a->b, mul(a, x, k(a, M_SQRT1_2)));
  }
  return mul(a, half_x, add(a, k(a, 1), inner));
}

/* x / (1 + exp(-x)), ATen's form. */
static hlo_value silu(act* a) {
  hlo_value x = arg(a, 0);
  return divide(a, x, add(a, k(a, 1), fn(a, "exponential", fn(a, "negate", x))));
}

/* softplus(self, beta, threshold): x where x*beta > threshold, else
 * log1p(exp(x*beta)) / beta. */
static hlo_value softplus(act* a) {
  hlo_value x = arg(a, 0), beta = arg(a, 1), xb = mul(a, x, beta);
  hlo_value smooth = divide(a, fn(a, "log_plus_one", fn(a, "exponential", xb)), beta);
  return sel(a, cmp(a, "GT", xb, arg(a, 2)), x, smooth);
}

static hlo_value leaky_relu(act* a) {
  hlo_value x = arg(a, 0);
  return sel(a, cmp_k(a, "GT", x, 0), x, mul(a, x, arg(a, 1)));
}

/* elu(self, alpha, scale, input_scale): x <= 0 ? expm1(x * input_scale) *
 * alpha * scale : x * scale. */
static hlo_value elu(act* a) {
  hlo_value x = arg(a, 0), scale = arg(a, 2);
  hlo_value neg = fn(a, "exponential_minus_one", mul(a, x, arg(a, 3)));
  neg = mul(a, neg, mul(a, arg(a, 1), scale));
  return sel(a, cmp_k(a, "LE", x, 0), neg, mul(a, x, scale));
}

static hlo_value hardtanh(act* a) { return clamp(a, arg(a, 0), arg(a, 1), arg(a, 2)); }

/* clamp(x + 3, 0, 6) / 6, hardsigmoid itself and a factor of hardswish. */
static hlo_value relu6_sixth(act* a, hlo_value x) {
  return divide(a, clamp(a, add(a, x, k(a, 3)), k(a, 0), k(a, 6)), k(a, 6));
}

static hlo_value hardsigmoid(act* a) { return relu6_sixth(a, arg(a, 0)); }

static hlo_value hardswish(act* a) {
  hlo_value x = arg(a, 0);
  return mul(a, x, relu6_sixth(a, x));
}

static hlo_value mish(act* a) {
  hlo_value x = arg(a, 0);
  return mul(a, x, fn(a, "tanh", fn(a, "log_plus_one", fn(a, "exponential", x))));
}

/* -lambd <= x <= lambd: where hardshrink and softshrink give 0. */
static hlo_value in_band(act* a, hlo_value x, hlo_value lambd) {
  return both(a, cmp(a, "GE", x, fn(a, "negate", lambd)), cmp(a, "LE", x, lambd));
}

static hlo_value hardshrink(act* a) {
  hlo_value x = arg(a, 0);
  return sel(a, in_band(a, x, arg(a, 1)), k(a, 0), x);
}

/* x - lambd above the band, x + lambd below, x * 0 inside (NaN stays NaN). */
static hlo_value softshrink(act* a) {
  hlo_value x = arg(a, 0), lambd = arg(a, 1);
  hlo_value inside = sel(a, cmp(a, "LT", x, fn(a, "negate", lambd)), add(a, x, lambd),
                         mul(a, x, k(a, 0)));
  return sel(a, cmp(a, "GT", x, lambd), sub(a, x, lambd), inside);
}

/* _prelu_kernel(self, weight): weight arrives broadcastable to self. */
static hlo_value prelu(act* a) {
  hlo_value x = arg(a, 0);
  return sel(a, cmp_k(a, "GT", x, 0), x, mul(a, arg(a, 1), x));
}

/* ---- backwards: (grad_output, input or result, options...) ---- */

static hlo_value threshold_backward(act* a) {
  return sel(a, cmp(a, "LE", arg(a, 1), arg(a, 2)), k(a, 0), arg(a, 0));
}

/* d/dx of gelu: Phi(x) + x phi(x), or the tanh form's product rule. */
static hlo_value gelu_backward(act* a) {
  const char* mode = gelu_mode(a, 2);
  if (!mode) return HLO_INVALID;
  hlo_value g = arg(a, 0), x = arg(a, 1), x2 = mul(a, x, x);
  hlo_value d;
  if (!strcmp(mode, "tanh")) {
    hlo_value inner = mul(a, k(a, gelu_beta), add(a, x, mul(a, k(a, gelu_kappa), mul(a, x2, x))));
    hlo_value t = fn(a, "tanh", inner);
    hlo_value left = mul(a, k(a, 0.5), add(a, k(a, 1), t));
    hlo_value dinner = mul(a, k(a, gelu_beta), add(a, k(a, 1), mul(a, k(a, 3 * gelu_kappa), x2)));
    hlo_value dtanh = sub(a, k(a, 1), mul(a, t, t));
    d = add(a, left, mul(a, mul(a, mul(a, k(a, 0.5), x), dtanh), dinner));
  } else {
    hlo_value cdf = mul(a, k(a, 0.5), add(a, k(a, 1), hlo_erf(a->b, mul(a, x, k(a, M_SQRT1_2)))));
    hlo_value gauss = fn(a, "exponential", mul(a, x2, k(a, -0.5)));
    hlo_value pdf = mul(a, k(a, M_2_SQRTPI * M_SQRT1_2 * 0.5), gauss);
    d = add(a, cdf, mul(a, x, pdf));
  }
  return mul(a, g, d);
}

/* sigmoid_backward(grad, result) = grad * (1 - y) * y. */
static hlo_value sigmoid_backward(act* a) {
  hlo_value y = arg(a, 1);
  return mul(a, mul(a, arg(a, 0), sub(a, k(a, 1), y)), y);
}

/* logit(self, eps=None), the inverse of sigmoid: log(z / (1 - z)), with
 * z = x clamped to [eps, 1 - eps] when eps is given. */
static hlo_value logit(act* a) {
  double eps = tpu_lower_float(a->l, 1, -1.0);
  hlo_value z = arg(a, 0);
  if (eps >= 0) z = clamp(a, z, k(a, eps), k(a, 1 - eps));
  return fn(a, "log", divide(a, z, sub(a, k(a, 1), z)));
}

/* logit_backward(grad, self, eps=None) = grad / (x (1 - x)); outside
 * [eps, 1 - eps] it is 0, and without eps NaN outside [0, 1]. A NaN x
 * gives NaN either way, as in ATen. */
static hlo_value logit_backward(act* a) {
  double eps = tpu_lower_float(a->l, 2, -1.0);
  hlo_value x = arg(a, 1);
  hlo_value outside = hlo_binary(a->b, "or", cmp_k(a, "LT", x, eps < 0 ? 0 : eps),
                                 cmp_k(a, "GT", x, eps < 0 ? 1 : 1 - eps));
  hlo_value grad = divide(a, arg(a, 0), mul(a, x, sub(a, k(a, 1), x)));
  return sel(a, outside, k(a, eps < 0 ? NAN : 0), grad);
}

/* tanh_backward(grad, result) = grad * (1 - y^2). */
static hlo_value tanh_backward(act* a) {
  hlo_value y = arg(a, 1);
  return mul(a, arg(a, 0), sub(a, k(a, 1), mul(a, y, y)));
}

/* softplus_backward(grad, self, beta, threshold). */
static hlo_value softplus_backward(act* a) {
  hlo_value g = arg(a, 0), xb = mul(a, arg(a, 1), arg(a, 2));
  hlo_value z = fn(a, "exponential", xb);
  return sel(a, cmp(a, "GT", xb, arg(a, 3)), g, divide(a, mul(a, g, z), add(a, z, k(a, 1))));
}

/* leaky_relu_backward(grad, self, slope, self_is_result): the sign of the
 * result is the input's, so the flag changes nothing here. */
static hlo_value leaky_relu_backward(act* a) {
  hlo_value g = arg(a, 0);
  return sel(a, cmp_k(a, "GT", arg(a, 1), 0), g, mul(a, g, arg(a, 2)));
}

/* elu_backward(grad, alpha, scale, input_scale, is_result, self_or_result):
 * on the negative side the derivative is input_scale * (y + alpha * scale)
 * from the result, or input_scale * alpha * scale * exp(x * input_scale)
 * from the input. */
static hlo_value elu_backward(act* a) {
  hlo_value g = arg(a, 0), scale = arg(a, 2), input_scale = arg(a, 3), v = arg(a, 5);
  hlo_value neg_coef = mul(a, arg(a, 1), scale);
  hlo_value d = tpu_lower_bool(a->l, 4, false)
                    ? add(a, v, neg_coef)
                    : mul(a, neg_coef, fn(a, "exponential", mul(a, v, input_scale)));
  hlo_value neg = mul(a, mul(a, g, input_scale), d);
  return sel(a, cmp_k(a, "LE", v, 0), neg, mul(a, g, scale));
}

/* hardtanh_backward(grad, self, min, max): 0 at and beyond the bounds. */
static hlo_value hardtanh_backward(act* a) {
  hlo_value x = arg(a, 1);
  hlo_value low = cmp(a, "LE", x, arg(a, 2)), high = cmp(a, "GE", x, arg(a, 3));
  hlo_value outside = hlo_binary(a->b, "or", low, high);
  return sel(a, outside, k(a, 0), arg(a, 0));
}

/* 0 for x <= -3, grad * (x/3 + 1/2) for x < 3, grad beyond. */
static hlo_value hardswish_backward(act* a) {
  hlo_value g = arg(a, 0), x = arg(a, 1);
  hlo_value ramp = mul(a, g, add(a, divide(a, x, k(a, 3)), k(a, 0.5)));
  return sel(a, cmp_k(a, "LE", x, -3), k(a, 0), sel(a, cmp_k(a, "LT", x, 3), ramp, g));
}

static hlo_value hardsigmoid_backward(act* a) {
  hlo_value x = arg(a, 1);
  hlo_value inside = both(a, cmp_k(a, "GT", x, -3), cmp_k(a, "LT", x, 3));
  return sel(a, inside, divide(a, arg(a, 0), k(a, 6)), k(a, 0));
}

/* hardshrink/softshrink_backward(grad, self, lambd): 0 inside the band. */
static hlo_value shrink_backward(act* a) {
  return sel(a, in_band(a, arg(a, 1), arg(a, 2)), k(a, 0), arg(a, 0));
}

/* log_sigmoid_backward(grad, self, buffer): grad * (1 - z / (1 + z)) for
 * x < 0, grad * z / (1 + z) otherwise, with z = exp(-|x|) recomputed
 * rather than read from the buffer. */
static hlo_value log_sigmoid_backward(act* a) {
  hlo_value x = arg(a, 1), negative = cmp_k(a, "LT", x, 0);
  hlo_value z = fn(a, "exponential", fn(a, "negate", fn(a, "abs", x)));
  hlo_value ratio = divide(a, z, add(a, k(a, 1), z));
  return mul(a, arg(a, 0), sel(a, negative, sub(a, k(a, 1), ratio), ratio));
}

static const struct activation {
  const char* name;
  hlo_value (*lower)(act* a);
} activations[] = {
    {"_prelu_kernel", prelu},
    {"elu", elu},
    {"elu_backward", elu_backward},
    {"gelu", gelu},
    {"gelu_backward", gelu_backward},
    {"hardshrink", hardshrink},
    {"hardshrink_backward", shrink_backward},
    {"hardsigmoid", hardsigmoid},
    {"hardsigmoid_backward", hardsigmoid_backward},
    {"hardswish", hardswish},
    {"hardswish_backward", hardswish_backward},
    {"hardtanh", hardtanh},
    {"hardtanh_backward", hardtanh_backward},
    {"leaky_relu", leaky_relu},
    {"leaky_relu_backward", leaky_relu_backward},
    {"log_sigmoid_backward", log_sigmoid_backward},
    {"logit", logit},
    {"logit_backward", logit_backward},
    {"mish", mish},
    {"relu", relu},
    {"sigmoid_backward", sigmoid_backward},
    {"silu", silu},
    {"softplus", softplus},
    {"softplus_backward", softplus_backward},
    {"softshrink", softshrink},
    {"softshrink_backward", shrink_backward},
    {"tanh_backward", tanh_backward},
    {"threshold", threshold},
    {"threshold_backward", threshold_backward},
};

static tpu_status lower_activation(tpu_lowering* l) {
  const char* name = tpu_lower_op_name(l);
  for (size_t i = 0; i < sizeof activations / sizeof activations[0]; i++) {
    if (strcmp(activations[i].name, name)) continue;
    act a = act_of(l);
    tpu_lower_set_output(l, 0, activations[i].lower(&a));
    return NULL;
  }
  tpu_lower_fail(l, TPU_INTERNAL, "aten::%s is registered but missing from activations[]", name);
  return NULL;
}

/* log_sigmoid_forward(self) -> (output, buffer): min(x, 0) - log1p(z) and
 * z = exp(-|x|), the buffer ATen's CPU backward would read. */
static tpu_status lower_log_sigmoid_forward(tpu_lowering* l) {
  act a = act_of(l);
  hlo_value x = arg(&a, 0);
  hlo_value z = fn(&a, "exponential", fn(&a, "negate", fn(&a, "abs", x)));
  hlo_value low = hlo_binary(a.b, "minimum", x, k(&a, 0));
  tpu_lower_set_output(l, 0, sub(&a, low, fn(&a, "log_plus_one", z)));
  tpu_lower_set_output(l, 1, z);
  return NULL;
}

/* _prelu_kernel_backward(grad, self, weight) -> (grad_input, grad_weight),
 * both of the broadcast shape; autograd sums grad_weight to weight's. */
static tpu_status lower_prelu_backward(tpu_lowering* l) {
  act a = act_of(l);
  hlo_value g = arg(&a, 0), x = arg(&a, 1), positive = cmp_k(&a, "GT", x, 0);
  tpu_lower_set_output(l, 0, sel(&a, positive, g, mul(&a, arg(&a, 2), g)));
  tpu_lower_set_output(l, 1, sel(&a, positive, k(&a, 0), mul(&a, x, g)));
  return NULL;
}

/* glu's operand in its compute type, halved along its dim: half 0 is the
 * value, half 1 the gate. */
typedef struct glu_halves {
  hlo_value value, gate;
  int dim;
} glu_halves;

static glu_halves glu_split(tpu_lowering* l, int self, int dim_arg) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type t = tpu_lower_arg_type(l, self);
  tpu_dtype dtype = tpu_dtype_compute(t.dtype);
  hlo_value x = tpu_lower_value(l, self, dtype);
  int64_t dim = tpu_lower_int(l, dim_arg, -1);
  if (dim < 0) dim += t.rank;
  int64_t start[TPU_MAX_RANK] = {0}, limit[TPU_MAX_RANK], step[TPU_MAX_RANK];
  for (int d = 0; d < t.rank; d++) {
    limit[d] = t.dims[d];
    step[d] = 1;
  }
  glu_halves h = {HLO_INVALID, HLO_INVALID, (int)dim};
  limit[dim] = t.dims[dim] / 2; /* PyTorch's meta function has checked it is even */
  h.value = hlo_slice(b, x, start, limit, step);
  start[dim] = limit[dim];
  limit[dim] = t.dims[dim];
  h.gate = hlo_slice(b, x, start, limit, step);
  return h;
}

/* glu(self, dim): value * sigmoid(gate). */
static tpu_status lower_glu(tpu_lowering* l) {
  glu_halves h = glu_split(l, 0, 1);
  hlo_builder* b = tpu_lower_builder(l);
  tpu_lower_set_output(l, 0, hlo_binary(b, "multiply", h.value, hlo_unary(b, "logistic", h.gate)));
  return NULL;
}

/* glu_backward(grad_output, self, dim): the value's gradient g * s and the
 * gate's g * value * s * (1 - s), s = sigmoid(gate), side by side along dim.
 * ATen's CPU kernel keeps s in the tensor's dtype before using it (float16
 * and bfloat16 lose 1 - s near s = 1 there); so does this. */
static tpu_status lower_glu_backward(tpu_lowering* l) {
  glu_halves h = glu_split(l, 1, 2);
  hlo_builder* b = tpu_lower_builder(l);
  tpu_dtype compute = hlo_type_of(b, h.gate)->dtype;
  hlo_value s = hlo_unary(b, "logistic", h.gate);
  s = hlo_convert(b, hlo_convert(b, s, tpu_lower_output_type(l, 0).dtype), compute);
  hlo_value g = tpu_lower_value(l, 0, hlo_type_of(b, s)->dtype);
  hlo_value gs = hlo_binary(b, "multiply", g, s);
  hlo_value rest = hlo_binary(b, "subtract", hlo_constant_like(b, s, 1), s);
  hlo_value halves[2] = {gs, hlo_binary(b, "multiply", hlo_binary(b, "multiply", gs, h.value), rest)};
  tpu_lower_set_output(l, 0, hlo_concatenate(b, halves, 2, h.dim));
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"_prelu_kernel", lower_activation, 0},
    {"_prelu_kernel_backward", lower_prelu_backward, 0},
    {"elu", lower_activation, 0},
    {"elu_backward", lower_activation, 0},
    {"gelu", lower_activation, 0},
    {"gelu_backward", lower_activation, 0},
    {"glu", lower_glu, 0},
    {"glu_backward", lower_glu_backward, 0},
    {"hardshrink", lower_activation, 0},
    {"hardshrink_backward", lower_activation, 0},
    {"hardsigmoid", lower_activation, 0},
    {"hardsigmoid_backward", lower_activation, 0},
    {"hardswish", lower_activation, 0},
    {"hardswish_backward", lower_activation, 0},
    {"hardtanh", lower_activation, 0},
    {"hardtanh_backward", lower_activation, 0},
    {"leaky_relu", lower_activation, 0},
    {"leaky_relu_backward", lower_activation, 0},
    {"log_sigmoid_backward", lower_activation, 0},
    {"log_sigmoid_forward", lower_log_sigmoid_forward, 0},
    {"logit", lower_activation, 0},
    {"logit_backward", lower_activation, 0},
    {"mish", lower_activation, 0},
    {"relu", lower_activation, 0},
    {"sigmoid_backward", lower_activation, 0},
    {"silu", lower_activation, TPU_OP_COMPLEX},
    {"softplus", lower_activation, 0},
    {"softplus_backward", lower_activation, 0},
    {"softshrink", lower_activation, 0},
    {"softshrink_backward", lower_activation, 0},
    {"tanh_backward", lower_activation, 0},
    {"threshold", lower_activation, 0},
    {"threshold_backward", lower_activation, 0},
};

TPU_OP_FAMILY(tpu_ops_activation, entries);
