/* Compiled programs by content: the hash of the StableHLO text and the
 * plugin's identity. Two op signatures that lower to the same text share one
 * executable. Entries live until the process ends. */
#ifndef TPU_CACHE_PROGRAM_CACHE_H
#define TPU_CACHE_PROGRAM_CACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "pjrt/pjrt.h"

/* Returns the executable for `text`: from memory, else from the disk cache,
 * else compiled (and written to disk); *out_compiled says whether it was
 * compiled. Call with the runtime lock held. */
tpu_status program_cache_get(tpu_pjrt* pjrt, const char* text, size_t size,
                             struct PJRT_LoadedExecutable** out_executable, bool* out_compiled);

/* A 64-bit FNV-1a-style fingerprint (word at a time), used by the caches;
 * entries also compare the full key, so collisions cost only a lookup. */
uint64_t cache_hash(const void* data, size_t size, uint64_t seed);
#define CACHE_HASH_SEED 1469598103934665603ull

#endif
