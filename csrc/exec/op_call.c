/* Op calls: signatures, the plan cache, and running a call's program.
 *
 * A plan is keyed by the call's input signature (op, dtypes, shapes, view
 * layouts, aliasing, attribute values; never Python scalar values or view
 * offsets, which are runtime parameters). It records the output types, and
 * one compiled variant per output layout. */
#include <stdlib.h>
#include <string.h>

#include "cache/program_cache.h"
#include "exec/graph.h"
#include "exec/index_check.h"
#include "exec/recompile.h"
#include "exec/runtime_impl.h"

#define PLAN_BUCKETS 8192

static tpu_op_plan* plan_buckets[PLAN_BUCKETS]; /* under the runtime lock */

/* One storage's first position among a call's tensors (arguments, list
 * items, then outputs, in order). */
typedef struct alias_slot {
  const tpu_buffer* buffer; /* NULL: empty slot */
  int64_t position;
} alias_slot;

/* A signature being built. Both arrays grow as needed and are kept for the
 * thread's next call (freed at thread exit). */
typedef struct key_buf {
  unsigned char* data;
  size_t len;
  size_t capacity;
  alias_slot* slots; /* open addressing, a power of two in size */
  size_t slot_count;
  bool out_of_memory;  /* sticky until the next key */
  bool exit_hook_set;  /* the thread-exit destructor knows this buffer */
  bool aliases;        /* slots index this call: each tensor notes its aliasing */
} key_buf;

static void put(key_buf* k, const void* p, size_t n) {
  if (k->out_of_memory || n == 0) return;
  if (k->len + n > k->capacity) {
    size_t capacity = k->capacity ? k->capacity : 1024;
    while (capacity < k->len + n) capacity *= 2;
    unsigned char* grown = realloc(k->data, capacity);
    if (!grown) {
      k->out_of_memory = true;
      return;
    }
    k->data = grown;
    k->capacity = capacity;
  }
  memcpy(k->data + k->len, p, n);
  k->len += n;
}

static void put_i64(key_buf* k, int64_t v) { put(k, &v, sizeof v); }

static void put_str(key_buf* k, const char* s) {
  size_t n = s ? strlen(s) : 0;
  put_i64(k, (int64_t)n);
  put(k, s, n);
}

static size_t alias_home(const key_buf* k, const tpu_buffer* buffer) {
  /* Fibonacci hashing of the address; the low bits are alignment. */
  return (size_t)(((uintptr_t)buffer >> 4) * UINT64_C(0x9E3779B97F4A7C15) >> 17) & (k->slot_count - 1);
}

static alias_slot* alias_find(const key_buf* k, const tpu_buffer* buffer) {
  size_t i = alias_home(k, buffer);
  while (k->slots[i].buffer && k->slots[i].buffer != buffer) i = (i + 1) & (k->slot_count - 1);
  return &k->slots[i];
}

static void alias_note(key_buf* k, const tpu_buffer* buffer, int64_t position) {
  if (!buffer) return;
  alias_slot* s = alias_find(k, buffer);
  if (!s->buffer) *s = (alias_slot){buffer, position};
}

/* Records the first position of every storage in `call`, so each tensor's
 * aliasing is one lookup (a foreach call has thousands of tensors). */
static void alias_index(key_buf* k, const tpu_op_call* call) {
  size_t tensors = (size_t)call->output_count;
  for (int i = 0; i < call->arg_count; i++) {
    const tpu_arg* a = &call->args[i];
    if (a->kind == TPU_ARG_TENSOR) tensors++;
    if (a->kind == TPU_ARG_TENSOR_LIST) tensors += (size_t)a->u.tensors.count;
  }
  size_t want = 16;
  while (want < 2 * tensors) want *= 2; /* at most half full */
  if (want > k->slot_count) {
    alias_slot* grown = realloc(k->slots, want * sizeof *grown);
    if (!grown) {
      k->out_of_memory = true;
      return;
    }
    k->slots = grown;
    k->slot_count = want;
  }
  memset(k->slots, 0, k->slot_count * sizeof *k->slots);
  int64_t position = 0;
  for (int i = 0; i < call->arg_count; i++) {
    const tpu_arg* a = &call->args[i];
    if (a->kind == TPU_ARG_TENSOR) alias_note(k, a->u.tensor.buffer, position++);
    if (a->kind == TPU_ARG_TENSOR_LIST)
      for (int j = 0; j < a->u.tensors.count; j++) alias_note(k, a->u.tensors.items[j].buffer, position++);
  }
  for (int j = 0; j < call->output_count; j++) alias_note(k, call->outputs[j].buffer, position++);
}

