/* Orthogonal polynomials P_n(x) (torch.special): Chebyshev T, U, V, W and
 * their shifted forms on [0, 1], physicists' and probabilists' Hermite,
 * Laguerre and Legendre. x and n broadcast; n is cut to an integer per
 * element (toward zero; NaN, inf and values past int64 count as negative).
 * Each follows PyTorch's CPU kernel case by case: 0 for n < 0, fixed
 * values at the ends of the interval, cos/sin of n acos(y) for the
 * Chebyshev kinds inside the interval past a small n, and otherwise the
 * three-term recurrence P_{k+1} = (m_k P_k - c_k P_{k-1}) / d_k from P_0 = 1.
 * The recurrence is one while loop to the largest n that needs it, a
 * runtime value, so a new n does not recompile; elements with a smaller n
 * keep their value once they reach it. The CPU stops an element's loop at
 * a NaN, which a NaN would stay anyway. float32 and float64 (integers
 * compute in float32); float16, bfloat16 and complex are refused as on the
 * CPU. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hlo/elementwise_extra_ops.h"
#include "hlo/loop_ops.h"
#include "ops/families.h"

/* |P_n| at an end of the interval: 1, n + 1 or 2n + 1. */
typedef enum end_value { END_NONE, END_ONE, END_N_PLUS_1, END_2N_PLUS_1 } end_value;

/* Which of cos(n t), sin((n+1) t) / sin t, cos((n+1/2) t) / cos(t/2),
 * sin((n+1/2) t) / sin(t/2) (t = acos y) the Chebyshev kind takes. */
typedef enum chebyshev_kind { NOT_CHEBYSHEV, KIND_T, KIND_U, KIND_V, KIND_W } chebyshev_kind;

typedef struct polynomial {
  const char* name;         /* ATen base name */
  chebyshev_kind kind;      /* the trigonometric form, if any */
  bool shifted;             /* y = 2x - 1 (computed as x + x - 1), else y = x */
  int trig_above;           /* trigonometric form for n > this and |y| < 1 */
  double upper_at, lower_at; /* x at the ends: 1 and -1 (0 when shifted); Laguerre's 0 */
  end_value upper, lower;   /* P_n there (the lower end's sign alternates with n) */
  bool hermite_limit;       /* NaN past n = 128 (float32) or 512 (float64) */
  double p1_scale, p1_shift; /* P_1 = scale y + shift */
  double u_scale, u_shift;   /* u = scale y + shift, the recurrence's variable */
  int m_k, m_1, m_add;      /* m_k = (m_k k + m_1) u + m_add k */
  int c_k, c_1;             /* c_k = c_k k + c_1 */
  bool over_k_plus_1;       /* d_k = k + 1, else 1 */
} polynomial;

/* The Chebyshev kinds' recurrence, P_{k+1} = 2y P_k - P_{k-1}. */
#define CHEBYSHEV_RECURRENCE .u_scale = 2, .m_1 = 1, .c_1 = 1

