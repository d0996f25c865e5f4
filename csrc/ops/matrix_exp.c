/* linalg_matrix_exp (torch.linalg.matrix_exp, torch.matrix_exp, and so the
 * orthogonal parametrization's default map): e^A of a batch of square
 * matrices by scaling and squaring. Each matrix is divided by 2^s, the
 * fewest halvings that bring its 1-norm under theta, put through the
 * degree-18 Taylor polynomial (Horner's rule), then squared s times in one
 * loop whose count is the batch's largest s, computed on the device; a
 * matrix needing fewer squarings keeps its value. theta is the bound
 * PyTorch's CPU kernel uses for its degree-18 approximant in the dtype,
 * under which the Taylor polynomial is as accurate (complex matrices take
 * their parts' dtype's). The backward is
 * PyTorch's formula: the exponential of a block matrix twice the size. */
#include "hlo/conv_ops.h"
#include "hlo/linalg_ops.h"
#include "hlo/loop_ops.h"
#include "ops/families.h"

#define TAYLOR_DEGREE 18

typedef struct batch_product {
  int rank;
  int64_t batch[TPU_MAX_RANK];
} batch_product;

/* x y for batches of matrices [..., n, n]. */
static hlo_value product(hlo_builder* b, const batch_product* p, hlo_value x, hlo_value y) {
  int64_t x_col = p->rank - 1, y_row = p->rank - 2;
  return hlo_dot_general(b, x, y, p->batch, p->batch, p->rank - 2, &x_col, &y_row, 1, hlo_type_of(b, x)->dtype);
}

/* One squaring: carried {e, s}; a matrix is squared while step < its s. */
static void square_step(hlo_builder* b, hlo_value step, const hlo_value* in, hlo_value* out, const void* context) {
  const batch_product* p = context;
  hlo_type et = *hlo_type_of(b, in[0]);
  hlo_value more = hlo_compare(b, "LT", hlo_broadcast_in_dim(b, step, et.rank - 2, et.dims, NULL), in[1]);
  out[0] = hlo_select(b, hlo_broadcast_in_dim(b, more, et.rank, et.dims, p->batch), product(b, p, in[0], in[0]),
                      in[0]);
  out[1] = in[1];
}

/* 2^s (s an i64 value of at most 64) exactly, by building the float's bits. */
static hlo_value power_of_two(hlo_builder* b, hlo_value s, tpu_dtype t) {
  bool wide = t == TPU_F64;
  tpu_dtype bits = wide ? TPU_I64 : TPU_I32;
  hlo_value biased = hlo_convert(b, hlo_binary_constant(b, "add", s, wide ? 1023 : 127), bits);
  return hlo_bitcast_convert(b, hlo_binary(b, "shift_left", biased, hlo_constant_like(b, biased, wide ? 52 : 23)), t);
}

static tpu_status lower_matrix_exp(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type at = tpu_lower_arg_type(l, 0);
  if (at.rank < 2 || at.dims[at.rank - 1] != at.dims[at.rank - 2] ||
      !(tpu_dtype_is_float(at.dtype) || tpu_dtype_is_complex(at.dtype))) {
    char shape[96];
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT,
                   "aten::linalg_matrix_exp: expected float or complex square matrices [..., n, n], "
                   "got %s of shape %s", tpu_dtype_name(at.dtype), hlo_shape_print(&at, shape, sizeof shape));
    return NULL;
  }
  tpu_dtype t = tpu_dtype_compute(at.dtype), parts = tpu_dtype_real_part(t);
  batch_product p = {at.rank, {0}};
  for (int i = 0; i < at.rank - 2; i++) p.batch[i] = i;
  hlo_value a = tpu_lower_value(l, 0, t);
  at.dtype = t;

  /* s = ceil(log2(|A|_1 / theta)), at least 0, at most 64 (and 0 for NaN). */
  int64_t rows = at.rank - 2, last = at.rank - 2;
  hlo_value norm = hlo_reduce(b, hlo_unary(b, "abs", a), hlo_constant(b, parts, 0), "add", &rows, 1);
  norm = hlo_reduce(b, norm, hlo_constant(b, parts, 0), "maximum", &last, 1);
  double theta = parts == TPU_F64 ? 1.090863719290036 : 3.010066362817634;
  hlo_value s = hlo_unary(b, "ceil", hlo_binary_constant(b, "divide", hlo_unary(b, "log", hlo_binary_constant(
                                                                        b, "divide", norm, theta)), 0.6931471805599453));
  s = hlo_select(b, hlo_compare(b, "EQ", s, s), s, hlo_constant_like(b, s, 0));
  s = hlo_convert(b, hlo_binary_constant(b, "minimum", hlo_binary_constant(b, "maximum", s, 0), 64), TPU_I64);
  hlo_value scale = hlo_broadcast_in_dim(b, power_of_two(b, s, parts), at.rank, at.dims, p.batch);
  hlo_value scaled = hlo_binary(b, "divide", a, hlo_convert(b, scale, t));

  hlo_value identity = hlo_identity(b, at);
  hlo_value e = identity;
  for (int k = TAYLOR_DEGREE; k >= 1; k--)
    e = hlo_binary(b, "add", identity, hlo_binary_constant(b, "divide", product(b, &p, scaled, e), (double)k));

  hlo_value count = s;
  if (at.rank > 2) {
    int64_t batch_dims[TPU_MAX_RANK];
    for (int i = 0; i < at.rank - 2; i++) batch_dims[i] = i;
    count = hlo_reduce(b, s, hlo_constant(b, TPU_I64, 0), "maximum", batch_dims, at.rank - 2);
  }
  hlo_value init[2] = {e, s}, out[2];
  hlo_counted_loop(b, count, init, 2, square_step, &p, out);
  tpu_lower_set_output(l, 0, out[0]);
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"linalg_matrix_exp", lower_matrix_exp, TPU_OP_COMPLEX},
};

TPU_OP_FAMILY(tpu_ops_matrix_exp, entries);
