/* Fused eager: op calls recorded into one pending graph per device and run
 * as one program at a sync point (see graph.h for the structure cache).
 * Storages that only the graph still holds are not results: XLA drops their
 * computation. */
#include <stdlib.h>
#include <string.h>

#include "cache/program_cache.h"
#include "exec/graph.h"
#include "exec/launcher.h"
#include "exec/runtime_impl.h"
#include "exec/view.h"
#include "hlo/complex_ops.h"

/* Bounds that keep one program's compile time and host memory modest. */
#define GRAPH_MAX_OPS 20000
#define TEMPLATE_BUCKETS 1024
#define ARENA_BLOCK 65536

static graph* pending[MAX_DEVICES]; /* under the runtime lock */
static graph* spare[MAX_DEVICES];   /* a launched graph, finished, kept for reuse */
static tpu_eager_mode eager_mode = TPU_EAGER_STRICT;

/* A graph structure seen before: its program and where each parameter and
 * result comes from. Lives until the process ends, like op plans. */
typedef struct graph_template {
  uint64_t hash;
  unsigned char* key;
  size_t key_size;
  struct cached_program* program; /* owned by the program cache */
  graph_source* sources;
  int source_count;
  bool* donated; /* per parameter, see graph_execute; NULL if none */
  int* result_slots;
  tpu_dtype* result_dtypes;
  int result_count;
  struct graph_template* next;
} graph_template;

static graph_template* templates[TEMPLATE_BUCKETS];

struct graph_arena {
  graph_arena* next;
  size_t used;
  size_t cap;
  unsigned char data[];
};

graph* graph_pending(int device) {
  return device >= 0 && device < MAX_DEVICES ? pending[device] : NULL;
}

tpu_status graph_open(int device, graph** out) {
  *out = NULL;
  if (device < 0 || device >= MAX_DEVICES)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "tpu:%d is out of range for a graph", device);
  if (!pending[device] && spare[device]) {
    pending[device] = spare[device];
    spare[device] = NULL;
  }
  if (!pending[device]) {
    graph* g = calloc(1, sizeof *g);
    if (!g) return TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory for a graph");
    g->device = device;
    pending[device] = g;
  }
  *out = pending[device];
  return NULL;
}

static void free_blocks(graph_arena* block) {
  while (block) {
    graph_arena* next = block->next;
    free(block);
    block = next;
  }
}

static void graph_free(graph* g) {
  free_blocks(g->arena);
  free_blocks(g->arena_free);
  free(g->slots);
  free(g->ops);
  free(g->key);
  free(g->sources);
  free(g);
}

/* ---- recording ---- */

static void* arena_alloc(graph* g, size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (!g->arena || g->arena->used + n > g->arena->cap) {
    graph_arena* block = g->arena_free;
    if (block && block->cap >= n) {
      g->arena_free = block->next;
    } else {
      size_t cap = n > ARENA_BLOCK ? n : ARENA_BLOCK;
      block = malloc(sizeof *block + cap);
      if (!block) return NULL;
      block->cap = cap;
    }
    block->next = g->arena;
    block->used = 0;
    g->arena = block;
  }
  void* p = g->arena->data + g->arena->used;
  g->arena->used += n;
  return p;
}

static void* arena_copy(graph* g, const void* src, size_t n, bool* ok) {
  if (!src) return NULL;
  void* p = arena_alloc(g, n ? n : 1);
  if (!p) {
    *ok = false;
    return NULL;
  }
  memcpy(p, src, n);
  return p;
}

static const char* arena_string(graph* g, const char* s, bool* ok) {
  return s ? arena_copy(g, s, strlen(s) + 1, ok) : NULL;
}

