/* Fused eager: op calls recorded into one pending program per device, run
 * at a sync point. The program text depends only on the graph's structure
 * (storages by first use, scalars and offsets as parameters), so a training
 * loop lowers the same text every step and compiles it once. Storages only
 * the graph still holds are not returned: XLA drops their computation. */
#include <stdlib.h>
#include <string.h>

#include "cache/program_cache.h"
#include "exec/graph.h"
#include "exec/runtime_impl.h"
#include "exec/view.h"

#define MAX_DEVICES 64
/* Bounds that keep one program's compile time and host memory modest. */
#define GRAPH_MAX_OPS 20000
#define GRAPH_MAX_PARAMS 20000

static graph* pending[MAX_DEVICES]; /* under the runtime lock */
static tpu_eager_mode eager_mode = TPU_EAGER_STRICT;

graph* graph_pending(int device) {
  return device >= 0 && device < MAX_DEVICES ? pending[device] : NULL;
}

tpu_status graph_open(int device, graph** out) {
  *out = NULL;
  if (device < 0 || device >= MAX_DEVICES)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "tpu:%d is out of range for fused eager", device);
  if (!pending[device]) {
    graph* g = calloc(1, sizeof *g);
    if (!g) return TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory for a fused graph");
    tpu_status status = hlo_builder_create(&g->b);
    if (status) {
      free(g);
      return status;
    }
    g->device = device;
    pending[device] = g;
  }
  *out = pending[device];
  return NULL;
}

/* ---- slots and parameters ---- */

static graph_slot* slot_of(graph* g, tpu_buffer* buffer, tpu_dtype view_dtype) {
  if (buffer->graph_slot) return &g->slots[buffer->graph_slot - 1];
  if (g->slot_count == g->slot_cap) {
    int cap = g->slot_cap ? g->slot_cap * 2 : 64;
    graph_slot* grown = realloc(g->slots, (size_t)cap * sizeof *grown);
    if (!grown) return NULL;
    g->slots = grown;
    g->slot_cap = cap;
  }
  graph_slot* s = &g->slots[g->slot_count++];
  *s = (graph_slot){buffer, HLO_INVALID, buffer_storage_dtype(buffer, view_dtype), false};
  tpu_buffer_retain(buffer);
  buffer->pending_dtype = s->dtype;
  buffer->graph_slot = g->slot_count;
  return s;
}

static graph_param* param_new(graph* g, param_kind kind, tpu_dtype dtype) {
  if (g->param_count == g->param_cap) {
    int cap = g->param_cap ? g->param_cap * 2 : 64;
    graph_param* grown = realloc(g->params, (size_t)cap * sizeof *grown);
    if (!grown) return NULL;
    g->params = grown;
    g->param_cap = cap;
  }
  graph_param* p = &g->params[g->param_count++];
  memset(p, 0, sizeof *p);
  p->kind = kind;
  p->dtype = dtype;
  p->slot = -1;
  return p;
}

static hlo_value out_of_memory(graph* g) {
  return hlo_fail(g->b, TPU_OUT_OF_MEMORY, "out of host memory recording a fused graph");
}

hlo_value graph_storage_read(graph* g, const tpu_tensor* t) {
  graph_slot* s = slot_of(g, t->buffer, t->dtype);
  if (!s) return out_of_memory(g);
  if (s->value != HLO_INVALID) return s->value;
  graph_param* p = param_new(g, PARAM_STORAGE, s->dtype);
  if (!p) return out_of_memory(g);
  p->slot = (int)(s - g->slots);
  int64_t numel = (int64_t)(t->buffer->nbytes / tpu_dtype_size(s->dtype));
  s->value = hlo_parameter(g->b, hlo_type_make(s->dtype, 1, &numel));
  return s->value;
}

hlo_value graph_param_bind(graph* g, param_kind kind, const tpu_op_call* call, tensor_ref ref,
                           hlo_type type) {
  graph_param* p = param_new(g, kind, type.dtype);
  if (!p) return out_of_memory(g);
  switch (kind) {
    case PARAM_OFFSET: {
      int64_t offset = ref_tensor(call, ref)->offset;
      memcpy(p->bits, &offset, sizeof offset);
      break;
    }
    case PARAM_SCALAR: {
      const tpu_arg* a = &call->args[ref.arg];
      if (a->u.scalar.type == TPU_F64) {
        memcpy(p->bits, &a->u.scalar.f, sizeof(double));
      } else if (a->u.scalar.type == TPU_BOOL) {
        p->bits[0] = a->u.scalar.i != 0;
      } else {
        memcpy(p->bits, &a->u.scalar.i, sizeof(int64_t));
      }
      break;
    }
    case PARAM_RNG: {
      const tpu_arg* a = &call->args[ref.arg];
      uint64_t state[2] = {a->u.rng.seed, a->u.rng.offset};
      memcpy(p->bits, state, sizeof state);
      break;
    }
    case PARAM_SCALAR_LIST: {
      const tpu_arg* a = &call->args[ref.arg];
      p->list_count = a->u.floats.count;
      p->list = malloc((size_t)(p->list_count ? p->list_count : 1) * sizeof(double));
      if (!p->list) {
        g->param_count--;
        return out_of_memory(g);
      }
      memcpy(p->list, a->u.floats.items, (size_t)p->list_count * sizeof(double));
      break;
    }
    case PARAM_STORAGE:
      g->param_count--;
      return hlo_fail(g->b, TPU_INTERNAL, "storages of a fused graph are bound by slot");
  }
  return hlo_parameter(g->b, type);
}

