/* Device storage: refcounted buffers whose PJRT storage is made on first
 * write, and copies between host memory and strided views. */
#include <stdlib.h>
#include <string.h>

#include "exec/graph.h"
#include "exec/runtime_impl.h"
#include "exec/view.h"

static tpu_buffer* live_buffers; /* under the runtime lock */

tpu_status tpu_buffer_create(int device, size_t nbytes, tpu_buffer** out_buffer) {
  *out_buffer = NULL;
  if (device < 0 || device >= tpu_device_count())
    return TPU_ERROR(TPU_INVALID_ARGUMENT,
                     "tpu:%d is not a valid device: there are %d tpu devices (0..%d)", device,
                     tpu_device_count(), tpu_device_count() - 1);
  tpu_buffer* buffer = calloc(1, sizeof *buffer);
  if (!buffer) return TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory for a %zu-byte tpu buffer", nbytes);
  atomic_init(&buffer->refcount, 1);
  buffer->device = device;
  buffer->nbytes = nbytes;
  runtime_lock();
  buffer->next = live_buffers;
  if (live_buffers) live_buffers->prev = buffer;
  live_buffers = buffer;
  runtime_unlock();
  memory_account(device, (int64_t)nbytes, false);
  *out_buffer = buffer;
  return NULL;
}

void tpu_buffer_retain(tpu_buffer* buffer) {
  if (buffer) atomic_fetch_add(&buffer->refcount, 1);
}

void tpu_buffer_release(tpu_buffer* buffer) {
  if (!buffer || atomic_fetch_sub(&buffer->refcount, 1) != 1) return;
  runtime_lock();
  if (buffer->prev) buffer->prev->next = buffer->next; else live_buffers = buffer->next;
  if (buffer->next) buffer->next->prev = buffer->prev;
  inflight_drop_storage(buffer->device, buffer->pjrt);
  runtime_unlock();
  memory_account(buffer->device, (int64_t)buffer->nbytes, true);
  free(buffer);
}

size_t tpu_buffer_nbytes(const tpu_buffer* buffer) { return buffer->nbytes; }
int tpu_buffer_device(const tpu_buffer* buffer) { return buffer->device; }

tpu_status buffers_for_each(int device, tpu_status (*fn)(tpu_buffer* buffer, void* context),
                            void* context) {
  for (tpu_buffer* b = live_buffers; b; b = b->next) {
    if (b->device != device || !b->pjrt) continue;
    TPU_RETURN_IF_ERROR(fn(b, context));
  }
  return NULL;
}

static tpu_status await_buffer(tpu_buffer* b, void* context) {
  tpu_status status = tpu_pjrt_buffer_await(runtime_pjrt(), b->pjrt);
  return status ? tpu_status_annotate(status, "%s failed: ", b->writer ? b->writer : "an op") : NULL;
}

tpu_status buffers_await_all(int device) { return buffers_for_each(device, await_buffer, NULL); }

tpu_dtype buffer_storage_dtype(const tpu_buffer* buffer, tpu_dtype view_dtype) {
  if (buffer->graph_slot || buffer->launch_pending) return buffer->pending_dtype;
  return buffer->pjrt ? buffer->dtype : view_dtype;
}

void buffer_replace(tpu_buffer* buffer, struct PJRT_Buffer* pjrt, tpu_dtype dtype) {
  inflight_drop_storage(buffer->device, buffer->pjrt);
  buffer->pjrt = pjrt;
  buffer->dtype = dtype;
}

static tpu_status upload(tpu_buffer* buffer, tpu_dtype dtype, const void* data) {
  size_t item = tpu_dtype_size(dtype);
  if (buffer->nbytes % item != 0)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "a %zu-byte tpu storage cannot hold %s elements",
                     buffer->nbytes, tpu_dtype_name(dtype));
  int64_t numel = (int64_t)(buffer->nbytes / item);
  struct PJRT_Buffer* made = NULL;
  TPU_RETURN_IF_ERROR(
      tpu_pjrt_buffer_from_host(runtime_pjrt(), buffer->device, dtype, &numel, 1, data, &made));
  tpu_counter_add(TPU_COUNTER_TRANSFER_TO_DEVICE, 1);
  tpu_counter_add(TPU_COUNTER_BYTES_TO_DEVICE, (int64_t)buffer->nbytes);
  buffer_replace(buffer, made, dtype);
  return NULL;
}

