/* The module builder's core: values, text buffers, parameters, finish.
 * Op emitters live in ops_*.c beside it and use builder_impl.h. */
#include "hlo/builder_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const hlo_type invalid_type = {TPU_F32, 0, {0}};

hlo_type hlo_type_make(tpu_dtype dtype, int rank, const int64_t* dims) {
  hlo_type t = {dtype, rank, {0}};
  for (int i = 0; i < rank && i < TPU_MAX_RANK; i++) t.dims[i] = dims[i];
  return t;
}

int64_t hlo_type_numel(const hlo_type* type) {
  int64_t n = 1;
  for (int i = 0; i < type->rank; i++) n *= type->dims[i];
  return n;
}

bool hlo_type_equal(const hlo_type* a, const hlo_type* b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

char* hlo_type_print(const hlo_type* type, char* buf, size_t size) {
  size_t n = (size_t)snprintf(buf, size, "tensor<");
  for (int i = 0; i < type->rank && n < size; i++)
    n += (size_t)snprintf(buf + n, size - n, "%lldx", (long long)type->dims[i]);
  if (n < size) snprintf(buf + n, size - n, "%s>", tpu_dtype_mlir(type->dtype));
  return buf;
}

char* hlo_shape_print(const hlo_type* type, char* buf, size_t size) {
  attr_i64_list(buf, size, type->dims, type->rank);
  return buf;
}

/* ---- text buffers ---- */

void text_append(hlo_builder* b, hlo_text* t, const char* fmt, ...) {
  if (b->status) return;
  va_list args;
  for (;;) {
    va_start(args, fmt);
    size_t room = t->cap - t->len;
    int n = vsnprintf(t->data ? t->data + t->len : NULL, t->data ? room : 0, fmt, args);
    va_end(args);
    if (n < 0) {
      hlo_fail(b, TPU_INTERNAL, "formatting StableHLO text failed");
      return;
    }
    if (t->data && (size_t)n < room) {
      t->len += (size_t)n;
      return;
    }
    size_t cap = t->cap ? t->cap * 2 : 1024;
    while (cap < t->len + (size_t)n + 1) cap *= 2;
    char* grown = realloc(t->data, cap);
    if (!grown) {
      hlo_fail(b, TPU_OUT_OF_MEMORY, "out of host memory building StableHLO text");
      return;
    }
    t->data = grown;
    t->cap = cap;
  }
}

void text_append_i64s(hlo_builder* b, hlo_text* t, const int64_t* v, int n) {
  for (int i = 0; i < n; i++) text_append(b, t, i ? ", %lld" : "%lld", (long long)v[i]);
}

hlo_text* current_text(hlo_builder* b) { return &b->texts[b->depth]; }

/* ---- builder lifetime and errors ---- */

tpu_status hlo_builder_create(hlo_builder** out_builder) {
  *out_builder = NULL;
  hlo_builder* b = calloc(1, sizeof *b);
  if (!b) return TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory creating a StableHLO builder");
  *out_builder = b;
  return NULL;
}

void hlo_builder_free(hlo_builder* b) {
  if (!b) return;
  for (int i = 0; i < HLO_MAX_DEPTH; i++) free(b->texts[i].data);
  free(b->params);
  free(b->region.data);
  free(b->values);
  tpu_status_free(b->status);
  free(b);
}

void hlo_set_precision(hlo_builder* b, hlo_precision precision) { b->precision = precision; }

size_t precision_attr(const hlo_builder* b, hlo_value lhs, hlo_value rhs, char* attrs, size_t size,
                      size_t len) {
  bool f32 = hlo_type_of(b, lhs)->dtype == TPU_F32 || hlo_type_of(b, rhs)->dtype == TPU_F32;
  if (!f32 || b->precision == HLO_PRECISION_DEFAULT || len >= size) return len;
  const char* name = b->precision == HLO_PRECISION_HIGH ? "HIGH" : "HIGHEST";
  return len + (size_t)snprintf(attrs + len, size - len,
                                ", precision_config = [#stablehlo<precision %s>, #stablehlo<precision %s>]",
                                name, name);
}

hlo_value hlo_fail_at(hlo_builder* b, tpu_status_code code, const char* file, int line, const char* fmt, ...) {
  if (b->status) return HLO_INVALID;
  char message[1024];
  va_list args;
  va_start(args, fmt);
  vsnprintf(message, sizeof message, fmt, args);
  va_end(args);
  b->status = tpu_status_make(code, file, line, "%s", message);
  return HLO_INVALID;
}

bool hlo_failed(const hlo_builder* b) { return b->status != NULL; }

const hlo_type* hlo_type_of(const hlo_builder* b, hlo_value v) {
  if (v < 0 || v >= b->value_count) return &invalid_type;
  return &b->values[v].type;
}

bool values_valid(hlo_builder* b, const hlo_value* vs, int n) {
  if (b->status) return false;
  for (int i = 0; i < n; i++) {
    if (vs[i] < 0 || vs[i] >= b->value_count) {
      hlo_fail(b, TPU_INTERNAL, "StableHLO builder got an invalid value %d", vs[i]);
      return false;
    }
  }
  return true;
}

/* ---- values ---- */

hlo_value new_value(hlo_builder* b, hlo_type type, int result_index) {
  if (b->status) return HLO_INVALID;
  if (type.rank < 0 || type.rank > TPU_MAX_RANK)
    return hlo_fail(b, TPU_INVALID_ARGUMENT, "rank %d is over the limit of %d", type.rank,
                    TPU_MAX_RANK);
  if (b->value_count == b->value_cap) {
    int cap = b->value_cap ? b->value_cap * 2 : 64;
    hlo_value_info* grown = realloc(b->values, (size_t)cap * sizeof *grown);
    if (!grown) return hlo_fail(b, TPU_OUT_OF_MEMORY, "out of host memory building StableHLO");
    b->values = grown;
    b->value_cap = cap;
  }
  hlo_value v = b->value_count++;
  hlo_value_info* info = &b->values[v];
  info->type = type;
  info->reshape_of = HLO_INVALID;
  if (result_index < 0)
    snprintf(info->name, sizeof info->name, "%%v%d", v);
  else
    snprintf(info->name, sizeof info->name, "%%v%d#%d", v - result_index, result_index);
  return v;
}

const char* value_name(const hlo_builder* b, hlo_value v) { return b->values[v].name; }

hlo_value hlo_parameter(hlo_builder* b, hlo_type type) {
  if (b->param_count == b->param_cap) {
    int cap = b->param_cap ? b->param_cap * 2 : 16;
    hlo_value* grown = realloc(b->params, (size_t)cap * sizeof *grown);
    if (!grown) return hlo_fail(b, TPU_OUT_OF_MEMORY, "out of host memory building StableHLO text");
    b->params = grown;
    b->param_cap = cap;
  }
  hlo_value v = new_value(b, type, -1);
  if (v == HLO_INVALID) return v;
  b->params[b->param_count++] = v;
  return v;
}

int hlo_parameter_count(const hlo_builder* b) { return b->param_count; }

hlo_value hlo_parameter_at(const hlo_builder* b, int index) {
  return index >= 0 && index < b->param_count ? b->params[index] : HLO_INVALID;
}

/* Emits `%vN = "stablehlo.op"(operands) <regions> {attrs} : (types) -> type`.
 * attrs may be NULL. Regions, if any, were prepared with region_begin/end. */
hlo_value emit_op(hlo_builder* b, const char* op, const hlo_value* operands, int n,
                  const char* attrs, hlo_type result) {
  if (!values_valid(b, operands, n)) return HLO_INVALID;
  hlo_value v = new_value(b, result, -1);
  if (v == HLO_INVALID) return v;
  emit_op_results(b, op, operands, n, attrs, &result, 1, v);
  return v;
}

void emit_op_results(hlo_builder* b, const char* op, const hlo_value* operands, int n,
                     const char* attrs, const hlo_type* results, int result_count,
                     hlo_value first) {
  hlo_text* t = current_text(b);
  char ty[128];
  if (result_count == 1)
    text_append(b, t, "    %s = \"%s\"(", value_name(b, first), op);
  else
    text_append(b, t, "    %%v%d:%d = \"%s\"(", first, result_count, op);
  for (int i = 0; i < n; i++) text_append(b, t, "%s%s", i ? ", " : "", value_name(b, operands[i]));
  text_append(b, t, ")");
  if (b->region.len) {
    text_append(b, t, " (%.*s)", (int)b->region.len, b->region.data);
    b->region.len = 0;
  }
  if (attrs && attrs[0]) text_append(b, t, " {%s}", attrs);
  text_append(b, t, " : (");
  for (int i = 0; i < n; i++)
    text_append(b, t, "%s%s", i ? ", " : "", hlo_type_print(hlo_type_of(b, operands[i]), ty, sizeof ty));
  text_append(b, t, ") -> ");
  if (result_count != 1) text_append(b, t, "(");
  for (int i = 0; i < result_count; i++)
    text_append(b, t, "%s%s", i ? ", " : "", hlo_type_print(&results[i], ty, sizeof ty));
  text_append(b, t, result_count != 1 ? ")\n" : "\n");
}

/* ---- regions: a nested block whose text becomes the next op's region ---- */

void region_begin(hlo_builder* b, const hlo_type* arg_types, int n, hlo_value* out_args) {
  if (b->status) return;
  if (b->depth + 1 >= HLO_MAX_DEPTH) {
    hlo_fail(b, TPU_INTERNAL, "StableHLO regions nested too deeply");
    return;
  }
  b->depth++;
  hlo_text* t = current_text(b);
  t->len = 0;
  char ty[128];
  text_append(b, t, "{\n  ^bb0(");
  for (int i = 0; i < n; i++) {
    out_args[i] = new_value(b, arg_types[i], -1);
    if (out_args[i] == HLO_INVALID) return;
    text_append(b, t, "%s%s: %s", i ? ", " : "", value_name(b, out_args[i]),
                hlo_type_print(&arg_types[i], ty, sizeof ty));
  }
  text_append(b, t, "):\n");
}

void region_end(hlo_builder* b, const hlo_value* results, int n) {
  if (!values_valid(b, results, n)) return;
  hlo_text* t = current_text(b);
  char ty[128];
  text_append(b, t, "    \"stablehlo.return\"(");
  for (int i = 0; i < n; i++) text_append(b, t, "%s%s", i ? ", " : "", value_name(b, results[i]));
  text_append(b, t, ") : (");
  for (int i = 0; i < n; i++)
    text_append(b, t, "%s%s", i ? ", " : "", hlo_type_print(hlo_type_of(b, results[i]), ty, sizeof ty));
  text_append(b, t, ") -> ()\n  }");
  b->depth--;
  b->region.len = 0;
  text_append(b, &b->region, "%.*s", (int)t->len, t->data);
}

/* ---- finish ---- */

/* The result parameter i may be written into, or -1. */
static int aliased_result(const hlo_builder* b, int i, const int* result_params, int result_count) {
  for (int m = 0; result_params && m < result_count; m++)
    if (result_params[m] == i) return m;
  return -1;
}

static void check_aliases(hlo_builder* b, const hlo_value* results, int result_count,
                          const int* result_params) {
  for (int m = 0; result_params && m < result_count && !b->status; m++) {
    int p = result_params[m];
    if (p < 0) continue;
    if (p >= b->param_count || aliased_result(b, p, result_params, result_count) != m) {
      hlo_fail(b, TPU_INTERNAL, "result %d aliases parameter %d, which is out of range or taken", m, p);
      return;
    }
    const hlo_type* param = hlo_type_of(b, b->params[p]);
    const hlo_type* result = hlo_type_of(b, results[m]);
    if (param->dtype != result->dtype || hlo_type_numel(param) != hlo_type_numel(result))
      hlo_fail(b, TPU_INTERNAL, "result %d cannot alias parameter %d: their dtypes or sizes differ", m, p);
  }
}

/* The signature's parameters. One aliased to a result of another shape is
 * declared in the result's shape (its name %a..., not %v...) and reshaped
 * into its own at the top of the body, written to `prologue`. */
static void print_parameters(hlo_builder* b, hlo_text* out, hlo_text* prologue, const hlo_value* results,
                             int result_count, const int* result_params) {
  char ty[128], declared[128];
  for (int i = 0; i < b->param_count; i++) {
    hlo_value v = b->params[i];
    const char* name = value_name(b, v);
    hlo_type_print(hlo_type_of(b, v), ty, sizeof ty);
    int m = aliased_result(b, i, result_params, result_count);
    if (m < 0) {
      text_append(b, out, "%s%s: %s", i ? ", " : "", name, ty);
      continue;
    }
    const hlo_type* result = hlo_type_of(b, results[m]);
    if (hlo_type_equal(result, hlo_type_of(b, v))) {
      text_append(b, out, "%s%s: %s {tf.aliasing_output = %d : i32}", i ? ", " : "", name, ty, m);
      continue;
    }
    hlo_type_print(result, declared, sizeof declared);
    text_append(b, out, "%s%%a%s: %s {tf.aliasing_output = %d : i32}", i ? ", " : "", name + 2, declared, m);
    text_append(b, prologue, "    %s = \"stablehlo.reshape\"(%%a%s) : (%s) -> %s\n", name, name + 2, declared, ty);
  }
}

tpu_status hlo_builder_finish(hlo_builder* b, const hlo_value* results, int result_count,
                              const int* result_params, char** out_text, size_t* out_size) {
  *out_text = NULL;
  if (out_size) *out_size = 0;
  if (values_valid(b, results, result_count)) check_aliases(b, results, result_count, result_params);
  if (b->status) {
    tpu_status s = b->status;
    b->status = NULL;
    return s;
  }
  hlo_text out = {0}, prologue = {0};
  char ty[128];
  text_append(b, &out, "module @tpu_program {\n  func.func public @main(");
  print_parameters(b, &out, &prologue, results, result_count, result_params);
  text_append(b, &out, ") -> (");
  for (int i = 0; i < result_count; i++)
    text_append(b, &out, "%s%s", i ? ", " : "", hlo_type_print(hlo_type_of(b, results[i]), ty, sizeof ty));
  text_append(b, &out, ") {\n%.*s%.*s    \"func.return\"(", (int)prologue.len, prologue.data ? prologue.data : "",
              (int)b->texts[0].len, b->texts[0].data ? b->texts[0].data : "");
  free(prologue.data);
  for (int i = 0; i < result_count; i++)
    text_append(b, &out, "%s%s", i ? ", " : "", value_name(b, results[i]));
  text_append(b, &out, ") : (");
  for (int i = 0; i < result_count; i++)
    text_append(b, &out, "%s%s", i ? ", " : "", hlo_type_print(hlo_type_of(b, results[i]), ty, sizeof ty));
  text_append(b, &out, ") -> ()\n  }\n}\n");
  if (b->status) {
    free(out.data);
    tpu_status s = b->status;
    b->status = NULL;
    return s;
  }
  *out_text = out.data;
  if (out_size) *out_size = out.len;
  return NULL;
}

hlo_value new_results(hlo_builder* b, const hlo_type* types, int count) {
  if (count == 1) return new_value(b, types[0], -1);
  hlo_value first = HLO_INVALID;
  for (int i = 0; i < count; i++) {
    hlo_value v = new_value(b, types[i], i);
    if (i == 0) first = v;
  }
  return b->status ? HLO_INVALID : first;
}

void attr_i64_list(char* buf, size_t size, const int64_t* v, int n) {
  size_t len = (size_t)snprintf(buf, size, "[");
  for (int i = 0; i < n && len < size; i++)
    len += (size_t)snprintf(buf + len, size - len, i ? ", %lld" : "%lld", (long long)v[i]);
  if (len < size) snprintf(buf + len, size - len, "]");
}

void attr_i64_array(char* buf, size_t size, const char* name, const int64_t* v, int n) {
  size_t len = (size_t)snprintf(buf, size, "%s = array<i64%s", name, n ? ": " : "");
  for (int i = 0; i < n && len < size; i++)
    len += (size_t)snprintf(buf + len, size - len, i ? ", %lld" : "%lld", (long long)v[i]);
  if (len < size) snprintf(buf + len, size - len, ">");
}
