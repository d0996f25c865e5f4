#include "cache/program_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/disk_cache.h"
#include "cache/dump.h"
#include "cache/prefetch.h"
#include "cache/program_maps.h"
#include "tpu/runtime.h"

#define BUCKETS 4096

struct cached_program {
  uint64_t hash;
  char* text;
  size_t size;
  struct PJRT_LoadedExecutable* executable; /* NULL while unloaded */
  size_t output_count;                      /* the plugin's count, read at load */
  int maps;                                 /* memory maps it held when first loaded */
  cached_program* next;                    /* hash chain */
  cached_program* newer;                   /* loaded ones, by last use */
  cached_program* older;
};

static cached_program* buckets[BUCKETS];
/* The loaded entries as a list from the most to the least recently used. */
static cached_program* newest;
static cached_program* oldest;
static long loaded_maps; /* the loaded executables' maps */
static long budget;

static program_maps maps_counter; /* the loads made under the runtime lock */

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

static long read_long(const char* path, long fallback) {
  long value = fallback;
  FILE* f = fopen(path, "r");
  if (f) {
    if (fscanf(f, "%ld", &value) != 1) value = fallback;
    fclose(f);
  }
  return value;
}

long program_cache_map_budget(void) {
  if (budget > 0) return budget;
  const char* env = getenv("TORCH_TPU_MAX_PROGRAM_MAPS");
  long n = env ? strtol(env, NULL, 10) : 0;
  if (n <= 0) n = read_long("/proc/sys/vm/max_map_count", 65530) / 2;
  budget = n < 1 ? 1 : n;
  return budget;
}

static void unlink_loaded(cached_program* p) {
  if (p->newer) p->newer->older = p->older; else newest = p->older;
  if (p->older) p->older->newer = p->newer; else oldest = p->newer;
  p->newer = p->older = NULL;
}

static void push_newest(cached_program* p) {
  p->older = newest;
  if (newest) newest->newer = p;
  newest = p;
  if (!oldest) oldest = p;
}

static void mark_used(cached_program* p) {
  if (newest == p) return;
  unlink_loaded(p);
  push_newest(p);
}

/* Unloads the least recently used executables past the budget. An execution
 * in flight keeps its own reference to the compiled code (the plugin's
 * asynchronous task holds it), so unloading never waits. */
static void unload_past_budget(tpu_pjrt* pjrt) {
  while (loaded_maps > program_cache_map_budget() && oldest != newest) {
    cached_program* p = oldest;
    unlink_loaded(p);
    tpu_pjrt_executable_destroy(pjrt, p->executable);
    p->executable = NULL;
    loaded_maps -= p->maps;
    tpu_counter_add(TPU_COUNTER_PROGRAM_UNLOAD, 1);
  }
}

/* Only the CPU plugin's executables hold host maps (its JIT maps each
 * kernel). A GPU's or TPU's code lives on the device: there an executable
 * counts as one map, and nothing is measured, since a compile's own threads
 * and allocations would read as maps the executable holds. */
static bool code_in_host_maps(const tpu_pjrt* pjrt) {
  return strcmp(tpu_pjrt_platform_name(pjrt), "cpu") == 0;
}

/* Loads p's executable: from the disk cache, else compiled (and stored).
 * Its first load also measures (or estimates) how many maps it holds. */