/* The call with every array and string it points to copied. */
static bool copy_call(graph* g, const tpu_op_call* src, tpu_op_call* dst) {
  bool ok = true;
  *dst = *src;
  dst->name = arena_string(g, src->name, &ok);
  dst->overload = arena_string(g, src->overload, &ok);
  tpu_arg* args = arena_copy(g, src->args, (size_t)src->arg_count * sizeof *args, &ok);
  dst->args = args;
  dst->outputs = arena_copy(g, src->outputs, (size_t)src->output_count * sizeof *src->outputs, &ok);
  for (int i = 0; ok && i < src->arg_count; i++) {
    tpu_arg* a = &args[i];
    switch (a->kind) {
      case TPU_ARG_TENSOR_LIST:
        a->u.tensors.items = arena_copy(g, a->u.tensors.items, (size_t)a->u.tensors.count * sizeof(tpu_tensor), &ok);
        break;
      case TPU_ARG_INT_LIST:
        a->u.ints.items = arena_copy(g, a->u.ints.items, (size_t)a->u.ints.count * sizeof(int64_t), &ok);
        break;
      case TPU_ARG_FLOAT_LIST:
      case TPU_ARG_SCALAR_LIST:
        a->u.floats.items = arena_copy(g, a->u.floats.items, (size_t)a->u.floats.count * sizeof(double), &ok);
        break;
      case TPU_ARG_STRING: a->u.string = arena_string(g, a->u.string, &ok); break;
      default: break;
    }
  }
  return ok;
}

static bool key_put(graph* g, const void* p, size_t n) {
  if (g->key_len + n > g->key_cap) {
    size_t cap = g->key_cap ? g->key_cap : 4096;
    while (cap < g->key_len + n) cap *= 2;
    unsigned char* grown = realloc(g->key, cap);
    if (!grown) return false;
    g->key = grown;
    g->key_cap = cap;
  }
  memcpy(g->key + g->key_len, p, n);
  g->key_len += n;
  return true;
}

/* The slot of t's storage, made (and the storage retained) on first use;
 * -1 for an absent tensor or no memory. */
static int slot_of(graph* g, const tpu_tensor* t) {
  if (!t || !t->buffer) return -1;
  tpu_buffer* buffer = t->buffer;
  if (buffer->graph_slot) return buffer->graph_slot - 1;
  if (g->slot_count == g->slot_cap) {
    int cap = g->slot_cap ? g->slot_cap * 2 : 64;
    graph_slot* grown = realloc(g->slots, (size_t)cap * sizeof *grown);
    if (!grown) return -1;
    g->slots = grown;
    g->slot_cap = cap;
  }
  tpu_dtype first = buffer_storage_dtype(buffer, t->dtype);
  g->slots[g->slot_count] = (graph_slot){buffer, first, HLO_INVALID, first, false, -1};
  tpu_buffer_retain(buffer);
  buffer->pending_dtype = first;
  buffer->graph_slot = ++g->slot_count;
  return g->slot_count - 1;
}

static tpu_status no_memory(void) {
  return TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory recording a fused graph");
}

/* The op's part of the structure: its plan, output layout and the slot of
 * every tensor it names (which fixes the aliasing between ops). */
static tpu_status note_structure(graph* g, tpu_op_plan* plan, const tpu_op_call* call) {
  const unsigned char* layout;
  size_t layout_len;
  TPU_RETURN_IF_ERROR(op_output_signature(call, &layout, &layout_len));
  uintptr_t id = (uintptr_t)plan;
  bool ok = key_put(g, &id, sizeof id) && key_put(g, &layout_len, sizeof layout_len) &&
            key_put(g, layout, layout_len);
  for (int i = 0; ok && i < call->arg_count; i++) {
    const tpu_arg* a = &call->args[i];
    int count = a->kind == TPU_ARG_TENSOR ? 1 : a->kind == TPU_ARG_TENSOR_LIST ? a->u.tensors.count : 0;
    for (int j = 0; ok && j < count; j++) {
      const tpu_tensor* t = a->kind == TPU_ARG_TENSOR ? &a->u.tensor : &a->u.tensors.items[j];
      int slot = slot_of(g, t);
      ok = (slot >= 0 || !t->buffer) && key_put(g, &slot, sizeof slot);
    }
  }
  /* Outputs take the storage type a write gives them (see write_outputs). */
  tpu_dtype written[64];
  int n = call->output_count < 64 ? call->output_count : 64;
  for (int k = 0; k < n; k++) written[k] = buffer_storage_dtype(call->outputs[k].buffer, call->outputs[k].dtype);
  for (int k = 0; ok && k < call->output_count; k++) {
    int slot = slot_of(g, &call->outputs[k]);
    ok = slot >= 0 && key_put(g, &slot, sizeof slot);
    if (!ok) break;
    if (plan->kept && plan->kept[k]) continue; /* not written: no result of the graph */
    g->slots[slot].written = true;
    g->slots[slot].buffer->pending_dtype = k < n ? written[k] : call->outputs[k].dtype;
  }
  return ok ? NULL : no_memory();
}

