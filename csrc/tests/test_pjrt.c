/* Tests csrc/pjrt/ against the real plugin named by TORCH_TPU_PJRT_PLUGIN,
 * opened with two CPU devices. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pjrt/pjrt.h"
#include "tests/check.h"

#ifdef __linux__
#include <dirent.h>
#include <sys/resource.h>
#endif

static const char add_f32x0[] =
    "module {\n"
    "  func.func public @main(%a: tensor<0xf32>, %b: tensor<0xf32>) -> tensor<0xf32> {\n"
    "    %0 = \"stablehlo.add\"(%a, %b) : (tensor<0xf32>, tensor<0xf32>) -> tensor<0xf32>\n"
    "    \"func.return\"(%0) : (tensor<0xf32>) -> ()\n"
    "  }\n"
    "}\n";

/* Two outputs, to check output counts other than one. */
static const char add_and_mul_f32x4[] =
    "module {\n"
    "  func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>)\n"
    "      -> (tensor<4xf32>, tensor<4xf32>) {\n"
    "    %0 = \"stablehlo.add\"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n"
    "    %1 = \"stablehlo.multiply\"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n"
    "    \"func.return\"(%0, %1) : (tensor<4xf32>, tensor<4xf32>) -> ()\n"
    "  }\n"
    "}\n";

static int has_text(tpu_status status, const char* text) {
  return strstr(tpu_status_message(status), text) != NULL;
}

static void test_bad_path(void) {
  const char* path = "/nonexistent/dir/libno_such_plugin.so";
  tpu_pjrt_options options = {.plugin_path = path};
  tpu_pjrt* pjrt = (tpu_pjrt*)1;
  tpu_status status = tpu_pjrt_open(&options, &pjrt);
  CHECK(tpu_status_code_of(status) == TPU_NOT_FOUND);
  CHECK(has_text(status, path));
  CHECK(pjrt == NULL);
  tpu_status_free(status);

  tpu_pjrt_options empty = {0};
  status = tpu_pjrt_open(&empty, &pjrt);
  CHECK(tpu_status_code_of(status) == TPU_INVALID_ARGUMENT);
  tpu_status_free(status);

  /* A real library that is not a PJRT plugin. */
  tpu_pjrt_options libc = {.plugin_path = "libc.so.6"};
  status = tpu_pjrt_open(&libc, &pjrt);
  CHECK(tpu_status_code_of(status) == TPU_NOT_FOUND);
  CHECK(has_text(status, "GetPjrtApi"));
  tpu_status_free(status);
}

static void test_queries(tpu_pjrt* pjrt) {
  printf("plugin %s: PJRT C API %d.%d, platform %s (%s), xla_version '%s', %d devices of kind "
         "'%s'\n",
         tpu_pjrt_plugin_path(pjrt), tpu_pjrt_api_major(pjrt), tpu_pjrt_api_minor(pjrt),
         tpu_pjrt_platform_name(pjrt), tpu_pjrt_platform_version(pjrt), tpu_pjrt_xla_version(pjrt),
         tpu_pjrt_device_count(pjrt), tpu_pjrt_device_kind(pjrt, 0));
  CHECK(tpu_pjrt_api_major(pjrt) == 0);
  CHECK(tpu_pjrt_api_minor(pjrt) > 0);
  CHECK(strcmp(tpu_pjrt_platform_name(pjrt), "cpu") == 0);
  CHECK(tpu_pjrt_platform_version(pjrt) != NULL);
  CHECK(tpu_pjrt_xla_version(pjrt) != NULL);
  CHECK(tpu_pjrt_device_count(pjrt) == 2);
  CHECK(tpu_pjrt_device_kind(pjrt, 0)[0] != '\0');
  CHECK(strcmp(tpu_pjrt_device_kind(pjrt, -1), "") == 0);
  CHECK(strcmp(tpu_pjrt_device_kind(pjrt, 2), "") == 0);
}

