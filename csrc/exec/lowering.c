/* The lowering context: hands a lowering its arguments as StableHLO values
 * (reading views, creating parameters on first use), then writes its
 * results through the output views. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/graph.h"
#include "exec/runtime_impl.h"

struct tpu_lowering {
  hlo_builder* b;
  graph* graph; /* fused or captured: storages and parameters come from it */
  const tpu_op_call* call;
  const tpu_op_plan* plan;
  char name[64];
  hlo_value* arg_values;  /* per argument: its read value, once made */
  hlo_value** list_values; /* per list argument: per item */
  struct storage_param {
    const tpu_buffer* buffer;
    hlo_value value;
    int param; /* its index among the parameters */
  } * storages; /* one parameter per distinct storage */
  int storage_count;
  int storage_cap;
  param_source* params;
  int param_count;
  int param_cap;
  hlo_value* outputs; /* per output, set by the lowering (or OUTPUT_KEPT) */
};

#define OUTPUT_KEPT (-2) /* tpu_lower_keep_output: not written */

const tpu_tensor* ref_tensor(const tpu_op_call* call, tensor_ref ref) {
  if (ref.arg < 0) return &call->outputs[ref.item];
  const tpu_arg* a = &call->args[ref.arg];
  if (a->kind == TPU_ARG_TENSOR) return &a->u.tensor;
  const tpu_tensor* t = &a->u.tensors.items[ref.item];
  return t->buffer ? t : NULL;
}

void op_base_name(const char* name, char* out, size_t size) {
  size_t n = strlen(name);
  bool dunder = n > 4 && name[0] == '_' && name[1] == '_' && name[n - 1] == '_' && name[n - 2] == '_';
  if (!dunder && n > 1 && name[n - 1] == '_') n--;
  if (n >= size) n = size - 1;
  memcpy(out, name, n);
  out[n] = '\0';
}

static hlo_value add_param(tpu_lowering* l, param_kind kind, tensor_ref ref, hlo_type type) {
  if (l->graph) return graph_param_bind(l->graph, kind, l->call, ref, type);
  if (l->param_count == l->param_cap) {
    int cap = l->param_cap ? l->param_cap * 2 : 16;
    param_source* grown = realloc(l->params, (size_t)cap * sizeof *grown);
    if (!grown) return hlo_fail(l->b, TPU_OUT_OF_MEMORY, "out of host memory lowering");
    l->params = grown;
    l->param_cap = cap;
  }
  hlo_value v = hlo_parameter(l->b, type);
  if (v == HLO_INVALID) return v;
  l->params[l->param_count++] = (param_source){kind, ref, type.dtype};
  return v;
}

/* The flat storage parameter of ref's buffer, shared by every ref to it. */
static hlo_value storage_param(tpu_lowering* l, tensor_ref ref, const tpu_tensor* t) {
  if (l->graph) return graph_storage_read(l->graph, t);
  for (int i = 0; i < l->storage_count; i++)
    if (l->storages[i].buffer == t->buffer) return l->storages[i].value;
  if (l->storage_count == l->storage_cap) {
    int cap = l->storage_cap ? l->storage_cap * 2 : 8;
    struct storage_param* grown = realloc(l->storages, (size_t)cap * sizeof *grown);
    if (!grown) return hlo_fail(l->b, TPU_OUT_OF_MEMORY, "out of host memory lowering");
    l->storages = grown;
    l->storage_cap = cap;
  }
  int64_t numel = view_storage_numel(t);
  hlo_type type = hlo_type_make(buffer_storage_dtype(t->buffer, t->dtype), 1, &numel);
  hlo_value v = add_param(l, PARAM_STORAGE, ref, type);
  l->storages[l->storage_count++] = (struct storage_param){t->buffer, v, l->param_count - 1};
  return v;
}

static hlo_value offset_param(tpu_lowering* l, tensor_ref ref) {
  return add_param(l, PARAM_OFFSET, ref, hlo_type_make(TPU_I64, 0, NULL));
}

