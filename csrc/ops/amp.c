/* Gradient scaling for mixed-precision training (torch.amp.GradScaler):
 * unscaling the gradients while looking for infs and NaNs, and updating the
 * scale from what was found. Both stay on the device, so a fused optimizer
 * (which takes found_inf itself) steps without a host sync. */
#include <stdlib.h>

#include "ops/families.h"

/* Whether no element of x is inf or NaN, 0-d. */
static hlo_value all_finite(hlo_builder* b, hlo_value x) {
  int rank = hlo_type_of(b, x)->rank;
  hlo_value finite = hlo_unary(b, "is_finite", x);
  if (rank == 0) return finite;
  int64_t dims[TPU_MAX_RANK];
  for (int d = 0; d < rank; d++) dims[d] = d;
  return hlo_reduce(b, finite, hlo_constant(b, TPU_BOOL, 1), "and", dims, rank);
}

/* _amp_foreach_non_finite_check_and_unscale_(self[], found_inf, inv_scale):
 * each gradient times inv_scale (float16/bfloat16 in float32, as ATen
 * computes); found_inf becomes 1 if any gradient held an inf or NaN before
 * unscaling, and otherwise keeps its value (callers zero it).
 * Outputs: the gradients, then found_inf. */
static tpu_status lower_unscale(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  int n = tpu_lower_tensor_list_count(l, 0);
  if (tpu_lower_output_count(l) != n + 1) {
    tpu_lower_fail(l, TPU_INTERNAL, "aten::%s_: %d outputs for %d gradients", tpu_lower_op_name(l),
                   tpu_lower_output_count(l), n);
    return NULL;
  }
  hlo_value* grads = malloc((size_t)(n ? n : 1) * sizeof *grads);
  if (!grads) {
    hlo_fail(b, TPU_OUT_OF_MEMORY, "out of host memory lowering aten::%s_", tpu_lower_op_name(l));
    return NULL;
  }
  tpu_lower_tensor_list(l, 0, grads, n);
  hlo_value finite = hlo_constant(b, TPU_BOOL, 1);
  for (int k = 0; k < n && !hlo_failed(b); k++) {
    tpu_dtype dtype = tpu_dtype_compute(tpu_lower_tensor_list_type(l, 0, k).dtype);
    hlo_value grad = hlo_convert(b, grads[k], dtype);
    finite = hlo_binary(b, "and", finite, all_finite(b, grad));
    const hlo_type* t = hlo_type_of(b, grad);
    hlo_value inv_scale = hlo_broadcast_to(b, tpu_lower_single(l, 2, dtype), t->rank, t->dims);
    tpu_lower_set_output(l, k, hlo_binary(b, "multiply", grad, inv_scale));
  }
  free(grads);
  hlo_type found = tpu_lower_output_type(l, n);
  hlo_value old = tpu_lower_value(l, 1, found.dtype);
  hlo_value pred = hlo_broadcast_to(b, finite, found.rank, found.dims);
  tpu_lower_set_output(l, n, hlo_select(b, pred, old, hlo_constant_like(b, old, 1)));
  return NULL;
}

/* _amp_update_scale_(scale, growth_tracker, found_inf, growth_factor,
 * backoff_factor, growth_interval): after an inf, the scale backs off and
 * the tracker restarts; after growth_interval clean steps in a row the
 * scale grows (unless that overflows) and the tracker restarts; otherwise
 * the tracker counts the step. Outputs: scale, growth_tracker. */
static tpu_status lower_update_scale(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type scale_type = tpu_lower_output_type(l, 0), tracker_type = tpu_lower_output_type(l, 1);
  hlo_value scale = tpu_lower_single(l, 0, TPU_F32);
  hlo_value tracker = tpu_lower_single(l, 1, TPU_I32);
  hlo_value found = hlo_compare(b, "NE", tpu_lower_single(l, 2, TPU_F32), hlo_constant(b, TPU_F32, 0));
  hlo_value counted = hlo_binary(b, "add", tracker, hlo_constant(b, TPU_I32, 1));
  hlo_value interval = hlo_constant_i64(b, TPU_I32, tpu_lower_int(l, 5, 2000));
  hlo_value grow = hlo_compare(b, "EQ", counted, interval);
  hlo_value grown = hlo_binary(b, "multiply", scale, hlo_constant(b, TPU_F32, tpu_lower_float(l, 3, 2.0)));
  grown = hlo_select(b, all_finite(b, grown), grown, scale);
  hlo_value backed_off = hlo_binary(b, "multiply", scale, hlo_constant(b, TPU_F32, tpu_lower_float(l, 4, 0.5)));
  hlo_value zero = hlo_constant(b, TPU_I32, 0);
  hlo_value new_scale = hlo_select(b, found, backed_off, hlo_select(b, grow, grown, scale));
  hlo_value new_tracker = hlo_select(b, found, zero, hlo_select(b, grow, zero, counted));
  tpu_lower_set_output(l, 0, hlo_broadcast_to(b, new_scale, scale_type.rank, scale_type.dims));
  tpu_lower_set_output(l, 1, hlo_broadcast_to(b, new_tracker, tracker_type.rank, tracker_type.dims));
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"_amp_foreach_non_finite_check_and_unscale", lower_unscale, 0},
    {"_amp_update_scale", lower_update_scale, 0},
};

TPU_OP_FAMILY(tpu_ops_amp, entries);