/* Host -> device -> host, byte for byte. */
static void round_trip(tpu_pjrt* pjrt, int device, tpu_dtype dtype, const int64_t* dims, int rank,
                       const void* data) {
  size_t nbytes = tpu_dtype_size(dtype);
  for (int i = 0; i < rank; i++) nbytes *= (size_t)dims[i];
  struct PJRT_Buffer* buffer = NULL;
  CHECK_OK(tpu_pjrt_buffer_from_host(pjrt, device, dtype, dims, rank, data, &buffer));
  CHECK(buffer != NULL);
  if (!buffer) return;
  CHECK_OK(tpu_pjrt_buffer_await(pjrt, buffer));
  unsigned char* back = malloc(nbytes + 1);
  memset(back, 0xAB, nbytes + 1);
  CHECK_OK(tpu_pjrt_buffer_to_host(pjrt, buffer, back, nbytes));
  CHECK(nbytes == 0 || memcmp(back, data, nbytes) == 0);
  CHECK(back[nbytes] == 0xAB); /* nothing written past the end */
  if (nbytes && memcmp(back, data, nbytes) != 0)
    fprintf(stderr, "  round trip of %s differs\n", tpu_dtype_name(dtype));
  free(back);
  tpu_pjrt_buffer_destroy(pjrt, buffer);
}

static void test_round_trips(tpu_pjrt* pjrt) {
  const int64_t dims23[] = {2, 3};
  const int64_t dims6[] = {6};
  const unsigned char bools[6] = {1, 0, 0, 1, 1, 0};
  const unsigned char u8[6] = {0, 1, 127, 128, 254, 255};
  const signed char i8[6] = {-128, -1, 0, 1, 2, 127};
  const short i16[6] = {-32768, -2, 0, 3, 1000, 32767};
  const int i32[6] = {-2147483647 - 1, -7, 0, 5, 65536, 2147483647};
  const long long i64[6] = {-9223372036854775807LL - 1, -3, 0, 1, 1LL << 40, 9223372036854775807LL};
  /* f16/bf16 as raw bits: 1.0, -2.0, +inf, a NaN payload, a subnormal, 0 */
  const unsigned short f16[6] = {0x3C00, 0xC000, 0x7C00, 0x7E01, 0x0001, 0x0000};
  const unsigned short bf16[6] = {0x3F80, 0xC000, 0x7F80, 0x7FC1, 0x0001, 0x8000};
  const float f32[6] = {1.5f, -2.25f, 0.0f, 3.0e38f, -1e-38f, 42.0f};
  const double f64[6] = {1.5, -2.25, 0.0, 1e308, -4.9e-324, 42.0};

  round_trip(pjrt, 0, TPU_BOOL, dims23, 2, bools);
  round_trip(pjrt, 0, TPU_U8, dims23, 2, u8);
  round_trip(pjrt, 0, TPU_I8, dims6, 1, i8);
  round_trip(pjrt, 0, TPU_I16, dims23, 2, i16);
  round_trip(pjrt, 0, TPU_I32, dims23, 2, i32);
  round_trip(pjrt, 0, TPU_I64, dims23, 2, i64);
  round_trip(pjrt, 0, TPU_F16, dims23, 2, f16);
  round_trip(pjrt, 0, TPU_BF16, dims23, 2, bf16);
  round_trip(pjrt, 0, TPU_F32, dims23, 2, f32);
  round_trip(pjrt, 1, TPU_F64, dims23, 2, f64);
  round_trip(pjrt, 1, TPU_F32, NULL, 0, f32); /* a scalar */

  /* Empty arrays, with and without a data pointer. */
  const int64_t dims0[] = {0};
  const int64_t dims20[] = {2, 0};
  round_trip(pjrt, 0, TPU_F32, dims0, 1, NULL);
  round_trip(pjrt, 1, TPU_I64, dims20, 2, i64);
  round_trip(pjrt, 0, TPU_BOOL, dims0, 1, bools);
}

