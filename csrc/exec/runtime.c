/* The process-wide runtime: the plugin, the lock, counters, memory
 * accounting and the cache of small scalar buffers. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "cache/disk_cache.h"
#include "cache/prefetch.h"
#include "cache/program_cache.h"
#include "exec/graph.h"
#include "exec/runtime_impl.h"

#define SCALAR_SLOTS 256

static pthread_mutex_t lock;
static pthread_once_t lock_once = PTHREAD_ONCE_INIT;
static tpu_pjrt* pjrt;
static atomic_llong counters[TPU_COUNTER_COUNT];
/* A tpu_memory_stat kept with atomics: storages are made and freed on any thread. */
typedef struct memory_measure {
  atomic_llong current, peak, allocated, freed;
} memory_measure;
static struct {
  memory_measure bytes, allocations;
} memory[MAX_DEVICES];

/* Scalars repeat (alpha = 1, offsets, fill values): keep one device copy of
 * each recent value instead of a transfer per op. Direct-mapped by hash. */
static struct scalar_slot {
  struct PJRT_Buffer* buffer;
  int device;
  tpu_dtype dtype;
  unsigned char bits[16];
} scalar_slots[SCALAR_SLOTS];

static void make_lock(void) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&lock, &attr);
  pthread_mutexattr_destroy(&attr);
}

void runtime_lock(void) {
  pthread_once(&lock_once, make_lock);
  pthread_mutex_lock(&lock);
}

void runtime_unlock(void) { pthread_mutex_unlock(&lock); }

tpu_pjrt* runtime_pjrt(void) { return pjrt; }

tpu_status tpu_runtime_init(const char* plugin_path, int cpu_device_count, int worker_nice,
                            bool keep_freed_memory) {
  runtime_lock();
  tpu_status status = NULL;
  if (!pjrt) {
    tpu_pjrt_options options = {plugin_path, cpu_device_count, worker_nice, keep_freed_memory};
    status = tpu_pjrt_open(&options, &pjrt);
  }
  runtime_unlock();
  return status;
}

bool tpu_runtime_ready(void) { return pjrt != NULL; }
int tpu_device_count(void) { return pjrt ? tpu_pjrt_device_count(pjrt) : 0; }
const char* tpu_runtime_plugin_path(void) { return pjrt ? tpu_pjrt_plugin_path(pjrt) : ""; }
const char* tpu_runtime_platform(void) { return pjrt ? tpu_pjrt_platform_name(pjrt) : ""; }
const char* tpu_runtime_platform_version(void) { return pjrt ? tpu_pjrt_platform_version(pjrt) : ""; }
const char* tpu_runtime_xla_version(void) { return pjrt ? tpu_pjrt_xla_version(pjrt) : ""; }
const char* tpu_runtime_device_kind(int device) { return pjrt ? tpu_pjrt_device_kind(pjrt, device) : ""; }
int tpu_runtime_lowered_threads(void) { return tpu_pjrt_lowered_threads(pjrt); }
bool tpu_runtime_keeps_freed_memory(void) { return tpu_pjrt_keeps_freed_memory(pjrt); }

void tpu_runtime_api_version(int* out_major, int* out_minor) {
  *out_major = pjrt ? tpu_pjrt_api_major(pjrt) : 0;
  *out_minor = pjrt ? tpu_pjrt_api_minor(pjrt) : 0;
}

/* ---- counters and memory ---- */

