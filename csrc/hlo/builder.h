/* StableHLO module builder: add ops one by one, then finish to MLIR text.
 *
 * Values are small integers naming SSA values. The first error is sticky:
 * once an op fails (bad shapes, out of memory), every later call returns
 * HLO_INVALID and hlo_builder_finish reports that first error, so lowering
 * code can chain calls and check once. Text uses MLIR's generic op form and
 * only long-stable StableHLO syntax, so plugins of different ages parse it. */
#ifndef TPU_HLO_BUILDER_H
#define TPU_HLO_BUILDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpu/dtype.h"
#include "tpu/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hlo_builder hlo_builder;
typedef int hlo_value;
#define HLO_INVALID (-1)

typedef struct hlo_type {
  tpu_dtype dtype;
  int rank;
  int64_t dims[TPU_MAX_RANK];
} hlo_type;

hlo_type hlo_type_make(tpu_dtype dtype, int rank, const int64_t* dims);
int64_t hlo_type_numel(const hlo_type* type);
bool hlo_type_equal(const hlo_type* a, const hlo_type* b);
/* "tensor<2x3xf32>" into buf; returns buf. */
char* hlo_type_print(const hlo_type* type, char* buf, size_t size);
/* "[2, 3]", the shape as PyTorch prints it (for error messages); returns buf. */
char* hlo_shape_print(const hlo_type* type, char* buf, size_t size);

tpu_status hlo_builder_create(hlo_builder** out_builder);
void hlo_builder_free(hlo_builder* builder); /* accepts NULL */

/* The precision_config of the float32 dot_general and convolution ops added
 * from now on: how exactly the device multiplies (on a TPU, DEFAULT is one
 * bfloat16 pass, HIGH three, HIGHEST float32). DEFAULT until set. */
typedef enum hlo_precision { HLO_PRECISION_DEFAULT = 0, HLO_PRECISION_HIGH, HLO_PRECISION_HIGHEST } hlo_precision;
void hlo_set_precision(hlo_builder* b, hlo_precision precision);

/* Records an error (first one wins) and returns HLO_INVALID. The macro
 * records the caller's file and line in the error, not the builder's. */