static void test_buffer_errors(tpu_pjrt* pjrt) {
  const int64_t dims[] = {4};
  const int64_t bad_dims[] = {-1};
  const float data[4] = {1, 2, 3, 4};
  struct PJRT_Buffer* buffer = NULL;
  tpu_status status = tpu_pjrt_buffer_from_host(pjrt, 2, TPU_F32, dims, 1, data, &buffer);
  CHECK(tpu_status_code_of(status) == TPU_INVALID_ARGUMENT && has_text(status, "device 2"));
  tpu_status_free(status);
  status = tpu_pjrt_buffer_from_host(pjrt, 0, TPU_F32, bad_dims, 1, data, &buffer);
  CHECK(tpu_status_code_of(status) == TPU_INVALID_ARGUMENT && has_text(status, "-1"));
  tpu_status_free(status);
  status = tpu_pjrt_buffer_from_host(pjrt, 0, TPU_F32, dims, 1, NULL, &buffer);
  CHECK(tpu_status_code_of(status) == TPU_INVALID_ARGUMENT);
  tpu_status_free(status);
  status = tpu_pjrt_buffer_from_host(pjrt, 0, TPU_DTYPE_COUNT, dims, 1, data, &buffer);
  CHECK(tpu_status_code_of(status) == TPU_INVALID_ARGUMENT);
  tpu_status_free(status);
  CHECK(buffer == NULL);

  CHECK_OK(tpu_pjrt_buffer_from_host(pjrt, 0, TPU_F32, dims, 1, data, &buffer));
  float back[8];
  status = tpu_pjrt_buffer_to_host(pjrt, buffer, back, 8);
  CHECK(tpu_status_code_of(status) == TPU_INVALID_ARGUMENT);
  CHECK(has_text(status, "needs 16 bytes, given 8"));
  tpu_status_free(status);
  status = tpu_pjrt_buffer_to_host(pjrt, buffer, back, 32);
  CHECK(tpu_status_code_of(status) == TPU_INVALID_ARGUMENT);
  tpu_status_free(status);
  tpu_pjrt_buffer_destroy(pjrt, buffer);
  tpu_pjrt_buffer_destroy(pjrt, NULL);
}

/* Runs check_add_f32x4 on `device`, checks the sum and that the inputs survive. */
static void run_add(tpu_pjrt* pjrt, struct PJRT_LoadedExecutable* exe, int device) {
  const int64_t dims[] = {4};
  const float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40};
  struct PJRT_Buffer* args[2] = {NULL, NULL};
  CHECK_OK(tpu_pjrt_buffer_from_host(pjrt, device, TPU_F32, dims, 1, a, &args[0]));
  CHECK_OK(tpu_pjrt_buffer_from_host(pjrt, device, TPU_F32, dims, 1, b, &args[1]));
  struct PJRT_Buffer* out = NULL;
  CHECK_OK(tpu_pjrt_execute(pjrt, exe, device, args, 2, NULL, &out, 1));
  float sum[4] = {0};
  if (out) {
    CHECK_OK(tpu_pjrt_buffer_to_host(pjrt, out, sum, sizeof sum));
    CHECK(sum[0] == 11 && sum[1] == 22 && sum[2] == 33 && sum[3] == 44);
  }
  float again[4] = {0};
  CHECK_OK(tpu_pjrt_buffer_to_host(pjrt, args[0], again, sizeof again)); /* not donated */
  CHECK(memcmp(again, a, sizeof a) == 0);
  tpu_pjrt_buffer_destroy(pjrt, out);
  tpu_pjrt_buffer_destroy(pjrt, args[0]);
  tpu_pjrt_buffer_destroy(pjrt, args[1]);
}

/* tpu_pjrt_buffers_shape_free on the CPU plugin: a [2, 2] result read by
 * a program whose parameter is [4] (finish_program in exec/lowering.c
 * returns whole-storage results in their computed shape there). */
