/* Whole-storage byte copies (exec/storage_bytes.c): between buffers, to and
 * from the host, and bytes retyped when a tensor is placed on them. */
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"
#include "tpu/runtime.h"

static tpu_tensor flat(tpu_buffer* buffer, tpu_dtype dtype) {
  return (tpu_tensor){buffer, dtype, 1, {(int64_t)(tpu_buffer_nbytes(buffer) / tpu_dtype_size(dtype))}, {1}, 0};
}

static tpu_buffer* make(size_t nbytes) {
  tpu_buffer* b = NULL;
  CHECK_OK(tpu_buffer_create(0, nbytes, &b));
  return b;
}

/* A float32 storage copied as bytes keeps its values, and both sides still
 * read as float32. */
static void test_copy_between_buffers(void) {
  float values[5] = {1.5f, -2.0f, 3.25f, 0.0f, 1e30f}, back[5];
  tpu_buffer* src = make(sizeof values);
  tpu_tensor src_view = flat(src, TPU_F32);
  CHECK_OK(tpu_tensor_from_host(&src_view, values));
  tpu_buffer* dst = make(sizeof values);
  CHECK_OK(tpu_buffer_copy(dst, src));
  tpu_tensor dst_view = flat(dst, TPU_F32);
  CHECK_OK(tpu_tensor_to_host(&dst_view, back));
  CHECK(memcmp(back, values, sizeof values) == 0);
  unsigned char bytes[sizeof values];
  CHECK_OK(tpu_buffer_to_host(dst, bytes));
  CHECK(memcmp(bytes, values, sizeof values) == 0);
  /* Copying into a storage that holds another element type replaces it. */
  int16_t shorts[10] = {0};
  tpu_buffer* typed = make(sizeof shorts);
  tpu_tensor typed_view = flat(typed, TPU_I16);
  CHECK_OK(tpu_tensor_from_host(&typed_view, shorts));
  CHECK_OK(tpu_buffer_copy(typed, src));
  tpu_tensor typed_f32 = flat(typed, TPU_F32);
  CHECK_OK(tpu_tensor_to_host(&typed_f32, back));
  CHECK(memcmp(back, values, sizeof values) == 0);
  tpu_buffer_release(typed);
  tpu_buffer_release(dst);
  tpu_buffer_release(src);
}

/* A never-written source reads as zeros and is not typed by being copied. */
static void test_unwritten_source(void) {
  tpu_buffer* src = make(16);
  unsigned char bytes[16];
  memset(bytes, 0xff, sizeof bytes);
  CHECK_OK(tpu_buffer_to_host(src, bytes));
  for (int i = 0; i < 16; i++) CHECK(bytes[i] == 0);
  int32_t ones[4] = {1, 1, 1, 1}, back[4];
  tpu_buffer* dst = make(16);
  tpu_tensor dst_view = flat(dst, TPU_I32);
  CHECK_OK(tpu_tensor_from_host(&dst_view, ones));
  CHECK_OK(tpu_buffer_copy(dst, src));
  CHECK_OK(tpu_tensor_to_host(&dst_view, back));
  for (int i = 0; i < 4; i++) CHECK(back[i] == 0);
  double d[2];
  tpu_tensor src_f64 = flat(src, TPU_F64); /* src still takes any element type */
  CHECK_OK(tpu_tensor_to_host(&src_f64, d));
  CHECK(d[0] == 0.0 && d[1] == 0.0);
  tpu_buffer_release(dst);
  tpu_buffer_release(src);
}

/* Bytes from the host are stored as uint8, then retyped for a float32
 * tensor (torch.load). A storage that already holds float32 keeps it. */
static void test_from_host_and_retype(void) {
  float values[3] = {0.5f, -7.0f, 2.0f}, back[3];
  tpu_buffer* b = make(sizeof values);
  CHECK_OK(tpu_buffer_from_host(b, values));
  tpu_tensor u8 = flat(b, TPU_U8);
  unsigned char bytes[sizeof values];
  CHECK_OK(tpu_tensor_to_host(&u8, bytes));
  CHECK(memcmp(bytes, values, sizeof values) == 0);
  CHECK_OK(tpu_buffer_retype(b, TPU_F32));
  tpu_tensor f32 = flat(b, TPU_F32);
  CHECK_OK(tpu_tensor_to_host(&f32, back));
  CHECK(memcmp(back, values, sizeof values) == 0);
  /* A float32 storage stays float32: for a byte view of it (storage
   * copies), or a tensor of another type placed on it. */
  CHECK_OK(tpu_buffer_retype(b, TPU_U8));
  CHECK_OK(tpu_buffer_retype(b, TPU_I32));
  CHECK_OK(tpu_tensor_to_host(&f32, back));
  CHECK(memcmp(back, values, sizeof values) == 0);
  float more[3] = {9.0f, 8.0f, 7.0f};
  CHECK_OK(tpu_buffer_from_host(b, more)); /* written in the type it holds */
  CHECK_OK(tpu_tensor_to_host(&f32, back));
  CHECK(memcmp(back, more, sizeof more) == 0);
  tpu_buffer_release(b);
}

static void test_mismatch_errors(void) {
  tpu_buffer* small = make(8);
  tpu_buffer* big = make(12);
  tpu_status s = tpu_buffer_copy(big, small);
  CHECK(s && tpu_status_code_of(s) == TPU_INVALID_ARGUMENT);
  CHECK(s && strstr(tpu_status_message(s), "8-byte storage on tpu:0 into a 12-byte one"));
  tpu_status_free(s);
  tpu_buffer_release(big);
  tpu_buffer_release(small);
}

int main(void) {
  if (check_runtime_init()) {
    test_copy_between_buffers();
    test_unwritten_source();
    test_from_host_and_retype();
    test_mismatch_errors();
    CHECK_OK(tpu_device_synchronize(0));
  }
  return check_finish("test_storage_bytes");
}