static hlo_value read_ref(tpu_lowering* l, tensor_ref ref) {
  const tpu_tensor* t = ref_tensor(l->call, ref);
  if (!t) return HLO_INVALID;
  view_class cls = view_class_of(t);
  hlo_value storage = storage_param(l, ref, t);
  hlo_value offset = view_class_has_offset(cls) ? offset_param(l, ref) : HLO_INVALID;
  return view_read(l->b, storage, offset, t, cls);
}

/* ---- accessors ---- */

hlo_builder* tpu_lower_builder(tpu_lowering* l) { return l->b; }
const char* tpu_lower_op_name(const tpu_lowering* l) { return l->name; }
const char* tpu_lower_overload(const tpu_lowering* l) { return l->call->overload; }
int tpu_lower_arg_count(const tpu_lowering* l) { return l->call->arg_count; }

static const tpu_arg* arg_at(const tpu_lowering* l, int index) {
  return index >= 0 && index < l->call->arg_count ? &l->call->args[index] : NULL;
}

tpu_arg_kind tpu_lower_arg_kind(const tpu_lowering* l, int index) {
  const tpu_arg* a = arg_at(l, index);
  return a ? a->kind : TPU_ARG_NONE;
}

bool tpu_lower_is_none(const tpu_lowering* l, int index) {
  return tpu_lower_arg_kind(l, index) == TPU_ARG_NONE;
}

static hlo_value wrong_kind(tpu_lowering* l, int index, const char* wanted) {
  return tpu_lower_fail(l, TPU_INVALID_ARGUMENT, "aten::%s: argument %d should be %s", l->name,
                        index, wanted);
}

hlo_value tpu_lower_tensor(tpu_lowering* l, int index) {
  const tpu_arg* a = arg_at(l, index);
  if (!a || a->kind != TPU_ARG_TENSOR) return wrong_kind(l, index, "a tensor");
  if (l->arg_values[index] == HLO_INVALID)
    l->arg_values[index] = read_ref(l, (tensor_ref){index, -1});
  return l->arg_values[index];
}

hlo_type tpu_lower_arg_type(const tpu_lowering* l, int index) {
  const tpu_arg* a = arg_at(l, index);
  if (a && a->kind == TPU_ARG_TENSOR)
    return hlo_type_make(a->u.tensor.dtype, a->u.tensor.rank, a->u.tensor.sizes);
  if (a && a->kind == TPU_ARG_SCALAR) return hlo_type_make(a->u.scalar.type, 0, NULL);
  return hlo_type_make(TPU_F32, 0, NULL);
}

int tpu_lower_tensor_list_count(const tpu_lowering* l, int index) {
  const tpu_arg* a = arg_at(l, index);
  return a && a->kind == TPU_ARG_TENSOR_LIST ? a->u.tensors.count : 0;
}

hlo_type tpu_lower_tensor_list_type(const tpu_lowering* l, int index, int item) {
  const tpu_arg* a = arg_at(l, index);
  if (!a || a->kind != TPU_ARG_TENSOR_LIST || item < 0 || item >= a->u.tensors.count)
    return hlo_type_make(TPU_F32, 0, NULL);
  const tpu_tensor* t = &a->u.tensors.items[item];
  return hlo_type_make(t->dtype, t->rank, t->sizes);
}

int tpu_lower_tensor_list(tpu_lowering* l, int index, hlo_value* out_values, int max) {
  const tpu_arg* a = arg_at(l, index);
  if (!a || a->kind != TPU_ARG_TENSOR_LIST) {
    wrong_kind(l, index, "a list of tensors");
    return 0;
  }
  int n = a->u.tensors.count < max ? a->u.tensors.count : max;
  if (!l->list_values[index]) {
    l->list_values[index] = malloc((size_t)(a->u.tensors.count ? a->u.tensors.count : 1) * sizeof(hlo_value));
    if (!l->list_values[index]) {
      hlo_fail(l->b, TPU_OUT_OF_MEMORY, "out of host memory lowering");
      return 0;
    }
    for (int i = 0; i < a->u.tensors.count; i++) l->list_values[index][i] = HLO_INVALID;
  }
  for (int i = 0; i < n; i++) {
    if (l->list_values[index][i] == HLO_INVALID)
      l->list_values[index][i] = read_ref(l, (tensor_ref){index, i});
    out_values[i] = l->list_values[index][i];
  }
  return n;
}

