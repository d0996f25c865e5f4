/* Conversions to and from the float8 types, bit for bit as PyTorch's CPU
 * backend makes them.
 *
 * c10 converts every type to float8 through float32 (a float64 or int64
 * source rounds twice: to float32, then to float8, each to nearest even),
 * and float8 to every type through float32. stablehlo.convert rounds the
 * same way from float32, with three differences (measured on the XLA CPU
 * plugin against torch 2.13 over every bfloat16 and float16 bit pattern and
 * 200,000 random float32 ones):
 *   - float8_e4m3fn has no inf. c10 saturates: any finite value past 448,
 *     and +-inf, give +-448 (0x7E | sign); XLA gives NaN.
 *   - A NaN becomes 0x7F | sign in c10 (e4m3fn and e5m2); XLA keeps the
 *     NaN's top mantissa bits (e5m2) or drops its sign (from bfloat16).
 *   - A float8 NaN widens in c10 to the float32 whose mantissa starts with
 *     the float8's (e4m3fn 0x7F -> 0x7FF00000; e5m2 quieted, as float16;
 *     the fnuz NaN 0x80 -> 0x7F800001); XLA gives 0x7FC00000. Float16 and
 *     float64 then follow from that float32 as the hardware widens and
 *     narrows NaNs, on both sides; bfloat16's NaN is 0x7FC0 in c10.
 * The fnuz types (one NaN, 0x80, which overflow also gives; no -0) match
 * c10 as XLA converts them.
 *
 * XLA CPU computes every other op on float8 values (select, concatenate,
 * slice, compare) in float16 and converts back, which keeps each value but
 * turns a float8_e5m2 NaN into 0x7F: the NaN fix-ups below select bytes,
 * not float8 values, and an e5m2 NaN's payload and sign do not survive
 * data movement on that plugin (the CPU copies the bytes). */
#include "hlo/builder_impl.h"

static hlo_value plain_convert(hlo_builder* b, hlo_value x, tpu_dtype dtype) {
  hlo_type t = *hlo_type_of(b, x);
  t.dtype = dtype;
  return emit_op(b, "stablehlo.convert", &x, 1, NULL, t);
}

hlo_value hlo_convert_plain(hlo_builder* b, hlo_value x, tpu_dtype dtype) {
  if (!values_valid(b, &x, 1)) return HLO_INVALID;
  if (hlo_type_of(b, x)->dtype == dtype) return x;
  return plain_convert(b, x, dtype);
}

/* An integer constant in like's shape, of integer type `dtype`. */
static hlo_value bits_as(hlo_builder* b, hlo_value like, tpu_dtype dtype, int64_t bits) {
  hlo_type t = *hlo_type_of(b, like);
  return hlo_broadcast_in_dim(b, hlo_constant_i64(b, dtype, bits), t.rank, t.dims, NULL);
}

static hlo_value is_nan(hlo_builder* b, hlo_value x) { return hlo_compare(b, "NE", x, x); }

/* float32 (or narrower float) f to float8 `dtype` as c10 rounds it. */
static hlo_value narrow(hlo_builder* b, hlo_value f, tpu_dtype dtype) {
  if (dtype == TPU_F8E4M3FN) { /* saturate; NaN compares false and passes */
    f = hlo_select(b, hlo_compare_constant(b, "GT", f, 448.0), hlo_constant_like(b, f, 448.0), f);
    f = hlo_select(b, hlo_compare_constant(b, "LT", f, -448.0), hlo_constant_like(b, f, -448.0), f);
  }
  hlo_value r = plain_convert(b, f, dtype);
  if (dtype != TPU_F8E4M3FN && dtype != TPU_F8E5M2) return r;
  /* Selected as bytes: XLA CPU computes a select of float8 values in a
   * wider float, which loses a NaN's sign on the way back. */
  hlo_value negative = hlo_compare(b, "LT", hlo_bitcast_convert(b, f, TPU_I32), bits_as(b, f, TPU_I32, 0));
  hlo_value nan = hlo_select(b, negative, bits_as(b, f, TPU_U8, 0xFF), bits_as(b, f, TPU_U8, 0x7F));
  hlo_value bytes = hlo_select(b, is_nan(b, f), nan, hlo_bitcast_convert(b, r, TPU_U8));
  return hlo_bitcast_convert(b, bytes, dtype);
}

/* float8 x to float32, NaNs as c10 widens them. */
static hlo_value widen(hlo_builder* b, hlo_value x) {
  tpu_dtype from = hlo_type_of(b, x)->dtype;
  hlo_value f = plain_convert(b, x, TPU_F32);
  hlo_value nan;
  if (from == TPU_F8E4M3FN || from == TPU_F8E5M2) {
    /* sign, all-ones exponent, the float8's mantissa at the top (e5m2 also
     * sets the quiet bit, as float16 -> float32 does) */
    int shift = from == TPU_F8E4M3FN ? 20 : 21;
    int64_t quiet = from == TPU_F8E4M3FN ? 0 : 0x400000;
    hlo_value byte = hlo_convert(b, hlo_bitcast_convert(b, x, TPU_U8), TPU_I32);
    hlo_value sign = hlo_binary(b, "shift_left", hlo_binary(b, "and", byte, bits_as(b, byte, TPU_I32, 0x80)),
                                bits_as(b, byte, TPU_I32, 24));
    int mantissa_mask = from == TPU_F8E4M3FN ? 0x7 : 0x3;
    hlo_value mantissa = hlo_binary(b, "and", byte, bits_as(b, byte, TPU_I32, mantissa_mask));
    mantissa = hlo_binary(b, "shift_left", mantissa, bits_as(b, byte, TPU_I32, shift));
    nan = hlo_binary(b, "or", hlo_binary(b, "or", sign, mantissa), bits_as(b, byte, TPU_I32, 0x7F800000 | quiet));
  } else {
    nan = bits_as(b, f, TPU_I32, 0x7F800001);
  }
  return hlo_select(b, is_nan(b, f), hlo_bitcast_convert(b, nan, TPU_F32), f);
}

hlo_value hlo_convert_float8(hlo_builder* b, hlo_value x, tpu_dtype dtype) {
  if (!values_valid(b, &x, 1)) return HLO_INVALID;
  tpu_dtype from = hlo_type_of(b, x)->dtype;
  if (from == dtype) return x;
  if (tpu_dtype_is_float8(dtype)) return narrow(b, hlo_convert(b, x, TPU_F32), dtype);
  if (!tpu_dtype_is_float8(from))
    return hlo_fail(b, TPU_INTERNAL, "convert_float8: neither %s nor %s is a float8 type", tpu_dtype_name(from),
                    tpu_dtype_name(dtype));
  hlo_value f = widen(b, x);
  if (dtype != TPU_BF16) return hlo_convert(b, f, dtype);
  hlo_value r = hlo_convert(b, f, TPU_BF16);
  return hlo_select(b, is_nan(b, f), hlo_bitcast_convert(b, bits_as(b, f, TPU_I16, 0x7FC0), TPU_BF16), r);
}
