/* The StableHLO builder: printed text of small modules, running them
 * through the plugin, and sticky errors. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hlo/builder.h"
#include "pjrt/pjrt.h"
#include "tests/check.h"

static tpu_pjrt* pjrt;

static char* finish(hlo_builder* b, const hlo_value* results, int n) {
  char* text = NULL;
  size_t size = 0;
  CHECK_OK(hlo_builder_finish(b, results, n, NULL, &text, &size));
  CHECK(text && strlen(text) == size);
  return text;
}

/* Compiles `text`, runs it on float inputs of `n` elements each and reads
 * output 0 (`out_n` floats). */
static void run_f32(const char* text, const float* const* inputs, int input_count, int64_t n,
                    float* out, size_t out_bytes) {
  struct PJRT_LoadedExecutable* exe = NULL;
  CHECK_OK(tpu_pjrt_compile(pjrt, text, strlen(text), &exe));
  if (!exe) return;
  struct PJRT_Buffer* args[4] = {0};
  for (int i = 0; i < input_count; i++)
    CHECK_OK(tpu_pjrt_buffer_from_host(pjrt, 0, TPU_F32, &n, 1, inputs[i], &args[i]));
  size_t outputs = tpu_pjrt_executable_output_count(pjrt, exe);
  struct PJRT_Buffer* results[4] = {0};
  CHECK_OK(tpu_pjrt_execute(pjrt, exe, 0, args, (size_t)input_count, NULL, results, outputs));
  CHECK_OK(tpu_pjrt_buffer_to_host(pjrt, results[0], out, out_bytes));
  for (size_t i = 0; i < outputs; i++) tpu_pjrt_buffer_destroy(pjrt, results[i]);
  for (int i = 0; i < input_count; i++) tpu_pjrt_buffer_destroy(pjrt, args[i]);
  tpu_pjrt_executable_destroy(pjrt, exe);
}

static void test_add_text_and_run(void) {
  hlo_builder* b = NULL;
  CHECK_OK(hlo_builder_create(&b));
  int64_t four = 4;
  hlo_type t = hlo_type_make(TPU_F32, 1, &four);
  hlo_value x = hlo_parameter(b, t), y = hlo_parameter(b, t);
  hlo_value two = hlo_constant_like(b, x, 2.0);
  hlo_value r = hlo_binary(b, "add", hlo_binary(b, "multiply", x, two), y);
  char* text = finish(b, &r, 1);
  CHECK(strstr(text, "func.func public @main(%v0: tensor<4xf32>, %v1: tensor<4xf32>) -> (tensor<4xf32>)"));
  CHECK(strstr(text, "\"stablehlo.constant\"() {value = dense<0x40000000> : tensor<f32>}"));
  CHECK(strstr(text, "\"stablehlo.broadcast_in_dim\"(%v2) {broadcast_dimensions = array<i64>}"));
  CHECK(strstr(text, "\"stablehlo.add\"(%v4, %v1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>"));
  float a[4] = {1, 2, 3, 4}, c[4] = {10, 20, 30, 40}, out[4] = {0};
  const float* inputs[2] = {a, c};
  run_f32(text, inputs, 2, 4, out, sizeof out);
  for (int i = 0; i < 4; i++) CHECK(out[i] == 2 * a[i] + c[i]);
  free(text);
  hlo_builder_free(b);
}

static void test_reduce_and_argmax(void) {
  hlo_builder* b = NULL;
  CHECK_OK(hlo_builder_create(&b));
  int64_t dims[2] = {2, 3}, six = 6;
  hlo_value flat = hlo_parameter(b, hlo_type_make(TPU_F32, 1, &six));
  hlo_value x = hlo_reshape(b, flat, 2, dims);
  int64_t axis = 1;
  hlo_value sum = hlo_reduce(b, x, hlo_constant(b, TPU_F32, 0), "add", &axis, 1);
  hlo_value values, indices;
  hlo_arg_reduce(b, x, 1, true, &values, &indices);
  hlo_value results[3] = {sum, values, hlo_convert(b, indices, TPU_F32)};
  char* text = finish(b, results, 3);
  CHECK(strstr(text, "\"stablehlo.reduce\"(%v1, %v2) ({"));
  CHECK(strstr(text, "dimensions = array<i64: 1>"));
  CHECK(strstr(text, "= \"stablehlo.reduce\"(%v1, "));
  /* Check the values by running each output: sum first. */
  float in[6] = {1, 5, 5, -1, -7, 2}, out[2];
  const float* inputs[1] = {in};
  run_f32(text, inputs, 1, 6, out, sizeof out);
  CHECK(out[0] == 11 && out[1] == -6);
  free(text);
  hlo_builder_free(b);
}

