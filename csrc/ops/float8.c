/* float8 tensors on the device: the ops that take them, and _scaled_mm,
 * the one op made for them.
 *
 * ATen's CPU kernels take float8 in a few ops only: moving and viewing
 * bytes, filling, comparing, abs, mul, where, mm and _scaled_mm; add, sum,
 * clamp and the rest refuse it. Those lowerings were checked against the
 * CPU bit for bit (tests/test_float8.py; abs clears the sign of -0.0 and
 * NaN, which the CPU's float8 abs keeps); every other op refuses float8
 * tensors by name (exec/op_call.c), rather than compute something the CPU
 * would not. Conversions round as c10 does (hlo/float8.c); arithmetic runs
 * in float32 (tpu_dtype_compute), rounded once to float8 at the end. */
#include <stdlib.h>
#include <string.h>

#include "ops/families.h"

/* Sorted: bsearch. Base names, as the lowering table keys them. */
static const char* const float8_ops[] = {
    "_index_put_impl", "_scaled_mm", "abs", "addmm", "all", "any", "cat", "constant_pad_nd",
    "copy", "eq", "eye", "fill", "flip", "index", "index_put", "index_select", "isnan",
    "masked_select", "mm", "mul", "narrow_copy", "ne", "roll", "where", "zero",
};

static int by_name(const void* key, const void* item) { return strcmp(key, *(const char* const*)item); }

bool tpu_op_takes_float8(const char* base_name) {
  return bsearch(base_name, float8_ops, sizeof float8_ops / sizeof float8_ops[0], sizeof float8_ops[0],
                 by_name) != NULL;
}

/* _scaled_mm(self, mat2, scale_a, scale_b, bias, scale_result, out_dtype,
 * use_fast_accum): (self * scale_a) . (mat2 * scale_b) + bias, as
 * PyTorch's CPU kernel computes it: each operand converted to float32 and
 * multiplied by its scale (one float32 scale for the tensor, or per row of
 * self, (M, 1), and per column of mat2, (1, N)), one float32 product, the
 * bias added in float32, the sum rounded once to out_dtype (self's dtype
 * when absent). scale_result divides the sum only where out_dtype is given
 * as float8_e4m3fn or float8_e5m2, as on the CPU (which ignores it
 * otherwise); use_fast_accum changes nothing, as on the CPU.
 *
 * Written in the form XLA GPU's GEMM rewrite looks for an fp8 GEMM in:
 * each operand is convert(float8) times its broadcast scale, straight into
 * the dot_general (hlo_convert_plain keeps the convert bare), so on a GPU
 * with fp8 tensor cores a tensorwise product can run as one cuBLASLt fp8
 * GEMM with the scales inside it (not yet checked on a GPU); elsewhere,
 * and for rowwise scales, it is a float32 product. The glue
 * checks the arguments as the CPU kernel does (fallback.cpp); the checks
 * here serve compiled graphs, whose meta kernel checks less. */
static hlo_value scaled_operand(tpu_lowering* l, int index, int scale_index, const hlo_type* shape) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_value x = hlo_convert_plain(b, tpu_lower_tensor(l, index), TPU_F32);
  hlo_type st = tpu_lower_arg_type(l, scale_index);
  hlo_value s = tpu_lower_tensor(l, scale_index);
  if (hlo_type_numel(&st) == 1) s = hlo_reshape(b, s, 0, NULL);
  return hlo_multiply(b, x, hlo_broadcast_to(b, s, shape->rank, shape->dims));
}

static bool is_tensorwise(const hlo_type* scale) { return scale->dtype == TPU_F32 && hlo_type_numel(scale) == 1; }

static bool is_rowwise(const hlo_type* scale, int64_t rows, int64_t cols) {
  return scale->dtype == TPU_F32 && scale->rank == 2 && scale->dims[0] == rows && scale->dims[1] == cols;
}

