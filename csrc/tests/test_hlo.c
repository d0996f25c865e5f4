/* The StableHLO builder: printed text of small modules, running them
 * through the plugin, and sticky errors. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hlo/builder.h"
#include "hlo/conv_ops.h"
#include "hlo/loop_ops.h"
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

/* Reductions over long rows and columns, folded by slices before (or
 * instead of) the reduce: sums and maxima against loops, on small integers so
 * every sum is exact. */
static void test_folded_reductions(void) {
  struct {
    int64_t rows, cols;
    bool down_columns, is_max;
  } cases[] = {{3, 1025, false, false}, {4, 40, false, true}, {1025, 3, true, false}, {70, 5, true, true}};
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    int64_t dims[2] = {cases[k].rows, cases[k].cols}, n = dims[0] * dims[1];
    int64_t axis = cases[k].down_columns ? 0 : 1, kept = dims[1 - axis];
    hlo_builder* b = NULL;
    CHECK_OK(hlo_builder_create(&b));
    hlo_value x = hlo_reshape(b, hlo_parameter(b, hlo_type_make(TPU_F32, 1, &n)), 2, dims);
    hlo_value init = hlo_constant(b, TPU_F32, cases[k].is_max ? -1e30 : 0);
    hlo_value r = hlo_reduce(b, x, init, cases[k].is_max ? "maximum" : "add", &axis, 1);
    CHECK(hlo_type_of(b, r) && hlo_type_of(b, r)->rank == 1 && hlo_type_of(b, r)->dims[0] == kept);
    char* text = finish(b, &r, 1);
    CHECK(text && strstr(text, "stablehlo.slice"));
    float* in = malloc((size_t)(n + 2 * kept) * sizeof *in);
    float *got = in + n, *want = got + kept;
    for (int64_t i = 0; i < n; i++) in[i] = (float)((i * 37) % 11 - 5);
    for (int64_t j = 0; j < kept; j++) want[j] = cases[k].is_max ? -1e30f : 0;
    for (int64_t i = 0; i < dims[0]; i++)
      for (int64_t c = 0; c < dims[1]; c++) {
        float v = in[i * dims[1] + c], *w = &want[cases[k].down_columns ? c : i];
        *w = cases[k].is_max ? (v > *w ? v : *w) : *w + v;
      }
    const float* inputs[1] = {in};
    memset(got, 0, (size_t)kept * sizeof *got);
    if (text) run_f32(text, inputs, 1, n, got, (size_t)kept * sizeof *got);
    for (int64_t j = 0; j < kept; j++) CHECK(got[j] == want[j]);
    free(in);
    free(text);
    hlo_builder_free(b);
  }
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

/* acc <- 2 acc + x + step + sum(x): the step number and a region (the
 * sum's) inside the loop's body. */
static void doubling_step(hlo_builder* b, hlo_value step, const hlo_value* in, hlo_value* out, const void* context) {
  (void)context;
  static const int64_t all = 0;
  hlo_value acc = in[0], x = in[1];
  hlo_value k = hlo_broadcast_in_dim(b, hlo_convert(b, step, TPU_F32), 1, hlo_type_of(b, x)->dims, NULL);
  hlo_value total = hlo_reduce(b, x, hlo_constant(b, TPU_F32, 0), "add", &all, 1);
  total = hlo_broadcast_in_dim(b, total, 1, hlo_type_of(b, x)->dims, NULL);
  acc = hlo_binary(b, "add", hlo_binary(b, "multiply", acc, hlo_constant_like(b, acc, 2)), x);
  out[0] = hlo_binary(b, "add", hlo_binary(b, "add", acc, k), total);
  out[1] = x;
}

