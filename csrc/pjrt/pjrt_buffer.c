/* Device buffers: host to device, device to host, readiness, destruction.
 * Host data is always dense row-major; the device picks its own layout
 * (TPU buffers are tiled), so every transfer names the host layout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pjrt/pjrt_internal.h"

static const PJRT_Buffer_Type buffer_types[TPU_DTYPE_COUNT] = {
    [TPU_BOOL] = PJRT_Buffer_Type_PRED, [TPU_U8] = PJRT_Buffer_Type_U8,
    [TPU_I8] = PJRT_Buffer_Type_S8,     [TPU_I16] = PJRT_Buffer_Type_S16,
    [TPU_I32] = PJRT_Buffer_Type_S32,   [TPU_I64] = PJRT_Buffer_Type_S64,
    [TPU_F16] = PJRT_Buffer_Type_F16,   [TPU_BF16] = PJRT_Buffer_Type_BF16,
    [TPU_F32] = PJRT_Buffer_Type_F32,   [TPU_F64] = PJRT_Buffer_Type_F64,
    [TPU_U32] = PJRT_Buffer_Type_U32,   [TPU_U64] = PJRT_Buffer_Type_U64,
    [TPU_C64] = PJRT_Buffer_Type_C64,   [TPU_C128] = PJRT_Buffer_Type_C128,
    [TPU_F8E4M3FN] = PJRT_Buffer_Type_F8E4M3FN, [TPU_F8E5M2] = PJRT_Buffer_Type_F8E5M2,
    [TPU_F8E4M3FNUZ] = PJRT_Buffer_Type_F8E4M3FNUZ, [TPU_F8E5M2FNUZ] = PJRT_Buffer_Type_F8E5M2FNUZ,
};

static tpu_status check_shape(tpu_dtype dtype, const int64_t* dims, int rank, const void* data) {
  /* An INVALID type CHECK-fails inside the plugin: reject it here. */
  if ((unsigned)dtype >= TPU_DTYPE_COUNT || buffer_types[dtype] == PJRT_Buffer_Type_INVALID)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "buffer_from_host: invalid dtype %d", (int)dtype);
  if (rank < 0 || rank > TPU_MAX_RANK)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "buffer_from_host: rank %d outside [0, %d]", rank,
                     TPU_MAX_RANK);
  if (rank > 0 && !dims)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "buffer_from_host: rank %d but dims is NULL", rank);
  int64_t elements = 1;
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0)
      return TPU_ERROR(TPU_INVALID_ARGUMENT, "buffer_from_host: dims[%d] is %lld", i,
                       (long long)dims[i]);
    if (dims[i] && elements > INT64_MAX / 8 / dims[i])
      return TPU_ERROR(TPU_INVALID_ARGUMENT,
                       "buffer_from_host: element count overflows at dims[%d]=%lld", i,
                       (long long)dims[i]);
    elements *= dims[i];
  }
  if (elements > 0 && !data)
    return TPU_ERROR(TPU_INVALID_ARGUMENT,
                     "buffer_from_host: %s array of %lld elements but data is NULL",
                     tpu_dtype_name(dtype), (long long)elements);
  return NULL;
}

tpu_status tpu_pjrt_buffer_from_host(tpu_pjrt* pjrt, int device, tpu_dtype dtype,
                                     const int64_t* dims, int rank, const void* data,
                                     struct PJRT_Buffer** out_buffer) {
  if (!out_buffer) return TPU_ERROR(TPU_INVALID_ARGUMENT, "buffer_from_host: out_buffer is NULL");
  *out_buffer = NULL;
  if (!pjrt) return TPU_ERROR(TPU_INVALID_ARGUMENT, "buffer_from_host: pjrt is NULL");
  if (device < 0 || device >= pjrt->device_count)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "buffer_from_host: device %d outside [0, %d)", device,
                     pjrt->device_count);
  TPU_RETURN_IF_ERROR(check_shape(dtype, dims, rank, data));
  const PJRT_Api* api = pjrt->api;
  /* Both CPU plugins take NULL data for an empty array; a real address costs
   * nothing and spares any plugin that checks it. */
  static const char empty_data[8];

  PJRT_Client_BufferFromHostBuffer_Args args;
  memset(&args, 0, sizeof args);
  args.struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE;
  args.client = pjrt->client;
  args.data = data ? data : empty_data;
  args.type = buffer_types[dtype];
  args.dims = dims;
  args.num_dims = (size_t)rank;
  /* No byte_strides: the header defines "none" as dense major-to-minor,
   * which is our host layout. No device_layout: the device picks its own. */
  /* Lets the plugin copy asynchronously without an extra staging copy; we
   * wait for done_with_host_buffer below, so the caller's memory is free
   * again when we return. */
  args.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes;
  args.device = pjrt->devices[device];
  tpu_status status = tpu_pjrt_error(api, api->PJRT_Client_BufferFromHostBuffer(&args),
                                     "PJRT_Client_BufferFromHostBuffer");
  if (status)
    return tpu_status_annotate(status, "%s array of rank %d to device %d: ", tpu_dtype_name(dtype),
                               rank, device);
  status = tpu_pjrt_event_finish(api, args.done_with_host_buffer, "awaiting done_with_host_buffer");
  if (status) {
    tpu_pjrt_buffer_destroy(pjrt, args.buffer);
    return status;
  }
  *out_buffer = args.buffer;
  return NULL;
}

