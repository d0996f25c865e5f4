/* Complex parts and the FFT. */
#include "hlo/complex_ops.h"

#include <stdio.h>
#include <string.h>

#include "hlo/builder_impl.h"

hlo_value hlo_complex(hlo_builder* b, hlo_value re, hlo_value im) {
  hlo_value operands[2] = {re, im};
  if (!values_valid(b, operands, 2)) return HLO_INVALID;
  hlo_type t = *hlo_type_of(b, re);
  if (t.dtype != TPU_F32 && t.dtype != TPU_F64)
    return hlo_fail(b, TPU_INTERNAL, "complex: parts must be float32 or float64, not %s", tpu_dtype_name(t.dtype));
  t.dtype = tpu_dtype_complex_of(t.dtype);
  return emit_op(b, "stablehlo.complex", operands, 2, NULL, t);
}

static hlo_value part(hlo_builder* b, const char* op, hlo_value x) {
  if (!values_valid(b, &x, 1)) return HLO_INVALID;
  hlo_type t = *hlo_type_of(b, x);
  if (!tpu_dtype_is_complex(t.dtype)) return strcmp(op, "stablehlo.real") == 0 ? x : hlo_constant_like(b, x, 0);
  t.dtype = tpu_dtype_real_part(t.dtype);
  return emit_op(b, op, &x, 1, NULL, t);
}

hlo_value hlo_real(hlo_builder* b, hlo_value x) { return part(b, "stablehlo.real", x); }
hlo_value hlo_imag(hlo_builder* b, hlo_value x) { return part(b, "stablehlo.imag", x); }

hlo_value hlo_conj(hlo_builder* b, hlo_value x) {
  if (!values_valid(b, &x, 1) || !tpu_dtype_is_complex(hlo_type_of(b, x)->dtype)) return x;
  return hlo_complex(b, hlo_real(b, x), hlo_unary(b, "negate", hlo_imag(b, x)));
}

hlo_value hlo_constant_complex(hlo_builder* b, tpu_dtype dtype, double re, double im) {
  tpu_dtype parts = tpu_dtype_real_part(dtype);
  return hlo_complex(b, hlo_constant(b, parts, re), hlo_constant(b, parts, im));
}

hlo_value hlo_fft(hlo_builder* b, hlo_value x, hlo_fft_kind kind, const int64_t* lengths, int count) {
  static const char* const names[] = {"FFT", "IFFT", "RFFT", "IRFFT"};
  if (!values_valid(b, &x, 1)) return HLO_INVALID;
  hlo_type t = *hlo_type_of(b, x);
  if (count < 1 || count > 3 || count > t.rank)
    return hlo_fail(b, TPU_INTERNAL, "fft over %d dims of a rank-%d value", count, t.rank);
  bool complex_in = kind != HLO_RFFT;
  if (tpu_dtype_is_complex(t.dtype) != complex_in)
    return hlo_fail(b, TPU_INTERNAL, "fft %s of %s", names[kind], tpu_dtype_name(t.dtype));
  int last = t.rank - 1;
  if (kind == HLO_RFFT) {
    t.dtype = tpu_dtype_complex_of(t.dtype);
    t.dims[last] = lengths[count - 1] / 2 + 1;
  } else if (kind == HLO_IRFFT) {
    t.dtype = tpu_dtype_real_part(t.dtype);
    t.dims[last] = lengths[count - 1];
  }
  char attrs[256];
  int n = snprintf(attrs, sizeof attrs, "fft_type = #stablehlo<fft_type %s>, ", names[kind]);
  attr_i64_array(attrs + n, sizeof attrs - (size_t)n, "fft_length", lengths, count);
  return emit_op(b, "stablehlo.fft", &x, 1, attrs, t);
}
