/* Cholesky and triangular solves as StableHLO ops. */
#include <stdio.h>

#include "hlo/builder_impl.h"
#include "hlo/linalg_ops.h"

hlo_value hlo_cholesky(hlo_builder* b, hlo_value a, bool lower) {
  if (!values_valid(b, &a, 1)) return HLO_INVALID;
  return emit_op(b, "stablehlo.cholesky", &a, 1, lower ? "lower = true" : "lower = false", *hlo_type_of(b, a));
}

hlo_value hlo_triangular_solve(hlo_builder* b, hlo_value a, hlo_value rhs, bool left_side, bool lower,
                               bool unit_diagonal, hlo_transposition transpose_a) {
  static const char* const transposes[] = {"NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"};
  hlo_value operands[2] = {a, rhs};
  if (!values_valid(b, operands, 2)) return HLO_INVALID;
  char attrs[200];
  snprintf(attrs, sizeof attrs,
           "left_side = %s, lower = %s, unit_diagonal = %s, transpose_a = #stablehlo<transpose %s>",
           left_side ? "true" : "false", lower ? "true" : "false", unit_diagonal ? "true" : "false",
           transposes[transpose_a]);
  return emit_op(b, "stablehlo.triangular_solve", operands, 2, attrs, *hlo_type_of(b, rhs));
}

hlo_value hlo_identity(hlo_builder* b, hlo_type type) {
  hlo_type positions = type;
  positions.dtype = TPU_I64;
  hlo_value diagonal = hlo_compare(b, "EQ", hlo_iota(b, positions, type.rank - 2), hlo_iota(b, positions, type.rank - 1));
  return hlo_convert(b, diagonal, type.dtype);
}
