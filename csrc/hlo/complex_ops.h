/* Complex numbers in StableHLO: building them from parts, taking parts,
 * the elementary functions StableHLO lacks, and the Fourier transform. */
#ifndef TPU_HLO_COMPLEX_OPS_H
#define TPU_HLO_COMPLEX_OPS_H

#include "hlo/builder.h"

#ifdef __cplusplus
extern "C" {
#endif

/* re + im i from two float values of one type (f32 or f64). */
hlo_value hlo_complex(hlo_builder* b, hlo_value re, hlo_value im);
/* The real and imaginary parts; a real value is its own real part and has
 * an imaginary part of zeros. */
hlo_value hlo_real(hlo_builder* b, hlo_value x);
hlo_value hlo_imag(hlo_builder* b, hlo_value x);
/* The conjugate: the imaginary part negated; a real value is itself. */
hlo_value hlo_conj(hlo_builder* b, hlo_value x);
/* The constant re + im i of a complex dtype. */
hlo_value hlo_constant_complex(hlo_builder* b, tpu_dtype dtype, double re, double im);

/* Elementary functions of a complex value, as the C library's csinh,
 * casin, ... compute them (principal values, branch cuts on the axes, the
 * side of a cut picked by the sign of a zero part). */
hlo_value hlo_complex_sinh(hlo_builder* b, hlo_value z);
hlo_value hlo_complex_cosh(hlo_builder* b, hlo_value z);
hlo_value hlo_complex_asin(hlo_builder* b, hlo_value z);
hlo_value hlo_complex_acos(hlo_builder* b, hlo_value z);
hlo_value hlo_complex_atan(hlo_builder* b, hlo_value z);
hlo_value hlo_complex_asinh(hlo_builder* b, hlo_value z);
hlo_value hlo_complex_acosh(hlo_builder* b, hlo_value z);
hlo_value hlo_complex_atanh(hlo_builder* b, hlo_value z);
/* torch.logaddexp of complex values, as PyTorch's CPU kernel computes it. */
hlo_value hlo_complex_logaddexp(hlo_builder* b, hlo_value x, hlo_value y);

typedef enum hlo_fft_kind {
  HLO_FFT,   /* complex -> complex, forward */
  HLO_IFFT,  /* complex -> complex, inverse, divided by the product of the lengths */
  HLO_RFFT,  /* real -> complex, last dim n -> n / 2 + 1 */
  HLO_IRFFT, /* complex -> real, last dim n / 2 + 1 -> lengths' last; divided likewise */
} hlo_fft_kind;

/* The discrete Fourier transform over x's last `count` (1 to 3) dims, whose
 * lengths are `lengths` (the real side's for RFFT and IRFFT). */
hlo_value hlo_fft(hlo_builder* b, hlo_value x, hlo_fft_kind kind, const int64_t* lengths, int count);

#ifdef __cplusplus
}
#endif

#endif
