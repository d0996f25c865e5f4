/* Warm start: the last session's programs loaded from the disk cache on a
 * thread of their own while the process is still importing and building its
 * model, so its first step finds them loaded. */
#ifndef TPU_CACHE_PREFETCH_H
#define TPU_CACHE_PREFETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pjrt/pjrt.h"

/* Starts a thread that lists, then loads, newest first, the files
 * disk_cache_recent names (at most PREFETCH_MAX), until the executables not
 * yet taken hold half of program_cache_map_budget()'s memory maps (a session
 * of another model's programs is never taken). Does nothing if a prefetch
 * ran already; with the disk cache off the thread lists nothing and ends.
 * Runtime lock held. */
#define PREFETCH_MAX 256
void prefetch_start(tpu_pjrt* pjrt);

/* The prefetched executable of the program with this text hash and length,
 * waiting if it is being loaded; false if it was not prefetched (or not
 * yet started: then it is left to the caller). *out_maps: the memory maps
 * it holds, measured or estimated by the loader's own counter (see
 * program_maps.h), at least 1. Runtime lock held. */
bool prefetch_take(uint64_t text_hash, size_t text_size, struct PJRT_LoadedExecutable** out_executable,
                   long* out_maps);

/* How many files are still queued or being loaded (at least 1 while the
 * directory is being listed). */
int prefetch_pending(void);

/* Stops the loading thread, waits for it and destroys what was not taken. */
void prefetch_stop(void);

#endif
