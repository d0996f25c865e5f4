/* Byte-level storage copies. PyTorch copies an untyped storage (deepcopy,
 * torch.save, torch.load) as a uint8 tensor over all of it, whatever
 * element type the storage holds; a tpu storage is one PJRT buffer of one
 * element type, so these copies move whole buffers in the type they hold.
 * Each function holds the (recursive) runtime lock throughout. */
#include <stdlib.h>
#include <string.h>

#include "exec/graph.h"
#include "exec/runtime_impl.h"

/* The element type `buffer` holds, or TPU_DTYPE_COUNT if never written. */
static tpu_dtype held_dtype(const tpu_buffer* buffer) { return buffer_storage_dtype(buffer, TPU_DTYPE_COUNT); }

/* All of `buffer` as a flat tensor of `dtype`. */
static tpu_tensor whole(tpu_buffer* buffer, tpu_dtype dtype) {
  return (tpu_tensor){buffer, dtype, 1, {(int64_t)(buffer->nbytes / tpu_dtype_size(dtype))}, {1}, 0};
}

/* Drops what `buffer` holds, so it reads as zeros of any element type; for
 * a buffer about to be overwritten whole. */
static tpu_status forget(tpu_buffer* buffer) {
  TPU_RETURN_IF_ERROR(graph_flush_buffer(buffer));
  buffer_replace(buffer, NULL, buffer->dtype);
  return NULL;
}

tpu_status tpu_buffer_to_host(tpu_buffer* src, void* dst) {
  runtime_lock();
  tpu_dtype dtype = held_dtype(src);
  tpu_status status = NULL;
  if (dtype == TPU_DTYPE_COUNT) {
    memset(dst, 0, src->nbytes); /* never written: zeros, and src stays untyped */
  } else {
    tpu_tensor view = whole(src, dtype);
    status = tpu_tensor_to_host(&view, dst);
  }
  runtime_unlock();
  return status;
}

tpu_status tpu_buffer_from_host(tpu_buffer* dst, const void* src) {
  runtime_lock();
  tpu_dtype dtype = held_dtype(dst);
  tpu_tensor view = whole(dst, dtype == TPU_DTYPE_COUNT ? TPU_U8 : dtype);
  tpu_status status = tpu_tensor_from_host(&view, src);
  runtime_unlock();
  return status;
}

tpu_status tpu_buffer_copy(tpu_buffer* dst, tpu_buffer* src) {
  if (dst->device != src->device || dst->nbytes != src->nbytes)
    return TPU_ERROR(TPU_INVALID_ARGUMENT,
                     "storage copy: a %zu-byte storage on tpu:%d into a %zu-byte one on tpu:%d; "
                     "sizes and devices must match", src->nbytes, src->device, dst->nbytes, dst->device);
  if (dst == src || src->nbytes == 0) return NULL;
  runtime_lock();
  tpu_dtype dtype = held_dtype(src);
  tpu_status status = held_dtype(dst) == dtype ? NULL : forget(dst);
  if (!status && dtype != TPU_DTYPE_COUNT) { /* a never-written src reads as zeros: so does dst now */
    tpu_tensor from = whole(src, dtype), to = whole(dst, dtype);
    status = tpu_tensor_copy(&to, &from);
  }
  runtime_unlock();
  return status;
}

/* Only bytes uploaded by tpu_buffer_from_host get here (torch.load), so a
 * round trip through the host is the simple way to reinterpret them. */
static tpu_status reinterpret(tpu_buffer* buffer, tpu_dtype dtype) {
  void* bytes = malloc(buffer->nbytes);
  if (!bytes) return TPU_ERROR(TPU_OUT_OF_MEMORY, "storage retype: out of host memory for %zu bytes", buffer->nbytes);
  tpu_status status = tpu_buffer_to_host(buffer, bytes);
  if (!status) status = forget(buffer);
  if (!status) {
    tpu_tensor view = whole(buffer, dtype);
    status = tpu_tensor_from_host(&view, bytes);
  }
  free(bytes);
  return status;
}

tpu_status tpu_buffer_retype(tpu_buffer* buffer, tpu_dtype dtype) {
  size_t item = tpu_dtype_size(dtype);
  runtime_lock();
  tpu_dtype held = held_dtype(buffer);
  tpu_status status = NULL;
  /* Only from uint8: a byte view of a typed storage (how PyTorch copies
   * storages) must not retype it. */
  if (held == TPU_U8 && item > 1 && buffer->nbytes % item == 0)
    status = reinterpret(buffer, dtype);
  runtime_unlock();
  return status;
}