static const polynomial polynomials[] = {
    {.name = "special_chebyshev_polynomial_t", .kind = KIND_T, .trig_above = 6, .upper_at = 1, .lower_at = -1,
     .upper = END_ONE, .lower = END_ONE, .p1_scale = 1, CHEBYSHEV_RECURRENCE},
    {.name = "special_chebyshev_polynomial_u", .kind = KIND_U, .trig_above = 8, .upper_at = 1, .lower_at = -1,
     .upper = END_N_PLUS_1, .lower = END_N_PLUS_1, .p1_scale = 2, CHEBYSHEV_RECURRENCE},
    {.name = "special_chebyshev_polynomial_v", .kind = KIND_V, .trig_above = 8, .upper_at = 1, .lower_at = -1,
     .upper = END_ONE, .lower = END_2N_PLUS_1, .p1_scale = 2, .p1_shift = -1, CHEBYSHEV_RECURRENCE},
    {.name = "special_chebyshev_polynomial_w", .kind = KIND_W, .trig_above = 8, .upper_at = 1, .lower_at = -1,
     .upper = END_2N_PLUS_1, .lower = END_ONE, .p1_scale = 2, .p1_shift = 1, CHEBYSHEV_RECURRENCE},
    /* H_{k+1} = 2x H_k - 2k H_{k-1} */
    {.name = "special_hermite_polynomial_h", .hermite_limit = true, .p1_scale = 2, .u_scale = 2, .m_1 = 1, .c_k = 2},
    /* He_{k+1} = x He_k - k He_{k-1} */
    {.name = "special_hermite_polynomial_he", .hermite_limit = true, .p1_scale = 1, .u_scale = 1, .m_1 = 1,
     .c_k = 1},
    /* L_{k+1} = ((2k + (1 - x)) L_k - k L_{k-1}) / (k + 1); L_n(0) = 1 */
    {.name = "special_laguerre_polynomial_l", .upper_at = 0, .upper = END_ONE, .p1_scale = -1, .p1_shift = 1,
     .u_scale = -1, .u_shift = 1, .m_1 = 1, .m_add = 2, .c_k = 1, .over_k_plus_1 = true},
    /* P_{k+1} = ((2k + 1) x P_k - k P_{k-1}) / (k + 1) */
    {.name = "special_legendre_polynomial_p", .upper_at = 1, .lower_at = -1, .upper = END_ONE, .lower = END_ONE,
     .p1_scale = 1, .u_scale = 1, .m_k = 2, .m_1 = 1, .c_k = 1, .over_k_plus_1 = true},
    {.name = "special_shifted_chebyshev_polynomial_t", .kind = KIND_T, .shifted = true, .trig_above = 6,
     .upper_at = 1, .lower_at = 0, .upper = END_ONE, .lower = END_ONE, .p1_scale = 1, CHEBYSHEV_RECURRENCE},
    {.name = "special_shifted_chebyshev_polynomial_u", .kind = KIND_U, .shifted = true, .trig_above = 6,
     .upper_at = 1, .lower_at = 0, .upper = END_N_PLUS_1, .lower = END_N_PLUS_1, .p1_scale = 2,
     CHEBYSHEV_RECURRENCE},
    {.name = "special_shifted_chebyshev_polynomial_v", .kind = KIND_V, .shifted = true, .trig_above = 6,
     .upper_at = 1, .lower_at = 0, .upper = END_ONE, .lower = END_2N_PLUS_1, .p1_scale = 2, .p1_shift = -1,
     CHEBYSHEV_RECURRENCE},
    {.name = "special_shifted_chebyshev_polynomial_w", .kind = KIND_W, .shifted = true, .trig_above = 4,
     .upper_at = 1, .lower_at = 0, .upper = END_2N_PLUS_1, .lower = END_ONE, .p1_scale = 2, .p1_shift = 1,
     CHEBYSHEV_RECURRENCE},
};

static hlo_value and_(hlo_builder* b, hlo_value x, hlo_value y) { return hlo_binary(b, "and", x, y); }

/* a n + c for an i64 value n, converted to float type `t`. */
static hlo_value affine(hlo_builder* b, hlo_value n, int64_t a, int64_t c, tpu_dtype t) {
  hlo_value v = a == 1 ? n : hlo_binary(b, "multiply", n, hlo_constant_like(b, n, (double)a));
  if (c) v = hlo_binary(b, "add", v, hlo_constant_like(b, v, (double)c));
  return hlo_convert(b, v, t);
}

/* scale y + shift for a scale of 1, 2 or -1, formed as the CPU forms it
 * (y + y, -y) so P_1 rounds the same. */
static hlo_value linear(hlo_builder* b, hlo_value y, double scale, double shift) {
  if (scale == 2)
    y = hlo_binary(b, "add", y, y);
  else if (scale == -1)
    y = hlo_unary(b, "negate", y);
  return shift ? hlo_binary(b, "add", y, hlo_constant_like(b, y, shift)) : y;
}

/* The value at an end: `which` of 1, n + 1, 2n + 1 (in float type t), with
 * the sign of (-1)^n when `alternating`. */
static hlo_value end_value_of(hlo_builder* b, end_value which, hlo_value n, bool alternating, tpu_dtype t) {
  hlo_value v = which == END_N_PLUS_1 ? affine(b, n, 1, 1, t) : which == END_2N_PLUS_1 ? affine(b, n, 2, 1, t)
                                                                                      : affine(b, n, 0, 1, t);
  if (!alternating) return v;
  hlo_value odd = hlo_compare_constant(b, "NE", hlo_binary(b, "remainder", n, hlo_constant_like(b, n, 2)), 0);
  return hlo_select(b, odd, hlo_unary(b, "negate", v), v);
}