static const char* const counter_names[TPU_COUNTER_COUNT] = {
    [TPU_COUNTER_COMPILE] = "compile",
    [TPU_COUNTER_CACHE_HIT] = "cache_hit",
    [TPU_COUNTER_EXECUTE] = "execute",
    [TPU_COUNTER_TRANSFER_TO_DEVICE] = "transfer_to_device",
    [TPU_COUNTER_TRANSFER_TO_HOST] = "transfer_to_host",
    [TPU_COUNTER_BYTES_TO_DEVICE] = "bytes_to_device",
    [TPU_COUNTER_BYTES_TO_HOST] = "bytes_to_host",
    [TPU_COUNTER_COMPILE_NANOS] = "compile_nanos",
    [TPU_COUNTER_DISK_HIT] = "disk_cache_hit",
    [TPU_COUNTER_DISK_WRITE] = "disk_cache_write",
    [TPU_COUNTER_PROGRAM_UNLOAD] = "program_unload",
    [TPU_COUNTER_IN_PLACE] = "in_place_write",
    [TPU_COUNTER_DISK_PREFETCH] = "disk_cache_prefetched",
};

const char* tpu_counter_name(tpu_counter c) {
  return (unsigned)c < TPU_COUNTER_COUNT ? counter_names[c] : "unknown";
}
int64_t tpu_counter_get(tpu_counter c) {
  return (unsigned)c < TPU_COUNTER_COUNT ? (int64_t)atomic_load(&counters[c]) : 0;
}
void tpu_counter_add(tpu_counter c, int64_t amount) {
  if ((unsigned)c < TPU_COUNTER_COUNT) atomic_fetch_add(&counters[c], amount);
}
void tpu_counters_reset(void) {
  for (int i = 0; i < TPU_COUNTER_COUNT; i++) atomic_store(&counters[i], 0);
}

static bool valid_device(int device) { return device >= 0 && device < MAX_DEVICES; }

static void measure_change(memory_measure* m, int64_t amount, bool freed) {
  atomic_fetch_add(freed ? &m->freed : &m->allocated, amount);
  int64_t change = freed ? -amount : amount;
  long long now = atomic_fetch_add(&m->current, change) + change;
  long long seen = atomic_load(&m->peak);
  while (now > seen && !atomic_compare_exchange_weak(&m->peak, &seen, now)) {
  }
}

void memory_account(int device, int64_t nbytes, bool freed) {
  if (!valid_device(device)) return;
  measure_change(&memory[device].bytes, nbytes, freed);
  measure_change(&memory[device].allocations, 1, freed);
}

static tpu_memory_stat measure_read(memory_measure* m) {
  return (tpu_memory_stat){atomic_load(&m->current), atomic_load(&m->peak), atomic_load(&m->allocated),
                           atomic_load(&m->freed)};
}

tpu_memory_stats tpu_memory_stats_of(int device) {
  if (!valid_device(device)) return (tpu_memory_stats){0};
  return (tpu_memory_stats){measure_read(&memory[device].bytes), measure_read(&memory[device].allocations)};
}

void tpu_memory_reset_peak(int device) {
  if (!valid_device(device)) return;
  atomic_store(&memory[device].bytes.peak, atomic_load(&memory[device].bytes.current));
  atomic_store(&memory[device].allocations.peak, atomic_load(&memory[device].allocations.current));
}

void tpu_memory_reset_totals(int device) {
  if (!valid_device(device)) return;
  atomic_store(&memory[device].bytes.allocated, 0);
  atomic_store(&memory[device].bytes.freed, 0);
  atomic_store(&memory[device].allocations.allocated, 0);
  atomic_store(&memory[device].allocations.freed, 0);
}

tpu_status tpu_memory_info(int device, int64_t* out_free, int64_t* out_total) {
  if (!pjrt) return TPU_ERROR(TPU_NOT_FOUND, "the tpu runtime has no plugin open yet");
  return tpu_pjrt_device_memory(pjrt, device, out_free, out_total);
}

void tpu_memory_release_cached(void) { tpu_pjrt_release_freed_memory(pjrt); }

/* ---- scalar buffers ---- */

