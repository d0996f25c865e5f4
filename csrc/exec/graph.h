/* Inside exec/: a graph of op calls built into one program. Fused eager
 * keeps one pending graph per device and runs it at a sync point; a
 * capture (torch.compile) turns one into a reusable tpu_program.
 *
 * Recording an op copies its call and notes its storages; nothing is
 * lowered then. At a sync point the graph's structure (each op's plan and
 * output layout, which storages each tensor is, which results are still
 * needed) is looked up among the graphs seen before: a training loop finds
 * its step there from the second step on and only binds new values to the
 * cached program's parameters. A new structure is lowered op by op into one
 * builder, exactly as a single op would be (exec/lowering.c asks here where
 * storages and parameters come from). */
#ifndef TPU_EXEC_GRAPH_H
#define TPU_EXEC_GRAPH_H

#include "exec/op_plan.h"
#include "pjrt/pjrt.h"

/* A storage the graph reads or writes, numbered by first use. */
typedef struct graph_slot {
  tpu_buffer* buffer;   /* retained while in the graph */
  tpu_dtype first_dtype; /* storage element type when the graph first saw it */
  hlo_value value;      /* while lowering: its latest flat value */
  tpu_dtype dtype;      /* while lowering: element type of value */
  bool written;         /* by some recorded op (recording); so far (lowering) */
  int param;            /* while lowering: the parameter of its first value, or -1 */
} graph_slot;

/* Where a program parameter's value comes from: a slot's storage, or an
 * argument (or view offset) of one recorded op. */
typedef struct graph_source {
  param_kind kind;
  tpu_dtype dtype;
  int slot;       /* PARAM_STORAGE */
  int op;         /* the others: the recorded op ... */
  tensor_ref ref; /* ... and its argument or tensor */
} graph_source;

/* A parameter's value, resolved from its source. */
typedef struct graph_value {
  param_kind kind;
  tpu_dtype dtype;
  tpu_buffer* storage;    /* PARAM_STORAGE */
  unsigned char bits[16]; /* PARAM_OFFSET, PARAM_SCALAR, PARAM_RNG */
  const double* list;     /* PARAM_SCALAR_LIST (borrowed) */
  int64_t list_count;
} graph_value;

typedef struct recorded_op {
  tpu_op_plan* plan;
  tpu_op_call call; /* a copy in the graph's arena */
} recorded_op;

typedef struct graph_arena graph_arena;

typedef struct graph {
  int device;
  graph_slot* slots;
  int slot_count;
  int slot_cap;
  recorded_op* ops;
  int op_count;
  int op_cap;
  graph_arena* arena;    /* the recorded calls' copies */
  graph_arena* arena_free; /* blocks of earlier ops, kept for reuse */
  unsigned char* key;    /* the structure so far */
  size_t key_len;
  size_t key_cap;
  bool capturing;        /* a torch.compile capture: never flushed, see program.c */
  bool values_fixed;     /* while lowering a capture: scalars and view offsets are constants */
  const char* recorder;  /* the thread that recorded the last op (graph_record) */
  /* While lowering: */
  hlo_builder* b;
  int lowering_op;
  graph_source* sources; /* one per program parameter, in order */
  int source_count;
  int source_cap;
} graph;

/* The device's pending graph, if any. Lock held. */
graph* graph_pending(int device);
/* The device's pending graph, made on first use. Lock held. */
tpu_status graph_open(int device, graph** out);
/* Drops every recorded op and slot. Lock held. */
void graph_reset(graph* g);

/* Adds one op call to the device's pending graph (fused mode, captures). */
tpu_status graph_record(tpu_op_plan* plan, const tpu_op_call* call);
/* Runs and empties the device's pending graph, if any. Lock held. */
tpu_status graph_flush(int device);
/* Flushes the graph `buffer` is pending in, if any. Lock held. */
tpu_status graph_flush_buffer(const tpu_buffer* buffer);

/* Lowers every recorded op into a new builder, filling g->sources; then
 * makes the program returning the latest values of `result_slots`. A
 * result may be written into its storage's parameter (in place) where
 * in_place[m] allows it (NULL: everywhere); result_params[m] tells whether
 * it is: that parameter, or -1 (see finish_program). */
tpu_status graph_lower(graph* g, const int* result_slots, int result_count, const bool* in_place,
                       int* result_params, char** out_text, size_t* out_size);
/* A source's value in this graph's recorded calls. */
graph_value graph_resolve(const graph* g, const graph_source* source);
/* The device buffer for a value; one made only for this run is also handed
 * back through out_owned. Lock held. */
tpu_status graph_value_buffer(int device, const graph_value* value, struct PJRT_Buffer** out_buffer,
                              struct PJRT_Buffer** out_owned);

/* Runs `program` (loaded if it was unloaded) with these parameter values,
 * handing it the storages `donated` marks (NULL: none) to write in place;
 * results come back through `results`. Lock held. */
tpu_status graph_execute(int device, struct cached_program* program, const graph_value* values,
                         int value_count, const bool* donated, struct PJRT_Buffer** results,
                         int result_count);

/* For exec/lowering.c while lowering: */
hlo_value graph_storage_read(graph* g, const tpu_tensor* t);
hlo_value graph_param_bind(graph* g, param_kind kind, const tpu_op_call* call, tensor_ref ref,
                           hlo_type type);
tpu_status graph_storage_write(graph* g, tpu_buffer* buffer, hlo_value value, tpu_dtype dtype);

/* Lowers `call` into `g` (exec/lowering.c). */
tpu_status lower_into_graph(const tpu_op_plan* plan, const tpu_op_call* call, graph* g);

#endif
