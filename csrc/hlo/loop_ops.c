/* Counted loops as one stablehlo.while: the step number and the count are
 * carried first (a region sees only what it is given), the condition
 * compares them, and the body adds one to the step. */
#include <stdlib.h>
#include <string.h>

#include "hlo/builder_impl.h"
#include "hlo/loop_ops.h"

#define MAX_CARRIED 16

/* Moves the builder's finished region out, leaving none pending. */
static hlo_text take_region(hlo_builder* b) {
  hlo_text region = b->region;
  b->region = (hlo_text){0};
  return region;
}

void hlo_counted_loop(hlo_builder* b, hlo_value count, const hlo_value* init, int n, hlo_loop_body_fn body,
                      const void* context, hlo_value* out) {
  enum { STEP, COUNT, FIRST };
  for (int i = 0; i < n; i++) out[i] = init[i];
  if (!values_valid(b, init, n) || !values_valid(b, &count, 1)) return;
  if (n + FIRST > MAX_CARRIED) {
    hlo_fail(b, TPU_INTERNAL, "a loop carries at most %d values, got %d", MAX_CARRIED - FIRST, n);
    return;
  }
  hlo_type types[MAX_CARRIED];
  hlo_value operands[MAX_CARRIED], args[MAX_CARRIED], results[MAX_CARRIED];
  for (int i = 0; i < n + FIRST; i++) args[i] = results[i] = HLO_INVALID; /* as they stay if a region fails */
  types[STEP] = types[COUNT] = hlo_type_make(TPU_I64, 0, NULL);
  operands[STEP] = hlo_constant_i64(b, TPU_I64, 0);
  operands[COUNT] = hlo_convert(b, count, TPU_I64);
  for (int i = 0; i < n; i++) {
    types[FIRST + i] = *hlo_type_of(b, init[i]);
    operands[FIRST + i] = init[i];
  }

  region_begin(b, types, n + FIRST, args);
  hlo_value more = hlo_compare(b, "LT", args[STEP], args[COUNT]);
  region_end(b, &more, 1);
  hlo_text condition = take_region(b);

  region_begin(b, types, n + FIRST, args);
  results[STEP] = hlo_binary(b, "add", args[STEP], hlo_constant_i64(b, TPU_I64, 1));
  results[COUNT] = args[COUNT];
  body(b, args[STEP], args + FIRST, results + FIRST, context);
  for (int i = 0; i < n && !hlo_failed(b); i++)
    if (!hlo_type_equal(hlo_type_of(b, results[FIRST + i]), &types[FIRST + i]))
      hlo_fail(b, TPU_INTERNAL, "a loop body changed the type of carried value %d", i);
  region_end(b, results, n + FIRST);
  hlo_text step = take_region(b);

  /* The op's two regions, condition first. */
  text_append(b, &b->region, "%.*s, %.*s", (int)condition.len, condition.data, (int)step.len, step.data);
  free(condition.data);
  free(step.data);
  hlo_value first = new_results(b, types, n + FIRST);
  if (first == HLO_INVALID) return;
  emit_op_results(b, "stablehlo.while", operands, n + FIRST, NULL, types, n + FIRST, first);
  for (int i = 0; i < n; i++) out[i] = first + FIRST + i;
}