static pthread_key_t key_buf_exit;
static pthread_once_t key_buf_exit_once = PTHREAD_ONCE_INIT;

static void key_buf_free(void* p) {
  key_buf* k = p;
  free(k->data);
  free(k->slots);
  *k = (key_buf){0};
}

static void key_buf_exit_create(void) { (void)pthread_key_create(&key_buf_exit, key_buf_free); }

/* Empties `k` for a new signature of `call`, noting aliasing if asked. */
static void key_begin(key_buf* k, const tpu_op_call* call, bool aliases) {
  if (!k->exit_hook_set) {
    (void)pthread_once(&key_buf_exit_once, key_buf_exit_create);
    k->exit_hook_set = pthread_setspecific(key_buf_exit, k) == 0;
  }
  k->len = 0;
  k->out_of_memory = false;
  k->aliases = aliases;
  if (aliases) alias_index(k, call);
}

/* Each tensor's layout, and the first earlier tensor it shares storage with.
 * `position` counts tensors in the order alias_index saw them. */
static void put_tensor(key_buf* k, const tpu_tensor* t, int64_t position) {
  put_i64(k, t->dtype);
  put_i64(k, t->rank);
  put(k, t->sizes, (size_t)t->rank * sizeof t->sizes[0]);
  view_class cls = view_class_of(t);
  put_i64(k, cls);
  if (view_class_has_strides(cls)) put(k, t->strides, (size_t)t->rank * sizeof t->strides[0]);
  put_i64(k, buffer_storage_dtype(t->buffer, t->dtype));
  put_i64(k, view_storage_numel(t));
  if (k->out_of_memory || !k->aliases) return;
  int64_t first = alias_find(k, t->buffer)->position;
  put_i64(k, first < position ? first : -1);
}

static tpu_status key_failed(const tpu_op_call* call) {
  return TPU_ERROR(TPU_OUT_OF_MEMORY, "aten::%s: out of host memory for its signature (%d arguments, %d outputs)",
                   call->name, call->arg_count, call->output_count);
}

static tpu_status input_key(const tpu_op_call* call, const tpu_op_entry* entry, key_buf* k) {
  key_begin(k, call, true);
  put_str(k, call->name);
  put_str(k, call->overload);
  put_i64(k, call->matmul_precision);
  put_i64(k, call->arg_count);
  int64_t position = 0;
  for (int i = 0; i < call->arg_count; i++) {
    const tpu_arg* a = &call->args[i];
    put_i64(k, a->kind);
    switch (a->kind) {
      case TPU_ARG_TENSOR:
        TPU_RETURN_IF_ERROR(view_check(&a->u.tensor, call->name));
        put_tensor(k, &a->u.tensor, position++);
        break;
      case TPU_ARG_TENSOR_LIST:
        put_i64(k, a->u.tensors.count);
        for (int j = 0; j < a->u.tensors.count; j++, position++) {
          const tpu_tensor* t = &a->u.tensors.items[j];
          put_i64(k, t->buffer != NULL);
          if (!t->buffer) continue;
          TPU_RETURN_IF_ERROR(view_check(t, call->name));
          put_tensor(k, t, position);
        }
        break;
      case TPU_ARG_SCALAR:
        put_i64(k, a->u.scalar.type);
        if ((entry->flags & TPU_OP_SCALARS_IN_KEY)) {
          put(k, &a->u.scalar.f, sizeof a->u.scalar.f);
          put_i64(k, a->u.scalar.i);
        }
        break;
      case TPU_ARG_INT: put_i64(k, a->u.i); break;
      case TPU_ARG_FLOAT: put(k, &a->u.f, sizeof a->u.f); break;
      case TPU_ARG_BOOL: put_i64(k, a->u.b); break;
      case TPU_ARG_INT_LIST:
        put_i64(k, a->u.ints.count);
        put(k, a->u.ints.items, (size_t)a->u.ints.count * sizeof(int64_t));
        break;
      case TPU_ARG_DTYPE: put_i64(k, a->u.dtype); break;
      case TPU_ARG_FLOAT_LIST:
        put_i64(k, a->u.floats.count);
        put(k, a->u.floats.items, (size_t)a->u.floats.count * sizeof(double));
        break;
      case TPU_ARG_SCALAR_LIST: put_i64(k, a->u.floats.count); break;
      case TPU_ARG_STRING: put_str(k, a->u.string); break;
      case TPU_ARG_NONE:
      case TPU_ARG_RNG: break;
    }
  }
  /* Given outputs (in-place, out=) decide the result dtypes. */
  put_i64(k, call->output_count);
  for (int j = 0; j < call->output_count; j++) put_i64(k, call->outputs[j].dtype);
  return k->out_of_memory ? key_failed(call) : NULL;
}

