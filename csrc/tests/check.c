#include "tests/check.h"

#include <stdio.h>
#include <stdlib.h>

#include "tpu/runtime.h"

int check_failures = 0;
int check_count = 0;

void check_fail(const char* file, int line, const char* what) {
  check_failures++;
  fprintf(stderr, "FAIL %s:%d: %s\n", file, line, what);
}

void check_ok(tpu_status status, const char* file, int line, const char* what) {
  check_count++;
  if (!status) return;
  check_failures++;
  fprintf(stderr, "FAIL %s:%d: %s -> %s\n", file, line, what, tpu_status_message(status));
  tpu_status_free(status);
}

const char* check_plugin_path(void) {
  const char* path = getenv("TORCH_TPU_PJRT_PLUGIN");
  check_count++;
  if (path && path[0]) return path;
  check_fail(__FILE__, __LINE__, "TORCH_TPU_PJRT_PLUGIN is not set: point it at a PJRT plugin .so");
  return NULL;
}

bool check_runtime_init(void) {
  const char* path = check_plugin_path();
  if (!path) return false;
  tpu_status status = tpu_runtime_init(path, 1, 0, false);
  bool ok = status == NULL;
  check_ok(status, __FILE__, __LINE__, "tpu_runtime_init");
  return ok;
}

int check_finish(const char* suite) {
  printf("%s: %d passed, %d failed\n", suite, check_count - check_failures, check_failures);
  return check_failures ? 1 : 0;
}

const char check_add_f32x4[] =
    "module {\n"
    "  func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {\n"
    "    %0 = \"stablehlo.add\"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n"
    "    \"func.return\"(%0) : (tensor<4xf32>) -> ()\n"
    "  }\n"
    "}\n";