/* A signature's first call is lowered on its own once, so a lowering error
 * surfaces at the call that caused it, not at a later sync point. */
static tpu_status check_lowers(tpu_op_plan* plan, const tpu_op_call* call) {
  if (plan->lowered) return NULL;
  op_variant trial = {0};
  char* text = NULL;
  size_t size = 0;
  tpu_status status = lower_call(plan, call, &trial, &text, &size);
  free(text);
  free(trial.params);
  free(trial.donated);
  free(trial.result_outputs);
  free(trial.result_dtypes);
  if (!status) plan_mark_lowered(plan, &trial);
  free(trial.kept);
  return status;
}

static tpu_status graph_cut(int device);

/* One per thread: its address tells the recording threads apart. */
static _Thread_local char recording_thread;

tpu_status graph_record(tpu_op_plan* plan, const tpu_op_call* call) {
  graph* g = NULL;
  TPU_RETURN_IF_ERROR(check_lowers(plan, call));
  TPU_RETURN_IF_ERROR(graph_open(call->device, &g));
  /* Another thread's op cuts the graph: autograd records a backward on its
   * own thread, so the forward's program runs while the backward is being
   * recorded, and the backward's while the optimizer step is. */
  if (!g->capturing && g->op_count > 0 && g->recorder != &recording_thread) {
    TPU_RETURN_IF_ERROR(graph_cut(call->device));
    TPU_RETURN_IF_ERROR(graph_open(call->device, &g));
  }
  g->recorder = &recording_thread;
  if (g->op_count == g->op_cap) {
    int cap = g->op_cap ? g->op_cap * 2 : 256;
    recorded_op* grown = realloc(g->ops, (size_t)cap * sizeof *grown);
    if (!grown) return no_memory();
    g->ops = grown;
    g->op_cap = cap;
  }
  recorded_op* op = &g->ops[g->op_count];
  op->plan = plan;
  if (!copy_call(g, call, &op->call)) return no_memory();
  TPU_RETURN_IF_ERROR(note_structure(g, plan, &op->call));
  g->op_count++;
  if (!g->capturing && g->op_count >= GRAPH_MAX_OPS) return graph_cut(call->device);
  return NULL;
}

/* ---- lowering ---- */

static graph_source* new_source(graph* g, param_kind kind, tpu_dtype dtype) {
  if (g->source_count == g->source_cap) {
    int cap = g->source_cap ? g->source_cap * 2 : 256;
    graph_source* grown = realloc(g->sources, (size_t)cap * sizeof *grown);
    if (!grown) return NULL;
    g->sources = grown;
    g->source_cap = cap;
  }
  graph_source* s = &g->sources[g->source_count++];
  *s = (graph_source){kind, dtype, -1, g->lowering_op, {-1, -1}};
  return s;
}

hlo_value graph_storage_read(graph* g, const tpu_tensor* t) {
  if (!t->buffer->graph_slot)
    return hlo_fail(g->b, TPU_INTERNAL, "a fused graph read a storage it never recorded");
  int index = t->buffer->graph_slot - 1;
  graph_slot* slot = &g->slots[index];
  if (slot->value != HLO_INVALID) return slot->value;
  graph_source* s = new_source(g, PARAM_STORAGE, slot->dtype);
  if (!s) return hlo_fail(g->b, TPU_OUT_OF_MEMORY, "out of host memory lowering a fused graph");
  s->slot = index;
  int64_t numel = (int64_t)(slot->buffer->nbytes / tpu_dtype_size(slot->dtype));
  slot->value = hlo_parameter(g->b, hlo_type_make(slot->dtype, 1, &numel));
  slot->param = g->source_count - 1;
  return slot->value;
}

/* A scalar or view offset of the op being lowered, as a constant. */
static hlo_value fixed_value(graph* g, param_kind kind, tensor_ref ref, tpu_dtype dtype) {
  graph_source source = {kind, dtype, -1, g->lowering_op, ref};
  graph_value v = graph_resolve(g, &source);
  if (dtype == TPU_F64 || dtype == TPU_C128) {
    double f[2];
    memcpy(f, v.bits, dtype == TPU_F64 ? sizeof f[0] : sizeof f);
    return dtype == TPU_F64 ? hlo_constant(g->b, dtype, f[0]) : hlo_constant_complex(g->b, dtype, f[0], f[1]);
  }
  if (dtype == TPU_BOOL) return hlo_constant(g->b, dtype, v.bits[0]);
  int64_t i;
  memcpy(&i, v.bits, sizeof i);
  return hlo_constant_i64(g->b, dtype, i);
}

