/* Inside the builder: shared by builder.c and the op emitters beside it.
 * Only csrc/hlo/ includes this. */
#ifndef TPU_HLO_BUILDER_IMPL_H
#define TPU_HLO_BUILDER_IMPL_H

#include "hlo/builder.h"

#define HLO_MAX_DEPTH 4 /* function body plus nested regions */

typedef struct hlo_text {
  char* data; /* heap; not NUL-terminated beyond len */
  size_t len;
  size_t cap;
} hlo_text;

typedef struct hlo_value_info {
  hlo_type type;
  char name[24]; /* "%v12" or "%v12#1" */
  hlo_value reshape_of; /* the operand when a reshape made it, else HLO_INVALID */
} hlo_value_info;

struct hlo_builder {
  hlo_value_info* values; /* indexed by hlo_value */
  int value_count;
  int value_cap;
  hlo_value* params;              /* the parameters in call order, printed at finish */
  int param_count;
  int param_cap;
  hlo_text texts[HLO_MAX_DEPTH];  /* [0] function body, [1..] regions being built */
  int depth;
  hlo_text region;                /* a finished region waiting for its op */
  tpu_status status;              /* first error; sticky */
  hlo_precision precision;        /* for float32 dot_general and convolution */
};

void text_append(hlo_builder* b, hlo_text* t, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
void text_append_i64s(hlo_builder* b, hlo_text* t, const int64_t* v, int n);
hlo_text* current_text(hlo_builder* b);

bool values_valid(hlo_builder* b, const hlo_value* vs, int n);
hlo_value new_value(hlo_builder* b, hlo_type type, int result_index);
const char* value_name(const hlo_builder* b, hlo_value v);

hlo_value emit_op(hlo_builder* b, const char* op, const hlo_value* operands, int n,
                  const char* attrs, hlo_type result);
void emit_op_results(hlo_builder* b, const char* op, const hlo_value* operands, int n,
                     const char* attrs, const hlo_type* results, int result_count,
                     hlo_value first);
/* Allocates `count` consecutive values named as results #0..#count-1 of one op. */
hlo_value new_results(hlo_builder* b, const hlo_type* types, int count);

/* hlo_convert where either side is a float8 type: c10's rounding and NaN
 * bits (float8.c). */
hlo_value hlo_convert_float8(hlo_builder* b, hlo_value x, tpu_dtype dtype);

/* A stablehlo.reduce of x over dims whose region combines two 0-d values
 * with `combine` (shared by the reductions in reduce.c and beside it). */
hlo_value reduce_with_region(hlo_builder* b, hlo_value x, hlo_value init, const int64_t* dims,
                             int dim_count, hlo_combine_fn combine, const void* context);

void region_begin(hlo_builder* b, const hlo_type* arg_types, int n, hlo_value* out_args);
void region_end(hlo_builder* b, const hlo_value* results, int n);

/* Appends ", precision_config = [..]" to attrs[len..] when lhs or rhs is
 * float32 and the builder's precision is not DEFAULT; returns the new length. */
size_t precision_attr(const hlo_builder* b, hlo_value lhs, hlo_value rhs, char* attrs, size_t size,
                      size_t len);

/* "array<i64: 1, 2>" into a small attribute string. */
void attr_i64_array(char* buf, size_t size, const char* name, const int64_t* v, int n);
/* "[1, 2]" list for #stablehlo.* attributes. */
void attr_i64_list(char* buf, size_t size, const int64_t* v, int n);

#endif
