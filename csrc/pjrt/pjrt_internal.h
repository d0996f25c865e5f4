/* Shared by the csrc/pjrt/ .c files only: the tpu_pjrt struct and the
 * helpers that turn plugin errors into tpu_status. The only header that
 * includes pjrt_c_api.h. */
#ifndef TPU_PJRT_INTERNAL_H
#define TPU_PJRT_INTERNAL_H

#include <stddef.h>

#include "pjrt/pjrt.h"
#include "pjrt_c_api.h" /* the wheel's include dir holds it flat, no xla/pjrt/c/ */

struct tpu_pjrt {
  const PJRT_Api* api;       /* the plugin's table; lives as long as the process */
  PJRT_Client* client;       /* owned; destroyed by tpu_pjrt_close */
  char* plugin_path;         /* owned copies of strings, NUL-terminated */
  char* platform_name;
  char* platform_version;
  char* xla_version;         /* "" when the plugin does not report it */
  int device_count;          /* addressable devices */
  PJRT_Device* const* devices; /* client-owned list, [device_count] */
  char** device_kinds;       /* owned, [device_count] */
  int lowered_threads;       /* plugin threads given a higher nice value (pjrt_threads.c) */
  bool keeps_freed_memory;   /* host memory policy applied (pjrt_host_memory.c) */
};

/* True when the plugin's table is long enough to hold `slot` and fills it.
 * Slots past api->struct_size belong to a newer header than the plugin's. */
#define TPU_PJRT_HAS(api, slot)                                                  \
  ((api)->struct_size >= offsetof(PJRT_Api, slot) + sizeof((api)->slot) && \
   (api)->slot != NULL)

/* Converts a plugin error into a TPU_PLUGIN_ERROR naming `call` and carrying
 * the plugin's text, and destroys the PJRT_Error. NULL passes through as OK. */
tpu_status tpu_pjrt_error(const PJRT_Api* api, PJRT_Error* error, const char* call);

/* Destroys an error whose status nobody can receive (destroy paths). */
void tpu_pjrt_error_drop(const PJRT_Api* api, PJRT_Error* error);

/* Keeps freed host memory in the process for reuse (pjrt_host_memory.c);
 * false where the C library offers no such policy. */
bool tpu_host_memory_keep_freed(void);
/* Gives the freed memory kept in the process back to the system. */
void tpu_host_memory_release(void);
/* The host's available (reclaimable included) and total memory in bytes. */
tpu_status tpu_host_memory_size(int64_t* out_available, int64_t* out_total);

/* Destroys `event` (NULL is OK). */
void tpu_pjrt_event_drop(const PJRT_Api* api, PJRT_Event* event);

/* Awaits and destroys `event` (NULL is OK); returns the event's error. */
tpu_status tpu_pjrt_event_finish(const PJRT_Api* api, PJRT_Event* event, const char* what);

/* The ids of this process's threads (empty where they cannot be listed). */
typedef struct tpu_thread_ids {
  int* ids;
  int count;
} tpu_thread_ids;

void tpu_thread_ids_snapshot(tpu_thread_ids* out);
void tpu_thread_ids_free(tpu_thread_ids* ids);
/* Raises by `delta` (capped at 19) the nice value of every thread that is
 * not in `before`; returns how many it changed. Best effort. */
int tpu_threads_lower_priority_since(const tpu_thread_ids* before, int delta);

/* A TPU_UNIMPLEMENTED status for a slot this plugin's table lacks. */
tpu_status tpu_pjrt_missing(const tpu_pjrt* pjrt, const char* slot);

#endif