static tpu_status output_key(const tpu_op_call* call, key_buf* k, bool aliases) {
  key_begin(k, call, aliases);
  int64_t position = 0; /* outputs follow every argument tensor */
  for (int i = 0; i < call->arg_count; i++) {
    const tpu_arg* a = &call->args[i];
    if (a->kind == TPU_ARG_TENSOR) position++;
    if (a->kind == TPU_ARG_TENSOR_LIST) position += a->u.tensors.count;
  }
  for (int j = 0; j < call->output_count; j++) {
    TPU_RETURN_IF_ERROR(view_check(&call->outputs[j], call->name));
    put_tensor(k, &call->outputs[j], position + j);
  }
  return k->out_of_memory ? key_failed(call) : NULL;
}

static const tpu_op_entry* find_entry(const char* name) {
  char base[64];
  op_base_name(name, base, sizeof base);
  return tpu_op_find(base);
}

bool tpu_op_supported(const char* name, const char* overload) { return find_entry(name) != NULL; }

static tpu_status unsupported(const tpu_op_call* call) {
  return TPU_ERROR(TPU_UNIMPLEMENTED, "aten::%s%s%s has no tpu lowering", call->name,
                   call->overload && call->overload[0] ? "." : "", call->overload ? call->overload : "");
}

/* Thread-local scratch: keys are built outside the plan allocation. */
static _Thread_local key_buf scratch;

/* The calling thread's scratch, looked up once per key: where the compiler
 * sees &scratch itself it folds it into every helper, each of which then
 * asks the dynamic loader for the thread's block on every call. */
__attribute__((noinline)) static key_buf* thread_scratch(void) { return &scratch; }

tpu_status op_output_signature(const tpu_op_call* call, const unsigned char** out_data, size_t* out_len) {
  key_buf* k = thread_scratch();
  TPU_RETURN_IF_ERROR(output_key(call, k, false));
  *out_data = k->data;
  *out_len = k->len;
  return NULL;
}

tpu_status tpu_op_lookup(const tpu_op_call* call, tpu_op_plan** out_plan) {
  *out_plan = NULL;
  const tpu_op_entry* entry = find_entry(call->name);
  if (!entry) return unsupported(call);
  key_buf* k = thread_scratch();
  runtime_lock();
  tpu_status status = input_key(call, entry, k);
  if (!status) {
    uint64_t h = cache_hash(k->data, k->len, CACHE_HASH_SEED);
    for (tpu_op_plan* p = plan_buckets[h % PLAN_BUCKETS]; p; p = p->next) {
      if (p->hash == h && p->key_size == k->len && memcmp(p->key, k->data, k->len) == 0) {
        *out_plan = p;
        break;
      }
    }
  }
  runtime_unlock();
  return status;
}

/* The type of the call's first tensor, scalar or output whose type `is`
 * holds for, or TPU_DTYPE_COUNT if none. */
static tpu_dtype first_dtype(const tpu_op_call* call, int output_count, const tpu_dtype* out_dtypes,
                             bool (*is)(tpu_dtype)) {
  for (int i = 0; i < call->arg_count; i++) {
    const tpu_arg* a = &call->args[i];
    if (a->kind == TPU_ARG_TENSOR && a->u.tensor.buffer && is(a->u.tensor.dtype)) return a->u.tensor.dtype;
    if (a->kind == TPU_ARG_SCALAR && is(a->u.scalar.type)) return a->u.scalar.type;
    for (int j = 0; a->kind == TPU_ARG_TENSOR_LIST && j < a->u.tensors.count; j++) {
      const tpu_tensor* t = &a->u.tensors.items[j];
      if (t->buffer && is(t->dtype)) return t->dtype;
    }
  }
  for (int j = 0; j < output_count; j++)
    if (is(out_dtypes[j])) return out_dtypes[j];
  return TPU_DTYPE_COUNT;
}

