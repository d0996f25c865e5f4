/* Readiness of device buffers: what runtime events (exec/event.c) and
 * device synchronizes (exec/inflight.c) wait on. Kept apart from pjrt.h
 * because nothing else waits this way. */
#ifndef TPU_PJRT_EVENT_H
#define TPU_PJRT_EVENT_H

#include "pjrt/pjrt.h"

struct PJRT_Event;

#ifdef __cplusplus
extern "C" {
#endif

/* Called once with NULL, or with the error of the work that made the buffer
 * (owned by the callee; its message starts "<what> failed"). */
typedef void (*tpu_pjrt_ready_fn)(void* user, tpu_status status);

/* Arranges fn(user, status) for when `buffer` is ready. fn runs either
 * before this returns, on this thread (the buffer was ready), or later on a
 * plugin thread, so it must not call into this layer. On an error return
 * fn is never called. `what` must outlive the call to fn (a static name). */
tpu_status tpu_pjrt_buffer_on_ready(tpu_pjrt* pjrt, struct PJRT_Buffer* buffer, const char* what,
                                    tpu_pjrt_ready_fn fn, void* user);

/* The event of `buffer` becoming ready (it outlives the buffer), the
 * caller's to destroy. */
tpu_status tpu_pjrt_buffer_ready_event(tpu_pjrt* pjrt, struct PJRT_Buffer* buffer,
                                       struct PJRT_Event** out_event);
/* Whether the event has happened, without waiting (a failure has). Where
 * the plugin cannot say, it reads as happened, so nothing waits on it. */
bool tpu_pjrt_event_is_ready(tpu_pjrt* pjrt, struct PJRT_Event* event);
/* Waits for the event, destroys it, and returns its error. */
tpu_status tpu_pjrt_event_await(tpu_pjrt* pjrt, struct PJRT_Event* event, const char* what);
/* As tpu_pjrt_buffer_on_ready, for an event; the event stays the caller's. */
tpu_status tpu_pjrt_event_on_ready(tpu_pjrt* pjrt, struct PJRT_Event* event, const char* what,
                                   tpu_pjrt_ready_fn fn, void* user);
void tpu_pjrt_event_destroy(tpu_pjrt* pjrt, struct PJRT_Event* event);

#ifdef __cplusplus
}
#endif

#endif
