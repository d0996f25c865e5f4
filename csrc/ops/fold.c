/* F.unfold and F.fold. im2col(self, kernel_size, dilation, padding,
 * stride) copies each sliding block of a [C, H, W] (or [N, C, H, W]) image
 * into a column of [C*kh*kw, L] (or [N, ...]), L the number of blocks, the
 * column's rows in (channel, kernel row, kernel column) order.
 * col2im(self, output_size, kernel_size, dilation, padding, stride) adds
 * the columns back at their positions. Each is the other's backward. One
 * strided slice (im2col) or one interior-padded add (col2im) per kernel
 * position; the sums of col2im run in float32 for float16/bfloat16.
 * unfold_backward (Tensor.unfold's backward, and istft's overlap-add) adds
 * each window back at its place along its dim: one scatter-add. */
#include "hlo/conv_ops.h"
#include "hlo/slice_ops.h"
#include "ops/families.h"

typedef struct fold_params {
  int64_t kernel[2], dilation[2], padding[2], stride[2];
  int64_t size[2];   /* the image's H, W */
  int64_t blocks[2]; /* blocks along H and W */
} fold_params;

/* kernel, dilation, padding and stride from argument `first` on, for an
 * image of `size`; false (the lowering failed) if they make no block. */
static bool read_params(tpu_lowering* l, int first, const int64_t* size, fold_params* p) {
  int64_t* lists[4] = {p->kernel, p->dilation, p->padding, p->stride};
  for (int k = 0; k < 4; k++) {
    const int64_t* items;
    if (tpu_lower_int_list(l, first + k, &items) != 2) {
      tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::%s: kernel_size, dilation, padding and stride "
                     "take 2 values each", tpu_lower_op_name(l));
      return false;
    }
    lists[k][0] = items[0];
    lists[k][1] = items[1];
  }
  for (int i = 0; i < 2; i++) {
    p->size[i] = size[i];
    int64_t span = p->dilation[i] * (p->kernel[i] - 1) + 1;
    p->blocks[i] = p->stride[i] > 0 ? (size[i] + 2 * p->padding[i] - span) / p->stride[i] + 1 : 0;
    if (p->kernel[i] < 1 || p->blocks[i] < 1) {
      tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::%s: a %lldx%lld kernel fits no block of a %lldx%lld "
                     "image", tpu_lower_op_name(l), (long long)p->kernel[0], (long long)p->kernel[1],
                     (long long)size[0], (long long)size[1]);
      return false;
    }
  }
  return true;
}

static tpu_status lower_im2col(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type in = tpu_lower_arg_type(l, 0), out = tpu_lower_output_type(l, 0);
  fold_params p;
  if (!read_params(l, 1, in.dims + in.rank - 2, &p)) return NULL;
  hlo_value x = tpu_lower_tensor(l, 0);
  int64_t lo[TPU_MAX_RANK] = {0}, hi[TPU_MAX_RANK] = {0}, interior[TPU_MAX_RANK] = {0};
  for (int i = 0; i < 2; i++) lo[in.rank - 2 + i] = hi[in.rank - 2 + i] = p.padding[i];
  hlo_value padded = hlo_pad(b, x, hlo_constant(b, in.dtype, 0), lo, hi, interior);
  /* [.., C, kh*kw, blocks H, blocks W], read as [.., C*kh*kw, L]. */
  int64_t first[2] = {0, 0};
  hlo_value patches = hlo_patches(b, padded, 2, first, p.kernel, p.dilation, p.stride, p.blocks);
  tpu_lower_set_output(l, 0, hlo_reshape(b, patches, out.rank, out.dims));
  return NULL;
}

/* The [.., C, blocks H, blocks W] grid of kernel position (ki, kj)'s
 * elements in an image of `rank` padded by p->padding. */
static void block_grid(const fold_params* p, int rank, const int64_t* dims, int64_t ki, int64_t kj,
                       int64_t* start, int64_t* limit, int64_t* step) {
  for (int d = 0; d < rank; d++) start[d] = 0, limit[d] = dims[d], step[d] = 1;
  int64_t k[2] = {ki, kj};
  for (int i = 0; i < 2; i++) {
    int d = rank - 2 + i;
    start[d] = k[i] * p->dilation[i];
    limit[d] = start[d] + (p->blocks[i] - 1) * p->stride[i] + 1;
    step[d] = p->stride[i];
  }
}

