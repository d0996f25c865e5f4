/* Builder ops for the convolution, pooling and resampling lowerings:
 * convolution, reduce_window and index arithmetic. */
#ifndef TPU_HLO_CONV_OPS_H
#define TPU_HLO_CONV_OPS_H

#include "hlo/builder.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HLO_MAX_SPATIAL (TPU_MAX_RANK - 2)

/* A convolution over `spatial` dims. Operands and result hold their two
 * non-spatial dims first and the spatial dims after, in order; the flags
 * say which of the two comes first. Padding may be negative (crops). */
typedef struct hlo_conv {
  int spatial;
  bool lhs_feature_first;  /* lhs is [f, b, ...] rather than [b, f, ...] */
  bool rhs_input_first;    /* rhs is [i, o, ...] rather than [o, i, ...] */
  bool out_feature_first;  /* result is [f, b, ...] rather than [b, f, ...] */
  int64_t strides[HLO_MAX_SPATIAL];
  int64_t pad_lo[HLO_MAX_SPATIAL];
  int64_t pad_hi[HLO_MAX_SPATIAL];
  int64_t lhs_dilation[HLO_MAX_SPATIAL];
  int64_t rhs_dilation[HLO_MAX_SPATIAL];
  int64_t feature_groups;  /* lhs features and rhs outputs split into groups */
  int64_t batch_groups;    /* lhs batch and rhs outputs split into groups */
} hlo_conv;

hlo_value hlo_convolution(hlo_builder* b, hlo_value lhs, hlo_value rhs, const hlo_conv* c,
                          tpu_dtype result_dtype);

/* A window over every dim of the operand (rank entries each). */
typedef struct hlo_window {
  int64_t dims[TPU_MAX_RANK];
  int64_t strides[TPU_MAX_RANK];
  int64_t dilations[TPU_MAX_RANK];
  int64_t pad_lo[TPU_MAX_RANK];
  int64_t pad_hi[TPU_MAX_RANK];
} hlo_window;

/* The patches of x's last n dims (padded already) under a sliding window:
 * for each kernel offset in the box from `first` spanning `span` (row-major
 * order), the strided slice starting at offset * dilation with `count`
 * elements `stride` apart, stacked on a new dim before the n:
 * [.., K, count...] (im2col, and convolutions as one dot). */
hlo_value hlo_patches(hlo_builder* b, hlo_value x, int n, const int64_t* first, const int64_t* span,
                      const int64_t* dilation, const int64_t* stride, const int64_t* count);

/* A window of size 1, stride 1, no padding for a rank-`rank` operand. */
hlo_window hlo_window_identity(int rank);

/* Combines each window of x with a binary reducer ("add", ...); padding
 * takes init, a 0-d value of x's dtype. */
hlo_value hlo_reduce_window(hlo_builder* b, hlo_value x, hlo_value init, const char* reducer,
                            const hlo_window* w);

/* The max of each window and the index (from `index`, an i64 tensor of x's
 * shape) where it sits: the first max, or the last NaN (NaN beats any
 * number), as PyTorch's pooling scan finds them. Padding
 * takes x_init and index_init. */
void hlo_reduce_window_argmax(hlo_builder* b, hlo_value x, hlo_value index, hlo_value x_init,
                              hlo_value index_init, const hlo_window* w, hlo_value* out_values,
                              hlo_value* out_indices);

#ifdef __cplusplus
}
#endif

#endif
