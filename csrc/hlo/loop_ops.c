/* Counted loops as one stablehlo.while: the step number is carried first,
 * the condition compares it with the count, and the body adds one to it. */
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

void hlo_counted_loop(hlo_builder* b, int64_t count, const hlo_value* init, int n, hlo_loop_body_fn body,
                      const void* context, hlo_value* out) {
  for (int i = 0; i < n; i++) out[i] = init[i];
  if (count <= 0 || !values_valid(b, init, n)) return;
  if (n + 1 > MAX_CARRIED) {
    hlo_fail(b, TPU_INTERNAL, "a loop carries at most %d values, got %d", MAX_CARRIED - 1, n);
    return;
  }
  hlo_type types[MAX_CARRIED];
  hlo_value operands[MAX_CARRIED], args[MAX_CARRIED], results[MAX_CARRIED];
  for (int i = 0; i <= n; i++) args[i] = results[i] = HLO_INVALID; /* as they stay if a region fails */
  types[0] = hlo_type_make(TPU_I64, 0, NULL);
  operands[0] = hlo_constant_i64(b, TPU_I64, 0);
  for (int i = 0; i < n; i++) {
    types[i + 1] = *hlo_type_of(b, init[i]);
    operands[i + 1] = init[i];
  }

  region_begin(b, types, n + 1, args);
  hlo_value more = hlo_compare(b, "LT", args[0], hlo_constant_i64(b, TPU_I64, count));
  region_end(b, &more, 1);
  hlo_text condition = take_region(b);

  region_begin(b, types, n + 1, args);
  results[0] = hlo_binary(b, "add", args[0], hlo_constant_i64(b, TPU_I64, 1));
  body(b, args[0], args + 1, results + 1, context);
  for (int i = 0; i < n && !hlo_failed(b); i++)
    if (!hlo_type_equal(hlo_type_of(b, results[i + 1]), &types[i + 1]))
      hlo_fail(b, TPU_INTERNAL, "a loop body changed the type of carried value %d", i);
  region_end(b, results, n + 1);
  hlo_text step = take_region(b);

  /* The op's two regions, condition first. */
  text_append(b, &b->region, "%.*s, %.*s", (int)condition.len, condition.data, (int)step.len, step.data);
  free(condition.data);
  free(step.data);
  hlo_value first = new_results(b, types, n + 1);
  if (first == HLO_INVALID) return;
  emit_op_results(b, "stablehlo.while", operands, n + 1, NULL, types, n + 1, first);
  for (int i = 0; i < n; i++) out[i] = first + 1 + i;
}
