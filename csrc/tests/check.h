/* A minimal test harness for the C unit tests: CHECK records a failure and
 * goes on; a test binary exits non-zero when any check failed. */
#ifndef TPU_TESTS_CHECK_H
#define TPU_TESTS_CHECK_H

#include <stdbool.h>

#include "tpu/status.h"

extern int check_failures;
extern int check_count;

void check_fail(const char* file, int line, const char* what);
/* Fails (and frees the status) unless it is OK. */
void check_ok(tpu_status status, const char* file, int line, const char* what);
/* The plugin TORCH_TPU_PJRT_PLUGIN names (make ctest sets it), or NULL
 * with a failure recorded saying to set it. */
const char* check_plugin_path(void);
/* Starts the runtime on that plugin with one device; false (a failure
 * recorded) if it cannot, so a test binary runs its tests only when true. */
bool check_runtime_init(void);
/* Prints "N passed, N failed" and returns the process exit code. */
int check_finish(const char* suite);

/* A StableHLO module adding two f32[4]: the tests' smallest program. */
extern const char check_add_f32x4[];

#define CHECK(cond) \
  do { check_count++; if (!(cond)) check_fail(__FILE__, __LINE__, #cond); } while (0)
#define CHECK_OK(expr) check_ok((expr), __FILE__, __LINE__, #expr)

#endif