/* Ops whose lowering does not know complex numbers refuse them, rather than
 * computing on the real parts. */
static tpu_status check_complex(const tpu_op_call* call, const tpu_op_entry* entry, int output_count,
                                const tpu_dtype* out_dtypes) {
  if (entry->flags & TPU_OP_COMPLEX ||
      first_dtype(call, output_count, out_dtypes, tpu_dtype_is_complex) == TPU_DTYPE_COUNT)
    return NULL;
  return TPU_ERROR(TPU_UNIMPLEMENTED,
                   "aten::%s has no tpu lowering for complex numbers yet. To run it on the CPU instead, set "
                   "TORCH_TPU_CPU_FALLBACK=1 or use `with torch_tpu.cpu_fallback():`.",
                   call->name);
}

/* Ops not checked against ATen's float8 kernels refuse float8 tensors, as
 * the CPU refuses most ops on them (ops/float8.c lists the others). */
static tpu_status check_float8(const tpu_op_call* call, const tpu_op_entry* entry, int output_count,
                               const tpu_dtype* out_dtypes) {
  tpu_dtype dtype = first_dtype(call, output_count, out_dtypes, tpu_dtype_is_float8);
  if (dtype == TPU_DTYPE_COUNT || tpu_op_takes_float8(entry->name)) return NULL;
  return TPU_ERROR(TPU_UNIMPLEMENTED,
                   "aten::%s: %s tensors are not supported on tpu in this op (PyTorch's CPU kernels take float8 "
                   "in only a few ops); convert to float32 or bfloat16 first",
                   call->name, tpu_dtype_name(dtype));
}

tpu_status tpu_op_plan_create(const tpu_op_call* call, int output_count,
                              const tpu_dtype* out_dtypes, const int* out_ranks,
                              const int64_t* const* out_sizes, const int64_t* const* out_strides,
                              void* host_data, tpu_op_plan** out_plan) {
  *out_plan = NULL;
  const tpu_op_entry* entry = find_entry(call->name);
  if (!entry) return unsupported(call);
  if (output_count < 0 || output_count > MAX_OUTPUTS)
    return TPU_ERROR(TPU_UNIMPLEMENTED, "aten::%s has %d outputs; at most %d are supported",
                     call->name, output_count, MAX_OUTPUTS);
  TPU_RETURN_IF_ERROR(check_complex(call, entry, output_count, out_dtypes));
  TPU_RETURN_IF_ERROR(check_float8(call, entry, output_count, out_dtypes));
  key_buf* k = thread_scratch();
  runtime_lock();
  tpu_status status = input_key(call, entry, k);
  tpu_op_plan* plan = status ? NULL : calloc(1, sizeof *plan);
  unsigned char* key = status ? NULL : malloc(k->len ? k->len : 1);
  struct op_output* outputs = status ? NULL : calloc((size_t)(output_count ? output_count : 1), sizeof *outputs);
  if (!status && (!plan || !key || !outputs))
    status = TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory planning aten::%s", call->name);
  if (!status) {
    memcpy(key, k->data, k->len);
    plan->key = key;
    plan->key_size = k->len;
    plan->hash = cache_hash(key, k->len, CACHE_HASH_SEED);
    plan->entry = entry;
    plan->output_count = output_count;
    plan->outputs = outputs;
    for (int j = 0; j < output_count; j++) {
      if (out_ranks[j] < 0 || out_ranks[j] > TPU_MAX_RANK) {
        status = TPU_ERROR(TPU_INVALID_ARGUMENT, "aten::%s: output rank %d is over the limit of %d",
                           call->name, out_ranks[j], TPU_MAX_RANK);
        break;
      }
      outputs[j].dtype = out_dtypes[j];
      outputs[j].rank = out_ranks[j];
      memcpy(outputs[j].sizes, out_sizes[j], (size_t)out_ranks[j] * sizeof(int64_t));
      outputs[j].strided = out_strides && out_strides[j];
      if (outputs[j].strided) memcpy(outputs[j].strides, out_strides[j], (size_t)out_ranks[j] * sizeof(int64_t));
    }
    plan->host_data = host_data;
  }
  if (!status) {
    tpu_op_plan** bucket = &plan_buckets[plan->hash % PLAN_BUCKETS];
    plan->next = *bucket;
    *bucket = plan;
    *out_plan = plan;
    recompile_note(call);
  } else {
    free(plan);
    free(key);
    free(outputs);
  }
  runtime_unlock();
  return status;
}

