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

tpu_status tpu_pjrt_buffer_on_ready(tpu_pjrt* pjrt, struct PJRT_Buffer* buffer, const char* what,
                                    tpu_pjrt_ready_fn fn, void* user) {
  if (!pjrt || !buffer || !fn)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "buffer_on_ready: NULL pjrt, buffer or callback");
  const PJRT_Api* api = pjrt->api;
  if (!TPU_PJRT_HAS(api, PJRT_Event_OnReady)) return tpu_pjrt_missing(pjrt, "PJRT_Event_OnReady");
  ready_call* call = malloc(sizeof *call);
  if (!call) return TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory waiting on a buffer");
  *call = (ready_call){api, what ? what : "an op", fn, user};

  PJRT_Buffer_ReadyEvent_Args ready;
  memset(&ready, 0, sizeof ready);
  ready.struct_size = PJRT_Buffer_ReadyEvent_Args_STRUCT_SIZE;
  ready.buffer = buffer;
  tpu_status status =
      tpu_pjrt_error(api, api->PJRT_Buffer_ReadyEvent(&ready), "PJRT_Buffer_ReadyEvent");
  if (status) {
    free(call);
    return status;
  }
  PJRT_Event_OnReady_Args args;
  memset(&args, 0, sizeof args);
  args.struct_size = PJRT_Event_OnReady_Args_STRUCT_SIZE;
  args.event = ready.event;
  args.callback = on_ready;
  args.user_arg = call;
  status = tpu_pjrt_error(api, api->PJRT_Event_OnReady(&args), "PJRT_Event_OnReady");
  if (status) free(call);
  /* The registered callback keeps what it waits on; the event handle is
   * ours alone and can go now. */
  PJRT_Event_Destroy_Args destroy;
  memset(&destroy, 0, sizeof destroy);
  destroy.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE;
  destroy.event = ready.event;
  tpu_pjrt_error_drop(api, api->PJRT_Event_Destroy(&destroy));
  return status;
}
