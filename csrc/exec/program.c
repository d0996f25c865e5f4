/* Captured programs for torch.compile: a graph recorded once from a run of
 * the FX graph's ops (through the same lowerings as eager), then executed
 * with new input storages. Parameters are bound by role: an input's
 * storage, a constant storage kept alive by the program, a value fixed at
 * capture (scalars, view offsets), or the random state of this run. */
#include <stdlib.h>
#include <string.h>

#include "cache/program_cache.h"
#include "exec/graph.h"
#include "exec/runtime_impl.h"

typedef struct program_param {
  graph_value bound;    /* kind, dtype and the value fixed at capture */
  double* list;         /* PARAM_SCALAR_LIST: bound.list, owned */
  int input;            /* PARAM_STORAGE: the input it reads, or -1 */
  tpu_buffer* constant; /* PARAM_STORAGE with no input: retained */
  uint64_t rng_step;    /* PARAM_RNG: its offset after the run's first */
} program_param;

typedef struct program_result {
  int input;       /* an input the graph wrote, updated in place; or -1 */
  size_t nbytes;   /* a fresh storage's size otherwise */
  tpu_dtype dtype; /* element type of the result */
} program_result;

typedef struct program_output {
  int result;           /* the result it is, or -1 */
  int input;            /* else the unchanged input it is, or -1 */
  tpu_buffer* constant; /* else a storage it returns as is: retained */
  size_t fresh_nbytes;  /* else a never-written storage (torch.empty): new each run */
} program_output;

struct tpu_program {
  int device;
  int input_count;
  struct cached_program* program; /* owned by the program cache */
  program_param* params;
  int param_count;
  bool* donated; /* per parameter: an input the program updates in place; NULL if none */
  program_result* results;
  int result_count;
  program_output* outputs;
  int output_count;
  uint64_t rng_count;
};

void tpu_program_free(tpu_program* p) {
  if (!p) return;
  for (int i = 0; i < p->param_count; i++) {
    free(p->params[i].list);
    tpu_buffer_release(p->params[i].constant);
  }
  for (int k = 0; k < p->output_count; k++) tpu_buffer_release(p->outputs[k].constant);
  free(p->params);
  free(p->donated);
  free(p->results);
  free(p->outputs);
  free(p);
}

uint64_t tpu_program_rng_count(const tpu_program* p) { return p->rng_count; }
int tpu_program_input_count(const tpu_program* p) { return p->input_count; }

bool tpu_program_writes_input(const tpu_program* p, int index) {
  for (int m = 0; m < p->result_count; m++)
    if (p->results[m].input == index) return true;
  return false;
}
int tpu_program_output_count(const tpu_program* p) { return p->output_count; }

tpu_status tpu_capture_begin(int device) {
  runtime_lock();
  tpu_status status = graph_flush(device);
  graph* g = NULL;
  if (!status) status = graph_open(device, &g);
  if (!status) g->capturing = true;
  runtime_unlock();
  return status;
}

void tpu_capture_abort(int device) {
  runtime_lock();
  graph* g = graph_pending(device);
  if (g && g->capturing) {
    g->capturing = false;
    graph_reset(g);
  }
  runtime_unlock();
}

bool tpu_capturing(int device) {
  runtime_lock();
  graph* g = graph_pending(device);
  bool capturing = g && g->capturing;
  runtime_unlock();
  return capturing;
}

static int input_of(tpu_buffer* const* inputs, int count, const tpu_buffer* buffer) {
  for (int i = 0; i < count; i++)
    if (inputs[i] == buffer) return i;
  return -1;
}

/* The program's parameters: each graph parameter by role. */
static tpu_status bind_roles(tpu_program* p, graph* g, tpu_buffer* const* inputs, int input_count) {
  p->params = calloc((size_t)g->source_count + 1, sizeof *p->params);
  if (!p->params) return TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory capturing a graph");
  uint64_t first = UINT64_MAX, last = 0;
  for (int i = 0; i < g->source_count; i++, p->param_count++) {
    program_param* pp = &p->params[i];
    pp->bound = graph_resolve(g, &g->sources[i]);
    pp->input = -1;
    if (pp->bound.kind == PARAM_STORAGE) {
      pp->input = input_of(inputs, input_count, pp->bound.storage);
      if (pp->input < 0) {
        pp->constant = pp->bound.storage;
        tpu_buffer_retain(pp->constant);
      }
      pp->bound.storage = NULL;
    } else if (pp->bound.kind == PARAM_SCALAR_LIST) {
      size_t n = (size_t)pp->bound.list_count;
      pp->list = malloc((n ? n : 1) * sizeof(double));
      if (!pp->list) return TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory capturing a graph");
      memcpy(pp->list, pp->bound.list, n * sizeof(double));
      pp->bound.list = pp->list;
    } else if (pp->bound.kind == PARAM_RNG) {
      uint64_t offset;
      memcpy(&offset, pp->bound.bits + 8, sizeof offset);
      if (offset < first) first = offset;
      if (offset > last) last = offset;
    }
  }
  p->rng_count = first == UINT64_MAX ? 0 : last - first + 1;
  for (int i = 0; i < p->param_count; i++) {
    program_param* pp = &p->params[i];
    if (pp->bound.kind != PARAM_RNG) continue;
    uint64_t offset;
    memcpy(&offset, pp->bound.bits + 8, sizeof offset);
    pp->rng_step = offset - first;
  }
  return NULL;
}