static void test_shape_free_buffers(tpu_pjrt* pjrt) {
  CHECK(tpu_pjrt_buffers_shape_free(pjrt) == (strcmp(tpu_pjrt_platform_name(pjrt), "cpu") == 0));
  if (!tpu_pjrt_buffers_shape_free(pjrt)) return;
  static const char square_2x2[] =
      "module {\n"
      "  func.func public @main(%a: tensor<4xf32>) -> tensor<2x2xf32> {\n"
      "    %0 = \"stablehlo.reshape\"(%a) : (tensor<4xf32>) -> tensor<2x2xf32>\n"
      "    %1 = \"stablehlo.multiply\"(%0, %0) : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>\n"
      "    \"func.return\"(%1) : (tensor<2x2xf32>) -> ()\n"
      "  }\n"
      "}\n";
  struct PJRT_LoadedExecutable *square = NULL, *add = NULL;
  CHECK_OK(tpu_pjrt_compile(pjrt, square_2x2, strlen(square_2x2), &square));
  CHECK_OK(tpu_pjrt_compile(pjrt, check_add_f32x4, strlen(check_add_f32x4), &add));
  const int64_t dims[] = {4};
  const float a[4] = {1, 2, 3, 4};
  struct PJRT_Buffer *flat = NULL, *shaped = NULL, *sum = NULL;
  CHECK_OK(tpu_pjrt_buffer_from_host(pjrt, 0, TPU_F32, dims, 1, a, &flat));
  if (square && add && flat) {
    CHECK_OK(tpu_pjrt_execute(pjrt, square, 0, &flat, 1, NULL, &shaped, 1));
    struct PJRT_Buffer* args[2] = {shaped, shaped};
    if (shaped) CHECK_OK(tpu_pjrt_execute(pjrt, add, 0, args, 2, NULL, &sum, 1));
    float out[4] = {0};
    if (sum) CHECK_OK(tpu_pjrt_buffer_to_host(pjrt, sum, out, sizeof out));
    CHECK(out[0] == 2 && out[1] == 8 && out[2] == 18 && out[3] == 32);
  }
  tpu_pjrt_buffer_destroy(pjrt, sum);
  tpu_pjrt_buffer_destroy(pjrt, shaped);
  tpu_pjrt_buffer_destroy(pjrt, flat);
  tpu_pjrt_executable_destroy(pjrt, square);
  tpu_pjrt_executable_destroy(pjrt, add);
}

static void test_execute(tpu_pjrt* pjrt) {
  struct PJRT_LoadedExecutable* exe = NULL;
  CHECK_OK(tpu_pjrt_compile(pjrt, check_add_f32x4, strlen(check_add_f32x4), &exe));
  if (!exe) return;
  CHECK(tpu_pjrt_executable_output_count(pjrt, exe) == 1);
  run_add(pjrt, exe, 0);
  run_add(pjrt, exe, 1); /* the same portable executable on the second device */
  run_add(pjrt, exe, 0);

  /* A device outside the client: refused, and the outputs stay NULL. */
  const int64_t dims[] = {4};
  const float a[4] = {1, 2, 3, 4};
  struct PJRT_Buffer* args[2] = {NULL, NULL};
  CHECK_OK(tpu_pjrt_buffer_from_host(pjrt, 0, TPU_F32, dims, 1, a, &args[0]));
  CHECK_OK(tpu_pjrt_buffer_from_host(pjrt, 0, TPU_F32, dims, 1, a, &args[1]));
  struct PJRT_Buffer* outs[2] = {NULL, NULL};
  tpu_status status = tpu_pjrt_execute(pjrt, exe, 5, args, 2, NULL, outs, 1);
  CHECK(tpu_status_code_of(status) == TPU_INVALID_ARGUMENT && has_text(status, "device 5"));
  tpu_status_free(status);
  CHECK(outs[0] == NULL && outs[1] == NULL);

  /* Wrong argument count: the plugin's error, and the process goes on. */
  status = tpu_pjrt_execute(pjrt, exe, 0, args, 1, NULL, outs, 1);
  CHECK(tpu_status_code_of(status) == TPU_PLUGIN_ERROR);
  CHECK(has_text(status, "PJRT_LoadedExecutable_Execute"));
  if (status) printf("wrong argument count -> %s\n", tpu_status_message(status));
  tpu_status_free(status);
  tpu_pjrt_buffer_destroy(pjrt, args[0]);
  tpu_pjrt_buffer_destroy(pjrt, args[1]);
  tpu_pjrt_executable_destroy(pjrt, exe);
  tpu_pjrt_executable_destroy(pjrt, NULL);
}