tpu_status buffer_materialize(tpu_buffer* buffer, tpu_dtype dtype) {
  if (buffer->pjrt) return NULL;
  void* zeros = calloc(1, buffer->nbytes ? buffer->nbytes : 1);
  if (!zeros) return TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory zeroing %zu bytes", buffer->nbytes);
  tpu_status status = upload(buffer, dtype, zeros);
  free(zeros);
  return status;
}

/* Host-side strided copy between dense `dense` and the view inside `storage`. */
static void host_strided_copy(const tpu_tensor* view, char* storage, char* dense, bool to_dense) {
  size_t item = tpu_dtype_size(view->dtype);
  int64_t numel = view_numel(view);
  int64_t index[TPU_MAX_RANK] = {0};
  for (int64_t n = 0; n < numel; n++) {
    int64_t at = view->offset;
    for (int d = 0; d < view->rank; d++) at += index[d] * view->strides[d];
    if (to_dense)
      memcpy(dense + n * (int64_t)item, storage + at * (int64_t)item, item);
    else
      memcpy(storage + at * (int64_t)item, dense + n * (int64_t)item, item);
    for (int d = view->rank - 1; d >= 0; d--) {
      if (++index[d] < view->sizes[d]) break;
      index[d] = 0;
    }
  }
}

tpu_status tpu_tensor_to_host(const tpu_tensor* src, void* dst) {
  TPU_RETURN_IF_ERROR(view_check(src, "copy to host"));
  if (view_numel(src) == 0) return NULL;
  tpu_buffer* buffer = src->buffer;
  runtime_lock();
  tpu_status status = graph_flush_buffer(buffer);
  if (!status) status = buffer_materialize(buffer, src->dtype);
  bool whole = !status && view_class_of(src) == VIEW_WHOLE;
  char* staging = whole ? dst : (status ? NULL : malloc(buffer->nbytes));
  if (!status && !staging)
    status = TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory staging %zu bytes", buffer->nbytes);
  if (!status) {
    status = tpu_pjrt_buffer_to_host(runtime_pjrt(), buffer->pjrt, staging, buffer->nbytes);
    tpu_counter_add(TPU_COUNTER_TRANSFER_TO_HOST, 1);
    tpu_counter_add(TPU_COUNTER_BYTES_TO_HOST, (int64_t)buffer->nbytes);
  }
  runtime_unlock();
  if (!status && !whole) host_strided_copy(src, staging, dst, true);
  if (!whole) free(staging);
  return status;
}

tpu_status tpu_tensor_from_host(const tpu_tensor* dst, const void* src) {
  TPU_RETURN_IF_ERROR(view_check(dst, "copy from host"));
  if (view_numel(dst) == 0) return NULL;
  if (view_class_of(dst) == VIEW_WHOLE) {
    runtime_lock();
    tpu_status status = graph_flush_buffer(dst->buffer);
    if (!status) status = upload(dst->buffer, dst->dtype, src);
    runtime_unlock();
    return status;
  }
  /* Stage the dense values in a fresh storage, then copy it into the view
   * on the device, so the rest of the storage is kept. */
  size_t nbytes = (size_t)view_numel(dst) * tpu_dtype_size(dst->dtype);
  tpu_buffer* staging = NULL;
  TPU_RETURN_IF_ERROR(tpu_buffer_create(dst->buffer->device, nbytes, &staging));
  runtime_lock();
  tpu_status status = upload(staging, dst->dtype, src);
  runtime_unlock();
  if (!status) {
    tpu_tensor from = *dst;
    from.buffer = staging;
    from.offset = 0;
    view_contiguous_strides(from.rank, from.sizes, from.strides);
    status = tpu_tensor_copy(dst, &from);
  }
  tpu_buffer_release(staging);
  return status;
}

tpu_status tpu_tensor_copy(const tpu_tensor* dst, const tpu_tensor* src) {
  tpu_arg arg = {.kind = TPU_ARG_TENSOR, .u.tensor = *src};
  tpu_tensor out = *dst;
  tpu_op_call call = {.name = "copy_", .overload = "", .device = dst->buffer ? dst->buffer->device : 0,
                      .args = &arg, .arg_count = 1, .outputs = &out, .output_count = 1};
  tpu_op_plan* plan = NULL;
  TPU_RETURN_IF_ERROR(tpu_op_lookup(&call, &plan));
  if (!plan) {
    const int64_t* sizes = dst->sizes;
    TPU_RETURN_IF_ERROR(tpu_op_plan_create(&call, 1, &dst->dtype, &dst->rank, &sizes, NULL, NULL, &plan));
  }
  return tpu_op_execute(plan, &call);
}
