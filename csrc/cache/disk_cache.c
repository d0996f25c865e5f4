#include "cache/disk_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/prefetch.h"
#include "cache/program_cache.h"
#include "tpu/runtime.h"

/* File layout: magic, identity length and bytes, text hash and length,
 * payload length and hash, payload (the serialized executable). */
static const char magic[8] = {'T', 'P', 'U', 'X', 'L', 'A', '0', '1'};
#define SUFFIX ".xla"

static char cache_dir[4096];
static char* cache_identity;
static uint64_t identity_hash;
static int64_t cache_max_bytes;

tpu_status disk_cache_configure(const char* dir, int64_t max_bytes, const char* identity) {
  prefetch_stop();
  cache_dir[0] = '\0';
  free(cache_identity);
  cache_identity = NULL;
  if (!dir || !dir[0]) return NULL;
  if (strlen(dir) >= sizeof cache_dir - 64)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "TORCH_TPU_CACHE_DIR is too long (%zu characters)", strlen(dir));
  /* mkdir -p */
  char path[sizeof cache_dir];
  snprintf(path, sizeof path, "%s", dir);
  for (char* p = path + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    mkdir(path, 0755);
    *p = '/';
  }
  if (mkdir(path, 0755) != 0 && errno != EEXIST)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "cannot create the compile cache directory %s: %s", dir,
                     strerror(errno));
  cache_identity = strdup(identity ? identity : "");
  if (!cache_identity) return TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory");
  snprintf(cache_dir, sizeof cache_dir, "%s", dir);
  identity_hash = cache_hash(cache_identity, strlen(cache_identity), CACHE_HASH_SEED);
  cache_max_bytes = max_bytes;
  return NULL;
}

static void file_path(char* out, size_t size, uint64_t text_hash) {
  snprintf(out, size, "%s/%016llx%016llx" SUFFIX, cache_dir, (unsigned long long)identity_hash,
           (unsigned long long)text_hash);
}

static bool read_all(const char* path, char** out_data, size_t* out_size) {
  *out_data = NULL;
  FILE* f = fopen(path, "rb");
  if (!f) return false;
  bool ok = fseek(f, 0, SEEK_END) == 0;
  long size = ok ? ftell(f) : -1;
  ok = ok && size >= 0 && fseek(f, 0, SEEK_SET) == 0;
  char* data = ok ? malloc((size_t)size + 1) : NULL;
  ok = data && fread(data, 1, (size_t)size, f) == (size_t)size;
  fclose(f);
  if (!ok) {
    free(data);
    return false;
  }
  *out_data = data;
  *out_size = (size_t)size;
  return true;
}

/* Reads a field, advancing *at; false if the file is too short. */
static bool take(const char* data, size_t size, size_t* at, void* out, size_t n) {
  if (size < *at || size - *at < n) return false;
  memcpy(out, data + *at, n);
  *at += n;
  return true;
}

/* The payload of a valid file for this identity and text, or NULL.
 * *text_size may be ANY_SIZE, and then is set to the file's. */
#define ANY_SIZE SIZE_MAX
static const char* validate(const char* data, size_t size, uint64_t text_hash, size_t* text_size,
                            size_t* out_payload_size) {
  size_t at = 0;
  char m[8];
  uint32_t identity_size;
  uint64_t file_text_hash, file_text_size, payload_size, payload_hash;
  if (!take(data, size, &at, m, sizeof m) || memcmp(m, magic, sizeof m) != 0) return NULL;
  if (!take(data, size, &at, &identity_size, sizeof identity_size)) return NULL;
  if (identity_size != strlen(cache_identity) || size - at < identity_size ||
      memcmp(data + at, cache_identity, identity_size) != 0)
    return NULL;
  at += identity_size;
  if (!take(data, size, &at, &file_text_hash, 8) || !take(data, size, &at, &file_text_size, 8) ||
      !take(data, size, &at, &payload_size, 8) || !take(data, size, &at, &payload_hash, 8))
    return NULL;
  if (file_text_hash != text_hash || size - at != payload_size) return NULL;
  if (*text_size != ANY_SIZE && file_text_size != *text_size) return NULL;
  if (cache_hash(data + at, payload_size, CACHE_HASH_SEED) != payload_hash) return NULL;
  *text_size = file_text_size;
  *out_payload_size = payload_size;
  return data + at;
}

