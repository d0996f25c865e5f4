/* Warm start (see prefetch.h). The loader thread never takes the runtime
 * lock: its table has a lock of its own, which program_cache_get (holding
 * the runtime lock) may wait on for a file being loaded. The plugin's
 * executable loading is safe to call beside the runtime's other calls. */
#include "cache/prefetch.h"

#include <pthread.h>
#include <stdlib.h>

#include "cache/disk_cache.h"
#include "cache/program_cache.h"
#include "cache/program_maps.h"

typedef enum { QUEUED, LOADING, LOADED, TAKEN } prefetch_state;

typedef struct prefetched {
  uint64_t text_hash;
  size_t text_size;
  struct PJRT_LoadedExecutable* executable; /* NULL if the load failed */
  long maps; /* what it holds, measured or estimated (0 if the load failed) */
  prefetch_state state;
} prefetched;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static prefetched items[PREFETCH_MAX];
static int item_count;
static bool started, stopping, thread_running;
static bool listing; /* the loader is still listing the cache directory */
/* Memory maps the loaded, not yet taken executables hold: the program
 * cache's budget does not see them, so the loader stops at half of it. */
static long held_maps;
static pthread_t thread;
static program_maps maps_counter; /* the loader thread's loads */
static tpu_pjrt* loader_pjrt;

/* Lists the last session's files (a stat of every cache file: kept off the
 * importing thread), then loads them in order. */
static void* load_all(void* unused) {
  uint64_t hashes[PREFETCH_MAX];
  int count = disk_cache_recent(hashes, PREFETCH_MAX);
  pthread_mutex_lock(&lock);
  for (int i = 0; i < count && !stopping; i++) items[i] = (prefetched){.text_hash = hashes[i], .state = QUEUED};
  item_count = stopping ? 0 : count;
  listing = false;
  pthread_mutex_unlock(&lock);
  for (int i = 0;; i++) {
    pthread_mutex_lock(&lock);
    while (i < item_count && items[i].state == TAKEN) i++; /* the caller loads it itself */
    bool done = stopping || i >= item_count || held_maps > program_cache_map_budget() / 2;
    if (!done) items[i].state = LOADING;
    pthread_mutex_unlock(&lock);
    if (done) return NULL;
    bool measure = program_maps_measure_next(&maps_counter);
    long before = measure ? program_maps_now() : -1;
    struct PJRT_LoadedExecutable* executable = NULL;
    size_t text_size = 0;
    disk_cache_load_hash(loader_pjrt, items[i].text_hash, &text_size, &executable);
    long maps = !executable ? 0
                : measure   ? program_maps_since(&maps_counter, before, text_size)
                            : program_maps_estimate(&maps_counter, text_size);
    pthread_mutex_lock(&lock);
    items[i].executable = executable;
    items[i].text_size = text_size;
    items[i].maps = maps;
    held_maps += maps;
    items[i].state = LOADED;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
  }
}

void prefetch_start(tpu_pjrt* pjrt) {
  pthread_mutex_lock(&lock);
  if (!started) {
    started = true;
    loader_pjrt = pjrt;
    thread_running = pthread_create(&thread, NULL, load_all, NULL) == 0;
    listing = thread_running;
  }
  pthread_mutex_unlock(&lock);
}

bool prefetch_take(uint64_t text_hash, size_t text_size, struct PJRT_LoadedExecutable** out_executable,
                   long* out_maps) {
  *out_executable = NULL;
  *out_maps = -1;
  pthread_mutex_lock(&lock);
  prefetched* found = NULL;
  for (int i = 0; i < item_count && !found; i++)
    if (items[i].text_hash == text_hash && items[i].state != TAKEN) found = &items[i];
  while (found && found->state == LOADING) pthread_cond_wait(&changed, &lock);
  struct PJRT_LoadedExecutable* executable = NULL;
  bool match = false;
  if (found) {
    /* Not started yet: the caller loads it now, the loader skips it. */
    executable = found->state == LOADED ? found->executable : NULL;
    if (executable) held_maps -= found->maps;
    match = executable && found->text_size == text_size;
    *out_maps = found->maps;
    found->executable = NULL;
    found->state = TAKEN;
  }
  pthread_mutex_unlock(&lock);
  if (executable && !match) tpu_pjrt_executable_destroy(loader_pjrt, executable);
  if (match) *out_executable = executable;
  return match;
}

int prefetch_pending(void) {
  pthread_mutex_lock(&lock);
  int pending = listing;
  for (int i = 0; i < item_count; i++) pending += items[i].state == QUEUED || items[i].state == LOADING;
  pthread_mutex_unlock(&lock);
  return pending;
}

void prefetch_stop(void) {
  pthread_mutex_lock(&lock);
  stopping = true;
  bool join = thread_running;
  thread_running = false;
  pthread_mutex_unlock(&lock);
  if (join) pthread_join(thread, NULL);
  pthread_mutex_lock(&lock);
  for (int i = 0; i < item_count; i++)
    if (items[i].executable) tpu_pjrt_executable_destroy(loader_pjrt, items[i].executable);
  item_count = 0;
  held_maps = 0;
  stopping = false;
  pthread_mutex_unlock(&lock);
}
