/* Running reductions as reduce_window: each output element reduces a window
 * that ends at it and reaches back over the whole dimension (padded with the
 * identity). The work is quadratic in the dimension's size unless the
 * compiler rewrites the pattern into a scan. */
#include <stdio.h>

#include "hlo/builder_impl.h"
#include "hlo/reduce_extra_ops.h"

hlo_value hlo_cumulative(hlo_builder* b, hlo_value x, hlo_value init, const char* reducer,
                         int dim) {
  hlo_value operands[2] = {x, init};
  if (!values_valid(b, operands, 2)) return HLO_INVALID;
  hlo_type in = *hlo_type_of(b, x);
  if (dim < 0 || dim >= in.rank)
    return hlo_fail(b, TPU_INTERNAL, "cumulative dim %d out of range for rank %d", dim, in.rank);
  int64_t n = in.dims[dim];
  if (n <= 1) return x;
  int64_t window[TPU_MAX_RANK];
  char padding[TPU_MAX_RANK * 48 + 64];
  size_t len = (size_t)snprintf(padding, sizeof padding, "padding = dense<[");
  for (int i = 0; i < in.rank; i++) {
    window[i] = i == dim ? n : 1;
    len += (size_t)snprintf(padding + len, sizeof padding - len, "%s[%lld, 0]", i ? ", " : "",
                            (long long)(i == dim ? n - 1 : 0));
  }
  snprintf(padding + len, sizeof padding - len, "]> : tensor<%dx2xi64>", in.rank);
  hlo_type scalar = {in.dtype, 0, {0}};
  hlo_type arg_types[2] = {scalar, scalar};
  hlo_value args[2];
  region_begin(b, arg_types, 2, args);
  hlo_value r = hlo_binary(b, reducer, args[0], args[1]);
  region_end(b, &r, 1);
  char dims_attr[256], attrs[sizeof dims_attr + sizeof padding + 8];
  attr_i64_array(dims_attr, sizeof dims_attr, "window_dimensions", window, in.rank);
  snprintf(attrs, sizeof attrs, "%s, %s", dims_attr, padding);
  return emit_op(b, "stablehlo.reduce_window", operands, 2, attrs, in);
}
