/* How many memory maps a loaded executable holds, for the program cache's
 * bound (see program_cache.h). Reading /proc/self/maps costs 1-2 us a map
 * (the kernel formats every line), a millisecond even in a fresh process:
 * in a warm start, where every program is a first load from the disk cache,
 * counting each one took a quarter of the first step. So a counter measures
 * its first few loads and one in 64 after them, and estimates the others
 * from the program text's size. Each thread that loads keeps its own
 * counter (no lock). */
#ifndef TPU_CACHE_PROGRAM_MAPS_H
#define TPU_CACHE_PROGRAM_MAPS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct program_maps {
  unsigned loads;
  double measured_maps, measured_bytes;
} program_maps;

/* The process's memory maps now; -1 where /proc cannot say. */
long program_maps_now(void);

/* Counts a first load; true if its maps are to be measured (always for a
 * counter with nothing measured yet, so program_maps_estimate has a ratio). */
bool program_maps_measure_next(program_maps* counter);

/* Records a measured load that began when the process had `before` maps
 * (program_maps_now()) and whose program text is `size` bytes. Returns the
 * maps it added, at least 1 (other threads map and unmap too: a rough
 * figure; 3 where /proc could not say). */
int program_maps_since(program_maps* counter, long before, size_t size);

/* The maps a load of `size` bytes of program text is charged without
 * measuring it: twice the maps per byte of all loads measured together.
 * (Not the highest ratio seen: a small program measured while other
 * threads map memory can show tens of times the usual ratio, and scaled up
 * to a large program's text that estimate alone exceeded the whole budget,
 * unloading programs needed every step.) */
int program_maps_estimate(const program_maps* counter, size_t size);

#endif
