/* Builder ops for matrix factorizations and solves that StableHLO has as
 * single ops (XLA expands them on every platform). Matrices are the last
 * two dims; leading dims are a batch. */
#ifndef TPU_HLO_LINALG_OPS_H
#define TPU_HLO_LINALG_OPS_H

#include "hlo/builder.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The Cholesky factor of a (lower: L with a = L L^T; else U with a = U^T U).
 * The other triangle is unspecified; a matrix that is not positive-definite
 * gives NaN from the failing minor on. */
hlo_value hlo_cholesky(hlo_builder* b, hlo_value a, bool lower);

/* A batch of identity matrices (ones where row == column over the last two
 * dims, rectangular too) of `type`. */
hlo_value hlo_identity(hlo_builder* b, hlo_type type);

/* x with a x = rhs (left_side) or x a = rhs, a triangular (lower or upper,
 * with an implicit unit diagonal if unit_diagonal), or with a^T (a^H) in
 * its place if transpose_a is HLO_TRANSPOSED (HLO_ADJOINT): a's `lower`
 * triangle read, then used transposed; a and rhs share their batch dims. */
typedef enum { HLO_AS_IS, HLO_TRANSPOSED, HLO_ADJOINT } hlo_transposition;
hlo_value hlo_triangular_solve(hlo_builder* b, hlo_value a, hlo_value rhs, bool left_side, bool lower,
                               bool unit_diagonal, hlo_transposition transpose_a);

#ifdef __cplusplus
}
#endif

#endif
