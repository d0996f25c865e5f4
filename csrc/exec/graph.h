/* Inside exec/: a graph of op calls built into one program. Fused eager
 * keeps one pending graph per device and runs it at a sync point; a
 * capture (torch.compile) turns one into a reusable tpu_program. Lowerings
 * add to the graph's builder exactly as they do for a single op; only where
 * storages and parameters come from differs (exec/lowering.c asks here). */
#ifndef TPU_EXEC_GRAPH_H
#define TPU_EXEC_GRAPH_H

#include "exec/op_plan.h"
#include "pjrt/pjrt.h"

/* A storage the graph reads or writes, by first use. */
typedef struct graph_slot {
  tpu_buffer* buffer; /* retained while in the graph */
  hlo_value value;    /* its latest flat value in the program */
  tpu_dtype dtype;    /* element type of value */
  bool written;
} graph_slot;

/* A program parameter with the value bound when its op was recorded. */
typedef struct graph_param {
  param_kind kind;
  tpu_dtype dtype;
  int slot;                         /* PARAM_STORAGE: the slot it reads */
  unsigned char bits[16];           /* PARAM_OFFSET, PARAM_SCALAR, PARAM_RNG */
  double* list;                     /* PARAM_SCALAR_LIST values (owned) */
  int64_t list_count;
} graph_param;

typedef struct graph {
  int device;
  hlo_builder* b;
  graph_slot* slots;
  int slot_count;
  int slot_cap;
  graph_param* params;
  int param_count;
  int param_cap;
  int op_count;
  const char* first_op; /* static names, for error messages */
  const char* last_op;
  bool capturing; /* a torch.compile capture: never flushed, see program.c */
} graph;

/* The device's pending graph, if it has recorded ops. Lock held. */
graph* graph_pending(int device);
/* The device's pending graph, made on first use. Lock held. */
tpu_status graph_open(int device, graph** out);
/* Drops every recorded op, parameter and slot. Lock held. */
void graph_reset(graph* g);
/* The device buffer for parameter `p` (`storage` for PARAM_STORAGE); a
 * buffer made only for this run is also handed back through out_owned. */
tpu_status graph_param_buffer(int device, const graph_param* p, tpu_buffer* storage,
                              struct PJRT_Buffer** out_buffer, struct PJRT_Buffer** out_owned);

/* The latest flat value of t's storage (a parameter on first read). */
hlo_value graph_storage_read(graph* g, const tpu_tensor* t);
/* Binds a non-storage parameter to its value in `call` now. */
hlo_value graph_param_bind(graph* g, param_kind kind, const tpu_op_call* call, tensor_ref ref,
                           hlo_type type);
/* Makes `value` (flat, `dtype`) the storage's latest value. */
tpu_status graph_storage_write(graph* g, tpu_buffer* buffer, hlo_value value, tpu_dtype dtype);

/* Adds one op call to the device's pending graph (fused mode). Lock held. */
tpu_status graph_record(tpu_op_plan* plan, const tpu_op_call* call);
/* Runs and empties the device's pending graph, if any. Lock held. */
tpu_status graph_flush(int device);
/* Flushes the graph `buffer` is pending in, if any. Lock held. */
tpu_status graph_flush_buffer(const tpu_buffer* buffer);

/* Lowers `call` into `g` (exec/lowering.c). */
tpu_status lower_into_graph(const tpu_op_plan* plan, const tpu_op_call* call, graph* g);

#endif