tpu_status runtime_scalar_buffer(int device, tpu_dtype dtype, const void* bits,
                                 struct PJRT_Buffer** out_buffer, struct PJRT_Buffer** out_owned) {
  *out_owned = NULL;
  size_t size = tpu_dtype_size(dtype);
  uint64_t h = 1469598103934665603ull ^ (uint64_t)dtype ^ ((uint64_t)device << 8);
  for (size_t i = 0; i < size; i++) h = (h ^ ((const unsigned char*)bits)[i]) * 1099511628211ull;
  struct scalar_slot* slot = &scalar_slots[h % SCALAR_SLOTS];
  if (slot->buffer && slot->device == device && slot->dtype == dtype &&
      memcmp(slot->bits, bits, size) == 0) {
    *out_buffer = slot->buffer;
    return NULL;
  }
  struct PJRT_Buffer* made = NULL;
  TPU_RETURN_IF_ERROR(tpu_pjrt_buffer_from_host(pjrt, device, dtype, NULL, 0, bits, &made));
  tpu_counter_add(TPU_COUNTER_TRANSFER_TO_DEVICE, 1);
  tpu_counter_add(TPU_COUNTER_BYTES_TO_DEVICE, (int64_t)size);
  *out_buffer = made;
  if (slot->buffer) {
    *out_owned = made;
    return NULL;
  }
  slot->buffer = made;
  slot->device = device;
  slot->dtype = dtype;
  memcpy(slot->bits, bits, size);
  return NULL;
}

tpu_status tpu_cache_configure(const char* dir, int64_t max_bytes) {
  runtime_lock();
  tpu_status status = NULL;
  if (!pjrt) {
    status = TPU_ERROR(TPU_INTERNAL, "configure the compile cache after tpu_runtime_init");
  } else {
    /* The plugin file's size and time stand in for its build: plugins can
     * report the same XLA version for different builds. */
    struct stat st = {0};
    stat(tpu_pjrt_plugin_path(pjrt), &st);
    /* XLA reads its debug options (XLA_FLAGS: fast math, ISA, fusion
     * choices) from the environment when it compiles, so they are part of
     * what a file was compiled under. */
    const char* flags = getenv("XLA_FLAGS");
    flags = flags ? flags : "";
    char identity[2048];
    snprintf(identity, sizeof identity, "%s|%s|pjrt %d.%d|xla %s|%s|%lld|%lld|%s|XLA_FLAGS %016llx",
             tpu_pjrt_platform_name(pjrt), tpu_pjrt_platform_version(pjrt), tpu_pjrt_api_major(pjrt),
             tpu_pjrt_api_minor(pjrt), tpu_pjrt_xla_version(pjrt), tpu_pjrt_plugin_path(pjrt),
             (long long)st.st_size, (long long)st.st_mtime, tpu_pjrt_compile_options_name(),
             (unsigned long long)cache_hash(flags, strlen(flags), 0));
    status = disk_cache_configure(dir, max_bytes, identity);
  }
  runtime_unlock();
  return status;
}

void tpu_cache_stats(const char** out_dir, int64_t* out_entries, int64_t* out_bytes,
                     int64_t* out_max_bytes) {
  runtime_lock();
  disk_cache_stats s = disk_cache_stat();
  runtime_unlock();
  *out_dir = s.dir;
  *out_entries = s.entries;
  *out_bytes = s.bytes;
  *out_max_bytes = s.max_bytes;
}

void tpu_cache_prefetch(void) {
  runtime_lock();
  if (pjrt) prefetch_start(pjrt);
  runtime_unlock();
}

void tpu_cache_prefetch_stop(void) { prefetch_stop(); }

tpu_status tpu_cache_clear(void) {
  runtime_lock();
  tpu_status status = disk_cache_clear();
  runtime_unlock();
  return status;
}

tpu_status tpu_device_synchronize(int device) {
  runtime_lock();
  tpu_status status = graph_flush(device);
  if (!status) status = buffers_await_all(device);
  inflight_await_all(device);
  runtime_unlock();
  if (!status) event_callbacks_wait(device);
  return status;
}
