/* The host's memory: its size, and a policy that keeps freed memory in the
 * process for the CPU platform, given back on request (empty_cache).
 *
 * The CPU plugin's device memory is the host's: at each execution it mallocs
 * the program's outputs and its scratch area (the temporaries XLA's buffer
 * assignment packs into one block) and frees them when they die. glibc serves
 * a block above its mmap threshold (which it caps at 32 MiB) with a fresh
 * mapping and unmaps it at free, so a program whose scratch is larger faults
 * in and zeroes every page of it again at each run: a default-size minGPT
 * step joined into one program spent a fifth of its time in the kernel doing
 * that. Large blocks come from the heap instead, and freed memory at the
 * heap's top stays up to 2 GiB, as a GPU backend's caching allocator keeps
 * device memory. Every thread allocates from that one heap (one arena): a
 * thread of its own arena gets any block over 64 MiB as a fresh mapping
 * whatever the mmap settings, and the plugin's worker threads allocate the
 * scratch (minGPT's forward and backward program: 68 MiB, mapped and
 * unmapped at every step). A thread takes its arena at its first malloc, so
 * this runs before the plugin's threads start. Process-wide (glibc has one
 * policy per process); glibc only. */
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

#include "pjrt/pjrt_internal.h"

#ifdef __GLIBC__
#include <malloc.h>

bool tpu_host_memory_keep_freed(void) {
  return mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1 &&
         mallopt(M_ARENA_MAX, 1) == 1;
}

void tpu_host_memory_release(void) { malloc_trim(0); }

#else

bool tpu_host_memory_keep_freed(void) { return false; }
void tpu_host_memory_release(void) {}

#endif

/* Linux's MemAvailable counts the page cache the kernel would give up, which
 * sysconf's free pages leave out; sysconf where /proc is not there. */
tpu_status tpu_host_memory_size(int64_t* out_available, int64_t* out_total) {
  long page = sysconf(_SC_PAGESIZE), pages = sysconf(_SC_PHYS_PAGES), free_pages = sysconf(_SC_AVPHYS_PAGES);
  if (page <= 0 || pages <= 0 || free_pages < 0)
    return TPU_ERROR(TPU_UNIMPLEMENTED, "this system does not report its memory size");
  *out_total = (int64_t)page * pages;
  *out_available = (int64_t)page * free_pages;
  FILE* meminfo = fopen("/proc/meminfo", "r");
  if (!meminfo) return NULL;
  char line[128];
  long long kib;
  while (fgets(line, sizeof line, meminfo))
    if (sscanf(line, "MemAvailable: %lld kB", &kib) == 1) *out_available = (int64_t)kib * 1024;
  fclose(meminfo);
  return NULL;
}
