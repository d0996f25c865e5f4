/* Inside exec/: the launcher thread. A fused graph cut where recording goes
 * on (another thread's op, torch_tpu.sync(), an optimizer step) has its
 * program and arguments made by the recording thread and handed here; this
 * thread makes the plugin's execute call, which costs as much as recording
 * dozens of ops, while the recording thread records the next graph.
 *
 * It takes no runtime lock and touches nothing but its job: the recording
 * side leaves every storage and executable the job uses alone until
 * launch_wait has returned (graph.c finishes a device's job before anything
 * reads or replaces a storage, loads a program or cuts again). */
#ifndef TPU_EXEC_LAUNCHER_H
#define TPU_EXEC_LAUNCHER_H

#include <stdbool.h>
#include <stddef.h>

#include "pjrt/pjrt.h"

typedef struct launch_job {
  struct PJRT_LoadedExecutable* executable;
  int device;
  struct PJRT_Buffer* const* args;
  size_t arg_count;
  const bool* donated; /* as tpu_pjrt_execute takes it */
  struct PJRT_Buffer** results;
  size_t result_count;
  /* Storages destroyed here once the call has returned: first the
   * replaced_count ones the results replace (left alone if the call
   * failed), then ones nothing holds any more. dropped_ready[i] gets the
   * ready event to remember for each (see storage_destroy). */
  struct PJRT_Buffer** dropped;
  struct PJRT_Event** dropped_ready;
  size_t replaced_count;
  size_t dropped_count;
  tpu_status status; /* the execute call's, once done */
  bool done;         /* under the launcher's mutex */
  struct launch_job* next;
} launch_job;

/* Queues the job (jobs run in order). Where no thread can be started the
 * call runs here, so it never fails. */
void launch_submit(launch_job* job);
/* Returns once the job's execute call has returned. */
void launch_wait(launch_job* job);

#endif
