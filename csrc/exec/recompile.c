/* Recompilation reasons. A signature is flattened into a list of named
 * facts in a fixed order ("input 0 kind", "input 0 dtype", "input 0 rank",
 * "input 0 dim 0", ...), so comparing two signatures is a walk to the first
 * fact that differs: a rank change shows before the dims it shifts, a list
 * length before its items. Plan creation is rare (once per signature), so
 * this costs nothing on the per-op path. */
#include "exec/recompile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/program_cache.h"
#include "exec/runtime_impl.h"
#include "exec/view.h"

#define OP_BUCKETS 1024
#define REASON_SIZE 256
#define WHAT_SIZE 40

typedef enum fact_kind { FACT_INT, FACT_FLOAT, FACT_DTYPE, FACT_LAYOUT, FACT_ARG_KIND, FACT_PRECISION } fact_kind;

typedef struct fact {
  char what[WHAT_SIZE]; /* "input 0 dim 1" */
  fact_kind kind;
  int64_t i; /* FACT_INT, and the enum value of the others */
  double f;  /* FACT_FLOAT */
} fact;

typedef struct signature {
  fact* facts;
  int count;
  int cap;
  bool out_of_memory;
} signature;

/* The latest signature of one op, in a hash chain. */
typedef struct op_record {
  char* op; /* "add.Tensor" (owned) */
  uint64_t hash;
  signature sig;
  struct op_record* next;
} op_record;

static op_record* op_buckets[OP_BUCKETS];       /* under the runtime lock */
static char reasons[TPU_RECOMPILE_REASONS_MAX][REASON_SIZE]; /* ring, under the lock */
static int64_t reasons_total;                    /* every reason ever noted since clear */

static fact* add_fact(signature* s, fact_kind kind, const char* fmt, int a, int b) {
  if (s->count == s->cap) {
    int cap = s->cap ? 2 * s->cap : 32;
    fact* grown = realloc(s->facts, (size_t)cap * sizeof *grown);
    if (!grown) {
      s->out_of_memory = true;
      return NULL;
    }
    s->facts = grown;
    s->cap = cap;
  }
  fact* f = &s->facts[s->count++];
  memset(f, 0, sizeof *f);
  snprintf(f->what, sizeof f->what, fmt, a, b);
  f->kind = kind;
  return f;
}

static void add_int(signature* s, fact_kind kind, int64_t value, const char* fmt, int a, int b) {
  fact* f = add_fact(s, kind, fmt, a, b);
  if (f) f->i = value;
}

static void add_float(signature* s, double value, const char* fmt, int a, int b) {
  fact* f = add_fact(s, FACT_FLOAT, fmt, a, b);
  if (f) f->f = value;
}

/* `name` is "input 0" or "input 0[3]" style, passed as fmt with a, b. */
static void add_tensor(signature* s, const tpu_tensor* t, const char* name, int a, int b) {
  char prefix[WHAT_SIZE];
  snprintf(prefix, sizeof prefix, name, a, b);
  char fmt[WHAT_SIZE + 16];
  snprintf(fmt, sizeof fmt, "%s dtype", prefix);
  add_int(s, FACT_DTYPE, t->dtype, fmt, 0, 0);
  snprintf(fmt, sizeof fmt, "%s rank", prefix);
  add_int(s, FACT_INT, t->rank, fmt, 0, 0);
  snprintf(fmt, sizeof fmt, "%s dim %%d", prefix);
  for (int d = 0; d < t->rank && d < TPU_MAX_RANK; d++) add_int(s, FACT_INT, t->sizes[d], fmt, d, 0);
  snprintf(fmt, sizeof fmt, "%s layout", prefix);
  view_class cls = view_class_of(t);
  add_int(s, FACT_LAYOUT, cls, fmt, 0, 0);
  if (view_class_has_strides(cls)) {
    snprintf(fmt, sizeof fmt, "%s stride %%d", prefix);
    for (int d = 0; d < t->rank && d < TPU_MAX_RANK; d++) add_int(s, FACT_INT, t->strides[d], fmt, d, 0);
  }
}

