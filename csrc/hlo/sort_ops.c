/* Sort: stablehlo.sort with a comparator that orders NaN as PyTorch does
 * (a plain LT leaves NaN unordered, so it would land anywhere). */
#include <stdio.h>

#include "hlo/builder_impl.h"
#include "hlo/sort_ops.h"

#define MAX_SORTED 4

/* a before b ascending: a < b, or b is NaN and a is not. */
static hlo_value ascending_before(hlo_builder* b, hlo_value x, hlo_value y) {
  hlo_value less = hlo_compare(b, "LT", x, y);
  if (!tpu_dtype_is_float(hlo_type_of(b, x)->dtype)) return less;
  hlo_value y_nan = hlo_compare(b, "NE", y, y), x_number = hlo_compare(b, "EQ", x, x);
  return hlo_binary(b, "or", less, hlo_binary(b, "and", y_nan, x_number));
}

void hlo_sort(hlo_builder* b, const hlo_value* xs, int count, int dim, bool descending,
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
  /* Descending is ascending with the operands swapped; a stable sort then
   * keeps equal keys in their original order either way. */
  hlo_value before = descending ? ascending_before(b, args[1], args[0])
                                : ascending_before(b, args[0], args[1]);
  region_end(b, &before, 1);
  char attrs[64];
  snprintf(attrs, sizeof attrs, "dimension = %d : i64, is_stable = true", dim);
  hlo_value first = new_results(b, types, count);
  if (first == HLO_INVALID) return;
  emit_op_results(b, "stablehlo.sort", xs, count, attrs, types, count, first);
  for (int i = 0; i < count; i++) out_sorted[i] = first + i;
}
