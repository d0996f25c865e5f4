#include "pjrt/pjrt_event.h"

#include <stdlib.h>
#include <string.h>

#include "pjrt/pjrt_internal.h"

/* What the plugin's callback needs to reach ours. Freed by the callback. */
typedef struct ready_call {
  const PJRT_Api* api;
  const char* what;
  tpu_pjrt_ready_fn fn;
  void* user;
} ready_call;

static void on_ready(PJRT_Error* error, void* arg) {
  ready_call* call = arg;
  call->fn(call->user, tpu_pjrt_error(call->api, error, call->what));
  free(call);
}

tpu_status tpu_pjrt_event_on_ready(tpu_pjrt* pjrt, struct PJRT_Event* event, const char* what,
                                   tpu_pjrt_ready_fn fn, void* user) {
  if (!pjrt || !event || !fn)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "event_on_ready: NULL pjrt, event or callback");
  const PJRT_Api* api = pjrt->api;
  if (!TPU_PJRT_HAS(api, PJRT_Event_OnReady)) return tpu_pjrt_missing(pjrt, "PJRT_Event_OnReady");
  ready_call* call = malloc(sizeof *call);
  if (!call) return TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory waiting on the device");
  *call = (ready_call){api, what ? what : "an op", fn, user};
  PJRT_Event_OnReady_Args args;
  memset(&args, 0, sizeof args);
  args.struct_size = PJRT_Event_OnReady_Args_STRUCT_SIZE;
  args.event = event;
  args.callback = on_ready;
  args.user_arg = call;
  tpu_status status = tpu_pjrt_error(api, api->PJRT_Event_OnReady(&args), "PJRT_Event_OnReady");
  if (status) free(call);
  return status;
}

tpu_status tpu_pjrt_buffer_ready_event(tpu_pjrt* pjrt, struct PJRT_Buffer* buffer,
                                       struct PJRT_Event** out_event) {
  *out_event = NULL;
  if (!pjrt || !buffer) return TPU_ERROR(TPU_INVALID_ARGUMENT, "buffer_ready_event: NULL pjrt or buffer");
  PJRT_Buffer_ReadyEvent_Args ready;
  memset(&ready, 0, sizeof ready);
  ready.struct_size = PJRT_Buffer_ReadyEvent_Args_STRUCT_SIZE;
  ready.buffer = buffer;
  TPU_RETURN_IF_ERROR(
      tpu_pjrt_error(pjrt->api, pjrt->api->PJRT_Buffer_ReadyEvent(&ready), "PJRT_Buffer_ReadyEvent"));
  *out_event = ready.event;
  return NULL;
}

tpu_status tpu_pjrt_buffer_on_ready(tpu_pjrt* pjrt, struct PJRT_Buffer* buffer, const char* what,
                                    tpu_pjrt_ready_fn fn, void* user) {
  struct PJRT_Event* event;
  TPU_RETURN_IF_ERROR(tpu_pjrt_buffer_ready_event(pjrt, buffer, &event));
  tpu_status status = tpu_pjrt_event_on_ready(pjrt, event, what, fn, user);
  /* The registered callback keeps what it waits on; the event handle is
   * ours alone and can go now. */
  tpu_pjrt_event_destroy(pjrt, event);
  return status;
}

bool tpu_pjrt_event_is_ready(tpu_pjrt* pjrt, struct PJRT_Event* event) {
  const PJRT_Api* api = pjrt->api;
  if (!TPU_PJRT_HAS(api, PJRT_Event_IsReady)) return true;
  PJRT_Event_IsReady_Args args;
  memset(&args, 0, sizeof args);
  args.struct_size = PJRT_Event_IsReady_Args_STRUCT_SIZE;
  args.event = event;
  PJRT_Error* error = api->PJRT_Event_IsReady(&args);
  if (error) {
    tpu_pjrt_error_drop(api, error);
    return true;
  }
  return args.is_ready;
}

tpu_status tpu_pjrt_event_await(tpu_pjrt* pjrt, struct PJRT_Event* event, const char* what) {
  return tpu_pjrt_event_finish(pjrt->api, event, what);
}

void tpu_pjrt_event_destroy(tpu_pjrt* pjrt, struct PJRT_Event* event) {
  if (pjrt) tpu_pjrt_event_drop(pjrt->api, event);
}