/* The first parameter may become the result (tf.aliasing_output). */
static const char add_in_place_f32x4[] =
    "module {\n"
    "  func.func public @main(%a: tensor<4xf32> {tf.aliasing_output = 0 : i32}, %b: tensor<4xf32>)\n"
    "      -> tensor<4xf32> {\n"
    "    %0 = \"stablehlo.add\"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n"
    "    \"func.return\"(%0) : (tensor<4xf32>) -> ()\n"
    "  }\n"
    "}\n";

/* Runs add_in_place once, donating `a` or not, and checks the sum. */
static struct PJRT_Buffer* add_in_place(tpu_pjrt* pjrt, struct PJRT_LoadedExecutable* exe,
                                        struct PJRT_Buffer* a, struct PJRT_Buffer* b, bool donate) {
  struct PJRT_Buffer* args[2] = {a, b};
  const bool donated[2] = {donate, false};
  struct PJRT_Buffer* out = NULL;
  CHECK_OK(tpu_pjrt_execute(pjrt, exe, 0, args, 2, donated, &out, 1));
  float sum[4] = {0};
  if (out) CHECK_OK(tpu_pjrt_buffer_to_host(pjrt, out, sum, sizeof sum));
  CHECK(sum[0] == 11 && sum[1] == 22 && sum[2] == 33 && sum[3] == 44);
  return out;
}

/* An aliased input that is not donated keeps its value (the plugin copies);
 * a donated one is gone, and reading it is an error, not a crash. */
static void test_donation(tpu_pjrt* pjrt) {
  struct PJRT_LoadedExecutable* exe = NULL;
  CHECK_OK(tpu_pjrt_compile(pjrt, add_in_place_f32x4, strlen(add_in_place_f32x4), &exe));
  if (!exe) return;
  const int64_t dims[] = {4};
  const float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40};
  struct PJRT_Buffer *x = NULL, *y = NULL;
  CHECK_OK(tpu_pjrt_buffer_from_host(pjrt, 0, TPU_F32, dims, 1, a, &x));
  CHECK_OK(tpu_pjrt_buffer_from_host(pjrt, 0, TPU_F32, dims, 1, b, &y));
  if (x && y) {
    tpu_pjrt_buffer_destroy(pjrt, add_in_place(pjrt, exe, x, y, false));
    float kept[4] = {0};
    CHECK_OK(tpu_pjrt_buffer_to_host(pjrt, x, kept, sizeof kept));
    CHECK(memcmp(kept, a, sizeof a) == 0);
    tpu_pjrt_buffer_destroy(pjrt, add_in_place(pjrt, exe, x, y, true));
    float gone[4];
    tpu_status status = tpu_pjrt_buffer_to_host(pjrt, x, gone, sizeof gone);
    CHECK(status != NULL);
    tpu_status_free(status);
  }
  tpu_pjrt_buffer_destroy(pjrt, x);
  tpu_pjrt_buffer_destroy(pjrt, y);
  tpu_pjrt_executable_destroy(pjrt, exe);
}

/* A donating write waits for the work already enqueued that reads the
 * buffer: a 1,024 x 1,024 product of ones, then ones + 1 written in place. */
