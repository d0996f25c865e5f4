/* Weight normalization (nn.utils.weight_norm and its parametrization):
 * _weight_norm_interface(v, g, dim) gives w = v * (g / |v|) and the norms
 * |v|, the 2-norm of v over every dim but `dim` (over all of v for dim -1),
 * kept as g's shape; its backward gives
 *
 *   grad_g = sum(grad_w * v) / |v|      over the same dims
 *   grad_v = (g / |v|) * (grad_w - v * grad_g / |v|)
 *
 * float16/bfloat16 compute in float32; the norms come out in float32 for
 * them, as PyTorch's kernels give. */
#include "ops/families.h"

/* Shapes (in the compute dtype) and the dims the norm covers: all but
 * `dim` (dim -1 keeps none), for v and g at these argument positions. */
typedef struct norm_shape {
  hlo_type v, g;
  tpu_dtype t;
  int64_t dims[TPU_MAX_RANK];
  int count;
} norm_shape;

static norm_shape norm_shape_of(tpu_lowering* l, int v_at, int g_at, int dim_at) {
  norm_shape n = {tpu_lower_arg_type(l, v_at), tpu_lower_arg_type(l, g_at), TPU_F32, {0}, 0};
  n.t = n.v.dtype = n.g.dtype = tpu_dtype_compute(n.v.dtype);
  int64_t dim = tpu_lower_int(l, dim_at, 0);
  for (int d = 0; d < n.v.rank; d++)
    if (d != dim) n.dims[n.count++] = d;
  return n;
}

/* sum over the norm's dims of x, in g's shape. */
static hlo_value sum_as_g(hlo_builder* b, hlo_value x, const norm_shape* n) {
  hlo_value s = hlo_reduce(b, x, hlo_constant(b, n->t, 0), "add", n->dims, n->count);
  return hlo_reshape(b, s, n->g.rank, n->g.dims);
}

/* A value in g's shape broadcast over v. */
static hlo_value over_v(hlo_builder* b, hlo_value per_g, const norm_shape* n) {
  return hlo_broadcast_to(b, per_g, n->v.rank, n->v.dims);
}

static tpu_status lower_weight_norm(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  norm_shape n = norm_shape_of(l, 0, 1, 2);
  hlo_value v = tpu_lower_value(l, 0, n.t), g = tpu_lower_value(l, 1, n.t);
  hlo_value norms = hlo_unary(b, "sqrt", sum_as_g(b, hlo_binary(b, "multiply", v, v), &n));
  tpu_lower_set_output(l, 0, hlo_binary(b, "multiply", v, over_v(b, hlo_binary(b, "divide", g, norms), &n)));
  tpu_lower_set_output(l, 1, norms);
  return NULL;
}

/* (grad_w, saved_v, saved_g, saved_norms, dim) -> (grad_v, grad_g). */
static tpu_status lower_weight_norm_backward(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  norm_shape n = norm_shape_of(l, 1, 2, 4);
  hlo_value grad = tpu_lower_value(l, 0, n.t), v = tpu_lower_value(l, 1, n.t), g = tpu_lower_value(l, 2, n.t);
  hlo_value norms = hlo_reshape(b, tpu_lower_value(l, 3, n.t), n.g.rank, n.g.dims);
  hlo_value grad_g = hlo_binary(b, "divide", sum_as_g(b, hlo_binary(b, "multiply", grad, v), &n), norms);
  hlo_value pull = hlo_binary(b, "multiply", v, over_v(b, hlo_binary(b, "divide", grad_g, norms), &n));
  tpu_lower_set_output(l, 0, hlo_binary(b, "multiply", over_v(b, hlo_binary(b, "divide", g, norms), &n),
                                        hlo_binary(b, "subtract", grad, pull)));
  tpu_lower_set_output(l, 1, grad_g);
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"_weight_norm_interface", lower_weight_norm, 0},
    {"_weight_norm_interface_backward", lower_weight_norm_backward, 0},
};

TPU_OP_FAMILY(tpu_ops_weight_norm, entries);
