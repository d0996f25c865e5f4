/* Compiled programs on disk: one file per program, named by the hash of its
 * StableHLO text and the plugin's identity, holding the serialized
 * executable. Files are written atomically (temporary file, then rename), so
 * concurrent processes only ever see whole files; a truncated, corrupt or
 * foreign file is ignored and replaced. Least recently used files go first
 * when the directory outgrows its bound. Call with the runtime lock held. */
#ifndef TPU_CACHE_DISK_CACHE_H
#define TPU_CACHE_DISK_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pjrt/pjrt.h"

/* Sets the directory (NULL or "" turns the disk cache off) and its size
 * bound. `identity` names the plugin build (platform, versions, plugin file)
 * and compile options: files made under another identity are never loaded. */
tpu_status disk_cache_configure(const char* dir, int64_t max_bytes, const char* identity);

/* The executable for `text` if a valid file holds it; *out_executable is
 * NULL on a miss. */
tpu_status disk_cache_load(tpu_pjrt* pjrt, const char* text, size_t size,
                           struct PJRT_LoadedExecutable** out_executable);
/* Best effort: a failed write is counted, never an error for the op. */
void disk_cache_store(tpu_pjrt* pjrt, const char* text, size_t size,
                      struct PJRT_LoadedExecutable* executable);

typedef struct disk_cache_stats {
  const char* dir; /* "" when off */
  int64_t entries;
  int64_t bytes;
  int64_t max_bytes;
} disk_cache_stats;

disk_cache_stats disk_cache_stat(void);
/* Removes every cache file in the directory. */
tpu_status disk_cache_clear(void);

#endif
