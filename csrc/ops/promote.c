/* PyTorch's type promotion, for lowerings that compute in a common type. */
#include "ops/lowering.h"

typedef enum category { CAT_NONE = 0, CAT_BOOL, CAT_INT, CAT_FLOAT, CAT_COMPLEX } category;

static category category_of(tpu_dtype t) {
  if (t == TPU_BOOL) return CAT_BOOL;
  if (tpu_dtype_is_complex(t)) return CAT_COMPLEX;
  return tpu_dtype_is_float(t) ? CAT_FLOAT : CAT_INT;
}

tpu_dtype tpu_promote_types(tpu_dtype a, tpu_dtype b) {
  if (a == b) return a;
  category ca = category_of(a), cb = category_of(b);
  if (ca != cb) {
    tpu_dtype high = ca > cb ? a : b, low = ca > cb ? b : a;
    /* complex64 with float64 is complex128: the parts promote too */
    if (tpu_dtype_is_complex(high) && tpu_dtype_is_float(low))
      return tpu_dtype_complex_of(tpu_promote_types(tpu_dtype_real_part(high), low));
    return high;
  }
  if (ca == CAT_FLOAT) {
    if ((a == TPU_F16 && b == TPU_BF16) || (a == TPU_BF16 && b == TPU_F16)) return TPU_F32;
    return tpu_dtype_size(a) >= tpu_dtype_size(b) ? a : b;
  }
  /* Integers: uint8 with a signed type needs a signed type one size up. */
  if (a == TPU_U8 || b == TPU_U8) {
    tpu_dtype other = a == TPU_U8 ? b : a;
    return other == TPU_I8 ? TPU_I16 : other;
  }
  return tpu_dtype_size(a) >= tpu_dtype_size(b) ? a : b;
}

/* Combines the dtype of a higher-priority group with a lower one: the lower
 * only matters when it is of a higher category (int tensor + float scalar). */
static tpu_dtype combine(bool has_high, tpu_dtype high, bool has_low, tpu_dtype low) {
  if (!has_high) return low;
  if (!has_low) return high;
  /* a complex scalar keeps a float tensor's width (float64 * 1j is complex128) */
  if (tpu_dtype_is_complex(low) && tpu_dtype_is_float(high)) return tpu_dtype_complex_of(high);
  if (category_of(low) > category_of(high)) return low;
  return high;
}

tpu_dtype tpu_lower_result_type(const tpu_lowering* l, const int* indices, int count) {
  bool has[3] = {false, false, false}; /* tensors with dims, 0-d tensors, scalars */
  tpu_dtype dt[3] = {TPU_F32, TPU_F32, TPU_F32};
  for (int i = 0; i < count; i++) {
    tpu_arg_kind kind = tpu_lower_arg_kind(l, indices[i]);
    if (kind != TPU_ARG_TENSOR && kind != TPU_ARG_SCALAR) continue;
    hlo_type t = tpu_lower_arg_type(l, indices[i]);
    int group = kind == TPU_ARG_SCALAR ? 2 : (t.rank == 0 ? 1 : 0);
    tpu_dtype d = t.dtype;
    /* A Python float counts as the default dtype, float32, a complex as complex64. */
    if (group == 2 && d == TPU_F64) d = TPU_F32;
    if (group == 2 && d == TPU_C128) d = TPU_C64;
    dt[group] = has[group] ? tpu_promote_types(dt[group], d) : d;
    has[group] = true;
  }
  tpu_dtype low = combine(has[1], dt[1], has[2], dt[2]);
  return combine(has[0], dt[0], has[1] || has[2], low);
}