static void describe(const tpu_op_call* call, signature* s) {
  add_int(s, FACT_PRECISION, call->matmul_precision, "float32 matmul precision", 0, 0);
  add_int(s, FACT_INT, call->arg_count, "argument count", 0, 0);
  for (int i = 0; i < call->arg_count; i++) {
    const tpu_arg* a = &call->args[i];
    add_int(s, FACT_ARG_KIND, a->kind, "argument %d", i, 0);
    switch (a->kind) {
      case TPU_ARG_TENSOR: add_tensor(s, &a->u.tensor, "input %d", i, 0); break;
      case TPU_ARG_TENSOR_LIST:
        add_int(s, FACT_INT, a->u.tensors.count, "input %d length", i, 0);
        for (int j = 0; j < a->u.tensors.count; j++) {
          const tpu_tensor* t = &a->u.tensors.items[j];
          add_int(s, FACT_INT, t->buffer != NULL, "input %d[%d] present", i, j);
          if (t->buffer) add_tensor(s, t, "input %d[%d]", i, j);
        }
        break;
      case TPU_ARG_SCALAR: add_int(s, FACT_DTYPE, a->u.scalar.type, "argument %d scalar type", i, 0); break;
      case TPU_ARG_INT: add_int(s, FACT_INT, a->u.i, "argument %d", i, 0); break;
      case TPU_ARG_BOOL: add_int(s, FACT_INT, a->u.b, "argument %d", i, 0); break;
      case TPU_ARG_FLOAT: add_float(s, a->u.f, "argument %d", i, 0); break;
      case TPU_ARG_DTYPE: add_int(s, FACT_DTYPE, a->u.dtype, "argument %d", i, 0); break;
      case TPU_ARG_INT_LIST:
        add_int(s, FACT_INT, a->u.ints.count, "argument %d length", i, 0);
        for (int j = 0; j < a->u.ints.count; j++) add_int(s, FACT_INT, a->u.ints.items[j], "argument %d[%d]", i, j);
        break;
      case TPU_ARG_FLOAT_LIST:
        add_int(s, FACT_INT, a->u.floats.count, "argument %d length", i, 0);
        for (int j = 0; j < a->u.floats.count; j++) add_float(s, a->u.floats.items[j], "argument %d[%d]", i, j);
        break;
      case TPU_ARG_SCALAR_LIST: add_int(s, FACT_INT, a->u.floats.count, "argument %d length", i, 0); break;
      case TPU_ARG_STRING: {
        const char* text = a->u.string ? a->u.string : "";
        add_int(s, FACT_INT, (int64_t)cache_hash(text, strlen(text), CACHE_HASH_SEED), "argument %d text", i, 0);
        break;
      }
      case TPU_ARG_NONE:
      case TPU_ARG_RNG: break;
    }
  }
  add_int(s, FACT_INT, call->output_count, "given outputs", 0, 0);
  for (int j = 0; j < call->output_count; j++) add_int(s, FACT_DTYPE, call->outputs[j].dtype, "output %d dtype", j, 0);
}

static const char* arg_kind_name(int64_t kind) {
  static const char* const names[] = {
      [TPU_ARG_NONE] = "None",          [TPU_ARG_TENSOR] = "a tensor",
      [TPU_ARG_TENSOR_LIST] = "a tensor list", [TPU_ARG_SCALAR] = "a scalar",
      [TPU_ARG_INT] = "an int",         [TPU_ARG_FLOAT] = "a float",
      [TPU_ARG_BOOL] = "a bool",        [TPU_ARG_INT_LIST] = "an int list",
      [TPU_ARG_DTYPE] = "a dtype",      [TPU_ARG_STRING] = "a string",
      [TPU_ARG_RNG] = "a generator",    [TPU_ARG_FLOAT_LIST] = "a float list",
      [TPU_ARG_SCALAR_LIST] = "a scalar list",
  };
  return kind >= 0 && kind < (int64_t)(sizeof names / sizeof names[0]) && names[kind] ? names[kind] : "?";
}

static const char* layout_name(int64_t cls) {
  switch (cls) {
    case VIEW_WHOLE: return "contiguous";
    case VIEW_SLICE: return "contiguous at an offset";
    case VIEW_BOX: return "strided (a box)";
    case VIEW_PERMUTED: return "transposed";
    default: return "strided";
  }
}