int tpu_op_plan_output_count(const tpu_op_plan* plan) { return plan->output_count; }

void tpu_op_plan_output(const tpu_op_plan* plan, int index, tpu_dtype* out_dtype, int* out_rank,
                        const int64_t** out_sizes, const int64_t** out_strides) {
  *out_dtype = plan->outputs[index].dtype;
  *out_rank = plan->outputs[index].rank;
  *out_sizes = plan->outputs[index].sizes;
  *out_strides = plan->outputs[index].strided ? plan->outputs[index].strides : NULL;
}

void* tpu_op_plan_host_data(const tpu_op_plan* plan) { return plan->host_data; }

void plan_mark_lowered(tpu_op_plan* plan, op_variant* variant) {
  plan->lowered = true;
  if (!plan->kept) {
    plan->kept = variant->kept;
  } else {
    free(variant->kept);
  }
  variant->kept = NULL;
}

/* A new variant for the output signature in `k`. */
static tpu_status make_variant(tpu_op_plan* plan, const tpu_op_call* call, const key_buf* k, uint64_t hash,
                               op_variant** out_variant) {
  op_variant* v = calloc(1, sizeof *v);
  if (!v) return TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory planning aten::%s", call->name);
  v->key = malloc(k->len ? k->len : 1);
  char* text = NULL;
  size_t size = 0;
  tpu_status status = v->key ? NULL : TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory");
  if (!status) {
    memcpy(v->key, k->data, k->len);
    v->key_size = k->len;
    v->hash = hash;
    status = lower_call(plan, call, v, &text, &size);
  }
  bool compiled = false;
  if (!status) status = program_cache_get(runtime_pjrt(), text, size, &v->program, &compiled);
  free(text);
  if (status) {
    free(v->params);
    free(v->donated);
    free(v->result_outputs);
    free(v->result_dtypes);
    free(v->kept);
    free(v->key);
    free(v);
    return status;
  }
  if (!compiled) tpu_counter_add(TPU_COUNTER_CACHE_HIT, 1);
  plan_mark_lowered(plan, v);
  v->next = plan->variants;
  plan->variants = v;
  *out_variant = v;
  return NULL;
}

static tpu_status param_buffer(const tpu_op_call* call, const param_source* p,
                               struct PJRT_Buffer** out_buffer, struct PJRT_Buffer** out_owned) {
  *out_owned = NULL;
  const tpu_tensor* t = p->kind == PARAM_STORAGE || p->kind == PARAM_OFFSET ? ref_tensor(call, p->ref) : NULL;
  switch (p->kind) {
    case PARAM_STORAGE:
      TPU_RETURN_IF_ERROR(buffer_materialize(t->buffer, p->dtype));
      *out_buffer = t->buffer->pjrt;
      return NULL;
    case PARAM_OFFSET:
      return runtime_scalar_buffer(call->device, TPU_I64, &t->offset, out_buffer, out_owned);
    case PARAM_SCALAR: {
      const tpu_arg* a = &call->args[p->ref.arg];
      if (a->u.scalar.type == TPU_F64)
        return runtime_scalar_buffer(call->device, TPU_F64, &a->u.scalar.f, out_buffer, out_owned);
      if (a->u.scalar.type == TPU_C128) {
        double parts[2] = {a->u.scalar.f, a->u.scalar.imag};
        return runtime_scalar_buffer(call->device, TPU_C128, parts, out_buffer, out_owned);
      }
      if (a->u.scalar.type == TPU_BOOL) {
        unsigned char b = a->u.scalar.i != 0;
        return runtime_scalar_buffer(call->device, TPU_BOOL, &b, out_buffer, out_owned);
      }
      return runtime_scalar_buffer(call->device, TPU_I64, &a->u.scalar.i, out_buffer, out_owned);
    }
    case PARAM_SCALAR_LIST: {
      const tpu_arg* a = &call->args[p->ref.arg];
      int64_t n = a->u.floats.count;
      TPU_RETURN_IF_ERROR(tpu_pjrt_buffer_from_host(runtime_pjrt(), call->device, TPU_F64, &n, 1,
                                                    a->u.floats.items, out_buffer));
      *out_owned = *out_buffer;
      return NULL;
    }
    case PARAM_RNG: {
      const tpu_arg* a = &call->args[p->ref.arg];
      uint64_t state[2] = {a->u.rng.seed, a->u.rng.offset};
      int64_t two = 2;
      TPU_RETURN_IF_ERROR(tpu_pjrt_buffer_from_host(runtime_pjrt(), call->device, TPU_U64, &two, 1,
                                                    state, out_buffer));
      *out_owned = *out_buffer;
      return NULL;
    }
  }
  return TPU_ERROR(TPU_INTERNAL, "unknown parameter kind %d", (int)p->kind);
}

