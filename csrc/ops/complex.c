/* Ops that build, split or measure complex numbers: complex (torch.complex),
 * polar, conj_physical (what a conjugate view becomes when it is
 * materialized) and angle. Arithmetic on complex numbers is the ordinary
 * elementwise lowerings (ops/elementwise.c), StableHLO's ops taking complex
 * operands as they are. */
#include <math.h>
#include <string.h>

#include "hlo/complex_ops.h"
#include "ops/families.h"

/* complex(real, imag) and polar(abs, angle): two float operands, broadcast,
 * into the complex output. */
static tpu_status lower_from_parts(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  tpu_dtype parts = tpu_dtype_real_part(tpu_lower_output_type(l, 0).dtype);
  int operands[2] = {0, 1};
  hlo_type shape = tpu_lower_broadcast_type(l, operands, 2, parts);
  hlo_value x = tpu_lower_value_as(l, 0, &shape), y = tpu_lower_value_as(l, 1, &shape);
  if (strcmp(tpu_lower_op_name(l), "polar") == 0) { /* abs (cos + i sin) */
    hlo_value re = hlo_binary(b, "multiply", x, hlo_unary(b, "cosine", y));
    y = hlo_binary(b, "multiply", x, hlo_unary(b, "sine", y));
    x = re;
  }
  tpu_lower_set_output(l, 0, hlo_complex(b, x, y));
  return NULL;
}

/* conj_physical / _conj_physical: the imaginary part negated; real
 * tensors are their own conjugate. */
static tpu_status lower_conj(tpu_lowering* l) {
  tpu_lower_set_output(l, 0, hlo_conj(tpu_lower_builder(l), tpu_lower_tensor(l, 0)));
  return NULL;
}

/* angle: atan2(imag, real) of a complex number; of a real one, pi where it
 * is negative, else 0, and NaN stays NaN, as PyTorch's kernel gives. */
static tpu_status lower_angle(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  tpu_dtype in = tpu_lower_arg_type(l, 0).dtype, out = tpu_lower_output_type(l, 0).dtype;
  hlo_value x = tpu_lower_value(l, 0, tpu_dtype_is_complex(in) ? in : tpu_dtype_compute(out));
  hlo_value a;
  if (tpu_dtype_is_complex(in)) {
    a = hlo_binary(b, "atan2", hlo_imag(b, x), hlo_real(b, x));
  } else {
    hlo_value zero = hlo_constant_like(b, x, 0);
    a = hlo_select(b, hlo_compare(b, "LT", x, zero), hlo_constant_like(b, x, M_PI), zero);
    a = hlo_select(b, hlo_compare(b, "NE", x, x), x, a);
  }
  tpu_lower_set_output(l, 0, a);
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"_conj_physical", lower_conj, TPU_OP_COMPLEX},
    {"angle", lower_angle, TPU_OP_COMPLEX},
    {"complex", lower_from_parts, TPU_OP_COMPLEX},
    {"conj_physical", lower_conj, TPU_OP_COMPLEX},
    {"polar", lower_from_parts, TPU_OP_COMPLEX},
};

TPU_OP_FAMILY(tpu_ops_complex, entries);
