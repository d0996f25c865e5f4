/* The CPU plugin's worker threads yield to the threads that issue work.
 *
 * On the CPU platform the "device" is the host: the plugin computes on the
 * host's own cores, with threads it starts itself (an Eigen pool whose idle
 * workers spin while they wait for work, and the client's executor threads).
 * The thread issuing ops (Python's, and autograd's) is what a training step
 * waits on, while the programs it issues have time to spare; when both want
 * a core (on a machine with few cores, most of the time) the issuer should
 * win. So the threads that appear while the plugin is loaded and its client
 * is created get a higher nice value. Linux only (threads are listed from
 * /proc/self/task; per-thread nice values are a Linux property). */
#include <errno.h>
#include <stdlib.h>

#include "pjrt/pjrt_internal.h"

#ifdef __linux__
#include <dirent.h>
#include <sys/resource.h>

void tpu_thread_ids_snapshot(tpu_thread_ids* out) {
  *out = (tpu_thread_ids){0};
  DIR* dir = opendir("/proc/self/task");
  if (!dir) return;
  int capacity = 0;
  for (struct dirent* entry; (entry = readdir(dir));) {
    int id = atoi(entry->d_name);
    if (id <= 0) continue;
    if (out->count == capacity) {
      capacity = capacity ? 2 * capacity : 64;
      int* grown = realloc(out->ids, (size_t)capacity * sizeof *grown);
      if (!grown) break; /* best effort: a thread left out keeps its priority */
      out->ids = grown;
    }
    out->ids[out->count++] = id;
  }
  closedir(dir);
}

static bool contains(const tpu_thread_ids* ids, int id) {
  for (int i = 0; i < ids->count; i++)
    if (ids->ids[i] == id) return true;
  return false;
}

int tpu_threads_lower_priority_since(const tpu_thread_ids* before, int delta) {
  tpu_thread_ids now;
  tpu_thread_ids_snapshot(&now);
  int lowered = 0;
  for (int i = 0; i < now.count; i++) {
    int id = now.ids[i];
    if (contains(before, id)) continue;
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, (id_t)id);
    if (nice == -1 && errno) continue; /* the thread has exited */
    int target = nice + delta > 19 ? 19 : nice + delta;
    if (setpriority(PRIO_PROCESS, (id_t)id, target) == 0) lowered++;
  }
  tpu_thread_ids_free(&now);
  return lowered;
}
#else
void tpu_thread_ids_snapshot(tpu_thread_ids* out) { *out = (tpu_thread_ids){0}; }
int tpu_threads_lower_priority_since(const tpu_thread_ids* before, int delta) { return 0; }
#endif

void tpu_thread_ids_free(tpu_thread_ids* ids) {
  free(ids->ids);
  *ids = (tpu_thread_ids){0};
}
