/* The compile cache's warm-start prefetch, without PyTorch: programs written
 * to the disk cache are loaded by the loader thread and handed over by text
 * hash and length, once each. And the count of the maps a load holds:
 * measured for the first loads and one in 64, estimated for the others. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/prefetch.h"
#include "cache/program_cache.h"
#include "cache/program_maps.h"
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
  CHECK(maps >= 1);
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

static void test_program_maps(void) {
  program_maps counter = {0};
  CHECK(program_maps_estimate(&counter, 1000) == 3); /* nothing measured yet */
  CHECK(program_maps_now() > 0);
  int measured = 0;
  for (int load = 0; load < 200; load++) {
    if (!program_maps_measure_next(&counter)) continue;
    measured++;
    CHECK(program_maps_since(&counter, -1, 1000) == 3); /* /proc could not say */
  }
  CHECK(measured == 8 + 3); /* loads 0-7, 64, 128 and 192 */
  CHECK(program_maps_estimate(&counter, 1000) == 6); /* twice 3 maps per 1000 bytes */
  CHECK(program_maps_estimate(&counter, 100000) == 600);
  CHECK(program_maps_estimate(&counter, 10) == 3);   /* at least 3 */
  long now = program_maps_now();
  CHECK(program_maps_since(&counter, now + 100, 1000) == 1); /* maps freed meanwhile: at least 1 */
}

int main(void) {
  test_program_maps();
  if (check_runtime_init()) test_prefetch();
  return check_finish("cache");
}