hlo_value tpu_lower_value(tpu_lowering* l, int index, tpu_dtype dtype) {
  const tpu_arg* a = arg_at(l, index);
  if (a && a->kind == TPU_ARG_TENSOR) return hlo_convert(l->b, tpu_lower_tensor(l, index), dtype);
  if (!a || a->kind != TPU_ARG_SCALAR) return wrong_kind(l, index, "a tensor or a number");
  if (l->arg_values[index] == HLO_INVALID)
    l->arg_values[index] = add_param(l, PARAM_SCALAR, (tensor_ref){index, -1},
                                     hlo_type_make(a->u.scalar.type, 0, NULL));
  return hlo_convert(l->b, l->arg_values[index], dtype);
}

hlo_value tpu_lower_rng_state(tpu_lowering* l, int index) {
  const tpu_arg* a = arg_at(l, index);
  if (!a || a->kind != TPU_ARG_RNG) return wrong_kind(l, index, "a generator");
  int64_t two = 2;
  if (l->arg_values[index] == HLO_INVALID)
    l->arg_values[index] = add_param(l, PARAM_RNG, (tensor_ref){index, -1},
                                     hlo_type_make(TPU_U64, 1, &two));
  return l->arg_values[index];
}

int64_t tpu_lower_int(const tpu_lowering* l, int index, int64_t fallback) {
  const tpu_arg* a = arg_at(l, index);
  if (!a) return fallback;
  if (a->kind == TPU_ARG_INT) return a->u.i;
  if (a->kind == TPU_ARG_BOOL) return a->u.b;
  return fallback;
}

double tpu_lower_float(const tpu_lowering* l, int index, double fallback) {
  const tpu_arg* a = arg_at(l, index);
  if (!a) return fallback;
  if (a->kind == TPU_ARG_FLOAT) return a->u.f;
  if (a->kind == TPU_ARG_INT) return (double)a->u.i;
  return fallback;
}

bool tpu_lower_bool(const tpu_lowering* l, int index, bool fallback) {
  const tpu_arg* a = arg_at(l, index);
  if (!a) return fallback;
  if (a->kind == TPU_ARG_BOOL) return a->u.b;
  if (a->kind == TPU_ARG_INT) return a->u.i != 0;
  return fallback;
}

int tpu_lower_int_list(const tpu_lowering* l, int index, const int64_t** out_items) {
  const tpu_arg* a = arg_at(l, index);
  *out_items = NULL;
  if (a && a->kind == TPU_ARG_INT_LIST) {
    *out_items = a->u.ints.items;
    return a->u.ints.count;
  }
  if (a && a->kind == TPU_ARG_INT) {
    *out_items = &a->u.i;
    return 1;
  }
  return 0;
}

int tpu_lower_float_list(const tpu_lowering* l, int index, const double** out_items) {
  const tpu_arg* a = arg_at(l, index);
  *out_items = NULL;
  if (!a || a->kind != TPU_ARG_FLOAT_LIST) return 0;
  *out_items = a->u.floats.items;
  return a->u.floats.count;
}

hlo_value tpu_lower_scalar_list(tpu_lowering* l, int index, tpu_dtype dtype) {
  const tpu_arg* a = arg_at(l, index);
  if (!a || a->kind != TPU_ARG_SCALAR_LIST) return wrong_kind(l, index, "a list of numbers");
  int64_t n = a->u.floats.count;
  if (l->arg_values[index] == HLO_INVALID)
    l->arg_values[index] = add_param(l, PARAM_SCALAR_LIST, (tensor_ref){index, -1},
                                     hlo_type_make(TPU_F64, 1, &n));
  return hlo_convert(l->b, l->arg_values[index], dtype);
}

tpu_dtype tpu_lower_dtype(const tpu_lowering* l, int index, tpu_dtype fallback) {
  const tpu_arg* a = arg_at(l, index);
  return a && a->kind == TPU_ARG_DTYPE ? a->u.dtype : fallback;
}