/* The executable of the file for `text_hash` (and *text_size, unless
 * ANY_SIZE), or NULL with false when it is missing, bad or unloadable. */
static bool load_file(tpu_pjrt* pjrt, uint64_t text_hash, size_t* text_size,
                      struct PJRT_LoadedExecutable** out_executable) {
  *out_executable = NULL;
  char path[sizeof cache_dir + 64];
  file_path(path, sizeof path, text_hash);
  char* data;
  size_t data_size;
  if (!read_all(path, &data, &data_size)) return false;
  size_t payload_size = 0;
  const char* payload = validate(data, data_size, text_hash, text_size, &payload_size);
  tpu_status status = payload ? tpu_pjrt_executable_deserialize(pjrt, payload, payload_size, out_executable)
                              : NULL;
  free(data);
  bool ok = payload && !status;
  tpu_status_free(status);
  if (!ok) *out_executable = NULL;
  return ok;
}

tpu_status disk_cache_load(tpu_pjrt* pjrt, const char* text, size_t size,
                           struct PJRT_LoadedExecutable** out_executable) {
  *out_executable = NULL;
  if (!cache_dir[0]) return NULL;
  uint64_t text_hash = cache_hash(text, size, CACHE_HASH_SEED);
  if (!load_file(pjrt, text_hash, &size, out_executable)) {
    /* Truncated, corrupt, foreign or unloadable: drop it; the caller
     * compiles and writes a good one. */
    char path[sizeof cache_dir + 64];
    file_path(path, sizeof path, text_hash);
    unlink(path);
    return NULL;
  }
  disk_cache_note_hit(text_hash);
  return NULL;
}

void disk_cache_note_hit(uint64_t text_hash) {
  char path[sizeof cache_dir + 64];
  file_path(path, sizeof path, text_hash);
  utimensat(AT_FDCWD, path, NULL, 0); /* most recently used */
  tpu_counter_add(TPU_COUNTER_DISK_HIT, 1);
}

bool disk_cache_load_hash(tpu_pjrt* pjrt, uint64_t text_hash, size_t* out_text_size,
                          struct PJRT_LoadedExecutable** out_executable) {
  *out_text_size = ANY_SIZE;
  return cache_dir[0] && load_file(pjrt, text_hash, out_text_size, out_executable);
}

typedef struct entry {
  char name[64];
  int64_t size;
  struct timespec used;
} entry;

static int older_first(const void* a, const void* b) {
  const struct timespec* x = &((const entry*)a)->used;
  const struct timespec* y = &((const entry*)b)->used;
  if (x->tv_sec != y->tv_sec) return x->tv_sec < y->tv_sec ? -1 : 1;
  return x->tv_nsec < y->tv_nsec ? -1 : x->tv_nsec > y->tv_nsec;
}

/* Lists the cache files; the caller frees *out_entries. */
static int64_t list_entries(entry** out_entries, int64_t* out_bytes) {
  *out_entries = NULL;
  *out_bytes = 0;
  DIR* dir = opendir(cache_dir);
  if (!dir) return 0;
  int64_t count = 0, cap = 0;
  entry* entries = NULL;
  struct dirent* d;
  while ((d = readdir(dir))) {
    size_t n = strlen(d->d_name);
    if (n <= strlen(SUFFIX) || n >= sizeof entries[0].name ||
        strcmp(d->d_name + n - strlen(SUFFIX), SUFFIX) != 0)
      continue;
    char path[sizeof cache_dir + 300];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", cache_dir, d->d_name);
    if (stat(path, &st) != 0) continue;
    if (count == cap) {
      cap = cap ? cap * 2 : 64;
      entry* grown = realloc(entries, (size_t)cap * sizeof *entries);
      if (!grown) break;
      entries = grown;
    }
    snprintf(entries[count].name, sizeof entries[count].name, "%s", d->d_name);
    entries[count].size = st.st_size;
    entries[count].used = st.st_mtim;
    *out_bytes += st.st_size;
    count++;
  }
  closedir(dir);
  *out_entries = entries;
  return count;
}