/* Each integer type's extremes printed in range (a literal out of range
 * fails to parse), and a module returning them compiles. */
static void test_constant_extremes(void) {
  hlo_builder* b = NULL;
  CHECK_OK(hlo_builder_create(&b));
  const tpu_dtype types[] = {TPU_U8, TPU_I8, TPU_I16, TPU_I32, TPU_I64, TPU_U32, TPU_U64, TPU_BOOL, TPU_F32};
  hlo_value results[2 * sizeof types / sizeof *types];
  int n = 0;
  for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
    results[n++] = hlo_constant_extreme(b, types[i], false);
    results[n++] = hlo_constant_extreme(b, types[i], true);
  }
  char* text = finish(b, results, n);
  const char* literals[] = {"dense<0> : tensor<ui8>", "dense<255> : tensor<ui8>", "dense<-128> : tensor<i8>",
                            "dense<127> : tensor<i8>", "dense<-32768> : tensor<i16>", "dense<32767> : tensor<i16>",
                            "dense<-2147483648> : tensor<i32>", "dense<2147483647> : tensor<i32>",
                            "dense<-9223372036854775808> : tensor<i64>", "dense<9223372036854775807> : tensor<i64>",
                            "dense<4294967295> : tensor<ui32>", "dense<18446744073709551615> : tensor<ui64>",
                            "dense<0xFF800000> : tensor<f32>", "dense<0x7F800000> : tensor<f32>"};
  for (size_t i = 0; i < sizeof literals / sizeof *literals; i++) {
    if (!strstr(text, literals[i])) fprintf(stderr, "missing %s\n", literals[i]);
    CHECK(strstr(text, literals[i]));
  }
  struct PJRT_LoadedExecutable* exe = NULL;
  CHECK_OK(tpu_pjrt_compile(pjrt, text, strlen(text), &exe));
  tpu_pjrt_executable_destroy(pjrt, exe);
  free(text);
  hlo_builder_free(b);
}

/* Results written in place: a parameter of the result's type is marked
 * tf.aliasing_output; one of another shape (the same element count) is
 * declared in the result's shape and reshaped at the top of the body. On a
 * plugin whose buffers are shape-free the program runs with both (flat)
 * inputs donated. Mismatched aliases are errors. */