hlo_value graph_param_bind(graph* g, param_kind kind, const tpu_op_call* call, tensor_ref ref,
                           hlo_type type) {
  /* A capture's values are its own for every run: as constants, XLA folds
   * them (a view's offset makes a static slice) and a run binds fewer
   * parameters. Fused graphs keep them as parameters, so a step whose
   * numbers change (a learning rate) reuses its program. */
  if (g->values_fixed && (kind == PARAM_SCALAR || kind == PARAM_OFFSET))
    return fixed_value(g, kind, ref, type.dtype);
  graph_source* s = new_source(g, kind, type.dtype);
  if (!s) return hlo_fail(g->b, TPU_OUT_OF_MEMORY, "out of host memory lowering a fused graph");
  s->ref = ref;
  return hlo_parameter(g->b, type);
}

tpu_status graph_storage_write(graph* g, tpu_buffer* buffer, hlo_value value, tpu_dtype dtype) {
  if (!buffer->graph_slot) return TPU_ERROR(TPU_INTERNAL, "a fused graph wrote a storage it never recorded");
  graph_slot* slot = &g->slots[buffer->graph_slot - 1];
  slot->value = value;
  slot->dtype = dtype;
  slot->written = true;
  buffer->pending_dtype = dtype;
  return NULL;
}

tpu_status graph_lower(graph* g, const int* result_slots, int result_count, const bool* in_place,
                       int* result_params, char** out_text, size_t* out_size) {
  /* Replay the storages' history from the graph's start. */
  for (int i = 0; i < g->slot_count; i++) {
    graph_slot* s = &g->slots[i];
    s->value = HLO_INVALID;
    s->dtype = s->first_dtype;
    s->written = false;
    s->param = -1;
    s->buffer->pending_dtype = s->first_dtype;
  }
  g->source_count = 0;
  TPU_RETURN_IF_ERROR(hlo_builder_create(&g->b));
  tpu_status status = NULL;
  for (int i = 0; !status && i < g->op_count; i++) {
    g->lowering_op = i;
    const tpu_op_call* call = &g->ops[i].call;
    status = lower_into_graph(g->ops[i].plan, call, g);
    if (!status && hlo_failed(g->b)) status = hlo_builder_finish(g->b, NULL, 0, NULL, out_text, out_size);
    if (status) status = tpu_status_annotate(status, "aten::%s (op %d of the graph): ", call->name, i + 1);
  }
  hlo_value* values = status ? NULL : malloc((size_t)(result_count + 1) * sizeof *values);
  if (!status && !values) status = no_memory();
  for (int m = 0; !status && m < result_count; m++) {
    values[m] = g->slots[result_slots[m]].value;
    result_params[m] = !in_place || in_place[m] ? g->slots[result_slots[m]].param : -1;
  }
  if (!status) status = finish_program(g->b, values, result_count, result_params, out_text, out_size);
  free(values);
  hlo_builder_free(g->b);
  g->b = NULL;
  return status;
}

/* ---- running ---- */

graph_value graph_resolve(const graph* g, const graph_source* source) {
  graph_value v = {.kind = source->kind, .dtype = source->dtype};
  if (source->kind == PARAM_STORAGE) {
    v.storage = g->slots[source->slot].buffer;
    return v;
  }
  const tpu_op_call* call = &g->ops[source->op].call;
  switch (source->kind) {
    case PARAM_OFFSET: {
      int64_t offset = ref_tensor(call, source->ref)->offset;
      memcpy(v.bits, &offset, sizeof offset);
      break;
    }
    case PARAM_SCALAR: {
      const tpu_arg* a = &call->args[source->ref.arg];
      if (a->u.scalar.type == TPU_F64) {
        memcpy(v.bits, &a->u.scalar.f, sizeof(double));
      } else if (a->u.scalar.type == TPU_C128) {
        double parts[2] = {a->u.scalar.f, a->u.scalar.imag};
        memcpy(v.bits, parts, sizeof parts);
      } else if (a->u.scalar.type == TPU_BOOL) {
        v.bits[0] = a->u.scalar.i != 0;
      } else {
        memcpy(v.bits, &a->u.scalar.i, sizeof(int64_t));
      }
      break;
    }
    case PARAM_RNG: {
      const tpu_arg* a = &call->args[source->ref.arg];
      uint64_t state[2] = {a->u.rng.seed, a->u.rng.offset};
      memcpy(v.bits, state, sizeof state);
      break;
    }
    case PARAM_SCALAR_LIST: {
      const tpu_arg* a = &call->args[source->ref.arg];
      v.list = a->u.floats.items;
      v.list_count = a->u.floats.count;
      break;
    }
    case PARAM_STORAGE: break;
  }
  return v;
}

