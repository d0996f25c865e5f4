/* Products: mm, bmm, mv, dot, vdot, addmm, addmv, baddbmm, addbmm, addr,
 * and the cross product (linalg_cross; torch.cross reaches us as it).
 * matmul, linear and outer are composite in PyTorch and reach us as these
 * (plus view ops).
 *
 * Each is one dot_general in the output dtype; float16/bfloat16 products
 * come out in float32 (the accumulation PyTorch's CPU kernels use) and are
 * rounded once, after the beta/alpha terms. */
#include <string.h>

#include "hlo/complex_ops.h"
#include "hlo/slice_ops.h"
#include "ops/families.h"

/* How an op contracts its two operands. The add* forms take (self, a, b,
 * beta, alpha) and give beta * self + alpha * (a . b). */
typedef struct contraction {
  const char* name;
  int batch;          /* leading dims both operands share, kept */
  int64_t lhs[2];     /* contracting dims */
  int64_t rhs[2];
  int count;          /* how many contracting dims */
  bool accumulates;   /* an add* form */
} contraction;

static const contraction contractions[] = {
    {"addbmm", 0, {0, 2}, {0, 1}, 2, true}, /* sums over the batch too */
    {"addmm", 0, {1}, {0}, 1, true},
    {"addmv", 0, {1}, {0}, 1, true},
    {"addr", 0, {0}, {0}, 0, true},         /* outer product: nothing contracted */
    {"baddbmm", 1, {2}, {1}, 1, true},
    {"bmm", 1, {2}, {1}, 1, false},
    {"dot", 0, {0}, {0}, 1, false},
    {"mm", 0, {1}, {0}, 1, false},
    {"mv", 0, {1}, {0}, 1, false},
    {"vdot", 0, {0}, {0}, 1, false},        /* conjugates its first operand */
};

/* Scalar argument `index` as a 0-d value of t broadcast to like's shape. */
static hlo_value scalar_like(tpu_lowering* l, int index, tpu_dtype t, hlo_value like) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type shape = *hlo_type_of(b, like);
  hlo_value s = tpu_lower_is_none(l, index) ? hlo_constant(b, t, 1) : tpu_lower_value(l, index, t);
  return hlo_broadcast_in_dim(b, s, shape.rank, shape.dims, NULL);
}

static tpu_status lower_product(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  const char* name = tpu_lower_op_name(l);
  const contraction* c = NULL;
  for (size_t i = 0; i < sizeof contractions / sizeof contractions[0]; i++)
    if (!strcmp(contractions[i].name, name)) c = &contractions[i];
  if (!c) return TPU_ERROR(TPU_INTERNAL, "aten::%s has no contraction", name);
  int first = c->accumulates ? 1 : 0;
  tpu_dtype out = tpu_lower_output_type(l, 0).dtype, t = tpu_dtype_compute(out);
  hlo_value lhs = tpu_lower_value(l, first, out), rhs = tpu_lower_value(l, first + 1, out);
  if (!strcmp(name, "vdot")) lhs = hlo_conj(b, lhs);
  static const int64_t batch_dims[1] = {0};
  hlo_value r = hlo_dot_general(b, lhs, rhs, batch_dims, batch_dims, c->batch, c->lhs, c->rhs,
                                c->count, t);
  if (c->accumulates) {
    hlo_type shape = *hlo_type_of(b, r);
    hlo_value self = tpu_lower_value_as(l, 0, &shape);
    hlo_value beta = scalar_like(l, 3, t, r);
    /* beta == 0 ignores self: nan and inf in it must not propagate. */
    hlo_value zero = hlo_constant_like(b, r, 0);
    hlo_value term = hlo_select(b, hlo_compare(b, "EQ", beta, zero), zero,
                                hlo_binary(b, "multiply", beta, self));
    r = hlo_binary(b, "add", term, hlo_binary(b, "multiply", scalar_like(l, 4, t, r), r));
  }
  tpu_lower_set_output(l, 0, r);
  return NULL;
}

/* linalg_cross(self, other, dim): the cross product of the size-3 vectors
 * along dim, inputs broadcast to the output's shape. */
static tpu_status lower_cross(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type out = tpu_lower_output_type(l, 0);
  int64_t dim = tpu_lower_int(l, 2, -1);
  if (dim < 0) dim += out.rank;
  if (dim < 0 || dim >= out.rank || out.dims[dim] != 3) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::linalg_cross: dim %lld of the broadcast shape must "
                   "have size 3", (long long)tpu_lower_int(l, 2, -1));
    return NULL;
  }
  hlo_value x[2] = {tpu_lower_value_as(l, 0, &out), tpu_lower_value_as(l, 1, &out)};
  hlo_value part[2][3];
  for (int side = 0; side < 2; side++)
    for (int i = 0; i < 3; i++) part[side][i] = hlo_slice_dim(b, x[side], (int)dim, i, i + 1);
  hlo_value c[3];
  for (int i = 0; i < 3; i++) {
    int j = (i + 1) % 3, k = (i + 2) % 3; /* c_i = x_j y_k - x_k y_j */
    c[i] = hlo_binary(b, "subtract", hlo_binary(b, "multiply", part[0][j], part[1][k]),
                      hlo_binary(b, "multiply", part[0][k], part[1][j]));
  }
  tpu_lower_set_output(l, 0, hlo_concatenate(b, c, 3, (int)dim));
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"addbmm", lower_product, TPU_OP_COMPLEX},  {"addmm", lower_product, TPU_OP_COMPLEX},
    {"addmv", lower_product, TPU_OP_COMPLEX},   {"addr", lower_product, TPU_OP_COMPLEX},
    {"baddbmm", lower_product, TPU_OP_COMPLEX}, {"bmm", lower_product, TPU_OP_COMPLEX},
    {"dot", lower_product, TPU_OP_COMPLEX},     {"linalg_cross", lower_cross, TPU_OP_COMPLEX},
    {"mm", lower_product, TPU_OP_COMPLEX},      {"mv", lower_product, TPU_OP_COMPLEX},
    {"vdot", lower_product, TPU_OP_COMPLEX},
};

TPU_OP_FAMILY(tpu_ops_linalg, entries);
