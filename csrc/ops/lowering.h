/* What an op lowering sees: the op's arguments as StableHLO values or
 * compile-time attributes, the output types, and a builder to add ops to.
 * A lowering reads arguments by position (the ATen schema order, out=
 * arguments excluded), builds its result and sets each output. Views,
 * dtype conversion of results and writes into outputs are done by exec/;
 * a lowering never sees strides. The same lowering serves eager and
 * compiled calls. */
#ifndef TPU_OPS_LOWERING_H
#define TPU_OPS_LOWERING_H

#include "hlo/builder.h"
#include "tpu/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tpu_lowering tpu_lowering;

/* The builder that ops are added to. */
hlo_builder* tpu_lower_builder(tpu_lowering* l);
const char* tpu_lower_op_name(const tpu_lowering* l);  /* "add" (no trailing '_') */
const char* tpu_lower_overload(const tpu_lowering* l); /* "Tensor", "out", "" */

int tpu_lower_arg_count(const tpu_lowering* l);
/* TPU_ARG_NONE for positions past the end (absent trailing defaults). */
tpu_arg_kind tpu_lower_arg_kind(const tpu_lowering* l, int index);
bool tpu_lower_is_none(const tpu_lowering* l, int index);

/* A tensor argument as a value of its logical shape and dtype. */
hlo_value tpu_lower_tensor(tpu_lowering* l, int index);
/* Type of a tensor (or scalar) argument without adding it to the program. */
hlo_type tpu_lower_arg_type(const tpu_lowering* l, int index);
/* Tensor-list entries; returns their count (<= max). Absent entries give HLO_INVALID. */
int tpu_lower_tensor_list(tpu_lowering* l, int index, hlo_value* out_values, int max);
int tpu_lower_tensor_list_count(const tpu_lowering* l, int index);
hlo_type tpu_lower_tensor_list_type(const tpu_lowering* l, int index, int item);
/* A tensor or scalar argument converted to `dtype`: tensors keep their shape,
 * scalars become 0-d runtime parameters (never compiled in). */
hlo_value tpu_lower_value(tpu_lowering* l, int index, tpu_dtype dtype);

/* Compile-time attributes; `fallback` when absent/None. */
int64_t tpu_lower_int(const tpu_lowering* l, int index, int64_t fallback);
double tpu_lower_float(const tpu_lowering* l, int index, double fallback);
bool tpu_lower_bool(const tpu_lowering* l, int index, bool fallback);
/* Int list; returns count; *out_items points into the call (valid during lowering). */
int tpu_lower_int_list(const tpu_lowering* l, int index, const int64_t** out_items);
/* Float list (float[]), compiled in; same contract as tpu_lower_int_list. */
int tpu_lower_float_list(const tpu_lowering* l, int index, const double** out_items);
/* A Scalar[] argument as one 1-D runtime parameter of its length, converted
 * to `dtype` (slice item k out of it). */
hlo_value tpu_lower_scalar_list(tpu_lowering* l, int index, tpu_dtype dtype);
tpu_dtype tpu_lower_dtype(const tpu_lowering* l, int index, tpu_dtype fallback);
const char* tpu_lower_string(const tpu_lowering* l, int index, const char* fallback);
/* The scalar's value baked in: only for ops whose table entry sets
 * scalars_in_key (their output shapes depend on it, like arange). */
double tpu_lower_scalar_constant(const tpu_lowering* l, int index);
/* The generator state of a TPU_ARG_RNG argument as a tensor<2xui64> value. */
hlo_value tpu_lower_rng_state(tpu_lowering* l, int index);

int tpu_lower_output_count(const tpu_lowering* l);
hlo_type tpu_lower_output_type(const tpu_lowering* l, int index);
/* Sets output `index`; exec/ converts it to the output's dtype (and
 * broadcasts a lower-rank value to the output's shape). */
void tpu_lower_set_output(tpu_lowering* l, int index, hlo_value value);

/* Leaves output `index` as it is: nothing is written to it (an in-place
 * op's argument that this call does not change, as a fused optimizer's
 * gradients without a grad_scale). A later set_output overrides it. */
void tpu_lower_keep_output(tpu_lowering* l, int index);

/* Records a user-facing error (first wins) and returns HLO_INVALID; the
 * error carries the caller's file and line. */
#define tpu_lower_fail(l, code, ...) tpu_lower_fail_at((l), (code), __FILE__, __LINE__, __VA_ARGS__)
hlo_value tpu_lower_fail_at(tpu_lowering* l, tpu_status_code code, const char* file, int line, const char* fmt,
                            ...) __attribute__((format(printf, 5, 6)));

/* PyTorch's type promotion over the given argument positions (tensors by
 * dimensionality category, then 0-d tensors, then Python scalars). */
tpu_dtype tpu_lower_result_type(const tpu_lowering* l, const int* indices, int count);
tpu_dtype tpu_promote_types(tpu_dtype a, tpu_dtype b);

/* Common shape of the given arguments under broadcasting. */
hlo_type tpu_lower_broadcast_type(const tpu_lowering* l, const int* indices, int count,
                                  tpu_dtype dtype);
/* A number or a one-element tensor argument (a GradScaler's scale, a tensor
 * lr) as a 0-d value converted to `dtype`. */
hlo_value tpu_lower_single(tpu_lowering* l, int index, tpu_dtype dtype);
/* tpu_lower_value broadcast to `type`'s shape (and converted to its dtype). */
hlo_value tpu_lower_value_as(tpu_lowering* l, int index, const hlo_type* type);

typedef tpu_status (*tpu_lower_fn)(tpu_lowering* l);

typedef struct tpu_op_entry {
  const char* name;     /* ATen schema name without '_' suffix or namespace */
  tpu_lower_fn lower;
  unsigned flags;       /* TPU_OP_* */
} tpu_op_entry;

enum {
  TPU_OP_SCALARS_IN_KEY = 1, /* the program depends on scalar values (output shape) */
  TPU_OP_COMPLEX = 2,        /* the lowering handles complex tensors and numbers */
};

/* The lowering table (ops/registry.c): looks up the base name. */
const tpu_op_entry* tpu_op_find(const char* base_name);
/* Whether the op's lowering takes float8 tensors as ATen's CPU kernels do
 * (ops/float8.c); the others refuse them. */
bool tpu_op_takes_float8(const char* base_name);

#ifdef __cplusplus
}
#endif

#endif