tpu_status graph_value_buffer(int device, const graph_value* v, struct PJRT_Buffer** out_buffer,
                              struct PJRT_Buffer** out_owned) {
  *out_owned = NULL;
  tpu_pjrt* pjrt = runtime_pjrt();
  switch (v->kind) {
    case PARAM_STORAGE:
      TPU_RETURN_IF_ERROR(buffer_materialize(v->storage, v->dtype));
      *out_buffer = v->storage->pjrt;
      return NULL;
    case PARAM_OFFSET:
      return runtime_scalar_buffer(device, TPU_I64, v->bits, out_buffer, out_owned);
    case PARAM_SCALAR:
      return runtime_scalar_buffer(device, v->dtype, v->bits, out_buffer, out_owned);
    case PARAM_RNG: {
      int64_t two = 2;
      TPU_RETURN_IF_ERROR(tpu_pjrt_buffer_from_host(pjrt, device, TPU_U64, &two, 1, v->bits, out_buffer));
      *out_owned = *out_buffer;
      return NULL;
    }
    case PARAM_SCALAR_LIST:
      TPU_RETURN_IF_ERROR(tpu_pjrt_buffer_from_host(pjrt, device, TPU_F64, &v->list_count, 1, v->list,
                                                    out_buffer));
      *out_owned = *out_buffer;
      return NULL;
  }
  return TPU_ERROR(TPU_INTERNAL, "unknown parameter kind %d", (int)v->kind);
}

static graph_template* template_find(uint64_t hash, const unsigned char* key, size_t size) {
  for (graph_template* t = templates[hash % TEMPLATE_BUCKETS]; t; t = t->next)
    if (t->hash == hash && t->key_size == size && memcmp(t->key, key, size) == 0) return t;
  return NULL;
}

static void template_free(graph_template* t) {
  if (!t) return;
  free(t->key);
  free(t->sources);
  free(t->donated);
  free(t->result_slots);
  free(t->result_dtypes);
  free(t);
}

/* Lowers and compiles a structure seen for the first time. */
static tpu_status template_make(graph* g, uint64_t hash, const int* result_slots, int result_count,
                                graph_template** out) {
  graph_template* t = calloc(1, sizeof *t);
  int* result_params = malloc(((size_t)result_count + 1) * sizeof *result_params);
  char* text = NULL;
  size_t size = 0;
  tpu_status status = t && result_params ? NULL : no_memory();
  if (!status) status = graph_lower(g, result_slots, result_count, NULL, result_params, &text, &size);
  if (!status) t->donated = donated_params(result_params, result_count, g->source_count);
  free(result_params);
  bool compiled = false;
  if (!status) status = program_cache_get(runtime_pjrt(), text, size, &t->program, &compiled);
  free(text);
  if (!status && !compiled) tpu_counter_add(TPU_COUNTER_CACHE_HIT, 1);
  if (!status) {
    t->hash = hash;
    t->key = malloc(g->key_len ? g->key_len : 1);
    t->sources = malloc(((size_t)g->source_count + 1) * sizeof *t->sources);
    t->result_slots = malloc(((size_t)result_count + 1) * sizeof *t->result_slots);
    t->result_dtypes = malloc(((size_t)result_count + 1) * sizeof *t->result_dtypes);
    if (!t->key || !t->sources || !t->result_slots || !t->result_dtypes) status = no_memory();
  }
  if (status) {
    template_free(t);
    return status;
  }
  memcpy(t->key, g->key, g->key_len);
  t->key_size = g->key_len;
  memcpy(t->sources, g->sources, (size_t)g->source_count * sizeof *t->sources);
  t->source_count = g->source_count;
  for (int m = 0; m < result_count; m++) {
    t->result_slots[m] = result_slots[m];
    t->result_dtypes[m] = g->slots[result_slots[m]].dtype;
  }
  t->result_count = result_count;
  t->next = templates[hash % TEMPLATE_BUCKETS];
  templates[hash % TEMPLATE_BUCKETS] = t;
  *out = t;
  return NULL;
}