tpu_status graph_storage_write(graph* g, tpu_buffer* buffer, hlo_value value, tpu_dtype dtype) {
  graph_slot* s = slot_of(g, buffer, dtype);
  if (!s) return TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory recording a fused graph");
  s->value = value;
  s->dtype = dtype;
  s->written = true;
  buffer->pending_dtype = dtype;
  return NULL;
}

/* ---- recording ---- */

typedef struct graph_mark {
  hlo_mark hlo;
  int slot_count;
  int param_count;
} graph_mark;

static void drop_params(graph* g, int keep) {
  for (int i = keep; i < g->param_count; i++) free(g->params[i].list);
  g->param_count = keep;
}

static void drop_slots(graph* g, int keep) {
  for (int i = keep; i < g->slot_count; i++) {
    g->slots[i].buffer->graph_slot = 0;
    tpu_buffer_release(g->slots[i].buffer);
  }
  g->slot_count = keep;
}

/* Undoes a failed op: the ops recorded before it stay. */
static tpu_status rollback(graph* g, graph_mark mark, tpu_status status) {
  tpu_status builder_error = hlo_builder_rollback(g->b, mark.hlo);
  drop_params(g, mark.param_count);
  drop_slots(g, mark.slot_count);
  if (status) {
    tpu_status_free(builder_error);
    return status;
  }
  return builder_error;
}

tpu_status graph_record(tpu_op_plan* plan, const tpu_op_call* call) {
  graph* g = NULL;
  TPU_RETURN_IF_ERROR(graph_open(call->device, &g));
  graph_mark mark = {hlo_builder_mark(g->b), g->slot_count, g->param_count};
  tpu_status status = lower_into_graph(plan, call, g);
  if (status || hlo_failed(g->b)) return rollback(g, mark, status);
  if (!g->first_op) g->first_op = plan->entry->name;
  g->last_op = plan->entry->name;
  g->op_count++;
  if (!g->capturing && (g->op_count >= GRAPH_MAX_OPS || g->param_count >= GRAPH_MAX_PARAMS))
    return graph_flush(call->device);
  return NULL;
}

/* ---- running ---- */

tpu_status graph_param_buffer(int device, const graph_param* p, tpu_buffer* storage,
                              struct PJRT_Buffer** out_buffer, struct PJRT_Buffer** out_owned) {
  *out_owned = NULL;
  tpu_pjrt* pjrt = runtime_pjrt();
  switch (p->kind) {
    case PARAM_STORAGE:
      TPU_RETURN_IF_ERROR(buffer_materialize(storage, p->dtype));
      *out_buffer = storage->pjrt;
      return NULL;
    case PARAM_OFFSET:
      return runtime_scalar_buffer(device, TPU_I64, p->bits, out_buffer, out_owned);
    case PARAM_SCALAR:
      return runtime_scalar_buffer(device, p->dtype, p->bits, out_buffer, out_owned);
    case PARAM_RNG: {
      int64_t two = 2;
      TPU_RETURN_IF_ERROR(tpu_pjrt_buffer_from_host(pjrt, device, TPU_U64, &two, 1, p->bits, out_buffer));
      *out_owned = *out_buffer;
      return NULL;
    }
    case PARAM_SCALAR_LIST:
      TPU_RETURN_IF_ERROR(tpu_pjrt_buffer_from_host(pjrt, device, TPU_F64, &p->list_count, 1,
                                                    p->list, out_buffer));
      *out_owned = *out_buffer;
      return NULL;
  }
  return TPU_ERROR(TPU_INTERNAL, "unknown parameter kind %d", (int)p->kind);
}

/* A written storage is a result only if something besides the graph still
 * holds it. */
static bool slot_is_result(const graph_slot* s) {
  return s->written && atomic_load(&s->buffer->refcount) > 1;
}