/* Results: every written slot that is an input or an output's storage. */
static int choose_results(tpu_program* p, graph* g, tpu_buffer* const* inputs, int input_count,
                          tpu_buffer* const* outputs, int output_count, int* result_slots,
                          int* slot_result) {
  for (int s = 0; s < g->slot_count; s++) {
    const graph_slot* slot = &g->slots[s];
    slot_result[s] = -1;
    if (!slot->written) continue;
    int input = input_of(inputs, input_count, slot->buffer);
    if (input < 0 && input_of(outputs, output_count, slot->buffer) < 0) continue;
    p->results[p->result_count] = (program_result){input, slot->buffer->nbytes, TPU_F32};
    slot_result[s] = p->result_count;
    result_slots[p->result_count++] = s;
  }
  return p->result_count;
}

static void bind_outputs(tpu_program* p, graph* g, tpu_buffer* const* inputs, int input_count,
                         tpu_buffer* const* outputs, int output_count, const int* result_slots,
                         const int* slot_result) {
  for (int m = 0; m < p->result_count; m++) p->results[m].dtype = g->slots[result_slots[m]].dtype;
  for (int k = 0; k < output_count; k++, p->output_count++) {
    program_output* o = &p->outputs[k];
    *o = (program_output){-1, -1, NULL, 0};
    const tpu_buffer* b = outputs[k];
    if (b->graph_slot && slot_result[b->graph_slot - 1] >= 0) {
      o->result = slot_result[b->graph_slot - 1];
    } else if ((o->input = input_of(inputs, input_count, b)) >= 0) {
    } else if (!b->pjrt) {
      o->fresh_nbytes = b->nbytes;
    } else {
      o->constant = outputs[k];
      tpu_buffer_retain(o->constant);
    }
  }
}

tpu_status tpu_capture_end(int device, tpu_buffer* const* inputs, int input_count,
                           tpu_buffer* const* outputs, int output_count, tpu_program** out_program) {
  *out_program = NULL;
  runtime_lock();
  graph* g = graph_pending(device);
  if (!g || !g->capturing) {
    runtime_unlock();
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "no graph is being captured on tpu:%d", device);
  }
  g->capturing = false;
  tpu_program* p = calloc(1, sizeof *p);
  size_t slots = (size_t)g->slot_count + 1;
  int* result_slots = malloc(slots * sizeof *result_slots);
  int* slot_result = malloc(slots * sizeof *slot_result);
  tpu_status status = NULL;
  if (p) {
    p->results = calloc(slots, sizeof *p->results);
    p->outputs = calloc((size_t)output_count + 1, sizeof *p->outputs);
  }
  if (!p || !result_slots || !slot_result || !p->results || !p->outputs)
    status = TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory capturing a graph");
  char* text = NULL;
  size_t size = 0;
  if (!status) {
    p->device = device;
    p->input_count = input_count;
    int n = choose_results(p, g, inputs, input_count, outputs, output_count, result_slots, slot_result);
    /* Only an updated input is written in place; a fresh result must not
     * overwrite a storage the program keeps as a constant. */
    bool* in_place = malloc(slots * sizeof *in_place);
    int* result_params = malloc(slots * sizeof *result_params);
    if (in_place && result_params) {
      for (int m = 0; m < n; m++) in_place[m] = p->results[m].input >= 0;
      g->values_fixed = true;
      status = graph_lower(g, result_slots, n, in_place, result_params, &text, &size);
      g->values_fixed = false;
      if (!status) p->donated = donated_params(result_params, n, g->source_count);
    } else {
      status = TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory capturing a graph");
    }
    free(in_place);
    free(result_params);
  }
  if (!status) status = bind_roles(p, g, inputs, input_count);
  if (!status) bind_outputs(p, g, inputs, input_count, outputs, output_count, result_slots, slot_result);
  bool compiled = false;
  if (!status) status = program_cache_get(runtime_pjrt(), text, size, &p->program, &compiled);
  if (!status && !compiled) tpu_counter_add(TPU_COUNTER_CACHE_HIT, 1);
  free(text);
  free(result_slots);
  free(slot_result);
  graph_reset(g);
  runtime_unlock();
  if (status) {
    tpu_program_free(p);
    return tpu_status_annotate(status, "capturing a graph: ");
  }
  *out_program = p;
  return NULL;
}