/* The arguments for `values`: args[i], and in owned[i] those made only for
 * this run (else NULL); *out_made counts the entries filled, also on error. */
static tpu_status make_args(int device, const graph_value* values, int value_count, struct PJRT_Buffer** args,
                            struct PJRT_Buffer** owned, int* out_made) {
  tpu_status status = NULL;
  int made = 0;
  for (; !status && made < value_count; made++)
    status = graph_value_buffer(device, &values[made], &args[made], &owned[made]);
  *out_made = made;
  return status;
}

static void destroy_owned(struct PJRT_Buffer** owned, int count) {
  for (int i = 0; i < count && owned; i++) tpu_pjrt_buffer_destroy(runtime_pjrt(), owned[i]);
}

tpu_status graph_execute(int device, struct cached_program* program, const graph_value* values,
                         int value_count, const bool* donated, struct PJRT_Buffer** results,
                         int result_count) {
  struct PJRT_Buffer** args = calloc((size_t)value_count + 1, sizeof *args);
  struct PJRT_Buffer** owned = calloc((size_t)value_count + 1, sizeof *owned);
  tpu_status status = args && owned ? NULL : no_memory();
  int made = 0;
  if (!status) status = make_args(device, values, value_count, args, owned, &made);
  if (!status)
    status = program_cache_run(runtime_pjrt(), program, device, args, (size_t)value_count, donated, results,
                               (size_t)result_count);
  destroy_owned(owned, made);
  free(args);
  free(owned);
  return status;
}

static graph_value* resolve_all(const graph* g, const graph_template* t) {
  graph_value* values = malloc(((size_t)t->source_count + 1) * sizeof *values);
  for (int i = 0; values && i < t->source_count; i++) values[i] = graph_resolve(g, &t->sources[i]);
  return values;
}

static void take_results(graph* g, const graph_template* t, struct PJRT_Buffer** results) {
  for (int m = 0; m < t->result_count; m++) {
    tpu_buffer* b = g->slots[t->result_slots[m]].buffer;
    buffer_replace(b, results[m], t->result_dtypes[m]);
    b->writer = "a fused graph";
  }
}

static tpu_status run_template(graph* g, const graph_template* t) {
  graph_value* values = resolve_all(g, t);
  struct PJRT_Buffer** results = calloc((size_t)t->result_count + 1, sizeof *results);
  tpu_status status = values && results ? NULL : no_memory();
  if (!status)
    status = graph_execute(g->device, t->program, values, t->source_count, t->donated, results, t->result_count);
  if (!status) take_results(g, t, results);
  free(values);
  free(results);
  return status;
}

/* Releases the recorded ops and slots; the graph can record again. */
static void graph_clear(graph* g) {
  for (int i = 0; i < g->slot_count; i++) tpu_buffer_release(g->slots[i].buffer);
  g->slot_count = 0;
  g->op_count = 0;
  g->key_len = 0;
  g->source_count = 0;
  /* Its blocks are kept for the graph's next ops. */
  while (g->arena) {
    graph_arena* next = g->arena->next;
    g->arena->next = g->arena_free;
    g->arena_free = g->arena;
    g->arena = next;
  }
}

/* Its storages may be recorded into another graph from now on. */
static void graph_detach(graph* g) {
  for (int i = 0; i < g->slot_count; i++) g->slots[i].buffer->graph_slot = 0;
}

void graph_reset(graph* g) {
  graph_detach(g);
  graph_clear(g);
}

/* A written storage is a result only if something besides the graph still
 * holds it. */
static bool slot_is_result(const graph_slot* s) {
  return s->written && atomic_load(&s->buffer->refcount) > 1;
}

/* The template of g's structure and results, made on first sight; NULL
 * when nothing outside the graph holds a result, so nothing can observe it. */