static void test_donation_waits_for_readers(tpu_pjrt* pjrt) {
  static const char square[] =
      "module {\n"
      "  func.func public @main(%a: tensor<1048576xf32>) -> tensor<1024x1024xf32> {\n"
      "    %0 = \"stablehlo.reshape\"(%a) : (tensor<1048576xf32>) -> tensor<1024x1024xf32>\n"
      "    %1 = \"stablehlo.dot_general\"(%0, %0) {dot_dimension_numbers = #stablehlo.dot<\n"
      "      lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>}\n"
      "      : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32>\n"
      "    \"func.return\"(%1) : (tensor<1024x1024xf32>) -> ()\n"
      "  }\n"
      "}\n";
  static const char increment[] =
      "module {\n"
      "  func.func public @main(%a: tensor<1048576xf32> {tf.aliasing_output = 0 : i32})\n"
      "      -> tensor<1048576xf32> {\n"
      "    %0 = \"stablehlo.constant\"() {value = dense<1.0> : tensor<1048576xf32>} : () -> tensor<1048576xf32>\n"
      "    %1 = \"stablehlo.add\"(%a, %0) : (tensor<1048576xf32>, tensor<1048576xf32>) -> tensor<1048576xf32>\n"
      "    \"func.return\"(%1) : (tensor<1048576xf32>) -> ()\n"
      "  }\n"
      "}\n";
  enum { N = 1048576 };
  struct PJRT_LoadedExecutable *reader = NULL, *writer = NULL;
  CHECK_OK(tpu_pjrt_compile(pjrt, square, strlen(square), &reader));
  CHECK_OK(tpu_pjrt_compile(pjrt, increment, strlen(increment), &writer));
  float* host = malloc(N * sizeof *host);
  struct PJRT_Buffer *x = NULL, *product = NULL, *incremented = NULL;
  if (host && reader && writer) {
    for (int i = 0; i < N; i++) host[i] = 1;
    const int64_t n = N;
    CHECK_OK(tpu_pjrt_buffer_from_host(pjrt, 0, TPU_F32, &n, 1, host, &x));
    const bool donated[1] = {true};
    if (x) CHECK_OK(tpu_pjrt_execute(pjrt, reader, 0, &x, 1, NULL, &product, 1));
    if (product) CHECK_OK(tpu_pjrt_execute(pjrt, writer, 0, &x, 1, donated, &incremented, 1));
    if (incremented) {
      CHECK_OK(tpu_pjrt_buffer_to_host(pjrt, product, host, N * sizeof *host));
      int wrong = 0;
      for (int i = 0; i < N; i++) wrong += host[i] != 1024;
      CHECK(wrong == 0);
      CHECK_OK(tpu_pjrt_buffer_to_host(pjrt, incremented, host, N * sizeof *host));
      CHECK(host[0] == 2 && host[N - 1] == 2);
    }
  }
  free(host);
  tpu_pjrt_buffer_destroy(pjrt, incremented);
  tpu_pjrt_buffer_destroy(pjrt, product);
  tpu_pjrt_buffer_destroy(pjrt, x);
  tpu_pjrt_executable_destroy(pjrt, reader);
  tpu_pjrt_executable_destroy(pjrt, writer);
}

static void test_two_outputs(tpu_pjrt* pjrt) {
  struct PJRT_LoadedExecutable* exe = NULL;
  CHECK_OK(tpu_pjrt_compile(pjrt, add_and_mul_f32x4, strlen(add_and_mul_f32x4), &exe));
  if (!exe) return;
  CHECK(tpu_pjrt_executable_output_count(pjrt, exe) == 2);
  const int64_t dims[] = {4};
  const float a[4] = {1, 2, 3, 4}, b[4] = {2, 2, 2, 2};
  struct PJRT_Buffer* args[2] = {NULL, NULL};
  CHECK_OK(tpu_pjrt_buffer_from_host(pjrt, 1, TPU_F32, dims, 1, a, &args[0]));
  CHECK_OK(tpu_pjrt_buffer_from_host(pjrt, 1, TPU_F32, dims, 1, b, &args[1]));
  struct PJRT_Buffer* outs[2] = {NULL, NULL};
  CHECK_OK(tpu_pjrt_execute(pjrt, exe, 1, args, 2, NULL, outs, 2));
  float sum[4] = {0}, product[4] = {0};
  if (outs[0] && outs[1]) {
    CHECK_OK(tpu_pjrt_buffer_to_host(pjrt, outs[0], sum, sizeof sum));
    CHECK_OK(tpu_pjrt_buffer_to_host(pjrt, outs[1], product, sizeof product));
  }
  CHECK(sum[0] == 3 && sum[3] == 6 && product[0] == 2 && product[3] == 8);
  for (int i = 0; i < 2; i++) {
    tpu_pjrt_buffer_destroy(pjrt, outs[i]);
    tpu_pjrt_buffer_destroy(pjrt, args[i]);
  }
  tpu_pjrt_executable_destroy(pjrt, exe);
}