static void test_counted_loop(void) {
  hlo_builder* b = NULL;
  CHECK_OK(hlo_builder_create(&b));
  int64_t four = 4;
  hlo_value x = hlo_parameter(b, hlo_type_make(TPU_F32, 1, &four));
  static const int64_t all = 0;
  /* Five steps, then as many as the (computed) count -1 says: none. */
  hlo_value init[2] = {hlo_constant_like(b, x, 0), x}, out[2], none[2];
  hlo_counted_loop(b, hlo_constant_i64(b, TPU_I64, 5), init, 2, doubling_step, NULL, out);
  hlo_value minus_one = hlo_convert(b, hlo_reduce(b, hlo_constant_like(b, x, -0.25), hlo_constant(b, TPU_F32, 0), "add",
                                                  &all, 1), TPU_I64);
  hlo_counted_loop(b, minus_one, out, 2, doubling_step, NULL, none);
  char* text = finish(b, none, 1);
  CHECK(strstr(text, "\"stablehlo.while\"") && strstr(text, "\"stablehlo.reduce\""));
  float a[4] = {1, -2, 0.5f, 3}, got[4] = {0};
  const float* inputs[1] = {a};
  run_f32(text, inputs, 1, 4, got, sizeof got);
  for (int i = 0; i < 4; i++) {
    float expected = 0, sum = a[0] + a[1] + a[2] + a[3];
    for (int k = 0; k < 5; k++) expected = 2 * expected + a[i] + (float)k + sum;
    CHECK(got[i] == expected);
  }
  free(text);
  hlo_builder_free(b);
}

/* A body that fails leaves the builder's sticky error, and no loop. */
static void mismatched_step(hlo_builder* b, hlo_value step, const hlo_value* in, hlo_value* out, const void* context) {
  (void)step, (void)context;
  out[0] = hlo_binary(b, "add", in[0], hlo_constant(b, TPU_F32, 1)); /* [4] + 0-d: an error */
}