static tpu_status template_of(graph* g, graph_template** out) {
  *out = NULL;
  int* result_slots = malloc(((size_t)g->slot_count + 1) * sizeof *result_slots);
  if (!result_slots) return no_memory();
  int result_count = 0;
  bool ok = true;
  for (int i = 0; i < g->slot_count; i++) {
    if (!slot_is_result(&g->slots[i])) continue;
    result_slots[result_count++] = i;
    ok = ok && key_put(g, &i, sizeof i);
  }
  tpu_status status = ok ? NULL : no_memory();
  if (!status && result_count > 0) {
    uint64_t hash = cache_hash(g->key, g->key_len, CACHE_HASH_SEED);
    *out = template_find(hash, g->key, g->key_len);
    if (*out)
      tpu_counter_add(TPU_COUNTER_CACHE_HIT, 1);
    else
      status = template_make(g, hash, result_slots, result_count, out);
  }
  free(result_slots);
  return status;
}

static tpu_status annotate(const graph* g, tpu_status status) {
  return tpu_status_annotate(status, "a fused graph of %d ops (aten::%s ... aten::%s): ", g->op_count,
                             g->ops[0].plan->entry->name, g->ops[g->op_count - 1].plan->entry->name);
}

/* ---- launching: a graph cut where recording goes on ---- */

/* A cut graph whose execute call is on the launcher thread. It keeps the
 * graph (and so every storage it reads or writes) until finished. */
typedef struct launched_graph {
  launch_job job;
  graph* g;
  const graph_template* t;
  struct PJRT_Buffer** args;
  struct PJRT_Buffer** owned;
  int made;
} launched_graph;

static launched_graph* in_flight[MAX_DEVICES]; /* under the runtime lock */

/* Storages that a finished launch held last, per device: the next launch's
 * job destroys them (their last use long over, so the plugin frees them
 * at once, off the recording thread), or the next flush does. */
typedef struct orphan_list {
  struct PJRT_Buffer** items;
  size_t count;
  size_t cap;
} orphan_list;

static orphan_list orphans[MAX_DEVICES];

/* Takes the storage of each of g's buffers that only g still holds. */
static void adopt_orphans(graph* g) {
  orphan_list* o = &orphans[g->device];
  for (int i = 0; i < g->slot_count; i++) {
    tpu_buffer* b = g->slots[i].buffer;
    if (!b->pjrt || atomic_load(&b->refcount) != 1) continue;
    if (o->count == o->cap) {
      size_t cap = o->cap ? 2 * o->cap : 64;
      struct PJRT_Buffer** grown = realloc(o->items, cap * sizeof *grown);
      if (!grown) return; /* the rest are dropped as they are released */
      o->items = grown;
      o->cap = cap;
    }
    o->items[o->count++] = b->pjrt;
    b->pjrt = NULL;
  }
}

static void drop_orphans(int device) {
  orphan_list* o = &orphans[device];
  for (size_t i = 0; i < o->count; i++) inflight_drop_storage(device, o->items[i]);
  o->count = 0;
}

static void launched_free(launched_graph* l) {
  destroy_owned(l->owned, l->made);
  free(l->args);
  free(l->owned);
  free(l->job.results);
  free(l->job.dropped);
  free(l->job.dropped_ready);
  free(l);
}

/* Waits for the device's launched graph, if any, and gives its storages
 * their results; returns the execute call's error, naming the graph. */
static tpu_status launch_finish(int device) {
  launched_graph* l = in_flight[device];
  if (!l) return NULL;
  in_flight[device] = NULL;
  launch_wait(&l->job);
  tpu_status status = l->job.status;
  for (int m = 0; m < l->t->result_count; m++) {
    tpu_buffer* b = l->g->slots[l->t->result_slots[m]].buffer;
    b->launch_pending = false;
    if (status) b->pjrt = l->job.dropped[m]; /* a failed call leaves it alone */
  }
  if (status)
    status = annotate(l->g, status);
  else
    take_results(l->g, l->t, l->job.results);
  for (size_t i = 0; i < l->job.dropped_count; i++) inflight_add(device, l->job.dropped_ready[i]);
  adopt_orphans(l->g);
  graph_clear(l->g);
  if (spare[device])
    graph_free(l->g);
  else
    spare[device] = l->g;
  launched_free(l);
  return status;
}