static void test_empty_program(tpu_pjrt* pjrt) {
  struct PJRT_LoadedExecutable* exe = NULL;
  CHECK_OK(tpu_pjrt_compile(pjrt, add_f32x0, strlen(add_f32x0), &exe));
  if (!exe) return;
  const int64_t dims[] = {0};
  struct PJRT_Buffer* args[2] = {NULL, NULL};
  CHECK_OK(tpu_pjrt_buffer_from_host(pjrt, 1, TPU_F32, dims, 1, NULL, &args[0]));
  CHECK_OK(tpu_pjrt_buffer_from_host(pjrt, 1, TPU_F32, dims, 1, NULL, &args[1]));
  struct PJRT_Buffer* out = NULL;
  CHECK_OK(tpu_pjrt_execute(pjrt, exe, 1, args, 2, NULL, &out, 1));
  if (out) CHECK_OK(tpu_pjrt_buffer_to_host(pjrt, out, NULL, 0));
  tpu_pjrt_buffer_destroy(pjrt, out);
  tpu_pjrt_buffer_destroy(pjrt, args[0]);
  tpu_pjrt_buffer_destroy(pjrt, args[1]);
  tpu_pjrt_executable_destroy(pjrt, exe);
}

static void test_serialize(tpu_pjrt* pjrt) {
  struct PJRT_LoadedExecutable* exe = NULL;
  CHECK_OK(tpu_pjrt_compile(pjrt, check_add_f32x4, strlen(check_add_f32x4), &exe));
  if (!exe) return;
  char* bytes = NULL;
  size_t size = 0;
  CHECK_OK(tpu_pjrt_executable_serialize(pjrt, exe, &bytes, &size));
  CHECK(bytes != NULL && size > 0);
  printf("serialized add: %zu bytes\n", size);
  tpu_pjrt_executable_destroy(pjrt, exe);

  struct PJRT_LoadedExecutable* loaded = NULL;
  CHECK_OK(tpu_pjrt_executable_deserialize(pjrt, bytes, size, &loaded));
  if (loaded) {
    CHECK(tpu_pjrt_executable_output_count(pjrt, loaded) == 1);
    run_add(pjrt, loaded, 1);
    run_add(pjrt, loaded, 0);
    tpu_pjrt_executable_destroy(pjrt, loaded);
  }

  /* Garbage bytes: an error, not a crash. */
  struct PJRT_LoadedExecutable* bad = NULL;
  tpu_status status = tpu_pjrt_executable_deserialize(pjrt, "not an executable", 17, &bad);
  CHECK(tpu_status_code_of(status) == TPU_PLUGIN_ERROR && bad == NULL);
  tpu_status_free(status);
  status = tpu_pjrt_executable_deserialize(pjrt, bytes, 0, &bad);
  CHECK(tpu_status_code_of(status) == TPU_INVALID_ARGUMENT);
  tpu_status_free(status);
  free(bytes);
}

static void test_compile_errors(tpu_pjrt* pjrt) {
  const char* bad = "module { func.func public @main( -> }";
  struct PJRT_LoadedExecutable* exe = NULL;
  tpu_status status = tpu_pjrt_compile(pjrt, bad, strlen(bad), &exe);
  CHECK(tpu_status_code_of(status) == TPU_PLUGIN_ERROR);
  CHECK(has_text(status, "PJRT_Client_Compile"));
  CHECK(exe == NULL);
  printf("invalid MLIR -> %s\n", tpu_status_message(status));
  tpu_status_free(status);

  /* A type error the parser accepts but the verifier does not. */
  const char* mismatched =
      "module { func.func public @main(%a: tensor<4xf32>, %b: tensor<3xf32>) -> tensor<4xf32> {\n"
      "  %0 = \"stablehlo.add\"(%a, %b) : (tensor<4xf32>, tensor<3xf32>) -> tensor<4xf32>\n"
      "  \"func.return\"(%0) : (tensor<4xf32>) -> () } }";
  status = tpu_pjrt_compile(pjrt, mismatched, strlen(mismatched), &exe);
  CHECK(tpu_status_code_of(status) == TPU_PLUGIN_ERROR);
  tpu_status_free(status);

  status = tpu_pjrt_compile(pjrt, "", 0, &exe);
  CHECK(tpu_status_code_of(status) == TPU_INVALID_ARGUMENT);
  tpu_status_free(status);

  /* The client still works after the failures. */
  CHECK_OK(tpu_pjrt_compile(pjrt, check_add_f32x4, strlen(check_add_f32x4), &exe));
  if (exe) run_add(pjrt, exe, 1);
  tpu_pjrt_executable_destroy(pjrt, exe);
}

