/* The compile cache's warm-start prefetch, without PyTorch: programs written
 * to the disk cache are loaded by the loader thread and handed over by text
 * hash and length, once each. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/prefetch.h"
#include "cache/program_cache.h"
#include "exec/runtime_impl.h"
#include "tests/check.h"
#include "tpu/runtime.h"

static const char mul_f32x4[] =
    "module {\n"
    "  func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {\n"
    "    %0 = \"stablehlo.multiply\"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n"
    "    \"func.return\"(%0) : (tensor<4xf32>) -> ()\n"
    "  }\n"
    "}\n";

static uint64_t hash_of(const char* text) { return cache_hash(text, strlen(text), CACHE_HASH_SEED); }

static void remove_dir(const char* dir) {
  DIR* d = opendir(dir);
  for (struct dirent* e; d && (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  if (d) closedir(d);
  rmdir(dir);
}

static void test_prefetch(void) {
  char dir[] = "/tmp/torch_tpu_cache_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  CHECK_OK(tpu_cache_configure(dir, (int64_t)1 << 30));
  /* Compiled and written to disk, as a first session would. */
  runtime_lock();
  cached_program* program = NULL;
  bool compiled = false;
  CHECK_OK(program_cache_get(runtime_pjrt(), check_add_f32x4, strlen(check_add_f32x4), &program, &compiled));
  CHECK(compiled);
  CHECK_OK(program_cache_get(runtime_pjrt(), mul_f32x4, strlen(mul_f32x4), &program, &compiled));
  runtime_unlock();

  tpu_cache_prefetch();
  /* Both files loaded (an entry not yet started is left to the caller). */
  for (int waited = 0; prefetch_pending() > 0 && waited < 3000; waited++) usleep(10000);
  CHECK(prefetch_pending() == 0);
  struct PJRT_LoadedExecutable* executable = NULL;
  long maps = 0;
  /* The length is part of the key: a mismatch is no hit (and the entry is used up). */
  CHECK(!prefetch_take(hash_of(mul_f32x4), strlen(mul_f32x4) + 1, &executable, &maps));
  CHECK(executable == NULL);
  CHECK(!prefetch_take(hash_of(mul_f32x4), strlen(mul_f32x4), &executable, &maps));
  CHECK(prefetch_take(hash_of(check_add_f32x4), strlen(check_add_f32x4), &executable, &maps));
  CHECK(executable != NULL);
  CHECK(maps >= -1);
  tpu_pjrt_executable_destroy(runtime_pjrt(), executable);
  CHECK(!prefetch_take(hash_of(check_add_f32x4), strlen(check_add_f32x4), &executable, &maps)); /* once */
  CHECK(!prefetch_take(12345, 10, &executable, &maps));                              /* unknown */
  tpu_cache_prefetch_stop();
  tpu_cache_prefetch(); /* once per process */
  CHECK(!prefetch_take(hash_of(check_add_f32x4), strlen(check_add_f32x4), &executable, &maps));
  tpu_cache_prefetch_stop();

  CHECK_OK(tpu_cache_configure("", 0));
  remove_dir(dir);
}

int main(void) {
  if (check_runtime_init()) test_prefetch();
  return check_finish("cache");
}