static tpu_status run(graph* g) {
  int result_count = 0;
  for (int i = 0; i < g->slot_count; i++) result_count += slot_is_result(&g->slots[i]);
  hlo_value* values = malloc((size_t)(result_count + 1) * sizeof *values);
  int* result_slots = malloc((size_t)(result_count + 1) * sizeof *result_slots);
  struct PJRT_Buffer** args = calloc((size_t)g->param_count + 1, sizeof *args);
  struct PJRT_Buffer** owned = calloc((size_t)g->param_count + 1, sizeof *owned);
  struct PJRT_Buffer** results = calloc((size_t)result_count + 1, sizeof *results);
  tpu_status status = values && result_slots && args && owned && results
                          ? NULL
                          : TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory running a fused graph");
  int m = 0;
  for (int i = 0; !status && i < g->slot_count; i++) {
    if (!slot_is_result(&g->slots[i])) continue;
    result_slots[m] = i;
    values[m++] = g->slots[i].value;
  }
  /* With no results nothing outside the graph can observe it: skip it. */
  char* text = NULL;
  size_t size = 0;
  if (!status && result_count > 0) status = hlo_builder_finish(g->b, values, result_count, &text, &size);
  struct PJRT_LoadedExecutable* executable = NULL;
  bool compiled = false;
  if (!status && result_count > 0) status = program_cache_get(runtime_pjrt(), text, size, &executable, &compiled);
  free(text);
  if (!status && result_count > 0 && !compiled) tpu_counter_add(TPU_COUNTER_CACHE_HIT, 1);
  int made = 0;
  for (; !status && result_count > 0 && made < g->param_count; made++)
    status = graph_param_buffer(g->device, &g->params[made],
                                g->params[made].slot >= 0 ? g->slots[g->params[made].slot].buffer : NULL,
                                &args[made], &owned[made]);
  if (!status && result_count > 0)
    status = tpu_pjrt_execute(runtime_pjrt(), executable, g->device, args, (size_t)g->param_count,
                              results, (size_t)result_count);
  if (!status && result_count > 0) {
    tpu_counter_add(TPU_COUNTER_EXECUTE, 1);
    for (int k = 0; k < result_count; k++) {
      graph_slot* s = &g->slots[result_slots[k]];
      buffer_replace(s->buffer, results[k], s->dtype);
      s->buffer->writer = "a fused graph";
    }
  }
  for (int i = 0; i < made && owned; i++) tpu_pjrt_buffer_destroy(runtime_pjrt(), owned[i]);
  free(values);
  free(result_slots);
  free(args);
  free(owned);
  free(results);
  return status;
}

void graph_reset(graph* g) {
  drop_params(g, 0);
  drop_slots(g, 0);
  tpu_status_free(hlo_builder_rollback(g->b, (hlo_mark){0, 0, 0, 0}));
  g->op_count = 0;
  g->first_op = g->last_op = NULL;
}

tpu_status graph_flush(int device) {
  graph* g = graph_pending(device);
  if (g && g->capturing)
    return TPU_ERROR(TPU_INVALID_ARGUMENT,
                     "a tpu value was needed on the host while a graph is being captured for "
                     "torch.compile (a .item(), print or data-dependent branch inside the compiled "
                     "code): move it out of the compiled function");
  if (!g || g->op_count == 0) return NULL;
  tpu_status status = run(g);
  if (status)
    status = tpu_status_annotate(status, "a fused graph of %d ops (aten::%s ... aten::%s): ",
                                 g->op_count, g->first_op, g->last_op);
  graph_reset(g);
  return status;
}

tpu_status graph_flush_buffer(const tpu_buffer* buffer) {
  return buffer->graph_slot ? graph_flush(buffer->device) : NULL;
}

/* ---- modes ---- */

tpu_status tpu_set_eager_mode(tpu_eager_mode mode) {
  if (mode != TPU_EAGER_STRICT && mode != TPU_EAGER_DEBUG && mode != TPU_EAGER_FUSED)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "unknown eager mode %d", (int)mode);
  runtime_lock();
  tpu_status status = NULL;
  for (int d = 0; d < MAX_DEVICES && !status; d++) status = graph_flush(d);
  eager_mode = mode;
  runtime_unlock();
  return status;
}

tpu_eager_mode tpu_get_eager_mode(void) { return eager_mode; }

tpu_status tpu_sync(int device) {
  runtime_lock();
  tpu_status status = graph_flush(device);
  runtime_unlock();
  return status;
}

int tpu_pending_op_count(int device) {
  runtime_lock();
  graph* g = graph_pending(device);
  int n = g ? g->op_count : 0;
  runtime_unlock();
  return n;
}
