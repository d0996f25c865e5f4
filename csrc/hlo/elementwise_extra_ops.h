/* Elementwise math that StableHLO has no single op for, composed from its
 * primitives with PyTorch's semantics. Binary ones take operands of equal
 * types. "Float" ones want f32 or f64 (widen f16/bf16 first). */
#ifndef TPU_HLO_ELEMENTWISE_EXTRA_OPS_H
#define TPU_HLO_ELEMENTWISE_EXTRA_OPS_H

#include "hlo/builder.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Any dtype. hlo_min_max: op "maximum" or "minimum", where a NaN operand
 * wins (torch.maximum) or loses (torch.fmax); XLA's own maximum need not
 * propagate NaN (the CPU plugin's does not). */
hlo_value hlo_min_max(hlo_builder* b, const char* op, hlo_value x, hlo_value y, bool nan_wins);
hlo_value hlo_sign(hlo_builder* b, hlo_value x);                 /* NaN -> 0; bool unchanged */
hlo_value hlo_floor_divide(hlo_builder* b, hlo_value x, hlo_value y); /* Python's // */
hlo_value hlo_python_remainder(hlo_builder* b, hlo_value x, hlo_value y); /* sign of y */
/* Whether the sign bit is set: -0.0 and -NaN count as negative; false for
 * unsigned types and bools. */
hlo_value hlo_signbit(hlo_builder* b, hlo_value x);
/* |x| with y's sign bit, so -0.0 and -NaN give a negative result. */
hlo_value hlo_copysign(hlo_builder* b, hlo_value x, hlo_value y);

/* Float. */
/* torch.lerp's two-sided formula: start + w (end - start) for |w| < 0.5,
 * else end - (end - start)(1 - w), so both ends are exact. */
hlo_value hlo_lerp(hlo_builder* b, hlo_value start, hlo_value end, hlo_value weight);
hlo_value hlo_trunc(hlo_builder* b, hlo_value x);
/* sqrt(x^2 + y^2) without overflow before the result; an infinite operand
 * gives +inf even beside NaN, as std::hypot does. */
hlo_value hlo_hypot(hlo_builder* b, hlo_value x, hlo_value y);
hlo_value hlo_erf(hlo_builder* b, hlo_value x);
hlo_value hlo_erfc(hlo_builder* b, hlo_value x);
hlo_value hlo_erfinv(hlo_builder* b, hlo_value x);
hlo_value hlo_asin(hlo_builder* b, hlo_value x);
hlo_value hlo_acos(hlo_builder* b, hlo_value x);
hlo_value hlo_atan(hlo_builder* b, hlo_value x);
hlo_value hlo_sinh(hlo_builder* b, hlo_value x);
hlo_value hlo_cosh(hlo_builder* b, hlo_value x);
hlo_value hlo_asinh(hlo_builder* b, hlo_value x);
hlo_value hlo_acosh(hlo_builder* b, hlo_value x);
hlo_value hlo_atanh(hlo_builder* b, hlo_value x);

#ifdef __cplusplus
}
#endif

#endif
