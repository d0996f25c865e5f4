#include "tests/check.h"

#include <stdio.h>

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

int check_finish(const char* suite) {
  printf("%s: %d passed, %d failed\n", suite, check_count - check_failures, check_failures);
  return check_failures ? 1 : 0;
}
