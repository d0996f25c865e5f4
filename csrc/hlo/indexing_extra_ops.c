/* Sort: stablehlo.sort with a comparator on the first operand. */
#include <stdio.h>

#include "hlo/builder_impl.h"
#include "hlo/indexing_extra_ops.h"

#define MAX_SORTED 4

void hlo_sort_by_first(hlo_builder* b, const hlo_value* xs, int count, int dim,
                       hlo_value* out_sorted) {
  for (int i = 0; i < count; i++) out_sorted[i] = HLO_INVALID;
  if (count < 1 || count > MAX_SORTED) {
    hlo_fail(b, TPU_INTERNAL, "sort of %d values; 1 to %d are supported", count, MAX_SORTED);
    return;
  }
  if (!values_valid(b, xs, count)) return;
  hlo_type types[MAX_SORTED], scalars[2 * MAX_SORTED];
  for (int i = 0; i < count; i++) {
    types[i] = *hlo_type_of(b, xs[i]);
    /* The comparator takes (lhs, rhs) scalar pairs, one pair per operand. */
    scalars[2 * i] = scalars[2 * i + 1] = hlo_type_make(types[i].dtype, 0, NULL);
  }
  hlo_value args[2 * MAX_SORTED];
  region_begin(b, scalars, 2 * count, args);
  hlo_value less = hlo_compare(b, "LT", args[0], args[1]);
  region_end(b, &less, 1);
  char attrs[64];
  snprintf(attrs, sizeof attrs, "dimension = %d : i64, is_stable = true", dim);
  hlo_value first = new_results(b, types, count);
  if (first == HLO_INVALID) return;
  emit_op_results(b, "stablehlo.sort", xs, count, attrs, types, count, first);
  for (int i = 0; i < count; i++) out_sorted[i] = first + i;
}