static void test_aliased_parameters(void) {
  hlo_builder* b = NULL;
  CHECK_OK(hlo_builder_create(&b));
  int64_t four = 4, two_by_two[2] = {2, 2};
  hlo_type flat = hlo_type_make(TPU_F32, 1, &four);
  hlo_value x = hlo_parameter(b, flat), y = hlo_parameter(b, flat);
  CHECK(hlo_parameter_count(b) == 2 && hlo_parameter_at(b, 1) == y && hlo_parameter_at(b, 2) == HLO_INVALID);
  hlo_value sum = hlo_binary(b, "add", x, y);
  hlo_value square = hlo_reshape(b, hlo_binary(b, "multiply", y, y), 2, two_by_two);
  hlo_value results[2] = {square, sum};
  const int result_params[2] = {1, 0};
  char* text = NULL;
  CHECK_OK(hlo_builder_finish(b, results, 2, result_params, &text, NULL));
  CHECK(strstr(text, "@main(%v0: tensor<4xf32> {tf.aliasing_output = 1 : i32}, "
                     "%a1: tensor<2x2xf32> {tf.aliasing_output = 0 : i32})"));
  CHECK(strstr(text, "    %v1 = \"stablehlo.reshape\"(%a1) : (tensor<2x2xf32>) -> tensor<4xf32>\n"));
  struct PJRT_LoadedExecutable* exe = NULL;
  if (text && tpu_pjrt_buffers_shape_free(pjrt)) CHECK_OK(tpu_pjrt_compile(pjrt, text, strlen(text), &exe));
  const float a[4] = {1, 2, 3, 4}, c[4] = {10, 20, 30, 40};
  struct PJRT_Buffer* args[2] = {NULL, NULL};
  CHECK_OK(tpu_pjrt_buffer_from_host(pjrt, 0, TPU_F32, &four, 1, a, &args[0]));
  CHECK_OK(tpu_pjrt_buffer_from_host(pjrt, 0, TPU_F32, &four, 1, c, &args[1]));
  const bool donated[2] = {true, true};
  struct PJRT_Buffer* outs[2] = {NULL, NULL};
  if (exe && args[0] && args[1]) CHECK_OK(tpu_pjrt_execute(pjrt, exe, 0, args, 2, donated, outs, 2));
  float squares[4] = {0}, sums[4] = {0};
  if (outs[0] && outs[1]) {
    CHECK_OK(tpu_pjrt_buffer_to_host(pjrt, outs[0], squares, sizeof squares));
    CHECK_OK(tpu_pjrt_buffer_to_host(pjrt, outs[1], sums, sizeof sums));
  }
  for (int i = 0; exe && i < 4; i++) CHECK(squares[i] == c[i] * c[i] && sums[i] == a[i] + c[i]);
  for (int i = 0; i < 2; i++) {
    tpu_pjrt_buffer_destroy(pjrt, outs[i]);
    tpu_pjrt_buffer_destroy(pjrt, args[i]);
  }
  tpu_pjrt_executable_destroy(pjrt, exe);
  free(text);

  /* Two results on one parameter, and a result of another element count. */
  const int twice[2] = {0, 0};
  tpu_status s = hlo_builder_finish(b, results, 2, twice, &text, NULL);
  CHECK(tpu_status_code_of(s) == TPU_INTERNAL && strstr(tpu_status_message(s), "taken"));
  tpu_status_free(s);
  hlo_value total = hlo_reduce(b, x, hlo_constant(b, TPU_F32, 0), "add", (int64_t[]){0}, 1);
  const int smaller[1] = {0};
  s = hlo_builder_finish(b, &total, 1, smaller, &text, NULL);
  CHECK(tpu_status_code_of(s) == TPU_INTERNAL && strstr(tpu_status_message(s), "sizes differ"));
  tpu_status_free(s);
  hlo_builder_free(b);
}

static void test_sticky_error(void) {
  hlo_builder* b = NULL;
  CHECK_OK(hlo_builder_create(&b));
  int64_t three = 3, four = 4;
  hlo_value x = hlo_parameter(b, hlo_type_make(TPU_F32, 1, &three));
  hlo_value y = hlo_parameter(b, hlo_type_make(TPU_F32, 1, &four));
  hlo_value bad = hlo_binary(b, "add", x, y);
  CHECK(bad == HLO_INVALID && hlo_failed(b));
  hlo_value later = hlo_unary(b, "negate", bad); /* chained calls stay invalid */
  CHECK(later == HLO_INVALID);
  char* text = NULL;
  tpu_status s = hlo_builder_finish(b, &later, 1, NULL, &text, NULL);
  CHECK(s && text == NULL);
  CHECK(strstr(tpu_status_message(s), "tensor<3xf32> and tensor<4xf32>"));
  tpu_status_free(s);
  hlo_builder_free(b);
}

int main(void) {
  const char* plugin = check_plugin_path();
  tpu_pjrt_options options = {.plugin_path = plugin, .cpu_device_count = 1};
  if (plugin) CHECK_OK(tpu_pjrt_open(&options, &pjrt));
  if (pjrt) {
    test_add_text_and_run();
    test_reduce_and_argmax();
    test_constant_extremes();
    test_aliased_parameters();
  }
  test_sticky_error();
  tpu_pjrt_close(pjrt);
  return check_finish("test_hlo");
}