const char* tpu_lower_string(const tpu_lowering* l, int index, const char* fallback) {
  const tpu_arg* a = arg_at(l, index);
  return a && a->kind == TPU_ARG_STRING ? a->u.string : fallback;
}

double tpu_lower_scalar_constant(const tpu_lowering* l, int index) {
  const tpu_arg* a = arg_at(l, index);
  if (!a || a->kind != TPU_ARG_SCALAR) return 0;
  return a->u.scalar.type == TPU_F64 ? a->u.scalar.f : (double)a->u.scalar.i;
}

int tpu_lower_output_count(const tpu_lowering* l) { return l->plan->output_count; }

hlo_type tpu_lower_output_type(const tpu_lowering* l, int index) {
  if (index < 0 || index >= l->plan->output_count) return hlo_type_make(TPU_F32, 0, NULL);
  const struct op_output* o = &l->plan->outputs[index];
  return hlo_type_make(o->dtype, o->rank, o->sizes);
}

void tpu_lower_set_output(tpu_lowering* l, int index, hlo_value value) {
  if (index >= 0 && index < l->plan->output_count) l->outputs[index] = value;
}

void tpu_lower_keep_output(tpu_lowering* l, int index) {
  if (index >= 0 && index < l->plan->output_count) l->outputs[index] = OUTPUT_KEPT;
}

hlo_value tpu_lower_fail_at(tpu_lowering* l, tpu_status_code code, const char* file, int line, const char* fmt,
                            ...) {
  char message[1024];
  va_list args;
  va_start(args, fmt);
  vsnprintf(message, sizeof message, fmt, args);
  va_end(args);
  return hlo_fail_at(l->b, code, file, line, "%s", message);
}

hlo_type tpu_lower_broadcast_type(const tpu_lowering* l, const int* indices, int count,
                                  tpu_dtype dtype) {
  hlo_type out = hlo_type_make(dtype, 0, NULL);
  for (int i = 0; i < count; i++) {
    hlo_type t = tpu_lower_arg_type(l, indices[i]);
    if (t.rank > out.rank) {
      int shift = t.rank - out.rank;
      for (int d = out.rank - 1; d >= 0; d--) out.dims[d + shift] = out.dims[d];
      for (int d = 0; d < shift; d++) out.dims[d] = 1;
      out.rank = t.rank;
    }
    for (int d = 0; d < t.rank; d++) {
      int64_t* o = &out.dims[out.rank - t.rank + d];
      if (*o == 1) *o = t.dims[d];
    }
  }
  return out;
}

hlo_value tpu_lower_single(tpu_lowering* l, int index, tpu_dtype dtype) {
  return hlo_reshape(l->b, tpu_lower_value(l, index, dtype), 0, NULL);
}

hlo_value tpu_lower_value_as(tpu_lowering* l, int index, const hlo_type* type) {
  hlo_value v = tpu_lower_value(l, index, type->dtype);
  return hlo_broadcast_to(l->b, v, type->rank, type->dims);
}

/* ---- the driver ---- */

/* Converts and broadcasts a lowering's result to the output's type. */
static hlo_value fit_output(tpu_lowering* l, int k, hlo_value v) {
  hlo_type want = tpu_lower_output_type(l, k);
  v = hlo_convert(l->b, v, want.dtype);
  const hlo_type* have = hlo_type_of(l->b, v);
  if (hlo_failed(l->b) || hlo_type_equal(have, &want)) return v;
  if (hlo_type_numel(have) == hlo_type_numel(&want) && have->rank != want.rank)
    return hlo_reshape(l->b, v, want.rank, want.dims);
  return hlo_broadcast_to(l->b, v, want.rank, want.dims);
}

/* Writes each output through its view; outputs sharing a storage chain
 * their writes. results[m] becomes the m-th written storage's new value. */