#define STACK_BUFFERS 32

/* Debug mode: waits for the op, so its error surfaces at the call. */
static tpu_status await_outputs(const op_variant* v, const tpu_op_call* call) {
  for (int m = 0; m < v->result_count; m++)
    TPU_RETURN_IF_ERROR(tpu_pjrt_buffer_await(runtime_pjrt(), call->outputs[v->result_outputs[m]].buffer->pjrt));
  return NULL;
}

static tpu_status run_variant(const op_variant* v, const tpu_op_call* call, const char* name) {
  /* Small calls keep their buffer lists on the stack. */
  struct PJRT_Buffer* stack_args[STACK_BUFFERS];
  struct PJRT_Buffer* stack_owned[STACK_BUFFERS];
  struct PJRT_Buffer* stack_results[STACK_BUFFERS];
  bool big = v->param_count > STACK_BUFFERS || v->result_count > STACK_BUFFERS;
  struct PJRT_Buffer** args = big ? calloc((size_t)v->param_count + 1, sizeof *args) : stack_args;
  struct PJRT_Buffer** owned = big ? calloc((size_t)v->param_count + 1, sizeof *owned) : stack_owned;
  struct PJRT_Buffer** results = big ? calloc((size_t)v->result_count + 1, sizeof *results) : stack_results;
  tpu_status status = args && owned && results ? NULL : TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory");
  int made = 0;
  for (; !status && made < v->param_count; made++)
    status = param_buffer(call, &v->params[made], &args[made], &owned[made]);
  if (!status)
    status = program_cache_run(runtime_pjrt(), v->program, call->device, args, (size_t)v->param_count, v->donated,
                               results, (size_t)v->result_count);
  if (!status) {
    for (int m = 0; m < v->result_count; m++) {
      tpu_buffer* written = call->outputs[v->result_outputs[m]].buffer;
      buffer_replace(written, results[m], v->result_dtypes[m]);
      written->writer = name;
    }
  }
  for (int i = 0; i < made && owned; i++) tpu_pjrt_buffer_destroy(runtime_pjrt(), owned[i]);
  if (big) {
    free(args);
    free(owned);
    free(results);
  }
  return status;
}

tpu_status tpu_op_execute(tpu_op_plan* plan, const tpu_op_call* call) {
  if (call->output_count != plan->output_count)
    return TPU_ERROR(TPU_INTERNAL, "aten::%s: %d outputs given, plan has %d", call->name,
                     call->output_count, plan->output_count);
  runtime_lock();
  tpu_eager_mode mode = tpu_get_eager_mode();
  graph* pending = graph_pending(call->device);
  if (mode == TPU_EAGER_FUSED || (pending && pending->capturing)) {
    tpu_status status = graph_record(plan, call);
    runtime_unlock();
    return tpu_status_name_op(status, call->name, NULL);
  }
  tpu_status status = mode == TPU_EAGER_DEBUG ? index_check(call) : NULL;
  key_buf* k = thread_scratch();
  if (!status) status = output_key(call, k, true);
  op_variant* v = NULL;
  if (!status) {
    uint64_t h = cache_hash(k->data, k->len, CACHE_HASH_SEED);
    for (v = plan->variants; v; v = v->next)
      if (v->hash == h && v->key_size == k->len && memcmp(v->key, k->data, k->len) == 0) break;
    if (v)
      tpu_counter_add(TPU_COUNTER_CACHE_HIT, 1);
    else
      status = make_variant(plan, call, k, h, &v);
  }
  if (!status) status = run_variant(v, call, plan->entry->name);
  if (!status && mode == TPU_EAGER_DEBUG) status = await_outputs(v, call);
  runtime_unlock();
  return tpu_status_name_op(status, call->name, NULL);
}
