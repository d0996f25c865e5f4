/* _grouped_mm(mat_a, mat_b, offs, bias, out_dtype): one product per group,
 * the groups of a mixture-of-experts layer (torch.nn.functional.grouped_mm).
 * A 2-d operand is cut into groups along one dim at the int32 offsets
 * `offs` (group g spans [offs[g-1], offs[g]), offs[-1] read as 0; entries
 * past offs[-1] belong to no group); a 3-d operand holds one matrix per
 * group:
 *
 *   2-d x 3-d   (M, K) x (G, K, N) -> (M, N)     rows of mat_a grouped
 *   3-d x 2-d   (G, M, K) x (K, N) -> (M, N)     columns of mat_b grouped
 *   2-d x 2-d   (M, K) x (K, N) -> (G, M, N)     the contraction grouped
 *   3-d x 3-d   (G, M, K) x (G, K, N) -> (G, M, N), no offs: bmm
 *
 * XLA has no ragged product off TPU, so the grouped operand is masked once
 * per group and all groups multiply in one batched dot_general, then sum:
 * G times the arithmetic of the ragged product (JAX's ragged_dot does the
 * same on CPU and GPU). Rows or columns in no group come out 0. The output
 * shape and the argument checks are the glue's (PyTorch's meta kernel
 * describes CUDA's kernel: bfloat16 only). float16/bfloat16 accumulate in
 * float32. */
#include "ops/families.h"

/* x broadcast to (G, x's dims), zero where position i of x's dim `dim` is
 * outside group g. */
static hlo_value mask_groups(hlo_builder* b, hlo_value x, int dim, hlo_value offs, int64_t groups) {
  hlo_type xt = *hlo_type_of(b, x);
  int64_t length = xt.dims[dim], one = 1, zero = 0, head = groups - 1;
  hlo_value ends = hlo_convert(b, offs, TPU_I64);
  hlo_value starts = hlo_filled(b, TPU_I64, 1, &one, 0);
  if (groups > 1) {
    hlo_value parts[2] = {starts, hlo_slice(b, ends, &zero, &head, &one)};
    starts = hlo_concatenate(b, parts, 2, 0);
  }
  int64_t grid[2] = {groups, length}, grid_group = 0;
  hlo_value at = hlo_iota(b, hlo_type_make(TPU_I64, 2, grid), 1);
  hlo_value in = hlo_binary(b, "and",
                            hlo_compare(b, "GE", at, hlo_broadcast_in_dim(b, starts, 2, grid, &grid_group)),
                            hlo_compare(b, "LT", at, hlo_broadcast_in_dim(b, ends, 2, grid, &grid_group)));
  int64_t dims[TPU_MAX_RANK + 1] = {groups}, x_dims[TPU_MAX_RANK], mask_dims[2] = {0, dim + 1};
  for (int d = 0; d < xt.rank; d++) {
    dims[d + 1] = xt.dims[d];
    x_dims[d] = d + 1;
  }
  hlo_value wide = hlo_broadcast_in_dim(b, x, xt.rank + 1, dims, x_dims);
  return hlo_select(b, hlo_broadcast_in_dim(b, in, xt.rank + 1, dims, mask_dims), wide,
                    hlo_constant_like(b, wide, 0));
}

static tpu_status lower_grouped_mm(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  if (!tpu_lower_is_none(l, 3)) {
    tpu_lower_fail(l, TPU_UNIMPLEMENTED, "aten::_grouped_mm: bias= is not supported (as on the CPU); add it to the result");
    return NULL;
  }
  hlo_type a_type = tpu_lower_arg_type(l, 0), b_type = tpu_lower_arg_type(l, 1);
  tpu_dtype out = tpu_lower_output_type(l, 0).dtype, t = tpu_dtype_compute(out);
  hlo_value x = tpu_lower_value(l, 0, out), y = tpu_lower_value(l, 1, out);
  static const int64_t first[1] = {0}, two[1] = {2}, one[1] = {1};
  hlo_value r;
  if (a_type.rank == 3 && b_type.rank == 3) {
    r = hlo_dot_general(b, x, y, first, first, 1, two, one, 1, t);
  } else {
    hlo_value offs = tpu_lower_tensor(l, 2);
    int64_t groups = hlo_type_of(b, offs)->dims[0];
    if (a_type.rank == 2 && b_type.rank == 2) {
      /* (G, M, K) . (K, N): the groups' slices of the contraction. */
      r = hlo_dot_general(b, mask_groups(b, x, 1, offs, groups), y, NULL, NULL, 0, two, first, 1, t);
    } else {
      /* (G, M, K) . (G, K, N), then the sum over groups. */
      hlo_value lhs = a_type.rank == 2 ? mask_groups(b, x, 0, offs, groups) : x;
      hlo_value rhs = a_type.rank == 2 ? y : mask_groups(b, y, 1, offs, groups);
      r = hlo_reduce(b, hlo_dot_general(b, lhs, rhs, first, first, 1, two, one, 1, t), hlo_constant(b, t, 0),
                     "add", first, 1);
    }
  }
  tpu_lower_set_output(l, 0, r);
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"_grouped_mm", lower_grouped_mm, 0},
};

TPU_OP_FAMILY(tpu_ops_grouped_mm, entries);