/* The Chebyshev kinds' trigonometric form at y (|y| < 1) for degree n. */
static hlo_value trigonometric(hlo_builder* b, const polynomial* p, hlo_value x, hlo_value y, hlo_value n,
                               tpu_dtype t) {
  hlo_value theta = hlo_acos(b, y), nf = hlo_convert(b, n, t);
  hlo_value half = hlo_binary(b, "multiply", theta, hlo_constant_like(b, theta, 0.5));
  hlo_value n_half = hlo_binary(b, "add", nf, hlo_constant_like(b, nf, 0.5)); /* n + 1/2 */
  switch (p->kind) {
  case KIND_T:
    return hlo_unary(b, "cosine", hlo_binary(b, "multiply", nf, theta));
  case KIND_U: {
    hlo_value n1 = affine(b, n, 1, 1, t), angle = hlo_binary(b, "multiply", n1, theta);
    hlo_value s = hlo_unary(b, "sine", theta);
    hlo_value at_end = hlo_binary(b, "divide", hlo_binary(b, "multiply", n1, hlo_unary(b, "cosine", angle)), y);
    return hlo_select(b, hlo_compare_constant(b, "NE", s, 0),
                      hlo_binary(b, "divide", hlo_unary(b, "sine", angle), s), at_end);
  }
  case KIND_V: {
    hlo_value v = hlo_binary(b, "divide", hlo_unary(b, "cosine", hlo_binary(b, "multiply", n_half, theta)),
                             hlo_unary(b, "cosine", half));
    return hlo_select(b, hlo_compare_constant(b, "NE", hlo_unary(b, "sine", half), 1), v,
                      end_value_of(b, p->lower, n, true, t));
  }
  default: { /* KIND_W; where cos(t/2) rounds to 1 the CPU takes an end's value */
    hlo_value w = hlo_binary(b, "divide", hlo_unary(b, "sine", hlo_binary(b, "multiply", n_half, theta)),
                             hlo_unary(b, "sine", half));
    hlo_value end = end_value_of(b, p->lower, n, true, t);
    if (!p->shifted)
      end = hlo_select(b, hlo_compare_constant(b, "GT", x, 0), end_value_of(b, p->upper, n, false, t), end);
    return hlo_select(b, hlo_compare_constant(b, "NE", hlo_unary(b, "cosine", half), 1), w, end);
  }
  }
}

/* Carried through the loop. */
enum { PREVIOUS, CURRENT, DEGREE, VARIABLE, CARRIED };

/* One recurrence step, k = step + 1: P_{k+1} from P_k (CURRENT) and
 * P_{k-1} (PREVIOUS) where k < n; other elements keep theirs. */
static void recurrence_step(hlo_builder* b, hlo_value step, const hlo_value* in, hlo_value* out,
                            const void* context) {
  const polynomial* p = context;
  hlo_type shape = *hlo_type_of(b, in[CURRENT]);
  hlo_value k = hlo_binary(b, "add", step, hlo_constant_i64(b, TPU_I64, 1));
  hlo_value m = in[VARIABLE];
  if (p->m_k || p->m_1 != 1)
    m = hlo_binary(b, "multiply", hlo_broadcast_to(b, affine(b, k, p->m_k, p->m_1, shape.dtype), shape.rank,
                                                   shape.dims), m);
  if (p->m_add)
    m = hlo_binary(b, "add", hlo_broadcast_to(b, affine(b, k, p->m_add, 0, shape.dtype), shape.rank, shape.dims), m);
  hlo_value before = in[PREVIOUS];
  if (p->c_k || p->c_1 != 1)
    before = hlo_binary(b, "multiply", hlo_broadcast_to(b, affine(b, k, p->c_k, p->c_1, shape.dtype), shape.rank,
                                                        shape.dims), before);
  hlo_value next = hlo_binary(b, "subtract", hlo_binary(b, "multiply", m, in[CURRENT]), before);
  if (p->over_k_plus_1)
    next = hlo_binary(b, "divide", next, hlo_broadcast_to(b, affine(b, k, 1, 1, shape.dtype), shape.rank, shape.dims));
  hlo_value more = hlo_compare(b, "LT", hlo_broadcast_to(b, k, shape.rank, shape.dims), in[DEGREE]);
  out[PREVIOUS] = hlo_select(b, more, in[CURRENT], in[PREVIOUS]);
  out[CURRENT] = hlo_select(b, more, next, in[CURRENT]);
  out[DEGREE] = in[DEGREE];
  out[VARIABLE] = in[VARIABLE];
}

/* n as an integer: toward zero, -1 where the CPU's cast gives a negative
 * number (NaN, inf, beyond int64). */
static hlo_value degree(hlo_builder* b, hlo_value n) {
  hlo_value fits =
      and_(b, hlo_compare(b, "EQ", n, n), hlo_compare_constant(b, "LT", hlo_unary(b, "abs", n), 9.2e18));
  return hlo_convert(b, hlo_select(b, fits, n, hlo_constant_like(b, n, -1)), TPU_I64);
}