static tpu_status lower_scaled_mm(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type at = tpu_lower_arg_type(l, 0), bt = tpu_lower_arg_type(l, 1);
  hlo_type sa = tpu_lower_arg_type(l, 2), sb = tpu_lower_arg_type(l, 3);
  char a_shape[64], b_shape[64], sa_shape[64], sb_shape[64];
  hlo_shape_print(&at, a_shape, sizeof a_shape);
  hlo_shape_print(&bt, b_shape, sizeof b_shape);
  if (at.rank != 2 || bt.rank != 2 || !tpu_dtype_is_float8(at.dtype) || !tpu_dtype_is_float8(bt.dtype)) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::_scaled_mm: takes two float8 matrices, got %s %s and %s %s",
                   tpu_dtype_name(at.dtype), a_shape, tpu_dtype_name(bt.dtype), b_shape);
    return NULL;
  }
  int64_t m = at.dims[0], k = at.dims[1], n = bt.dims[1];
  if (bt.dims[0] != k) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT,
                   "aten::_scaled_mm: mat_a and mat_b shapes cannot be multiplied (%lldx%lld and %lldx%lld)",
                   (long long)m, (long long)k, (long long)bt.dims[0], (long long)n);
    return NULL;
  }
  bool tensorwise = is_tensorwise(&sa) && is_tensorwise(&sb);
  if (!tensorwise && !(is_rowwise(&sa, m, 1) && is_rowwise(&sb, 1, n))) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT,
                   "aten::_scaled_mm: invalid scaling configuration: takes float32 scales, one each (tensorwise) "
                   "or scale_a (%lld, 1) with scale_b (1, %lld) (rowwise); got scale_a %s %s and scale_b %s %s",
                   (long long)m, (long long)n, tpu_dtype_name(sa.dtype),
                   hlo_shape_print(&sa, sa_shape, sizeof sa_shape), tpu_dtype_name(sb.dtype),
                   hlo_shape_print(&sb, sb_shape, sizeof sb_shape));
    return NULL;
  }
  hlo_type a_f32 = hlo_type_make(TPU_F32, 2, at.dims), b_f32 = hlo_type_make(TPU_F32, 2, bt.dims);
  hlo_value x = scaled_operand(l, 0, 2, &a_f32), y = scaled_operand(l, 1, 3, &b_f32);
  static const int64_t lhs_contract[1] = {1}, rhs_contract[1] = {0};
  hlo_value r = hlo_dot_general(b, x, y, NULL, NULL, 0, lhs_contract, rhs_contract, 1, TPU_F32);
  int64_t out_dims[2] = {m, n}, last[1] = {1};
  if (!tpu_lower_is_none(l, 4)) {
    hlo_type bias = tpu_lower_arg_type(l, 4);
    if (hlo_type_numel(&bias) != n) {
      char bias_shape[64];
      tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::_scaled_mm: Bias must be size %lld but got %s", (long long)n,
                     hlo_shape_print(&bias, bias_shape, sizeof bias_shape));
      return NULL;
    }
    hlo_value v = hlo_reshape(b, tpu_lower_value(l, 4, TPU_F32), 1, &n);
    r = hlo_add(b, r, hlo_broadcast_in_dim(b, v, 2, out_dims, last));
  }
  tpu_dtype out = tpu_lower_dtype(l, 6, TPU_DTYPE_COUNT);
  if (!tpu_lower_is_none(l, 5) && (out == TPU_F8E4M3FN || out == TPU_F8E5M2)) {
    hlo_type st = tpu_lower_arg_type(l, 5);
    if (hlo_type_numel(&st) != 1 || st.dtype != TPU_F32) {
      tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::_scaled_mm: scale_result must be a float scalar, got %s with %lld "
                     "elements", tpu_dtype_name(st.dtype), (long long)hlo_type_numel(&st));
      return NULL;
    }
    hlo_value s = hlo_reshape(b, tpu_lower_value(l, 5, TPU_F32), 0, NULL);
    hlo_value inverse = hlo_divide(b, hlo_constant(b, TPU_F32, 1.0), s);
    r = hlo_multiply(b, r, hlo_broadcast_in_dim(b, inverse, 2, out_dims, NULL));
  }
  tpu_lower_set_output(l, 0, r);
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"_scaled_mm", lower_scaled_mm, 0},
};

TPU_OP_FAMILY(tpu_ops_float8, entries);
