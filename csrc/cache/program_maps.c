#include "cache/program_maps.h"

#include <stdio.h>
#include <string.h>

#define MEASURED_FIRST 8
#define MEASURE_EVERY 64
#define MOST_MAPS 1000000

long program_maps_now(void) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (!f) return -1;
  long lines = 0;
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
    for (const char* p = chunk; (p = memchr(p, '\n', (size_t)(chunk + n - p))); p++) lines++;
  fclose(f);
  return lines;
}

bool program_maps_measure_next(program_maps* counter) {
  unsigned load = counter->loads++;
  return load < MEASURED_FIRST || load % MEASURE_EVERY == 0 || counter->measured_bytes <= 0;
}

int program_maps_since(program_maps* counter, long before, size_t size) {
  long after = program_maps_now();
  long held = before < 0 || after < 0 ? 3 : after - before < 1 ? 1 : after - before;
  if (held > MOST_MAPS) held = MOST_MAPS;
  counter->measured_maps += (double)held;
  counter->measured_bytes += (double)size;
  return (int)held;
}

int program_maps_estimate(const program_maps* counter, size_t size) {
  double maps = counter->measured_bytes > 0 ? 2.0 * counter->measured_maps * (double)size / counter->measured_bytes : 3;
  return maps < 3 ? 3 : maps > MOST_MAPS ? MOST_MAPS : (int)maps;
}
