/* Tables of numbers as StableHLO constants, and lookups into them. */
#include <stdio.h>
#include <stdlib.h>

#include "hlo/builder_impl.h"
#include "hlo/special_ops.h"

hlo_value hlo_constant_table(hlo_builder* b, tpu_dtype dtype, const double* values, int count,
                             int stride) {
  if (dtype != TPU_F32 && dtype != TPU_F64)
    return hlo_fail(b, TPU_INTERNAL, "constant tables are f32 or f64, not %s", tpu_dtype_name(dtype));
  if (count <= 0 || stride <= 0)
    return hlo_fail(b, TPU_INTERNAL, "a constant table needs entries (count %d, stride %d)", count, stride);
  hlo_text attrs = {0};
  char ty[64];
  int64_t n = count;
  hlo_type type = hlo_type_make(dtype, 1, &n);
  /* %.9e / %.17e round-trip f32 / f64 exactly and always carry a point */
  text_append(b, &attrs, "value = dense<[");
  for (int i = 0; i < count; i++) {
    double v = values[(size_t)i * (size_t)stride];
    if (dtype == TPU_F32)
      text_append(b, &attrs, "%s%.9e", i ? ", " : "", (double)(float)v);
    else
      text_append(b, &attrs, "%s%.17e", i ? ", " : "", v);
  }
  text_append(b, &attrs, "]> : %s", hlo_type_print(&type, ty, sizeof ty));
  hlo_value result = hlo_failed(b) ? HLO_INVALID : emit_op(b, "stablehlo.constant", NULL, 0, attrs.data, type);
  free(attrs.data);
  return result;
}

hlo_value hlo_table_lookup(hlo_builder* b, hlo_value table, hlo_value index) {
  const hlo_type* it = hlo_type_of(b, index);
  hlo_type result = hlo_type_make(hlo_type_of(b, table)->dtype, it->rank, it->dims);
  int64_t zero = 0, one = 1;
  /* each index picks one entry: no window dims, the table's dim collapsed,
   * the index vector an implicit trailing dim of size 1 */
  hlo_gather_dims g = {NULL, 0, &zero, 1, &zero, 1, it->rank, &one};
  return hlo_gather(b, table, index, &g, result);
}