static void test_failing_loop_body(void) {
  hlo_builder* b = NULL;
  CHECK_OK(hlo_builder_create(&b));
  int64_t four = 4;
  hlo_value x = hlo_parameter(b, hlo_type_make(TPU_F32, 1, &four)), out;
  hlo_counted_loop(b, hlo_constant_i64(b, TPU_I64, 3), &x, 1, mismatched_step, NULL, &out);
  CHECK(hlo_failed(b));
  char* text = NULL;
  tpu_status s = hlo_builder_finish(b, &out, 1, NULL, &text, NULL);
  CHECK(s && text == NULL);
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

/* An op's name is put before a lowering's error once, however many layers
 * name it; the error points at the line that failed, not the builder's. */
static void test_error_names_op_once(void) {
  hlo_builder* b = NULL;
  CHECK_OK(hlo_builder_create(&b));
  int line = __LINE__ + 1;
  hlo_fail(b, TPU_INVALID_ARGUMENT, "aten::%s: bad norm", "fft_x");
  char* text = NULL;
  tpu_status s = hlo_builder_finish(b, NULL, 0, NULL, &text, NULL);
  char where[64];
  snprintf(where, sizeof where, "(test_hlo.c:%d)", line);
  CHECK(s && strstr(tpu_status_message(s), where));
  s = tpu_status_name_op(s, "fft_x", NULL);
  CHECK(strncmp(tpu_status_message(s), "aten::fft_x: bad norm", 21) == 0);
  s = tpu_status_name_op(s, "fft_x", "aten::fft_x(Float[4])");
  CHECK(strncmp(tpu_status_message(s), "aten::fft_x(Float[4]): bad norm (", 33) == 0);
  s = tpu_status_name_op(s, "other", NULL); /* another op's prefix stays */
  CHECK(strncmp(tpu_status_message(s), "aten::other: aten::fft_x(Float[4]): bad norm", 44) == 0);
  tpu_status_free(s);
  CHECK(tpu_status_name_op(NULL, "fft_x", NULL) == NULL);
  hlo_builder_free(b);
}

/* A 2-d convolution by its StableHLO definition, element by element:
 * lhs dims l, rhs dims r, out dims o, each in the layout c names. */
static void reference_conv(const hlo_conv* c, const float* lhs, const int64_t* l, const float* rhs,
                           const int64_t* r, float* out, const int64_t* o) {
  int64_t in_group = r[c->rhs_input_first ? 0 : 1], outputs = r[c->rhs_input_first ? 1 : 0];
  int64_t batch = o[c->out_feature_first ? 1 : 0];
  for (int64_t bi = 0; bi < batch; bi++)
    for (int64_t oi = 0; oi < outputs; oi++)
      for (int64_t y = 0; y < o[2]; y++)
        for (int64_t x = 0; x < o[3]; x++) {
          int64_t lb = oi / (outputs / c->batch_groups) * batch + bi;
          double sum = 0;
          for (int64_t i = 0; i < in_group; i++)
            for (int64_t ky = 0; ky < r[2]; ky++)
              for (int64_t kx = 0; kx < r[3]; kx++) {
                int64_t lf = oi / (outputs / c->feature_groups) * in_group + i;
                int64_t py = y * c->strides[0] + ky * c->rhs_dilation[0] - c->pad_lo[0];
                int64_t px = x * c->strides[1] + kx * c->rhs_dilation[1] - c->pad_lo[1];
                if (py < 0 || px < 0 || py % c->lhs_dilation[0] || px % c->lhs_dilation[1]) continue;
                py /= c->lhs_dilation[0];
                px /= c->lhs_dilation[1];
                if (py >= l[2] || px >= l[3]) continue;
                int64_t l0 = c->lhs_feature_first ? lf : lb, l1 = c->lhs_feature_first ? lb : lf;
                int64_t r0 = c->rhs_input_first ? i : oi, r1 = c->rhs_input_first ? oi : i;
                sum += (double)lhs[((l0 * l[1] + l1) * l[2] + py) * l[3] + px] *
                       rhs[((r0 * r[1] + r1) * r[2] + ky) * r[3] + kx];
              }
          int64_t o0 = c->out_feature_first ? oi : bi, o1 = c->out_feature_first ? bi : oi;
          out[((o0 * o[1] + o1) * o[2] + y) * o[3] + x] = (float)sum;
        }
}

/* hlo_convolution in each of its forms (taps, diagonal blocks, dots
 * batched over groups, XLA's op) against the definition: whether the op
 * is kept is seen in the text. */
static void test_convolution_forms(void) {
  struct {
    const char* name;
    hlo_conv c;
    int64_t l[4], r[4], o[4];
    bool keeps_op;
  } cases[] = {
      {"ungrouped taps, dilated", {.strides = {1, 1}, .pad_lo = {2, 1}, .pad_hi = {1, 2},
        .lhs_dilation = {1, 1}, .rhs_dilation = {2, 1}, .feature_groups = 1},
       {2, 3, 5, 6}, {4, 3, 3, 3}, {2, 4, 4, 7}, false},
      {"grouped taps over a dilated input, transposed layouts",
       {.lhs_feature_first = true, .rhs_input_first = true, .out_feature_first = true, .strides = {1, 2},
        .pad_lo = {2, 1}, .pad_hi = {2, 1}, .lhs_dilation = {2, 2}, .rhs_dilation = {1, 1},
        .feature_groups = 2},
       {4, 2, 3, 4}, {2, 6, 3, 3}, {6, 2, 7, 4}, false},
      {"diagonal blocks of the ungrouped convolution (a grouped weight grad)",
       {.lhs_feature_first = true, .rhs_input_first = true, .out_feature_first = true, .strides = {1, 1},
        .pad_lo = {1, 1}, .pad_hi = {1, 0}, .lhs_dilation = {1, 1}, .rhs_dilation = {2, 1},
        .batch_groups = 2, .feature_groups = 1},
       {3, 4, 6, 5}, {3, 6, 3, 4}, {6, 2, 4, 3}, false},
      {"dots batched over groups (a grouped weight grad of 66 outputs)",
       {.lhs_feature_first = true, .rhs_input_first = true, .out_feature_first = true, .strides = {1, 2},
        .lhs_dilation = {1, 1}, .rhs_dilation = {1, 1}, .batch_groups = 2, .feature_groups = 1},
       {2, 4, 4, 5}, {2, 66, 3, 2}, {66, 2, 2, 2}, false},
      {"depthwise weight grad keeps the op",
       {.lhs_feature_first = true, .rhs_input_first = true, .out_feature_first = true, .strides = {1, 1},
        .pad_lo = {1, 1}, .pad_hi = {1, 1}, .lhs_dilation = {1, 1}, .rhs_dilation = {1, 1},
        .batch_groups = 3, .feature_groups = 1},
       {2, 3, 4, 4}, {2, 3, 4, 4}, {3, 1, 3, 3}, true},
      {"ungrouped strided keeps the op", {.strides = {2, 2}, .lhs_dilation = {1, 1},
        .rhs_dilation = {1, 1}, .feature_groups = 1},
       {1, 2, 5, 5}, {3, 2, 3, 3}, {1, 3, 2, 2}, true},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    hlo_conv c = cases[k].c;
    c.spatial = 2;
    if (!c.batch_groups) c.batch_groups = 1;
    int64_t ln = 1, rn = 1, on = 1;
    for (int i = 0; i < 4; i++) ln *= cases[k].l[i], rn *= cases[k].r[i], on *= cases[k].o[i];
    hlo_builder* b = NULL;
    CHECK_OK(hlo_builder_create(&b));
    hlo_value lhs = hlo_parameter(b, hlo_type_make(TPU_F32, 1, &ln));
    hlo_value rhs = hlo_parameter(b, hlo_type_make(TPU_F32, 1, &rn));
    hlo_value y = hlo_convolution(b, hlo_reshape(b, lhs, 4, cases[k].l), hlo_reshape(b, rhs, 4, cases[k].r),
                                  &c, TPU_F32);
    CHECK(hlo_type_of(b, y) && memcmp(hlo_type_of(b, y)->dims, cases[k].o, sizeof cases[k].o) == 0);
    y = hlo_reshape(b, y, 1, &on);
    char* text = finish(b, &y, 1);
    if (!text) {
      hlo_builder_free(b);
      continue;
    }
    bool has_op = strstr(text, "stablehlo.convolution") != NULL;
    if (has_op != cases[k].keeps_op) fprintf(stderr, "%s: form not as expected\n", cases[k].name);
    CHECK(has_op == cases[k].keeps_op);
    float* x = malloc((size_t)(ln + rn + 2 * on) * sizeof *x);
    float *w = x + ln, *got = w + rn, *want = got + on;
    for (int64_t i = 0; i < ln + rn; i++) x[i] = (float)((i * 7919) % 23 - 11) / 8;
    reference_conv(&c, x, cases[k].l, w, cases[k].r, want, cases[k].o);
    memset(got, 0, (size_t)on * sizeof *got);
    /* run_f32 gives both inputs one length: pass each its own. */
    struct PJRT_LoadedExecutable* exe = NULL;
    CHECK_OK(tpu_pjrt_compile(pjrt, text, strlen(text), &exe));
    struct PJRT_Buffer *args[2] = {0}, *result = NULL;
    CHECK_OK(tpu_pjrt_buffer_from_host(pjrt, 0, TPU_F32, &ln, 1, x, &args[0]));
    CHECK_OK(tpu_pjrt_buffer_from_host(pjrt, 0, TPU_F32, &rn, 1, w, &args[1]));
    if (exe) CHECK_OK(tpu_pjrt_execute(pjrt, exe, 0, args, 2, NULL, &result, 1));
    if (result) CHECK_OK(tpu_pjrt_buffer_to_host(pjrt, result, got, (size_t)on * sizeof *got));
    float worst = 0;
    for (int64_t i = 0; i < on; i++) {
      float d = got[i] > want[i] ? got[i] - want[i] : want[i] - got[i];
      if (d > worst) worst = d;
    }
    if (worst > 1e-4f) fprintf(stderr, "%s: off by %g\n", cases[k].name, worst);
    CHECK(worst <= 1e-4f);
    tpu_pjrt_buffer_destroy(pjrt, result);
    for (int i = 0; i < 2; i++) tpu_pjrt_buffer_destroy(pjrt, args[i]);
    tpu_pjrt_executable_destroy(pjrt, exe);
    free(x);
    free(text);
    hlo_builder_free(b);
  }
}

int main(void) {
  const char* plugin = check_plugin_path();
  tpu_pjrt_options options = {.plugin_path = plugin, .cpu_device_count = 1};
  if (plugin) CHECK_OK(tpu_pjrt_open(&options, &pjrt));
  if (pjrt) {
    test_add_text_and_run();
    test_reduce_and_argmax();
    test_folded_reductions();
    test_constant_extremes();
    test_aliased_parameters();
    test_convolution_forms();
    test_counted_loop();
  }
  test_failing_loop_body();
  test_sticky_error();
  test_error_names_op_once();
  tpu_pjrt_close(pjrt);
  return check_finish("test_hlo");
}
