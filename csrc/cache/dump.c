#include "cache/dump.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/program_cache.h"
#include "tpu/runtime.h"

static pthread_mutex_t dump_lock = PTHREAD_MUTEX_INITIALIZER;
static char dump_dir[4096]; /* "" when off; under dump_lock */

tpu_status tpu_dump_configure(const char* dir) {
  if (!dir) dir = "";
  if (strlen(dir) >= sizeof dump_dir - 64)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "TORCH_TPU_DUMP_DIR is too long (%zu characters)", strlen(dir));
  struct stat st;
  if (dir[0] && stat(dir, &st) != 0)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "the program dump directory %s cannot be used: %s", dir,
                     strerror(errno));
  if (dir[0] && !S_ISDIR(st.st_mode))
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "the program dump directory %s is not a directory", dir);
  pthread_mutex_lock(&dump_lock);
  snprintf(dump_dir, sizeof dump_dir, "%s", dir);
  pthread_mutex_unlock(&dump_lock);
  return NULL;
}

void dump_program(tpu_pjrt* pjrt, const char* text, size_t size) {
  pthread_mutex_lock(&dump_lock);
  if (!dump_dir[0]) {
    pthread_mutex_unlock(&dump_lock);
    return;
  }
  /* The key is the program text under the plugin that compiles it. */
  char identity[2048];
  snprintf(identity, sizeof identity, "%s %s, PJRT API %d.%d, XLA %s, plugin %s, compile options %s",
           tpu_pjrt_platform_name(pjrt), tpu_pjrt_platform_version(pjrt), tpu_pjrt_api_major(pjrt),
           tpu_pjrt_api_minor(pjrt), tpu_pjrt_xla_version(pjrt), tpu_pjrt_plugin_path(pjrt),
           tpu_pjrt_compile_options_name());
  unsigned long long identity_hash = cache_hash(identity, strlen(identity), CACHE_HASH_SEED);
  unsigned long long text_hash = cache_hash(text, size, CACHE_HASH_SEED);
  char path[sizeof dump_dir + 64], temporary[sizeof dump_dir + 128];
  snprintf(path, sizeof path, "%s/%016llx%016llx.mlir", dump_dir, identity_hash, text_hash);
  snprintf(temporary, sizeof temporary, "%s.%ld.tmp", path, (long)getpid());
  /* Written whole and renamed, so processes sharing the directory never
   * see half a file. */
  FILE* f = fopen(temporary, "w");
  bool ok = f && fprintf(f,
                         "// torch_tpu program %016llx%016llx\n"
                         "// key: program text (%zu bytes, hash %016llx) + plugin identity (hash %016llx):\n"
                         "//   %s\n",
                         identity_hash, text_hash, size, text_hash, identity_hash, identity) > 0;
  ok = ok && fwrite(text, 1, size, f) == size;
  if (ok && size && text[size - 1] != '\n') ok = fputc('\n', f) != EOF;
  if (f) ok = fclose(f) == 0 && ok;
  if (!ok || rename(temporary, path) != 0) unlink(temporary);
  pthread_mutex_unlock(&dump_lock);
}