#define hlo_fail(b, code, ...) hlo_fail_at((b), (code), __FILE__, __LINE__, __VA_ARGS__)
hlo_value hlo_fail_at(hlo_builder* b, tpu_status_code code, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
bool hlo_failed(const hlo_builder* b);
/* The type of a value; a 0-d f32 placeholder for HLO_INVALID. The pointer
 * is valid only until the next value is added: copy it to keep it. */
const hlo_type* hlo_type_of(const hlo_builder* b, hlo_value v);

/* Appends a function parameter (in call order). */
hlo_value hlo_parameter(hlo_builder* b, hlo_type type);
int hlo_parameter_count(const hlo_builder* b);
hlo_value hlo_parameter_at(const hlo_builder* b, int index); /* HLO_INVALID out of range */
/* Makes the module text (malloc'd; caller frees) returning `results`.
 * Returns the sticky error if any op failed.
 * result_params (NULL: none) names for each result the parameter whose
 * buffer it may be written into (tf.aliasing_output), or -1: at most one
 * result a parameter, of its dtype and element count. A parameter aliased
 * to a result of another shape is declared in the result's shape (a plugin
 * whose buffers are shape-free takes it; see tpu_pjrt_buffers_shape_free). */
tpu_status hlo_builder_finish(hlo_builder* b, const hlo_value* results, int result_count,
                              const int* result_params, char** out_text, size_t* out_size);

/* Constants: a 0-d tensor of `dtype` holding `value` (exact for integers up
 * to 2^53; use hlo_constant_i64 beyond). */
hlo_value hlo_constant(hlo_builder* b, tpu_dtype dtype, double value);
hlo_value hlo_constant_i64(hlo_builder* b, tpu_dtype dtype, int64_t value);
/* The largest (or smallest) value of `dtype`, infinity for floats: the
 * identity of minimum (or maximum), what max pooling pads with. */
hlo_value hlo_constant_extreme(hlo_builder* b, tpu_dtype dtype, bool largest);
/* A tensor of `dtype` and shape dims[rank] holding `value` everywhere (dims
 * may point into the builder's own types). */
hlo_value hlo_filled(hlo_builder* b, tpu_dtype dtype, int rank, const int64_t* dims, double value);
/* A 0-d constant broadcast to `like`'s shape, in `like`'s dtype. */
hlo_value hlo_constant_like(hlo_builder* b, hlo_value like, double value);
hlo_value hlo_iota(hlo_builder* b, hlo_type type, int dimension);

/* Elementwise. `op` is the StableHLO name without prefix ("add", "negate").
 * Operands must have equal types (use hlo_broadcast_to / hlo_convert first). */
hlo_value hlo_unary(hlo_builder* b, const char* op, hlo_value x);
/* One of CHLO's special functions ("lgamma", "digamma", "polygamma"),
 * which XLA expands into primitives; operands of one float type. */
hlo_value hlo_chlo(hlo_builder* b, const char* op, const hlo_value* operands, int n);
hlo_value hlo_binary(hlo_builder* b, const char* op, hlo_value x, hlo_value y);
/* direction: "EQ", "NE", "LT", "LE", "GT", "GE". Result dtype bool. */
hlo_value hlo_compare(hlo_builder* b, const char* direction, hlo_value x, hlo_value y);
/* Shorthands for formulas: the four arithmetic ops, and x `op` k or x
 * compared with k, k a constant of x's dtype and shape. */
hlo_value hlo_add(hlo_builder* b, hlo_value x, hlo_value y);
hlo_value hlo_subtract(hlo_builder* b, hlo_value x, hlo_value y);
hlo_value hlo_multiply(hlo_builder* b, hlo_value x, hlo_value y);
hlo_value hlo_divide(hlo_builder* b, hlo_value x, hlo_value y);
hlo_value hlo_binary_constant(hlo_builder* b, const char* op, hlo_value x, double k);
hlo_value hlo_compare_constant(hlo_builder* b, const char* direction, hlo_value x, double k);
/* k where pred holds, x elsewhere (an edge value replacing a computed one). */
hlo_value hlo_select_constant(hlo_builder* b, hlo_value pred, double k, hlo_value x);
hlo_value hlo_select(hlo_builder* b, hlo_value pred, hlo_value on_true, hlo_value on_false);
/* x unchanged, but opaque to XLA's simplifier (it may not fold or reorder
 * arithmetic across it): for formulas whose rounding must stay as written. */
hlo_value hlo_optimization_barrier(hlo_builder* b, hlo_value x);
hlo_value hlo_convert(hlo_builder* b, hlo_value x, tpu_dtype dtype); /* no-op if same */
/* stablehlo.convert alone. hlo_convert to or from a float8 type adds
 * PyTorch's saturation and NaN bits (hlo/float8.c); this keeps XLA's, which
 * differ only for NaN and (float8_e4m3fn) overflow: the form XLA GPU's fp8
 * GEMM rewrite matches, for operands that feed a dot_general. */
hlo_value hlo_convert_plain(hlo_builder* b, hlo_value x, tpu_dtype dtype);
hlo_value hlo_bitcast_convert(hlo_builder* b, hlo_value x, tpu_dtype dtype); /* same size */

/* Shapes. */
hlo_value hlo_reshape(hlo_builder* b, hlo_value x, int rank, const int64_t* dims);
/* The value a chain of reshapes began from (v itself when v is no reshape):
 * the same elements in the same row-major order, in the shape they were
 * computed in. */
hlo_value hlo_reshape_origin(const hlo_builder* b, hlo_value v);
hlo_value hlo_broadcast_in_dim(hlo_builder* b, hlo_value x, int rank, const int64_t* dims,
                               const int64_t* broadcast_dims);
/* NumPy-style: aligns trailing dims; size-1 dims stretch. */
hlo_value hlo_broadcast_to(hlo_builder* b, hlo_value x, int rank, const int64_t* dims);
hlo_value hlo_transpose(hlo_builder* b, hlo_value x, const int64_t* permutation);
hlo_value hlo_slice(hlo_builder* b, hlo_value x, const int64_t* start, const int64_t* limit,
                    const int64_t* strides);
/* starts: one 0-d integer value per dimension. */
hlo_value hlo_dynamic_slice(hlo_builder* b, hlo_value x, const hlo_value* starts,
                            const int64_t* sizes);
hlo_value hlo_dynamic_update_slice(hlo_builder* b, hlo_value x, hlo_value update,
                                   const hlo_value* starts);
hlo_value hlo_concatenate(hlo_builder* b, const hlo_value* xs, int count, int dimension);
hlo_value hlo_pad(hlo_builder* b, hlo_value x, hlo_value pad_value, const int64_t* low,
                  const int64_t* high, const int64_t* interior);
hlo_value hlo_reverse(hlo_builder* b, hlo_value x, const int64_t* dims, int count);

/* A binary combine built from other ops (a reduction's region, a scan's
 * step): context is the caller's. */
typedef hlo_value (*hlo_combine_fn)(hlo_builder* b, hlo_value x, hlo_value y, const void* context);

/* Reductions over `dims` with a binary reducer ("add", "multiply", "maximum",
 * "minimum", "and", "or"); init is a 0-d value of x's dtype. */
hlo_value hlo_reduce(hlo_builder* b, hlo_value x, hlo_value init, const char* reducer,
                     const int64_t* dims, int dim_count);
/* The same over every dim of x: a 0-d value (x itself when x is 0-d). */
hlo_value hlo_reduce_all(hlo_builder* b, hlo_value x, hlo_value init, const char* reducer);
/* Index (i64) and value of the first max (is_max) or min along `dim`; NaN
 * wins, as in PyTorch. */
void hlo_arg_reduce(hlo_builder* b, hlo_value x, int dim, bool is_max, hlo_value* out_values,
                    hlo_value* out_indices);

hlo_value hlo_dot_general(hlo_builder* b, hlo_value lhs, hlo_value rhs, const int64_t* lhs_batch,
                          const int64_t* rhs_batch, int batch_count,
                          const int64_t* lhs_contract, const int64_t* rhs_contract,
                          int contract_count, tpu_dtype result_dtype);

/* Gather along one operand dimension: indices (integer, any shape) pick
 * entries of x along `dim` (torch.index_select/gather building block). See
 * gather.c for the dimension numbers used. */
typedef struct hlo_gather_dims {
  const int64_t* offset_dims;          int offset_count;
  const int64_t* collapsed_slice_dims; int collapsed_count;
  const int64_t* start_index_map;      int start_index_count;
  int64_t index_vector_dim;
  const int64_t* slice_sizes;          /* operand rank entries */
} hlo_gather_dims;
hlo_value hlo_gather(hlo_builder* b, hlo_value x, hlo_value indices, const hlo_gather_dims* dims,
                     hlo_type result_type);

typedef struct hlo_scatter_dims {
  const int64_t* update_window_dims;          int update_window_count;
  const int64_t* inserted_window_dims;        int inserted_count;
  const int64_t* scatter_dims_to_operand_dims; int scatter_dims_count;
  int64_t index_vector_dim;
} hlo_scatter_dims;
/* combiner: NULL overwrites, else a binary op name ("add"). */
hlo_value hlo_scatter(hlo_builder* b, hlo_value x, hlo_value indices, hlo_value updates,
                      const hlo_scatter_dims* dims, const char* combiner);

/* Random bits: state is a tensor<2xui64>-compatible u64 pair; returns the
 * bits as `bits_type` (an unsigned/int type) and the next state. */
void hlo_rng_bits(hlo_builder* b, hlo_value state, hlo_type bits_type, hlo_value* out_state,
                  hlo_value* out_bits);

#ifdef __cplusplus
}
#endif

#endif
