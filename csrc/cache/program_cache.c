#include "cache/program_cache.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/disk_cache.h"
#include "cache/dump.h"
#include "tpu/runtime.h"

#define BUCKETS 4096

typedef struct program {
  uint64_t hash;
  char* text;
  size_t size;
  struct PJRT_LoadedExecutable* executable;
  struct program* next;
} program;

static program* buckets[BUCKETS];

uint64_t cache_hash(const void* data, size_t size, uint64_t seed) {
  /* FNV-1a over 8-byte words, then the tail bytes: keys are hashed on every
   * op call, so a word at a time matters. */
  const unsigned char* p = data;
  uint64_t h = seed;
  for (; size >= 8; size -= 8, p += 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    h = (h ^ w) * 1099511628211ull;
    h ^= h >> 29;
  }
  for (; size; size--, p++) h = (h ^ *p) * 1099511628211ull;
  return h;
}

static int64_t now_nanos(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

tpu_status program_cache_get(tpu_pjrt* pjrt, const char* text, size_t size,
                             struct PJRT_LoadedExecutable** out_executable, bool* out_compiled) {
  *out_executable = NULL;
  *out_compiled = false;
  uint64_t h = cache_hash(text, size, CACHE_HASH_SEED);
  program** bucket = &buckets[h % BUCKETS];
  for (program* p = *bucket; p; p = p->next) {
    if (p->hash == h && p->size == size && memcmp(p->text, text, size) == 0) {
      *out_executable = p->executable;
      return NULL;
    }
  }
  program* p = calloc(1, sizeof *p);
  char* copy = malloc(size);
  if (!p || !copy) {
    free(p);
    free(copy);
    return TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory caching a program");
  }
  dump_program(pjrt, text, size);
  tpu_status status = disk_cache_load(pjrt, text, size, &p->executable);
  if (!status && !p->executable) {
    int64_t start = now_nanos();
    status = tpu_pjrt_compile(pjrt, text, size, &p->executable);
    if (!status) {
      tpu_counter_add(TPU_COUNTER_COMPILE, 1);
      tpu_counter_add(TPU_COUNTER_COMPILE_NANOS, now_nanos() - start);
      disk_cache_store(pjrt, text, size, p->executable);
      *out_compiled = true;
    }
  }
  if (status) {
    free(p);
    free(copy);
    return status;
  }
  memcpy(copy, text, size);
  p->hash = h;
  p->text = copy;
  p->size = size;
  p->next = *bucket;
  *bucket = p;
  *out_executable = p->executable;
  return NULL;
}
