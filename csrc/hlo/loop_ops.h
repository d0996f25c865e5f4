/* Builder ops that repeat a computation: a counted loop whose body is
 * built once (a recurrence over time, as CTC's alpha and beta), rather than
 * unrolled into the program. */
#ifndef TPU_HLO_LOOP_OPS_H
#define TPU_HLO_LOOP_OPS_H

#include "hlo/builder.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Builds one iteration: from the i64 step number `step` (0-d) and the
 * values carried into it, sets next[0..n-1], each of its carried value's
 * type. Only `step`, `carried` and what the body adds may be used: values
 * from outside reach it by being carried. */
typedef void (*hlo_loop_body_fn)(hlo_builder* b, hlo_value step, const hlo_value* carried,
                                 hlo_value* next, const void* context);

/* A stablehlo.while running `body` for step = 0 .. count - 1 over n values
 * starting as init[0..n-1]; out[0..n-1] gets them after the last step.
 * count is a 0-d i64 value, so computed counts (a matrix's squarings) work
 * too; none run when it is at most 0. */
void hlo_counted_loop(hlo_builder* b, hlo_value count, const hlo_value* init, int n, hlo_loop_body_fn body,
                      const void* context, hlo_value* out);

#ifdef __cplusplus
}
#endif

#endif