tpu_status tpu_capture_end_replayable(int device, tpu_program** out_program, tpu_buffer*** out_storages,
                                      int* out_count) {
  *out_program = NULL;
  *out_storages = NULL;
  *out_count = 0;
  runtime_lock(); /* recursive: held through tpu_capture_end, so no slot changes between */
  graph* g = graph_pending(device);
  if (!g || !g->capturing) {
    runtime_unlock();
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "no graph is being captured on tpu:%d", device);
  }
  tpu_buffer** held = malloc(((size_t)g->slot_count + 1) * sizeof *held);
  if (!held) {
    tpu_capture_abort(device);
    runtime_unlock();
    return TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory capturing a graph");
  }
  int count = 0;
  /* The graph holds one reference to each slot's storage; a tensor, another. */
  for (int s = 0; s < g->slot_count; s++) {
    tpu_buffer* b = g->slots[s].buffer;
    if (atomic_load(&b->refcount) > 1) {
      tpu_buffer_retain(b);
      held[count++] = b;
    }
  }
  tpu_status status = tpu_capture_end(device, held, count, NULL, 0, out_program);
  runtime_unlock();
  if (status) {
    for (int i = 0; i < count; i++) tpu_buffer_release(held[i]);
    free(held);
    return status;
  }
  *out_storages = held;
  *out_count = count;
  return NULL;
}

static tpu_status check_inputs(const tpu_program* p, tpu_buffer* const* inputs, int input_count) {
  if (input_count != p->input_count)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "a compiled graph takes %d inputs, got %d", p->input_count,
                     input_count);
  for (int i = 0; i < p->param_count; i++) {
    const program_param* pp = &p->params[i];
    if (pp->bound.kind != PARAM_STORAGE || pp->input < 0) continue;
    const tpu_buffer* b = inputs[pp->input];
    if (!b || b->device != p->device)
      return TPU_ERROR(TPU_INVALID_ARGUMENT, "input %d of a compiled graph is not on tpu:%d",
                       pp->input, p->device);
  }
  return NULL;
}

static tpu_buffer* param_storage(const tpu_program* p, const program_param* pp, tpu_buffer* const* inputs) {
  return pp->input >= 0 ? inputs[pp->input] : pp->constant;
}

tpu_status tpu_program_run(tpu_program* p, tpu_buffer* const* inputs, int input_count,
                           uint64_t rng_seed, uint64_t rng_offset, tpu_buffer** out_outputs) {
  for (int k = 0; k < p->output_count; k++) out_outputs[k] = NULL;
  TPU_RETURN_IF_ERROR(check_inputs(p, inputs, input_count));
  graph_value* values = malloc(((size_t)p->param_count + 1) * sizeof *values);
  struct PJRT_Buffer** results = calloc((size_t)p->result_count + 1, sizeof *results);
  tpu_buffer** fresh = calloc((size_t)p->result_count + 1, sizeof *fresh);
  tpu_status status = values && results && fresh
                          ? NULL
                          : TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory running a compiled graph");
  for (int m = 0; !status && m < p->result_count; m++)
    if (p->results[m].input < 0) status = tpu_buffer_create(p->device, p->results[m].nbytes, &fresh[m]);
  runtime_lock();
  /* Pending fused ops may write this program's inputs. */
  if (!status) status = graph_flush(p->device);
  for (int i = 0; !status && i < p->param_count; i++) {
    const program_param* pp = &p->params[i];
    values[i] = pp->bound;
    if (pp->bound.kind == PARAM_RNG) {
      uint64_t state[2] = {rng_seed, rng_offset + pp->rng_step};
      memcpy(values[i].bits, state, sizeof state);
    }
    values[i].storage = param_storage(p, pp, inputs);
  }
  if (!status)
    status = graph_execute(p->device, p->program, values, p->param_count, p->donated, results, p->result_count);
  for (int m = 0; !status && m < p->result_count; m++) {
    tpu_buffer* target = p->results[m].input >= 0 ? inputs[p->results[m].input] : fresh[m];
    buffer_replace(target, results[m], p->results[m].dtype);
    target->writer = "a compiled graph";
  }
  runtime_unlock();
  for (int k = 0; !status && k < p->output_count; k++) {
    const program_output* o = &p->outputs[k];
    tpu_buffer* b = o->result >= 0 ? (p->results[o->result].input >= 0 ? inputs[p->results[o->result].input]
                                                                        : fresh[o->result])
                    : o->input >= 0 ? inputs[o->input]
                                    : o->constant;
    if (b) {
      tpu_buffer_retain(b);
      out_outputs[k] = b;
    } else {
      status = tpu_buffer_create(p->device, o->fresh_nbytes, &out_outputs[k]);
    }
  }
  for (int k = 0; status && k < p->output_count; k++) {
    tpu_buffer_release(out_outputs[k]);
    out_outputs[k] = NULL;
  }
  for (int m = 0; fresh && m < p->result_count; m++) tpu_buffer_release(fresh[m]);
  free(values);
  free(results);
  free(fresh);
  return status;
}
