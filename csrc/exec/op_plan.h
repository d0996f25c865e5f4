/* Inside exec/: plans (one per input signature), their compiled variants
 * (one per output layout) and where each program parameter comes from. */
#ifndef TPU_EXEC_OP_PLAN_H
#define TPU_EXEC_OP_PLAN_H

#include "exec/view.h"
#include "ops/lowering.h"

#define MAX_OUTPUTS 4096 /* a foreach op writes one output per list item */

/* Where a tensor comes from in a call: an argument, a list item, an output. */
typedef struct tensor_ref {
  int arg;  /* argument index, or -1 for an output */
  int item; /* list item, output index, or -1 */
} tensor_ref;

typedef enum param_kind {
  PARAM_STORAGE, /* the flat storage of ref's buffer */
  PARAM_OFFSET,  /* ref's element offset, i64 */
  PARAM_SCALAR,  /* argument `ref.arg`'s Python number */
  PARAM_RNG,     /* argument `ref.arg`'s (seed, offset) as ui64[2] */
  PARAM_SCALAR_LIST, /* argument `ref.arg`'s Scalar[] as f64[n] */
} param_kind;

typedef struct param_source {
  param_kind kind;
  tensor_ref ref;
  tpu_dtype dtype; /* storage dtype to materialize as, or the scalar's dtype */
} param_source;

typedef struct op_variant {
  uint64_t hash;
  unsigned char* key; /* output layout signature */
  size_t key_size;
  struct cached_program* program; /* owned by the program cache */
  param_source* params;
  int param_count;
  bool* donated;            /* per parameter: a storage the program writes in place; NULL if none */
  int* result_outputs;      /* output whose storage takes result i */
  tpu_dtype* result_dtypes; /* that storage's dtype */
  int result_count;
  bool* kept;               /* per output: left as it was (tpu_lower_keep_output); NULL if none;
                               plan_mark_lowered hands it to the plan */
  struct op_variant* next;
} op_variant;

struct tpu_op_plan {
  uint64_t hash;
  unsigned char* key; /* input signature */
  size_t key_size;
  const tpu_op_entry* entry;
  int output_count;
  struct op_output {
    tpu_dtype dtype;
    int rank;
    int64_t sizes[TPU_MAX_RANK];
    bool strided; /* else contiguous */
    int64_t strides[TPU_MAX_RANK];
  } * outputs; /* output_count entries */
  void* host_data;
  op_variant* variants;
  bool lowered; /* some call of this signature lowered without error */
  bool* kept;   /* per output: the lowering leaves it as it was; NULL if none (set with lowered) */
  struct tpu_op_plan* next; /* hash chain */
};

/* Notes that `variant` lowered: the plan is lowered and takes the outputs
 * the lowering kept (the same for every variant of a plan). */
void plan_mark_lowered(tpu_op_plan* plan, op_variant* variant);

/* The tensor a ref names in `call`; NULL if the ref is absent (None). */
const tpu_tensor* ref_tensor(const tpu_op_call* call, tensor_ref ref);

/* Lowers `call` with `plan`'s output types into MLIR text and fills the
 * variant's parameter sources and results (exec/lowering.c). */
tpu_status lower_call(const tpu_op_plan* plan, const tpu_op_call* call, op_variant* variant,
                      char** out_text, size_t* out_size);

/* Finishes a program returning each written storage's new value (flat).
 * A storage written whole is returned in the shape it was computed in where
 * the plugin lets later programs read it as flat (tpu_pjrt_buffers_shape_free):
 * XLA CPU runs a fusion whose result is reshaped to 1-d as a loop over the
 * flat index, and a broadcast inside it (a bias, a norm's statistics) then
 * stops vectorization; a linear layer and GELU in one program ran 5x slower. */
tpu_status finish_program(hlo_builder* b, hlo_value* results, int count, int* result_params, char** out_text,
                          size_t* out_size);
/* result_params (NULL: none) names, per result, the parameter holding the
 * same storage's old value, or -1. finish_program keeps each such pair the
 * program can write in place (same dtype and size, and same shape unless
 * the plugin's buffers are shape-free) whose storage is large enough to be
 * worth it (IN_PLACE_MIN_BYTES, 1 MiB) and sets the others to -1.
 * donated_params turns the pairs into a per-parameter flag array
 * (malloc'd), or NULL when there are none (or no memory: nothing donated). */
bool* donated_params(const int* result_params, int result_count, int param_count);

/* The call's output layout signature (views and storages; not aliasing,
 * which a graph's storage slots fix), valid until the thread's next
 * signature. */
tpu_status op_output_signature(const tpu_op_call* call, const unsigned char** out_data, size_t* out_len);

/* The op's base name: "add_" -> "add"; dunder names are kept. */
void op_base_name(const char* name, char* out, size_t size);

#endif
