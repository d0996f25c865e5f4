/* Histograms: histc and bincount.
 *
 * histc(self, bins, min, max): how many values fall in each of `bins`
 * equal-width bins from min to max, the last bin closed; values outside
 * (and NaN) count nowhere. min == max means the data's own range, widened
 * by 1 each way when that range is a single value. Integer inputs count
 * too (CUDA takes them, and Hugging Face's mixture-of-experts layers pass
 * int32 expert ids on tpu); PyTorch's CPU kernel takes floats only.
 *
 * A value's bin is floor((x - min) * bins / (max - min)), as PyTorch's
 * kernels compute it, in float32 (float64 for float64 input), and each
 * value adds 1 at its bin through one scatter-add. float16/bfloat16 bins
 * and counts are float32, rounded once at the end: PyTorch's CPU kernel
 * rounds after each step, so its bfloat16 counts past 256 drift. min and
 * max are compiled in (TPU_OP_SCALARS_IN_KEY), so PyTorch's meta kernel checks
 * each pair once. */
#include <math.h>

#include "hlo/slice_ops.h"
#include "ops/families.h"

static tpu_status lower_histc(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type in = tpu_lower_arg_type(l, 0), out = tpu_lower_output_type(l, 0);
  int64_t bins = out.dims[0], numel = hlo_type_numel(&in), zero = 0;
  tpu_dtype t = in.dtype == TPU_F64 ? TPU_F64 : TPU_F32;
  tpu_dtype count_type = tpu_dtype_compute(out.dtype);
  hlo_value x = hlo_reshape(b, tpu_lower_value(l, 0, t), 1, &numel);
  double min = tpu_lower_scalar_constant(l, 2), max = tpu_lower_scalar_constant(l, 3);
  hlo_value lo = hlo_constant(b, t, min), hi = hlo_constant(b, t, max);
  if (min == max) {
    lo = hlo_reduce(b, x, hlo_constant(b, t, INFINITY), "minimum", &zero, 1);
    hi = hlo_reduce(b, x, hlo_constant(b, t, -INFINITY), "maximum", &zero, 1);
    hlo_value one = hlo_constant(b, t, 1), single = hlo_compare(b, "EQ", lo, hi);
    lo = hlo_select(b, single, hlo_binary(b, "subtract", lo, one), lo);
    hi = hlo_select(b, single, hlo_binary(b, "add", hi, one), hi);
  }
  hlo_value los = hlo_broadcast_in_dim(b, lo, 1, &numel, NULL), his = hlo_broadcast_in_dim(b, hi, 1, &numel, NULL);
  hlo_value inside = hlo_binary(b, "and", hlo_compare(b, "GE", x, los), hlo_compare(b, "LE", x, his));
  hlo_value scaled = hlo_binary(b, "divide",
                                hlo_binary(b, "multiply", hlo_binary(b, "subtract", x, los),
                                           hlo_filled(b, t, 1, &numel, (double)bins)),
                                hlo_binary(b, "subtract", his, los));
  /* x == max lands past the last bin: clamp it back (outside values do not count). */
  hlo_value bin = hlo_convert(b, hlo_unary(b, "floor", scaled), TPU_I64);
  bin = hlo_binary(b, "maximum",
                   hlo_binary(b, "minimum", bin, hlo_filled(b, TPU_I64, 1, &numel, (double)(bins - 1))),
                   hlo_filled(b, TPU_I64, 1, &numel, 0));
  int64_t index_dims[2] = {numel, 1};
  hlo_value counts = hlo_filled(b, count_type, 1, &bins, 0);
  static const int64_t dim0[1] = {0};
  hlo_scatter_dims s = {NULL, 0, dim0, 1, dim0, 1, 1};
  counts = hlo_scatter(b, counts, hlo_reshape(b, bin, 2, index_dims), hlo_convert(b, inside, count_type), &s, "add");
  tpu_lower_set_output(l, 0, hlo_convert(b, counts, out.dtype));
  return NULL;
}

/* bincount(self, [weights,] length): how many times each of 0..length-1
 * occurs in self (or the sum of its weights there), through one
 * scatter-add. The glue reads the length off the data first (the largest
 * value + 1, at least minlength: one sync, as in CUDA's kernel) and checks
 * that no value is negative, so every value has its bin. */
static tpu_status lower_bincount(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type out = tpu_lower_output_type(l, 0), in = tpu_lower_arg_type(l, 0);
  hlo_value bins = hlo_constant(b, out.dtype, 0);
  if (out.dims[0] == 0 || in.dims[0] == 0) {
    tpu_lower_set_output(l, 0, bins);
    return NULL;
  }
  bins = hlo_broadcast_in_dim(b, bins, 1, out.dims, NULL);
  hlo_value adds = tpu_lower_arg_count(l) == 3 ? tpu_lower_value(l, 1, out.dtype)
                                               : hlo_filled(b, out.dtype, 1, in.dims, 1);
  tpu_lower_set_output(l, 0, hlo_put(b, bins, 0, tpu_lower_value(l, 0, TPU_I64), adds, "add"));
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"bincount", lower_bincount, 0},
    {"histc", lower_histc, TPU_OP_SCALARS_IN_KEY},
};

TPU_OP_FAMILY(tpu_ops_histogram, entries);
