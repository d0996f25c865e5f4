/* Compiled programs by content: the hash of the StableHLO text and the
 * plugin's identity. Two op signatures that lower to the same text share one
 * program. Entries live until the process ends; their executables need not.
 * The XLA CPU plugin maps each kernel of a loaded executable's JIT code
 * separately (three maps a kernel; a fused training step has hundreds of
 * kernels), and a process gets vm.max_map_count maps (65,530 by default):
 * past that the JIT places new code over memory still registered for
 * unwinding, and the next C++ exception anywhere in the process crashes it.
 * So the loaded executables hold at most program_cache_map_budget() maps
 * (on other platforms, whose code lives on the device, an executable counts
 * as one); the least recently used is unloaded first and reloaded (from the disk
 * cache, else compiled) at its next use. */
#ifndef TPU_CACHE_PROGRAM_CACHE_H
#define TPU_CACHE_PROGRAM_CACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "pjrt/pjrt.h"

typedef struct cached_program cached_program;

/* Returns the entry for `text`, loaded: from memory, else from the disk
 * cache, else compiled (and written to disk); *out_compiled says whether it
 * was compiled. Call with the runtime lock held. */
tpu_status program_cache_get(tpu_pjrt* pjrt, const char* text, size_t size, cached_program** out_program,
                             bool* out_compiled);

/* The entry's executable, loaded again if it was unloaded (and marked the
 * most recently used); result_count must be the program's output count
 * (checked). Runtime lock held. */
tpu_status program_cache_load(tpu_pjrt* pjrt, cached_program* program, size_t result_count,
                              struct PJRT_LoadedExecutable** out_executable);

/* Counts one execution (and its in-place parameters) for the metrics;
 * where the call is handed to another thread, when it is handed over, so
 * the counts do not lag behind. */
void program_cache_count_run(const bool* donated, size_t arg_count);

/* program_cache_load, tpu_pjrt_execute (returns without waiting) and
 * program_cache_count_run. Runtime lock held. */
tpu_status program_cache_run(tpu_pjrt* pjrt, cached_program* program, int device,
                             struct PJRT_Buffer* const* args, size_t arg_count, const bool* donated,
                             struct PJRT_Buffer** results, size_t result_count);

/* The maps loaded executables may hold: TORCH_TPU_MAX_PROGRAM_MAPS, else
 * half of vm.max_map_count. The most recently used one stays loaded
 * whatever it holds. */
long program_cache_map_budget(void);

/* A 64-bit FNV-1a-style fingerprint (word at a time), used by the caches;
 * entries also compare the full key, so collisions cost only a lookup. */
uint64_t cache_hash(const void* data, size_t size, uint64_t seed);
#define CACHE_HASH_SEED 1469598103934665603ull

#endif