static void evict_to_bound(void) {
  entry* entries;
  int64_t bytes;
  int64_t count = list_entries(&entries, &bytes);
  if (bytes > cache_max_bytes) {
    qsort(entries, (size_t)count, sizeof *entries, older_first);
    for (int64_t i = 0; i < count && bytes > cache_max_bytes; i++) {
      char path[sizeof cache_dir + 100];
      snprintf(path, sizeof path, "%s/%s", cache_dir, entries[i].name);
      if (unlink(path) == 0) bytes -= entries[i].size;
    }
  }
  free(entries);
}

static int newer_first(const void* a, const void* b) { return older_first(b, a); }

int disk_cache_recent(uint64_t* out_text_hashes, int max) {
  if (!cache_dir[0]) return 0;
  entry* entries;
  int64_t bytes;
  int64_t count = list_entries(&entries, &bytes);
  qsort(entries, (size_t)count, sizeof *entries, newer_first);
  char mine[17];
  snprintf(mine, sizeof mine, "%016llx", (unsigned long long)identity_hash);
  int taken = 0;
  for (int64_t i = 0; i < count && taken < max; i++) {
    if (entries[i].used.tv_sec < entries[0].used.tv_sec - DISK_CACHE_SESSION_SECONDS) break;
    const char* name = entries[i].name;
    if (strlen(name) != 32 + strlen(SUFFIX) || strncmp(name, mine, 16) != 0) continue;
    char hex[17];
    memcpy(hex, name + 16, 16);
    hex[16] = '\0';
    out_text_hashes[taken++] = strtoull(hex, NULL, 16);
  }
  free(entries);
  return taken;
}

void disk_cache_store(tpu_pjrt* pjrt, const char* text, size_t size,
                      struct PJRT_LoadedExecutable* executable) {
  if (!cache_dir[0]) return;
  char* payload = NULL;
  size_t payload_size = 0;
  tpu_status status = tpu_pjrt_executable_serialize(pjrt, executable, &payload, &payload_size);
  if (status) {
    tpu_status_free(status);
    return;
  }
  uint64_t text_hash = cache_hash(text, size, CACHE_HASH_SEED);
  uint32_t identity_size = (uint32_t)strlen(cache_identity);
  uint64_t fields[4] = {text_hash, size, payload_size, cache_hash(payload, payload_size, CACHE_HASH_SEED)};
  char path[sizeof cache_dir + 64], temporary[sizeof cache_dir + 128];
  file_path(path, sizeof path, text_hash);
  snprintf(temporary, sizeof temporary, "%s.%ld.%lx.tmp", path, (long)getpid(), (unsigned long)pthread_self());
  FILE* f = fopen(temporary, "wb");
  bool ok = f && fwrite(magic, 1, sizeof magic, f) == sizeof magic &&
            fwrite(&identity_size, sizeof identity_size, 1, f) == 1 &&
            fwrite(cache_identity, 1, identity_size, f) == identity_size &&
            fwrite(fields, sizeof fields, 1, f) == 1 &&
            fwrite(payload, 1, payload_size, f) == payload_size;
  if (f) ok = fclose(f) == 0 && ok;
  free(payload);
  if (ok && rename(temporary, path) == 0) {
    tpu_counter_add(TPU_COUNTER_DISK_WRITE, 1);
    evict_to_bound();
  } else {
    unlink(temporary);
  }
}

disk_cache_stats disk_cache_stat(void) {
  disk_cache_stats s = {cache_dir, 0, 0, cache_max_bytes};
  if (!cache_dir[0]) return s;
  entry* entries;
  s.entries = list_entries(&entries, &s.bytes);
  free(entries);
  return s;
}

tpu_status disk_cache_clear(void) {
  prefetch_stop();
  if (!cache_dir[0]) return NULL;
  entry* entries;
  int64_t bytes;
  int64_t count = list_entries(&entries, &bytes);
  tpu_status status = NULL;
  for (int64_t i = 0; i < count && !status; i++) {
    char path[sizeof cache_dir + 100];
    snprintf(path, sizeof path, "%s/%s", cache_dir, entries[i].name);
    if (unlink(path) != 0 && errno != ENOENT)
      status = TPU_ERROR(TPU_INVALID_ARGUMENT, "cannot remove %s: %s", path, strerror(errno));
  }
  free(entries);
  return status;
}