static tpu_status write_outputs(tpu_lowering* l, op_variant* variant, hlo_value* results) {
  const tpu_op_call* call = l->call;
  hlo_value* latest = results;
  for (int k = 0; k < call->output_count; k++) {
    if (l->outputs[k] == OUTPUT_KEPT) continue;
    if (l->outputs[k] == HLO_INVALID)
      return TPU_ERROR(TPU_INTERNAL, "aten::%s: the lowering set no value for output %d", l->name, k);
    const tpu_tensor* out = &call->outputs[k];
    tensor_ref ref = {-1, k};
    view_class cls = view_class_of(out);
    hlo_value value = fit_output(l, k, l->outputs[k]);
    int slot = -1;
    for (int m = 0; m < variant->result_count; m++)
      if (call->outputs[variant->result_outputs[m]].buffer == out->buffer) slot = m;
    hlo_value base = HLO_INVALID;
    if (view_class_has_offset(cls)) base = slot >= 0 ? latest[slot] : storage_param(l, ref, out);
    hlo_value offset = view_class_has_offset(cls) ? offset_param(l, ref) : HLO_INVALID;
    tpu_dtype sd = buffer_storage_dtype(out->buffer, out->dtype);
    hlo_value written = view_write(l->b, base, offset, value, out, cls, sd, view_storage_numel(out));
    if (slot < 0) {
      slot = variant->result_count++;
      variant->result_outputs[slot] = k;
      variant->result_dtypes[slot] = sd;
    }
    latest[slot] = written;
  }
  return NULL;
}

/* PyTorch's float32 matmul precision as XLA's: "medium" allows the
 * device's fastest form, which XLA calls DEFAULT. */
static hlo_precision precision_of(tpu_matmul_precision p) {
  switch (p) {
    case TPU_MATMUL_HIGH: return HLO_PRECISION_HIGH;
    case TPU_MATMUL_MEDIUM: return HLO_PRECISION_DEFAULT;
    default: return HLO_PRECISION_HIGHEST;
  }
}

/* Runs the lowering and writes its outputs; results[m] and the variant's
 * result lists name each written storage's new value. */
static tpu_status lower_and_write(tpu_lowering* l, op_variant* variant, hlo_value* results) {
  const tpu_op_call* call = l->call;
  hlo_set_precision(l->b, precision_of(call->matmul_precision));
  int n = call->arg_count ? call->arg_count : 1;
  size_t outs = (size_t)(call->output_count ? call->output_count : 1);
  l->arg_values = malloc((size_t)n * sizeof *l->arg_values);
  l->list_values = calloc((size_t)n, sizeof *l->list_values);
  l->outputs = malloc(outs * sizeof *l->outputs);
  variant->result_outputs = malloc(outs * sizeof *variant->result_outputs);
  variant->result_dtypes = malloc(outs * sizeof *variant->result_dtypes);
  if (!l->arg_values || !l->list_values || !l->outputs || !variant->result_outputs ||
      !variant->result_dtypes)
    return TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory lowering aten::%s", l->name);
  for (int i = 0; i < call->arg_count; i++) l->arg_values[i] = HLO_INVALID;
  for (int k = 0; k < call->output_count; k++) l->outputs[k] = HLO_INVALID;
  tpu_status status = l->plan->entry->lower(l);
  /* A builder error is reported by the caller, naming the op that failed. */
  if (!status && !hlo_failed(l->b)) status = write_outputs(l, variant, results);
  for (int k = 0; !status && k < call->output_count; k++) {
    if (l->outputs[k] != OUTPUT_KEPT) continue;
    if (!variant->kept && !(variant->kept = calloc(outs, sizeof *variant->kept)))
      return TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory lowering aten::%s", l->name);
    variant->kept[k] = true;
  }
  return status;
}

static tpu_lowering lowering_begin(const tpu_op_plan* plan, const tpu_op_call* call) {
  tpu_lowering l = {0};
  l.call = call;
  l.plan = plan;
  op_base_name(call->name, l.name, sizeof l.name);
  return l;
}

static void lowering_end(tpu_lowering* l) {
  free(l->params);
  for (int i = 0; i < l->call->arg_count && l->list_values; i++) free(l->list_values[i]);
  free(l->list_values);
  free(l->arg_values);
  free(l->outputs);
  free(l->storages);
}

/* The smallest storage written in place. On the CPU plugin a donation costs
 * about 60 us an execution (measured; the cause is inside the plugin), more
 * than a fresh allocation of a smaller buffer; a 1 MiB update broke even, a
 * 16 MiB one ran 3.4x faster. Nor does a small buffer matter to a device's
 * memory. */
