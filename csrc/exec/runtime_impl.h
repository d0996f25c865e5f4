/* Inside the runtime: the process-wide state that exec/ and cache/ share. */
#ifndef TPU_EXEC_RUNTIME_IMPL_H
#define TPU_EXEC_RUNTIME_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "pjrt/pjrt.h"
#include "tpu/runtime.h"

struct tpu_buffer {
  atomic_int refcount;
  int device;
  size_t nbytes;
  struct PJRT_Buffer* pjrt; /* NULL until first written; guarded by the runtime lock */
  tpu_dtype dtype;          /* element type of pjrt (valid when pjrt != NULL) */
  int graph_slot;           /* 1 + its slot in the device's pending graph; 0 if none */
  tpu_dtype pending_dtype;  /* element type of that slot's value, or of the launched result */
  bool launch_pending;      /* a result of a graph on the launcher: pjrt is NULL until it finishes */
  const char* writer;       /* the op that last wrote it (static), for errors */
  tpu_buffer* prev;         /* the live-buffer list, for synchronize; under the lock */
  tpu_buffer* next;
};

/* The runtime lock guards every PJRT call and every buffer's pjrt field.
 * Recursive, so a locked path may call another locked entry point. */
void runtime_lock(void);
void runtime_unlock(void);
tpu_pjrt* runtime_pjrt(void); /* NULL before tpu_runtime_init */

/* A 0-d device buffer holding `bits` as `dtype` (scalars, offsets): a
 * cached one owned by the runtime, or, when its cache slot holds another
 * value, a new one handed back through out_owned too (the caller destroys
 * it after the program is enqueued; evicting the slot could free a buffer
 * an earlier argument of the same call still uses). Lock held. */
tpu_status runtime_scalar_buffer(int device, tpu_dtype dtype, const void* bits,
                                 struct PJRT_Buffer** out_buffer, struct PJRT_Buffer** out_owned);

/* The buffer's PJRT storage, made of zeros as `dtype` if never written.
 * Call with the lock held. */
tpu_status buffer_materialize(tpu_buffer* buffer, tpu_dtype dtype);
/* Replaces the PJRT storage (taking ownership of `pjrt`). Lock held. */
void buffer_replace(tpu_buffer* buffer, struct PJRT_Buffer* pjrt, tpu_dtype dtype);
/* Storage element type for reads through a view of `view_dtype`. */
tpu_dtype buffer_storage_dtype(const tpu_buffer* buffer, tpu_dtype view_dtype);

/* The most devices one process addresses (per-device tables are this long). */
#define MAX_DEVICES 64

/* Counts a storage of `nbytes` made (freed false) or freed on `device`. */
void memory_account(int device, int64_t nbytes, bool freed);

/* Calls fn on every live buffer of `device` that holds device storage,
 * until one fails. Lock held. */
tpu_status buffers_for_each(int device, tpu_status (*fn)(tpu_buffer* buffer, void* context),
                            void* context);

/* Awaits every live buffer on `device`: all enqueued work that anything can
 * still observe. Returns the first error. Lock held. */
tpu_status buffers_await_all(int device);

struct PJRT_Event;

/* Destroys a storage's PJRT buffer, first remembering its ready event if
 * the work writing it may still run (inflight.c). Lock held. */
void inflight_drop_storage(int device, struct PJRT_Buffer* storage);
/* Its two halves: destroys the buffer and hands back that ready event (NULL
 * if the work is done), needing no lock (the launcher thread calls it);
 * and remembers such an event (NULL: nothing). The second with the lock. */
struct PJRT_Event* storage_destroy(struct PJRT_Buffer* storage);
void inflight_add(int device, struct PJRT_Event* ready);
/* Waits for the work writing every storage dropped on `device` that may
 * still run (their errors are moot: nothing can read them). Lock held. */
void inflight_await_all(int device);
/* Calls fn on the ready event of each of those storages, until one fails.
 * Lock held. */
tpu_status inflight_for_each(int device, tpu_status (*fn)(struct PJRT_Event* ready, void* context),
                             void* context);

/* Waits until every event callback registered on `device` has run (event.c).
 * Lock not held: the callbacks come from the plugin's threads. */
void event_callbacks_wait(int device);

#endif