tpu_status tpu_pjrt_buffer_to_host(tpu_pjrt* pjrt, struct PJRT_Buffer* buffer, void* dst,
                                   size_t nbytes) {
  if (!pjrt || !buffer)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "buffer_to_host: NULL pjrt or buffer");
  if (!dst && nbytes)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "buffer_to_host: dst is NULL for %zu bytes", nbytes);
  const PJRT_Api* api = pjrt->api;

  PJRT_Buffer_Dimensions_Args shape;
  memset(&shape, 0, sizeof shape);
  shape.struct_size = PJRT_Buffer_Dimensions_Args_STRUCT_SIZE;
  shape.buffer = buffer;
  TPU_RETURN_IF_ERROR(
      tpu_pjrt_error(api, api->PJRT_Buffer_Dimensions(&shape), "PJRT_Buffer_Dimensions"));
  if (shape.num_dims > TPU_MAX_RANK)
    return TPU_ERROR(TPU_UNIMPLEMENTED, "buffer_to_host: rank %zu above %d", shape.num_dims,
                     TPU_MAX_RANK);

  /* Dense row-major on the host whatever the device layout is: minor_to_major
   * lists the last dimension first, and no tiles. */
  int64_t minor_to_major[TPU_MAX_RANK];
  for (size_t i = 0; i < shape.num_dims; i++) minor_to_major[i] = (int64_t)(shape.num_dims - 1 - i);
  PJRT_Buffer_MemoryLayout layout;
  memset(&layout, 0, sizeof layout);
  layout.struct_size = PJRT_Buffer_MemoryLayout_STRUCT_SIZE;
  layout.type = PJRT_Buffer_MemoryLayout_Type_Tiled;
  layout.tiled.struct_size = PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE;
  layout.tiled.minor_to_major = minor_to_major;
  layout.tiled.minor_to_major_size = shape.num_dims;

  PJRT_Buffer_ToHostBuffer_Args args;
  memset(&args, 0, sizeof args);
  args.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE;
  args.src = buffer;
  args.host_layout = &layout;
  /* dst = NULL asks only for the size, so a wrong nbytes is an error here
   * rather than a short or overlong copy. */
  TPU_RETURN_IF_ERROR(tpu_pjrt_error(api, api->PJRT_Buffer_ToHostBuffer(&args),
                                     "PJRT_Buffer_ToHostBuffer (size query)"));
  if (args.dst_size != nbytes) {
    char dims_text[TPU_MAX_RANK * 22 + 1] = "";
    size_t used = 0;
    for (size_t i = 0; i < shape.num_dims; i++)
      used += (size_t)snprintf(dims_text + used, sizeof dims_text - used, "%s%lld", i ? "," : "",
                               (long long)shape.dims[i]);
    return TPU_ERROR(TPU_INVALID_ARGUMENT,
                     "buffer_to_host: buffer of shape [%s] needs %zu bytes, given %zu", dims_text,
                     args.dst_size, nbytes);
  }
  /* Nothing to copy: still wait, so a failed producer surfaces here too. */
  if (nbytes == 0) return tpu_pjrt_buffer_await(pjrt, buffer);

  args.dst = dst;
  args.dst_size = nbytes;
  args.event = NULL;
  TPU_RETURN_IF_ERROR(
      tpu_pjrt_error(api, api->PJRT_Buffer_ToHostBuffer(&args), "PJRT_Buffer_ToHostBuffer"));
  return tpu_pjrt_event_finish(api, args.event, "awaiting PJRT_Buffer_ToHostBuffer");
}

tpu_status tpu_pjrt_buffer_await(tpu_pjrt* pjrt, struct PJRT_Buffer* buffer) {
  if (!pjrt || !buffer)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "buffer_await: NULL pjrt or buffer");
  const PJRT_Api* api = pjrt->api;
  PJRT_Buffer_ReadyEvent_Args args;
  memset(&args, 0, sizeof args);
  args.struct_size = PJRT_Buffer_ReadyEvent_Args_STRUCT_SIZE;
  args.buffer = buffer;
  TPU_RETURN_IF_ERROR(
      tpu_pjrt_error(api, api->PJRT_Buffer_ReadyEvent(&args), "PJRT_Buffer_ReadyEvent"));
  return tpu_pjrt_event_finish(api, args.event, "awaiting buffer ready");
}

void tpu_pjrt_buffer_destroy(tpu_pjrt* pjrt, struct PJRT_Buffer* buffer) {
  if (!pjrt || !buffer) return;
  PJRT_Buffer_Destroy_Args args;
  memset(&args, 0, sizeof args);
  args.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE;
  args.buffer = buffer;
  tpu_pjrt_error_drop(pjrt->api, pjrt->api->PJRT_Buffer_Destroy(&args));
}
