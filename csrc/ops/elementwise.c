/* Elementwise lowerings: arithmetic, comparison, logical, unary math, where,
 * clamp, casts, fill and copy. */
#include "ops/families.h"

/* copy_(self, src) and _to_copy: the value converted (by exec/) to the
 * output's dtype and broadcast to its shape. */
static tpu_status lower_copy(tpu_lowering* l) {
  int src = tpu_lower_arg_count(l) > 1 && tpu_lower_arg_kind(l, 1) == TPU_ARG_TENSOR ? 1 : 0;
  tpu_lower_set_output(l, 0, tpu_lower_tensor(l, src));
  return NULL;
}

/* fill_(self, value): value is a runtime scalar or a 0-d tensor. */
static tpu_status lower_fill(tpu_lowering* l) {
  hlo_type out = tpu_lower_output_type(l, 0);
  tpu_lower_set_output(l, 0, tpu_lower_value(l, 1, out.dtype));
  return NULL;
}

/* add(self, other, alpha) = self + alpha * other, in the promoted type. */
static tpu_status lower_add(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  int operands[2] = {0, 1};
  tpu_dtype t = tpu_lower_result_type(l, operands, 2);
  hlo_type shape = tpu_lower_broadcast_type(l, operands, 2, t);
  hlo_value x = tpu_lower_value_as(l, 0, &shape);
  hlo_value y = tpu_lower_value_as(l, 1, &shape);
  if (!tpu_lower_is_none(l, 2)) {
    hlo_value alpha = hlo_broadcast_to(b, tpu_lower_value(l, 2, t), shape.rank, shape.dims);
    y = hlo_binary(b, "multiply", y, alpha);
  }
  tpu_lower_set_output(l, 0, hlo_binary(b, "add", x, y));
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"add", lower_add, false},
    {"copy", lower_copy, false},
    {"fill", lower_fill, false},
};

TPU_OP_FAMILY(tpu_ops_elementwise, entries);