/* P_n(x) for x and n of one float type and shape. */
static hlo_value evaluate(hlo_builder* b, const polynomial* p, hlo_value x, hlo_value nf) {
  hlo_type shape = *hlo_type_of(b, x);
  tpu_dtype t = shape.dtype;
  hlo_value n = degree(b, nf);
  hlo_value y = p->shifted ? hlo_binary(b, "subtract", hlo_binary(b, "add", x, x), hlo_constant_like(b, x, 1)) : x;
  hlo_value no = hlo_filled(b, TPU_BOOL, shape.rank, shape.dims, 0);

  hlo_value at_upper = p->upper ? hlo_compare_constant(b, "EQ", x, p->upper_at) : no;
  hlo_value at_lower = p->lower ? hlo_compare_constant(b, "EQ", x, p->lower_at) : no;
  hlo_value trig = p->kind ? and_(b, hlo_compare_constant(b, "GT", n, p->trig_above),
                                  hlo_compare_constant(b, "LT", hlo_unary(b, "abs", y), 1))
                           : no;
  hlo_value limit = no;
  if (p->hermite_limit) limit = hlo_compare_constant(b, "GT", n, t == TPU_F64 ? 512 : 128);
  hlo_value direct = hlo_binary(b, "or", hlo_binary(b, "or", at_upper, at_lower), hlo_binary(b, "or", trig, limit));

  /* The loop runs to the largest n - 1 among the elements that need it. */
  hlo_value needs = and_(b, hlo_compare_constant(b, "GE", n, 2), hlo_unary(b, "not", direct));
  hlo_value steps = hlo_select(b, needs, hlo_binary(b, "subtract", n, hlo_constant_like(b, n, 1)),
                               hlo_constant_like(b, n, 0));
  steps = hlo_reduce_all(b, steps, hlo_constant_i64(b, TPU_I64, 0), "maximum");
  hlo_value init[CARRIED], done[CARRIED];
  init[PREVIOUS] = hlo_constant_like(b, x, 1);
  init[CURRENT] = linear(b, y, p->p1_scale, p->p1_shift);
  init[DEGREE] = n;
  init[VARIABLE] = linear(b, y, p->u_scale, p->u_shift);
  hlo_counted_loop(b, steps, init, CARRIED, recurrence_step, p, done);

  hlo_value r = hlo_select(b, hlo_compare_constant(b, "EQ", n, 0), hlo_constant_like(b, x, 1), done[CURRENT]);
  if (p->kind) r = hlo_select(b, trig, trigonometric(b, p, x, y, n, t), r);
  if (p->hermite_limit) r = hlo_select(b, limit, hlo_constant_like(b, x, NAN), r);
  if (p->lower) r = hlo_select(b, at_lower, end_value_of(b, p->lower, n, true, t), r);
  if (p->upper) r = hlo_select(b, at_upper, end_value_of(b, p->upper, n, false, t), r);
  return hlo_select(b, hlo_compare_constant(b, "LT", n, 0), hlo_constant_like(b, x, 0), r);
}

/* special_*_polynomial_*(x, n) and its out= form (the x_scalar and
 * n_scalar overloads reach it with a 0-d tensor). */
static tpu_status lower_polynomial(tpu_lowering* l) {
  const char* name = tpu_lower_op_name(l);
  const polynomial* p = NULL;
  for (size_t i = 0; i < sizeof polynomials / sizeof polynomials[0]; i++)
    if (strcmp(polynomials[i].name, name) == 0) p = &polynomials[i];
  if (!p) {
    tpu_lower_fail(l, TPU_INTERNAL, "aten::%s is registered but missing from the polynomial table", name);
    return NULL;
  }
  int operands[2] = {0, 1};
  tpu_dtype t = tpu_lower_result_type(l, operands, 2);
  if (tpu_dtype_is_integral(t) || t == TPU_BOOL) t = TPU_F32;
  if (t != TPU_F32 && t != TPU_F64) {
    tpu_lower_fail(l, TPU_UNIMPLEMENTED, "aten::%s is not implemented for %s, as on the CPU; convert to float32 "
                   "or float64", name, tpu_dtype_name(t));
    return NULL;
  }
  hlo_type shape = tpu_lower_broadcast_type(l, operands, 2, t);
  hlo_value x = tpu_lower_value_as(l, 0, &shape), n = tpu_lower_value_as(l, 1, &shape);
  tpu_lower_set_output(l, 0, evaluate(tpu_lower_builder(l), p, x, n));
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"special_chebyshev_polynomial_t", lower_polynomial, 0},
    {"special_chebyshev_polynomial_u", lower_polynomial, 0},
    {"special_chebyshev_polynomial_v", lower_polynomial, 0},
    {"special_chebyshev_polynomial_w", lower_polynomial, 0},
    {"special_hermite_polynomial_h", lower_polynomial, 0},
    {"special_hermite_polynomial_he", lower_polynomial, 0},
    {"special_laguerre_polynomial_l", lower_polynomial, 0},
    {"special_legendre_polynomial_p", lower_polynomial, 0},
    {"special_shifted_chebyshev_polynomial_t", lower_polynomial, 0},
    {"special_shifted_chebyshev_polynomial_u", lower_polynomial, 0},
    {"special_shifted_chebyshev_polynomial_v", lower_polynomial, 0},
    {"special_shifted_chebyshev_polynomial_w", lower_polynomial, 0},
};

TPU_OP_FAMILY(tpu_ops_polynomial, entries);
