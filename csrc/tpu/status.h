/* Status: how every fallible runtime call reports failure.
 * NULL means OK. Anything else is an owned error the caller frees with
 * tpu_status_free (or passes upward). Library code never aborts. */
#ifndef TPU_STATUS_H
#define TPU_STATUS_H

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tpu_status_code {
  TPU_OK = 0,
  TPU_INVALID_ARGUMENT, /* the caller's input is wrong: shapes, dtypes, indices */
  TPU_UNIMPLEMENTED,    /* no lowering for this op or variant */
  TPU_PLUGIN_ERROR,     /* the PJRT plugin reported an error */
  TPU_NOT_FOUND,        /* a plugin, symbol or file is missing */
  TPU_OUT_OF_MEMORY,
  TPU_INTERNAL,         /* a bug in torch_tpu */
  TPU_OUT_OF_RANGE,     /* an index outside its dimension (Python's IndexError) */
} tpu_status_code;

typedef struct tpu_status_s* tpu_status;

/* Makes an error; use the TPU_ERROR macro so file and line are recorded. */
tpu_status tpu_status_make(tpu_status_code code, const char* file, int line,
                           const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Prepends context ("while lowering aten::add: ") to an error; OK passes through. */
tpu_status tpu_status_annotate(tpu_status status, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Names the op an error came from: "<subject>: " before the message (subject
 * NULL: "aten::<op>"). A leading "aten::<op>: " already there (the lowering's
 * own, or a layer below's) is dropped first, so the op is named once however
 * many layers name it. OK passes through. */
tpu_status tpu_status_name_op(tpu_status status, const char* op, const char* subject);

tpu_status_code tpu_status_code_of(tpu_status status);
const char* tpu_status_message(tpu_status status); /* "" for OK; lives as long as status */
void tpu_status_free(tpu_status status);           /* accepts NULL */

const char* tpu_status_code_name(tpu_status_code code);

#define TPU_ERROR(code, ...) tpu_status_make((code), __FILE__, __LINE__, __VA_ARGS__)

#define TPU_RETURN_IF_ERROR(expr)  \
  do {                             \
    tpu_status status_ = (expr);   \
    if (status_) return status_;   \
  } while (0)

#ifdef __cplusplus
}
#endif

#endif