static tpu_status lower_col2im(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type in = tpu_lower_arg_type(l, 0), out = tpu_lower_output_type(l, 0);
  tpu_dtype t = tpu_dtype_compute(out.dtype);
  fold_params p;
  if (!read_params(l, 2, out.dims + out.rank - 2, &p)) return NULL;
  int64_t positions = p.kernel[0] * p.kernel[1];
  /* [.., C*kh*kw, L] as [.., C, kh*kw, blocks H, blocks W] */
  hlo_type split = out;
  split.rank = out.rank + 1;
  split.dims[out.rank - 2] = positions;
  split.dims[out.rank - 1] = p.blocks[0];
  split.dims[out.rank] = p.blocks[1];
  if (in.dims[in.rank - 1] != p.blocks[0] * p.blocks[1]) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::col2im: %lld columns where the kernel, dilation, "
                   "padding and stride give %lld blocks", (long long)in.dims[in.rank - 1],
                   (long long)(p.blocks[0] * p.blocks[1]));
    return NULL;
  }
  hlo_value cols = hlo_reshape(b, tpu_lower_value(l, 0, t), split.rank, split.dims);
  hlo_type padded = out;
  padded.dtype = t;
  for (int i = 0; i < 2; i++) padded.dims[out.rank - 2 + i] += 2 * p.padding[i];
  hlo_value sum = hlo_filled(b, t, padded.rank, padded.dims, 0);
  hlo_type one = split;  /* one kernel position: [.., C, blocks H, blocks W] */
  for (int d = out.rank - 2; d < out.rank; d++) one.dims[d] = split.dims[d + 1];
  one.rank = out.rank;
  for (int64_t k = 0; k < positions; k++) {
    hlo_value blocks = hlo_reshape(b, hlo_slice_dim(b, cols, out.rank - 2, k, k + 1), one.rank, one.dims);
    /* Spread the blocks to their places in the padded image. */
    int64_t grid_start[TPU_MAX_RANK], grid_limit[TPU_MAX_RANK], grid_step[TPU_MAX_RANK];
    block_grid(&p, out.rank, padded.dims, k / p.kernel[1], k % p.kernel[1], grid_start, grid_limit, grid_step);
    int64_t lo[TPU_MAX_RANK] = {0}, hi[TPU_MAX_RANK] = {0}, interior[TPU_MAX_RANK] = {0};
    for (int d = out.rank - 2; d < out.rank; d++) {
      lo[d] = grid_start[d];
      hi[d] = padded.dims[d] - grid_limit[d];
      interior[d] = grid_step[d] - 1;
    }
    sum = hlo_binary(b, "add", sum, hlo_pad(b, blocks, hlo_constant(b, t, 0), lo, hi, interior));
  }
  int64_t start[TPU_MAX_RANK] = {0}, limit[TPU_MAX_RANK], step[TPU_MAX_RANK];
  for (int d = 0; d < out.rank; d++) limit[d] = out.dims[d], step[d] = 1;
  for (int i = 0; i < 2; i++) {
    start[out.rank - 2 + i] = p.padding[i];
    limit[out.rank - 2 + i] = p.padding[i] + p.size[i];
  }
  tpu_lower_set_output(l, 0, hlo_slice(b, sum, start, limit, step));
  return NULL;
}

/* unfold_backward(grad_in, input_sizes, dim, size, step): grad_in is
 * [.., windows (at dim), .., size]; entry (w, k) adds to position
 * w * step + k of dim. The windows and their entries become rows of a
 * scatter-add into the input's shape with dim moved first. */
static tpu_status lower_unfold_backward(tpu_lowering* l) {
  hlo_builder* b = tpu_lower_builder(l);
  hlo_type out = tpu_lower_output_type(l, 0), in = tpu_lower_arg_type(l, 0);
  int64_t dim = tpu_lower_int(l, 2, 0), size = tpu_lower_int(l, 3, 1), step = tpu_lower_int(l, 4, 1);
  if (out.rank > 0 && dim < 0) dim += out.rank;
  int64_t windows = in.rank == out.rank + 1 && out.rank > 0 && dim >= 0 && dim < out.rank ? in.dims[dim] : -1;
  if (windows < 0 || in.dims[in.rank - 1] != size || step < 1 || (windows && (windows - 1) * step + size > out.dims[dim])) {
    tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::unfold_backward: a gradient of rank %d does not hold windows "
                   "of size %lld, step %lld along dim %lld of a rank-%d input", in.rank, (long long)size,
                   (long long)step, (long long)tpu_lower_int(l, 2, 0), out.rank);
    return NULL;
  }
  tpu_dtype t = tpu_dtype_compute(out.dtype);
  /* grad as [windows * size, other dims in order], positions to match */
  int64_t perm[TPU_MAX_RANK + 1], rows[TPU_MAX_RANK], back[TPU_MAX_RANK];
  int k = 0;
  perm[k++] = dim;
  perm[k++] = in.rank - 1;
  rows[0] = windows * size;
  for (int d = 0; d < out.rank; d++)
    if (d != dim) rows[k - 1] = out.dims[d], perm[k++] = d;
  hlo_value grad = hlo_reshape(b, hlo_transpose(b, tpu_lower_value(l, 0, t), perm), out.rank, rows);
  hlo_type grid = hlo_type_make(TPU_I64, 2, (int64_t[]){windows, size});
  hlo_value at = hlo_binary(b, "add", hlo_binary_constant(b, "multiply", hlo_iota(b, grid, 0), (double)step),
                            hlo_iota(b, grid, 1));
  at = hlo_reshape(b, at, 2, (int64_t[]){windows * size, 1});
  hlo_type moved = out;  /* the input's shape, dim first */
  moved.dims[0] = out.dims[dim];
  for (int d = 1; d < out.rank; d++) moved.dims[d] = rows[d];
  int64_t window[TPU_MAX_RANK], zero = 0;
  for (int d = 1; d < out.rank; d++) window[d - 1] = d;
  hlo_scatter_dims s = {window, out.rank - 1, &zero, 1, &zero, 1, 1};
  hlo_value sum = hlo_scatter(b, hlo_filled(b, t, moved.rank, moved.dims, 0), at, grad, &s, "add");
  for (int d = 0; d < out.rank; d++) back[d] = d == dim ? 0 : d < dim ? d + 1 : d;
  tpu_lower_set_output(l, 0, hlo_transpose(b, sum, back));
  return NULL;
}

static const tpu_op_entry entries[] = {
    {"col2im", lower_col2im, TPU_OP_COMPLEX},
    {"im2col", lower_im2col, TPU_OP_COMPLEX},
    {"unfold_backward", lower_unfold_backward, TPU_OP_COMPLEX},
};

TPU_OP_FAMILY(tpu_ops_fold, entries);