/* Hands g's program to the launcher; from here the graph is the launch's
 * and the device has no pending graph. */
static tpu_status launch(graph* g, const graph_template* t) {
  launched_graph* l = calloc(1, sizeof *l);
  graph_value* values = resolve_all(g, t);
  tpu_status status = l && values ? NULL : no_memory();
  if (!status) {
    l->args = calloc((size_t)t->source_count + 1, sizeof *l->args);
    l->owned = calloc((size_t)t->source_count + 1, sizeof *l->owned);
    l->job.results = calloc((size_t)t->result_count + 1, sizeof *l->job.results);
    size_t most = (size_t)t->result_count + orphans[g->device].count + 1;
    l->job.dropped = calloc(most, sizeof *l->job.dropped);
    l->job.dropped_ready = calloc(most, sizeof *l->job.dropped_ready);
    if (!l->args || !l->owned || !l->job.results || !l->job.dropped || !l->job.dropped_ready)
      status = no_memory();
  }
  if (!status) status = make_args(g->device, values, t->source_count, l->args, l->owned, &l->made);
  free(values);
  struct PJRT_LoadedExecutable* executable = NULL;
  if (!status) status = program_cache_load(runtime_pjrt(), t->program, (size_t)t->result_count, &executable);
  if (status) {
    if (l) launched_free(l);
    return status;
  }
  l->g = g;
  l->t = t;
  l->job.executable = executable;
  l->job.device = g->device;
  l->job.args = l->args;
  l->job.arg_count = (size_t)t->source_count;
  l->job.donated = t->donated;
  l->job.result_count = (size_t)t->result_count;
  /* Until finished, recording sees each result's type to come. */
  for (int m = 0; m < t->result_count; m++) {
    tpu_buffer* b = g->slots[t->result_slots[m]].buffer;
    l->job.dropped[m] = b->pjrt;
    b->pjrt = NULL; /* the launcher's to destroy */
    b->pending_dtype = t->result_dtypes[m];
    b->launch_pending = true;
  }
  orphan_list* o = &orphans[g->device];
  if (o->count) memcpy(l->job.dropped + t->result_count, o->items, o->count * sizeof *o->items);
  l->job.replaced_count = (size_t)t->result_count;
  l->job.dropped_count = (size_t)t->result_count + o->count;
  o->count = 0;
  graph_detach(g);
  pending[g->device] = NULL;
  in_flight[g->device] = l;
  program_cache_count_run(t->donated, (size_t)t->source_count);
  launch_submit(&l->job);
  return NULL;
}

/* Cuts the device's pending graph without waiting: its program goes to the
 * launcher and the next op starts a new graph. One launched graph per
 * device: the one before is finished first (its execute call has long
 * returned by then: a whole graph was recorded since). */
static tpu_status graph_cut(int device) {
  graph* g = graph_pending(device);
  if (!g || g->op_count == 0 || g->capturing) return graph_flush(device);
  TPU_RETURN_IF_ERROR(launch_finish(device));
  graph_template* t = NULL;
  tpu_status status = template_of(g, &t);
  if (!status && t) status = launch(g, t);
  if (status || !t) {
    if (status) status = annotate(g, status);
    graph_reset(g);
  }
  return status;
}

tpu_status graph_flush(int device) {
  graph* g = graph_pending(device);
  if (g && g->capturing)
    return TPU_ERROR(TPU_INVALID_ARGUMENT,
                     "a tpu value was needed on the host while a graph is being captured (by "
                     "torch.compile or torch.accelerator.Graph: a .item(), print or data-dependent "
                     "branch inside the captured code): move it out of the compiled function or the "
                     "graph's capture");
  tpu_status launched = NULL;
  if (device >= 0 && device < MAX_DEVICES) {
    launched = launch_finish(device);
    drop_orphans(device);
  }
  if (!g || g->op_count == 0) return launched;
  graph_template* t = NULL;
  tpu_status status = template_of(g, &t);
  if (!status && t) status = run_template(g, t);
  if (status) status = annotate(g, status);
  graph_reset(g);
  if (launched) {
    tpu_status_free(status);
    return launched;
  }
  return status;
}

tpu_status graph_flush_buffer(const tpu_buffer* buffer) {
  return buffer->graph_slot ? graph_flush(buffer->device) : launch_finish(buffer->device);
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
  tpu_status status = graph_cut(device);
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