static tpu_status load(tpu_pjrt* pjrt, cached_program* p, bool* out_compiled) {
  *out_compiled = false;
  bool host = code_in_host_maps(pjrt);
  long prefetched_maps;
  if (prefetch_take(p->hash, p->size, &p->executable, &prefetched_maps)) {
    disk_cache_note_hit(p->hash);
    tpu_counter_add(TPU_COUNTER_DISK_PREFETCH, 1);
    if (host && !p->maps) p->maps = (int)prefetched_maps; /* counted by the loader */
  }
  bool measure = host && !p->maps && !p->executable && program_maps_measure_next(&maps_counter);
  long maps_before = measure ? program_maps_now() : -1;
  if (!p->executable) TPU_RETURN_IF_ERROR(disk_cache_load(pjrt, p->text, p->size, &p->executable));
  if (!p->executable) {
    int64_t start = now_nanos();
    TPU_RETURN_IF_ERROR(tpu_pjrt_compile(pjrt, p->text, p->size, &p->executable));
    tpu_counter_add(TPU_COUNTER_COMPILE, 1);
    tpu_counter_add(TPU_COUNTER_COMPILE_NANOS, now_nanos() - start);
    disk_cache_store(pjrt, p->text, p->size, p->executable);
    *out_compiled = true;
  }
  /* Read once here: asking the plugin per execution builds every output's
   * shape each time. */
  p->output_count = tpu_pjrt_executable_output_count(pjrt, p->executable);
  if (!p->maps)
    p->maps = !host ? 1 : measure ? program_maps_since(&maps_counter, maps_before, p->size)
                             : program_maps_estimate(&maps_counter, p->size);
  loaded_maps += p->maps;
  push_newest(p);
  unload_past_budget(pjrt);
  return NULL;
}

static tpu_status ensure_loaded(tpu_pjrt* pjrt, cached_program* p) {
  if (p->executable) {
    mark_used(p);
    return NULL;
  }
  bool compiled;
  return load(pjrt, p, &compiled);
}

tpu_status program_cache_load(tpu_pjrt* pjrt, cached_program* p, size_t result_count,
                              struct PJRT_LoadedExecutable** out_executable) {
  *out_executable = NULL;
  TPU_RETURN_IF_ERROR(ensure_loaded(pjrt, p));
  /* The plugin writes as many results as the program has: a short array
   * would be overrun. */
  if (p->output_count != result_count)
    return TPU_ERROR(TPU_INTERNAL, "execute: program has %zu outputs, caller expects %zu",
                     p->output_count, result_count);
  *out_executable = p->executable;
  return NULL;
}

void program_cache_count_run(const bool* donated, size_t arg_count) {
  tpu_counter_add(TPU_COUNTER_EXECUTE, 1);
  int64_t in_place = 0;
  for (size_t i = 0; donated && i < arg_count; i++) in_place += donated[i];
  if (in_place) tpu_counter_add(TPU_COUNTER_IN_PLACE, in_place);
}

tpu_status program_cache_run(tpu_pjrt* pjrt, cached_program* p, int device,
                             struct PJRT_Buffer* const* args, size_t arg_count, const bool* donated,
                             struct PJRT_Buffer** results, size_t result_count) {
  struct PJRT_LoadedExecutable* executable;
  TPU_RETURN_IF_ERROR(program_cache_load(pjrt, p, result_count, &executable));
  TPU_RETURN_IF_ERROR(tpu_pjrt_execute(pjrt, executable, device, args, arg_count, donated, results, result_count));
  program_cache_count_run(donated, arg_count);
  return NULL;
}

tpu_status program_cache_get(tpu_pjrt* pjrt, const char* text, size_t size, cached_program** out_program,
                             bool* out_compiled) {
  *out_program = NULL;
  *out_compiled = false;
  uint64_t h = cache_hash(text, size, CACHE_HASH_SEED);
  cached_program** bucket = &buckets[h % BUCKETS];
  for (cached_program* p = *bucket; p; p = p->next) {
    if (p->hash == h && p->size == size && memcmp(p->text, text, size) == 0) {
      TPU_RETURN_IF_ERROR(ensure_loaded(pjrt, p));
      *out_program = p;
      return NULL;
    }
  }
  cached_program* p = calloc(1, sizeof *p);
  char* copy = malloc(size);
  if (!p || !copy) {
    free(p);
    free(copy);
    return TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory caching a program");
  }
  memcpy(copy, text, size);
  p->hash = h;
  p->text = copy;
  p->size = size;
  dump_program(pjrt, text, size);
  tpu_status status = load(pjrt, p, out_compiled);
  if (status) {
    free(p);
    free(copy);
    return status;
  }
  p->next = *bucket;
  *bucket = p;
  *out_program = p;
  return NULL;
}