#define IN_PLACE_MIN_BYTES (1 << 20)

tpu_status finish_program(hlo_builder* b, hlo_value* results, int count, int* result_params, char** out_text,
                          size_t* out_size) {
  bool shape_free = tpu_pjrt_buffers_shape_free(runtime_pjrt());
  if (shape_free)
    for (int m = 0; m < count; m++) results[m] = hlo_reshape_origin(b, results[m]);
  for (int m = 0; result_params && m < count && !hlo_failed(b); m++) {
    if (result_params[m] < 0) continue;
    hlo_type param = *hlo_type_of(b, hlo_parameter_at(b, result_params[m]));
    const hlo_type* result = hlo_type_of(b, results[m]);
    bool fits = param.dtype == result->dtype && hlo_type_numel(&param) == hlo_type_numel(result) &&
                (shape_free || hlo_type_equal(&param, result)) &&
                hlo_type_numel(&param) * (int64_t)tpu_dtype_size(param.dtype) >= IN_PLACE_MIN_BYTES;
    if (!fits) result_params[m] = -1;
  }
  return hlo_builder_finish(b, results, count, result_params, out_text, out_size);
}

bool* donated_params(const int* result_params, int result_count, int param_count) {
  bool* donated = NULL;
  for (int m = 0; result_params && m < result_count; m++) {
    if (result_params[m] < 0) continue;
    if (!donated && !(donated = calloc((size_t)param_count, sizeof *donated))) return NULL;
    donated[result_params[m]] = true;
  }
  return donated;
}

/* Per result of a single op's program, the storage parameter it overwrites. */
static int* overwritten_params(const tpu_lowering* l, const op_variant* variant) {
  int* result_params = malloc((size_t)(variant->result_count ? variant->result_count : 1) * sizeof *result_params);
  for (int m = 0; result_params && m < variant->result_count; m++) {
    const tpu_buffer* written = l->call->outputs[variant->result_outputs[m]].buffer;
    result_params[m] = -1;
    for (int i = 0; i < l->storage_count; i++)
      if (l->storages[i].buffer == written) result_params[m] = l->storages[i].param;
  }
  return result_params;
}

static hlo_value* results_alloc(const tpu_op_call* call) {
  return malloc((size_t)(call->output_count ? call->output_count : 1) * sizeof(hlo_value));
}

tpu_status lower_call(const tpu_op_plan* plan, const tpu_op_call* call, op_variant* variant,
                      char** out_text, size_t* out_size) {
  tpu_lowering l = lowering_begin(plan, call);
  hlo_value* results = results_alloc(call);
  tpu_status status = results ? hlo_builder_create(&l.b)
                              : TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory lowering aten::%s", l.name);
  if (!status) status = lower_and_write(&l, variant, results);
  int* result_params = status ? NULL : overwritten_params(&l, variant);
  if (!status)
    status = finish_program(l.b, results, variant->result_count, result_params, out_text, out_size);
  if (!status) {
    variant->params = l.params;
    variant->param_count = l.param_count;
    variant->donated = donated_params(result_params, variant->result_count, l.param_count);
    l.params = NULL;
  }
  free(result_params);
  lowering_end(&l);
  free(results);
  hlo_builder_free(l.b);
  return status;
}

tpu_status lower_into_graph(const tpu_op_plan* plan, const tpu_op_call* call, graph* g) {
  tpu_lowering l = lowering_begin(plan, call);
  l.b = g->b;
  l.graph = g;
  op_variant scratch = {0};
  hlo_value* results = results_alloc(call);
  tpu_status status = results ? lower_and_write(&l, &scratch, results)
                              : TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory lowering aten::%s", l.name);
  /* Storages change only once the whole op lowered. */
  for (int m = 0; !status && !hlo_failed(g->b) && m < scratch.result_count; m++)
    status = graph_storage_write(g, call->outputs[scratch.result_outputs[m]].buffer, results[m],
                                 scratch.result_dtypes[m]);
  lowering_end(&l);
  free(scratch.result_outputs);
  free(scratch.result_dtypes);
  free(scratch.kept);
  free(results);
  return status;
}