static void format_value(const fact* f, char* out, size_t size) {
  switch (f->kind) {
    case FACT_INT: snprintf(out, size, "%lld", (long long)f->i); break;
    case FACT_FLOAT: snprintf(out, size, "%g", f->f); break;
    case FACT_DTYPE: snprintf(out, size, "%s", tpu_dtype_name((tpu_dtype)f->i)); break;
    case FACT_LAYOUT: snprintf(out, size, "%s", layout_name(f->i)); break;
    case FACT_ARG_KIND: snprintf(out, size, "%s", arg_kind_name(f->i)); break;
    case FACT_PRECISION:
      snprintf(out, size, "%s", f->i == TPU_MATMUL_HIGH ? "high" : f->i == TPU_MATMUL_MEDIUM ? "medium" : "highest");
      break;
  }
}

static bool same_fact(const fact* a, const fact* b) {
  if (strcmp(a->what, b->what) != 0 || a->kind != b->kind) return false;
  return a->kind == FACT_FLOAT ? memcmp(&a->f, &b->f, sizeof a->f) == 0 : a->i == b->i;
}

/* The first difference, as "input 0 dim 1 changed 128 -> 256". */
static void difference(const signature* before, const signature* now, char* out, size_t size) {
  int n = before->count < now->count ? before->count : now->count;
  for (int k = 0; k < n; k++) {
    const fact* a = &before->facts[k];
    const fact* b = &now->facts[k];
    if (same_fact(a, b)) continue;
    char was[64], is[64];
    format_value(a, was, sizeof was);
    format_value(b, is, sizeof is);
    if (strcmp(a->what, b->what) == 0)
      snprintf(out, size, "%s changed %s -> %s", b->what, was, is);
    else
      snprintf(out, size, "%s (%s) where there was %s (%s)", b->what, is, a->what, was);
    return;
  }
  /* Equal facts: the plan key also holds aliasing and storage size. */
  snprintf(out, size, "storage size or aliasing between arguments changed");
}

static void note_reason(const char* op, const char* why) {
  char* slot = reasons[reasons_total % TPU_RECOMPILE_REASONS_MAX];
  snprintf(slot, REASON_SIZE, "aten::%.100s: %.140s", op, why);
  reasons_total++;
}

void recompile_note(const tpu_op_call* call) {
  char op[128];
  snprintf(op, sizeof op, "%s%s%s", call->name, call->overload && call->overload[0] ? "." : "",
           call->overload ? call->overload : "");
  signature now = {0};
  describe(call, &now);
  if (now.out_of_memory) {
    free(now.facts);
    return;
  }
  uint64_t h = cache_hash(op, strlen(op), CACHE_HASH_SEED);
  op_record** bucket = &op_buckets[h % OP_BUCKETS];
  op_record* r = *bucket;
  while (r && (r->hash != h || strcmp(r->op, op) != 0)) r = r->next;
  if (r) {
    char why[REASON_SIZE];
    difference(&r->sig, &now, why, sizeof why);
    note_reason(op, why);
    free(r->sig.facts);
    r->sig = now;
    return;
  }
  r = calloc(1, sizeof *r);
  char* copy = r ? strdup(op) : NULL;
  if (!copy) {
    free(r);
    free(now.facts);
    return;
  }
  r->op = copy;
  r->hash = h;
  r->sig = now;
  r->next = *bucket;
  *bucket = r;
}

int64_t tpu_recompile_count(void) {
  runtime_lock();
  int64_t n = reasons_total;
  runtime_unlock();
  return n;
}

bool tpu_recompile_reason(int index, char* out, size_t size) {
  runtime_lock();
  int64_t kept = reasons_total < TPU_RECOMPILE_REASONS_MAX ? reasons_total : TPU_RECOMPILE_REASONS_MAX;
  bool ok = index >= 0 && index < kept && size > 0;
  if (ok) snprintf(out, size, "%s", reasons[(reasons_total - kept + index) % TPU_RECOMPILE_REASONS_MAX]);
  runtime_unlock();
  return ok;
}

void tpu_recompile_reasons_clear(void) {
  runtime_lock();
  reasons_total = 0;
  runtime_unlock();
}
