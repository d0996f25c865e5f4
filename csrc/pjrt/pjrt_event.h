/* Readiness callbacks on device buffers: what runtime events (exec/event.c)
 * are made of. Kept apart from pjrt.h because nothing else waits this way. */
#ifndef TPU_PJRT_EVENT_H
#define TPU_PJRT_EVENT_H

#include "pjrt/pjrt.h"

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

#ifdef __cplusplus
}
#endif

#endif