/* On the CPU platform the threads the client started run `delta` nicer than
 * this one; nothing else in this process is. */
static void test_worker_nice(tpu_pjrt* pjrt, int delta) {
  if (strcmp(tpu_pjrt_platform_name(pjrt), "cpu") != 0) return;
  int lowered = tpu_pjrt_lowered_threads(pjrt);
  printf("worker_nice %d: %d plugin threads lowered\n", delta, lowered);
  CHECK(lowered > 0);
#ifdef __linux__
  int base = getpriority(PRIO_PROCESS, 0);
  int niced = 0, other = 0;
  DIR* dir = opendir("/proc/self/task");
  CHECK(dir != NULL);
  for (struct dirent* entry; dir && (entry = readdir(dir));) {
    int id = atoi(entry->d_name);
    if (id <= 0) continue;
    int nice = getpriority(PRIO_PROCESS, (id_t)id);
    if (nice == base + delta)
      niced++;
    else if (nice != base)
      other++;
  }
  if (dir) closedir(dir);
  CHECK(niced == lowered);
  CHECK(other == 0);
#endif
}

int main(void) {
  test_bad_path();
  const char* path = check_plugin_path();
  if (!path) return check_finish("test_pjrt");
  tpu_pjrt_options options = {.plugin_path = path, .cpu_device_count = 2};
  tpu_pjrt* pjrt = NULL;
  CHECK_OK(tpu_pjrt_open(&options, &pjrt));
  if (!pjrt) return check_finish("test_pjrt");
  test_queries(pjrt);
  CHECK(!tpu_pjrt_keeps_freed_memory(pjrt)); /* not asked for */
  test_round_trips(pjrt);
  test_buffer_errors(pjrt);
  test_execute(pjrt);
  test_shape_free_buffers(pjrt);
  test_two_outputs(pjrt);
  test_donation(pjrt);
  test_donation_waits_for_readers(pjrt);
  test_empty_program(pjrt);
  test_serialize(pjrt);
  test_compile_errors(pjrt);
  tpu_pjrt_close(pjrt);
  tpu_pjrt_close(NULL);

  /* A second client from the same (already initialized) plugin, its
   * threads given a nice value, keeping freed host memory (a policy that
   * AddressSanitizer's allocator, which this test runs under, ignores). */
  tpu_pjrt_options negative = {.plugin_path = path, .worker_nice = -1};
  tpu_status status = tpu_pjrt_open(&negative, &pjrt);
  CHECK(tpu_status_code_of(status) == TPU_INVALID_ARGUMENT && has_text(status, "worker_nice is -1"));
  tpu_status_free(status);
  tpu_pjrt_options one = {.plugin_path = path, .worker_nice = 4, .keep_freed_memory = true};
  CHECK_OK(tpu_pjrt_open(&one, &pjrt));
  if (pjrt) {
    test_worker_nice(pjrt, 4);
    CHECK(tpu_pjrt_device_count(pjrt) >= 1);
    struct PJRT_LoadedExecutable* exe = NULL;
    CHECK_OK(tpu_pjrt_compile(pjrt, check_add_f32x4, strlen(check_add_f32x4), &exe));
    if (exe) run_add(pjrt, exe, 0);
    tpu_pjrt_executable_destroy(pjrt, exe);
    tpu_pjrt_close(pjrt);
  }
  return check_finish("test_pjrt");
}
