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

/* For prefetch.c, which calls these from its own thread, without the
 * runtime lock (it is stopped before the directory changes): */
/* The programs of the last session: the text hashes of this plugin's files
 * used within DISK_CACHE_SESSION_SECONDS of the newest use, newest first,
 * at most `max`. */
#define DISK_CACHE_SESSION_SECONDS 300
int disk_cache_recent(uint64_t* out_text_hashes, int max);
/* The executable of the file for `text_hash` and its text's length; false
 * (and the file left alone) when it is missing, bad or unloadable. */
bool disk_cache_load_hash(tpu_pjrt* pjrt, uint64_t text_hash, size_t* out_text_size,
                          struct PJRT_LoadedExecutable** out_executable);
/* Counts a disk hit of a program loaded by disk_cache_load_hash and marks
 * its file most recently used. Runtime lock held. */
void disk_cache_note_hit(uint64_t text_hash);

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
