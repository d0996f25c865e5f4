#include "tpu/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tpu_status_s {
  tpu_status_code code;
  char* message; /* heap, NUL-terminated */
};

/* Returned when allocating an error itself fails: static, never freed. */
static struct tpu_status_s out_of_memory_status = {TPU_OUT_OF_MEMORY,
                                                   "out of host memory while reporting an error"};

static char* format_message(const char* fmt, va_list args) {
  va_list copy;
  va_copy(copy, args);
  int n = vsnprintf(NULL, 0, fmt, copy);
  va_end(copy);
  if (n < 0) return NULL;
  char* text = malloc((size_t)n + 1);
  if (text) vsnprintf(text, (size_t)n + 1, fmt, args);
  return text;
}

tpu_status tpu_status_make(tpu_status_code code, const char* file, int line,
                           const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  char* text = format_message(fmt, args);
  va_end(args);
  tpu_status status = malloc(sizeof *status);
  const char* base = file ? strrchr(file, '/') : NULL;
  base = base ? base + 1 : (file ? file : "?");
  size_t size = (text ? strlen(text) : 0) + strlen(base) + 32;
  char* message = malloc(size);
  if (!status || !message || !text) {
    free(status);
    free(message);
    free(text);
    return &out_of_memory_status;
  }
  snprintf(message, size, "%s (%s:%d)", text, base, line);
  free(text);
  status->code = code;
  status->message = message;
  return status;
}

tpu_status tpu_status_annotate(tpu_status status, const char* fmt, ...) {
  if (!status || status == &out_of_memory_status) return status;
  va_list args;
  va_start(args, fmt);
  char* prefix = format_message(fmt, args);
  va_end(args);
  if (!prefix) return status;
  size_t size = strlen(prefix) + strlen(status->message) + 1;
  char* message = malloc(size);
  if (message) {
    snprintf(message, size, "%s%s", prefix, status->message);
    free(status->message);
    status->message = message;
  }
  free(prefix);
  return status;
}

tpu_status tpu_status_name_op(tpu_status status, const char* op, const char* subject) {
  if (!status || status == &out_of_memory_status) return status;
  size_t op_len = strlen(op);
  const char* m = status->message;
  if (strncmp(m, "aten::", 6) == 0 && strncmp(m + 6, op, op_len) == 0 && strncmp(m + 6 + op_len, ": ", 2) == 0) {
    if (!subject) return status;
    memmove(status->message, m + 8 + op_len, strlen(m + 8 + op_len) + 1);
  }
  return subject ? tpu_status_annotate(status, "%s: ", subject) : tpu_status_annotate(status, "aten::%s: ", op);
}

tpu_status_code tpu_status_code_of(tpu_status status) { return status ? status->code : TPU_OK; }

const char* tpu_status_message(tpu_status status) { return status ? status->message : ""; }

void tpu_status_free(tpu_status status) {
  if (!status || status == &out_of_memory_status) return;
  free(status->message);
  free(status);
}

const char* tpu_status_code_name(tpu_status_code code) {
  switch (code) {
    case TPU_OK: return "OK";
    case TPU_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case TPU_UNIMPLEMENTED: return "UNIMPLEMENTED";
    case TPU_PLUGIN_ERROR: return "PLUGIN_ERROR";
    case TPU_NOT_FOUND: return "NOT_FOUND";
    case TPU_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
    case TPU_INTERNAL: return "INTERNAL";
    case TPU_OUT_OF_RANGE: return "OUT_OF_RANGE";
  }
  return "UNKNOWN";
}
