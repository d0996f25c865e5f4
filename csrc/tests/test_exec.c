/* The runtime end to end without PyTorch: storage, views, op calls, the
 * plan and program caches, and errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"
#include "tpu/runtime.h"

static tpu_tensor dense(tpu_buffer* buffer, tpu_dtype dtype, int rank, const int64_t* sizes) {
  tpu_tensor t = {buffer, dtype, rank, {0}, {0}, 0};
  int64_t s = 1;
  for (int d = rank - 1; d >= 0; d--) {
    t.sizes[d] = sizes[d];
    t.strides[d] = s;
    s *= sizes[d];
  }
  return t;
}

static tpu_buffer* upload_f32(const float* data, int64_t n, tpu_tensor* out) {
  tpu_buffer* b = NULL;
  CHECK_OK(tpu_buffer_create(0, (size_t)n * 4, &b));
  *out = dense(b, TPU_F32, 1, &n);
  CHECK_OK(tpu_tensor_from_host(out, data));
  return b;
}

/* The operands most tests add: a and b on the device and a 6-element
 * float output, each on its own storage. */
static const float operand_a[6] = {1, 2, 3, 4, 5, 6};
static const float operand_b[6] = {10, 20, 30, 40, 50, 60};

static void upload_operands(tpu_tensor* ta, tpu_tensor* tb, tpu_tensor* to) {
  upload_f32(operand_a, 6, ta);
  upload_f32(operand_b, 6, tb);
  tpu_buffer* bo = NULL;
  CHECK_OK(tpu_buffer_create(0, 24, &bo));
  int64_t six = 6;
  *to = dense(bo, TPU_F32, 1, &six);
}

static void release_operands(const tpu_tensor* ta, const tpu_tensor* tb, const tpu_tensor* to) {
  tpu_buffer_release(ta->buffer);
  tpu_buffer_release(tb->buffer);
  tpu_buffer_release(to->buffer);
}

/* Runs name(args) into outputs, inferring nothing: outputs are given. */
static tpu_status run(const char* name, tpu_arg* args, int n, tpu_tensor* outs, int n_out) {
  tpu_op_call call = {.name = name, .overload = "", .args = args, .arg_count = n, .outputs = outs, .output_count = n_out};
  tpu_op_plan* plan = NULL;
  tpu_status s = tpu_op_lookup(&call, &plan);
  if (s) return s;
  if (!plan) {
    tpu_dtype dt[8];
    int ranks[8];
    const int64_t* sizes[8];
    for (int i = 0; i < n_out; i++) {
      dt[i] = outs[i].dtype;
      ranks[i] = outs[i].rank;
      sizes[i] = outs[i].sizes;
    }
    s = tpu_op_plan_create(&call, n_out, dt, ranks, sizes, NULL, NULL, &plan);
    if (s) return s;
  }
  return tpu_op_execute(plan, &call);
}

static void test_add_and_cache(void) {
  const float *a = operand_a, *b = operand_b;
  float out[6];
  tpu_tensor ta, tb, to;
  upload_operands(&ta, &tb, &to);
  for (int alpha = 1; alpha <= 3; alpha++) {
    tpu_arg args[3] = {{.kind = TPU_ARG_TENSOR, .u.tensor = ta},
                       {.kind = TPU_ARG_TENSOR, .u.tensor = tb},
                       {.kind = TPU_ARG_SCALAR, .u.scalar = {TPU_I64, 0, alpha}}};
    int64_t compiles = tpu_counter_get(TPU_COUNTER_COMPILE);
    CHECK_OK(run("add", args, 3, &to, 1));
    if (alpha > 1) CHECK(tpu_counter_get(TPU_COUNTER_COMPILE) == compiles); /* scalars are runtime */
    CHECK_OK(tpu_tensor_to_host(&to, out));
    for (int i = 0; i < 6; i++) CHECK(out[i] == a[i] + alpha * b[i]);
  }
  /* A transposed 2x3 view of `a` read by add: t(a) + t(b) -> 3x2. */
  tpu_tensor va = ta, vb = tb, vo;
  int64_t sizes[2] = {3, 2};
  va.rank = vb.rank = 2;
  va.sizes[0] = vb.sizes[0] = 3;
  va.sizes[1] = vb.sizes[1] = 2;
  va.strides[0] = vb.strides[0] = 1;
  va.strides[1] = vb.strides[1] = 3;
  tpu_buffer* bt = NULL;
  CHECK_OK(tpu_buffer_create(0, 24, &bt));
  vo = dense(bt, TPU_F32, 2, sizes);
  tpu_arg args[2] = {{.kind = TPU_ARG_TENSOR, .u.tensor = va}, {.kind = TPU_ARG_TENSOR, .u.tensor = vb}};
  CHECK_OK(run("add", args, 2, &vo, 1));
  CHECK_OK(tpu_tensor_to_host(&vo, out));
  float expect[6] = {11, 44, 22, 55, 33, 66};
  for (int i = 0; i < 6; i++) CHECK(out[i] == expect[i]);
  /* Host read of a strided view. */
  CHECK_OK(tpu_tensor_to_host(&va, out));
  float va_expect[6] = {1, 4, 2, 5, 3, 6};
  for (int i = 0; i < 6; i++) CHECK(out[i] == va_expect[i]);
  /* Write through a strided view: a[::2] = 7 via fill_. */
  tpu_tensor every_other = ta;
  every_other.sizes[0] = 3;
  every_other.strides[0] = 2;
  every_other.offset = 1;
  tpu_arg fill[2] = {{.kind = TPU_ARG_TENSOR, .u.tensor = every_other},
                     {.kind = TPU_ARG_SCALAR, .u.scalar = {TPU_F64, 7.0, 0}}};
  CHECK_OK(run("fill_", fill, 2, &every_other, 1));
  CHECK_OK(tpu_tensor_to_host(&ta, out));
  float filled[6] = {1, 7, 3, 7, 5, 7};
  for (int i = 0; i < 6; i++) CHECK(out[i] == filled[i]);
  /* Host write into a slice keeps the rest. */
  tpu_tensor middle = tb;
  middle.sizes[0] = 2;
  middle.offset = 2;
  float two[2] = {-1, -2};
  CHECK_OK(tpu_tensor_from_host(&middle, two));
  CHECK_OK(tpu_tensor_to_host(&tb, out));
  float mid[6] = {10, 20, -1, -2, 50, 60};
  for (int i = 0; i < 6; i++) CHECK(out[i] == mid[i]);
  CHECK(tpu_memory_stats_of(0).bytes.current >= 4 * 24);
  release_operands(&ta, &tb, &to);
  tpu_buffer_release(bt);
  CHECK(tpu_memory_stats_of(0).bytes.current == 0);
}

/* Complex storage read and written through float views and back
 * (view_as_real, view_as_complex), and a complex scalar operand. */
static void test_complex_views(void) {
  float pairs[6] = {1, 2, 3, 4, 5, 6}; /* 1+2i, 3+4i, 5+6i */
  tpu_tensor parts;
  tpu_buffer* storage = upload_f32(pairs, 6, &parts); /* first written as float32 */
  int64_t three = 3;
  tpu_tensor z = dense(storage, TPU_C64, 1, &three);
  float out[6];
  /* z * (0 + 1i) = (-2+1i, -4+3i, -6+5i), written through the complex view */
  tpu_arg mul[2] = {{.kind = TPU_ARG_TENSOR, .u.tensor = z},
                    {.kind = TPU_ARG_SCALAR, .u.scalar = {TPU_C128, 0, 0, 1}}};
  CHECK_OK(run("mul", mul, 2, &z, 1));
  CHECK_OK(tpu_tensor_to_host(&parts, out));
  float turned[6] = {-2, 1, -4, 3, -6, 5};
  for (int i = 0; i < 6; i++) CHECK(out[i] == turned[i]);
  /* the imaginary parts (a strided float view of what is now complex
   * storage) filled with 9, then read as complex numbers */
  tpu_tensor imag = parts;
  imag.sizes[0] = 3;
  imag.strides[0] = 2;
  imag.offset = 1;
  tpu_arg fill[2] = {{.kind = TPU_ARG_TENSOR, .u.tensor = imag},
                     {.kind = TPU_ARG_SCALAR, .u.scalar = {TPU_F64, 9.0, 0}}};
  CHECK_OK(run("fill_", fill, 2, &imag, 1));
  CHECK_OK(tpu_tensor_to_host(&z, out));
  float filled[6] = {-2, 9, -4, 9, -6, 9};
  for (int i = 0; i < 6; i++) CHECK(out[i] == filled[i]);
  /* a complex view past the storage's end is refused */
  tpu_tensor beyond = z;
  beyond.offset = 1;
  tpu_status s = tpu_tensor_to_host(&beyond, out);
  CHECK(tpu_status_code_of(s) == TPU_INVALID_ARGUMENT && strstr(tpu_status_message(s), "outside"));
  tpu_status_free(s);
  tpu_buffer_release(storage);
}

/* One fused "step": tmp = a * s (a temporary, released before the sync),
 * out = tmp + b. Returns out's values through `host`. */
static void fused_step(tpu_tensor ta, tpu_tensor tb, tpu_tensor to, double scale, float* host) {
  tpu_buffer* btmp = NULL;
  CHECK_OK(tpu_buffer_create(0, 24, &btmp));
  int64_t six = 6;
  tpu_tensor tmp = dense(btmp, TPU_F32, 1, &six);
  tpu_arg mul[2] = {{.kind = TPU_ARG_TENSOR, .u.tensor = ta},
                    {.kind = TPU_ARG_SCALAR, .u.scalar = {TPU_F64, scale, 0}}};
  CHECK_OK(run("mul", mul, 2, &tmp, 1));
  tpu_arg add[2] = {{.kind = TPU_ARG_TENSOR, .u.tensor = tmp}, {.kind = TPU_ARG_TENSOR, .u.tensor = tb}};
  CHECK_OK(run("add", add, 2, &to, 1));
  tpu_buffer_release(btmp);
  CHECK(tpu_pending_op_count(0) == 2);
  CHECK_OK(tpu_tensor_to_host(&to, host)); /* a sync point */
  CHECK(tpu_pending_op_count(0) == 0);
}

static void test_fused_graph(void) {
  const float *a = operand_a, *b = operand_b;
  float out[6];
  tpu_tensor ta, tb, to;
  upload_operands(&ta, &tb, &to);
  CHECK_OK(tpu_set_eager_mode(TPU_EAGER_FUSED));
  int64_t compiles = 0, executes = 0;
  for (int step = 1; step <= 3; step++) {
    if (step == 3) {
      compiles = tpu_counter_get(TPU_COUNTER_COMPILE);
      executes = tpu_counter_get(TPU_COUNTER_EXECUTE);
    }
    fused_step(ta, tb, to, step, out);
    for (int i = 0; i < 6; i++) CHECK(out[i] == a[i] * step + b[i]);
  }
  /* The third step reused the graph's program: one run, nothing compiled. */
  CHECK(tpu_counter_get(TPU_COUNTER_COMPILE) == compiles);
  CHECK(tpu_counter_get(TPU_COUNTER_EXECUTE) == executes + 1);
  /* A lowering error surfaces at the call (a new signature is lowered once
   * when first recorded) and records nothing. */
  tpu_arg bad[1] = {{.kind = TPU_ARG_TENSOR, .u.tensor = ta}};
  tpu_status s = run("mul", bad, 1, &to, 1);
  CHECK(s && strstr(tpu_status_message(s), "aten::mul") != NULL);
  tpu_status_free(s);
  CHECK(tpu_pending_op_count(0) == 0);
  CHECK_OK(tpu_set_eager_mode(TPU_EAGER_STRICT));
  release_operands(&ta, &tb, &to);
}

/* tpu_sync cuts the graph without waiting: the launcher thread runs it
 * while the next graph records, reading its results and writing its
 * storages in place; each step's multiply writes a storage only the graph
 * holds. Values, and that the storages come back (ASan: no leak, no use
 * after free). */
static void test_launched_graphs(void) {
  const float *a = operand_a, *b = operand_b;
  tpu_tensor ta, tb, to;
  upload_operands(&ta, &tb, &to);
  CHECK_OK(tpu_set_eager_mode(TPU_EAGER_FUSED));
  int64_t executes = tpu_counter_get(TPU_COUNTER_EXECUTE);
  for (int step = 1; step <= 4; step++) {
    tpu_buffer* btmp = NULL;
    CHECK_OK(tpu_buffer_create(0, 24, &btmp));
    int64_t six = 6;
    tpu_tensor tmp = dense(btmp, TPU_F32, 1, &six);
    tpu_arg mul[2] = {{.kind = TPU_ARG_TENSOR, .u.tensor = ta},
                      {.kind = TPU_ARG_SCALAR, .u.scalar = {TPU_F64, (double)step, 0}}};
    CHECK_OK(run("mul", mul, 2, &tmp, 1));
    tpu_buffer_release(btmp);
    /* to += tmp, in place, reading the last launch's result. */
    tpu_arg add[2] = {{.kind = TPU_ARG_TENSOR, .u.tensor = to}, {.kind = TPU_ARG_TENSOR, .u.tensor = tmp}};
    CHECK_OK(run("add", add, 2, &to, 1));
    CHECK_OK(tpu_sync(0));
    CHECK(tpu_pending_op_count(0) == 0);
  }
  /* A device storage the next graph reads, dropped before it is launched:
   * the launcher destroys it after the call. */
  tpu_tensor tc;
  tpu_buffer* bc = upload_f32(operand_b, 6, &tc);
  tpu_arg add_c[2] = {{.kind = TPU_ARG_TENSOR, .u.tensor = to}, {.kind = TPU_ARG_TENSOR, .u.tensor = tc}};
  CHECK_OK(run("add", add_c, 2, &to, 1));
  tpu_buffer_release(bc);
  CHECK_OK(tpu_sync(0));
  float out[6];
  CHECK_OK(tpu_tensor_to_host(&to, out)); /* finishes the last launch */
  CHECK(tpu_counter_get(TPU_COUNTER_EXECUTE) == executes + 5);
  /* to starts as zeros (never written before): 1+2+3+4 = 10 times a, then b. */
  for (int i = 0; i < 6; i++) CHECK(out[i] == 10 * a[i] + b[i]);
  /* A host write into a storage a launch reads. */
  tpu_arg add[2] = {{.kind = TPU_ARG_TENSOR, .u.tensor = ta}, {.kind = TPU_ARG_TENSOR, .u.tensor = tb}};
  CHECK_OK(run("add", add, 2, &to, 1));
  CHECK_OK(tpu_sync(0));
  CHECK_OK(tpu_tensor_from_host(&tb, operand_a));
  CHECK_OK(tpu_tensor_to_host(&to, out));
  for (int i = 0; i < 6; i++) CHECK(out[i] == a[i] + b[i]);
  CHECK_OK(tpu_set_eager_mode(TPU_EAGER_STRICT));
  release_operands(&ta, &tb, &to);
}

static void test_captured_program(void) {
  const float *a = operand_a, *b = operand_b;
  float out[6];
  int64_t six = 6;
  tpu_tensor ta, tb, to;
  upload_operands(&ta, &tb, &to);
  /* Captured: out = a + b; a += 1 (an input written in place). */
  CHECK_OK(tpu_capture_begin(0));
  tpu_arg add[2] = {{.kind = TPU_ARG_TENSOR, .u.tensor = ta}, {.kind = TPU_ARG_TENSOR, .u.tensor = tb}};
  CHECK_OK(run("add", add, 2, &to, 1));
  tpu_arg bump[2] = {{.kind = TPU_ARG_TENSOR, .u.tensor = ta},
                     {.kind = TPU_ARG_SCALAR, .u.scalar = {TPU_F64, 1.0, 0}}};
  CHECK_OK(run("add_", bump, 2, &ta, 1));
  tpu_status s = tpu_tensor_to_host(&to, out); /* host reads fail while capturing */
  CHECK(s && strstr(tpu_status_message(s), "torch.compile") != NULL);
  tpu_status_free(s);
  tpu_buffer* inputs[2] = {ta.buffer, tb.buffer};
  tpu_program* program = NULL;
  CHECK_OK(tpu_capture_end(0, inputs, 2, &to.buffer, 1, &program));
  CHECK(tpu_program_writes_input(program, 0) && !tpu_program_writes_input(program, 1));
  for (int run_index = 0; run_index < 2; run_index++) {
    tpu_buffer* result = NULL;
    CHECK_OK(tpu_program_run(program, inputs, 2, 0, 0, &result));
    tpu_tensor tr = dense(result, TPU_F32, 1, &six);
    CHECK_OK(tpu_tensor_to_host(&tr, out));
    for (int i = 0; i < 6; i++) CHECK(out[i] == a[i] + run_index + b[i]);
    tpu_buffer_release(result);
  }
  CHECK_OK(tpu_tensor_to_host(&ta, out));
  for (int i = 0; i < 6; i++) CHECK(out[i] == a[i] + 2);
  tpu_buffer* wrong[1] = {ta.buffer};
  tpu_buffer* none = NULL;
  s = tpu_program_run(program, wrong, 1, 0, 0, &none);
  CHECK(s && strstr(tpu_status_message(s), "takes 2 inputs") != NULL);
  tpu_status_free(s);
  tpu_program_free(program);
  release_operands(&ta, &tb, &to);
}

/* Debug mode reads gather indices back: one outside its dimension is an
 * OUT_OF_RANGE error naming it, where strict mode lets XLA clamp it. */
static void test_debug_index_check(void) {
  float out[6];
  tpu_tensor data, unused, to;
  upload_operands(&data, &unused, &to); /* data: 6 floats, 1..6 */
  tpu_buffer* bi = NULL;
  CHECK_OK(tpu_buffer_create(0, 6 * sizeof(int64_t), &bi));
  int64_t six = 6;
  tpu_tensor index = dense(bi, TPU_I64, 1, &six);
  tpu_arg args[3] = {{.kind = TPU_ARG_TENSOR, .u.tensor = data}, {.kind = TPU_ARG_INT, .u.i = 0},
                     {.kind = TPU_ARG_TENSOR, .u.tensor = index}};
  const int64_t in_range[6] = {5, 0, 1, 2, 3, 4}, outside[6] = {0, 1, 2, 6, 4, 5};
  CHECK_OK(tpu_set_eager_mode(TPU_EAGER_DEBUG));
  CHECK_OK(tpu_tensor_from_host(&index, in_range));
  CHECK_OK(run("index_select", args, 3, &to, 1));
  CHECK_OK(tpu_tensor_to_host(&to, out));
  for (int i = 0; i < 6; i++) CHECK(out[i] == operand_a[in_range[i]]);
  CHECK_OK(tpu_tensor_from_host(&index, outside));
  tpu_status s = run("index_select", args, 3, &to, 1);
  CHECK(tpu_status_code_of(s) == TPU_OUT_OF_RANGE &&
        strstr(tpu_status_message(s), "index 6 is out of bounds for dimension 0 with size 6"));
  tpu_status_free(s);
  CHECK_OK(tpu_set_eager_mode(TPU_EAGER_STRICT));
  CHECK_OK(run("index_select", args, 3, &to, 1)); /* clamped: reads element 5 */
  CHECK_OK(tpu_tensor_to_host(&to, out));
  CHECK(out[3] == operand_a[5]);
  tpu_buffer_release(bi);
  release_operands(&data, &unused, &to);
}

static void test_errors(void) {
  tpu_buffer* b = NULL;
  tpu_status s = tpu_buffer_create(99, 4, &b);
  CHECK(tpu_status_code_of(s) == TPU_INVALID_ARGUMENT && strstr(tpu_status_message(s), "tpu:99"));
  tpu_status_free(s);
  CHECK_OK(tpu_buffer_create(0, 8, &b));
  int64_t n = 2;
  tpu_tensor t = dense(b, TPU_F32, 1, &n);
  tpu_arg arg = {.kind = TPU_ARG_TENSOR, .u.tensor = t};
  s = run("no_such_op", &arg, 1, &t, 1);
  CHECK(tpu_status_code_of(s) == TPU_UNIMPLEMENTED && strstr(tpu_status_message(s), "no_such_op"));
  tpu_status_free(s);
  tpu_tensor outside = t;
  outside.offset = 5;
  float x[2];
  s = tpu_tensor_to_host(&outside, x);
  CHECK(tpu_status_code_of(s) == TPU_INVALID_ARGUMENT && strstr(tpu_status_message(s), "outside"));
  tpu_status_free(s);
  /* Never-written storage reads as zeros. */
  CHECK_OK(tpu_tensor_to_host(&t, x));
  CHECK(x[0] == 0 && x[1] == 0);
  tpu_buffer_release(b);
}

/* Allocator statistics count storages and bytes both ways; the device
 * memory of the CPU platform is the host's. */
static void test_memory_stats(void) {
  tpu_memory_reset_totals(0);
  tpu_memory_stats before = tpu_memory_stats_of(0);
  CHECK(before.bytes.allocated == 0 && before.allocations.freed == 0);
  tpu_buffer *a = NULL, *b = NULL;
  CHECK_OK(tpu_buffer_create(0, 1000, &a));
  CHECK_OK(tpu_buffer_create(0, 24, &b));
  tpu_buffer_release(a);
  tpu_memory_stats after = tpu_memory_stats_of(0);
  CHECK(after.bytes.current == before.bytes.current + 24 && after.bytes.allocated == 1024 &&
        after.bytes.freed == 1000 && after.bytes.peak >= before.bytes.current + 1024);
  CHECK(after.allocations.current == before.allocations.current + 1 && after.allocations.allocated == 2 &&
        after.allocations.freed == 1);
  tpu_memory_reset_peak(0);
  CHECK(tpu_memory_stats_of(0).bytes.peak == after.bytes.current);
  tpu_buffer_release(b);
  CHECK(tpu_memory_stats_of(-1).bytes.current == 0);
  int64_t free_bytes = -1, total = -1;
  CHECK_OK(tpu_memory_info(0, &free_bytes, &total));
  CHECK(total > 0 && free_bytes > 0 && free_bytes <= total);
  tpu_status s = tpu_memory_info(99, &free_bytes, &total);
  CHECK(tpu_status_code_of(s) == TPU_INVALID_ARGUMENT && strstr(tpu_status_message(s), "tpu:99"));
  tpu_status_free(s);
  tpu_memory_release_cached();
}

int main(void) {
  /* Loaded executables may hold 8 memory maps (about two small programs;
   * the default is tens of thousands), so these tests also unload programs
   * and reload them at their next use. */
  setenv("TORCH_TPU_MAX_PROGRAM_MAPS", "8", 1);
  if (check_runtime_init()) {
    test_add_and_cache();
    test_complex_views();
    test_fused_graph();
    test_launched_graphs();
    test_captured_program();
    test_debug_index_check();
    test_errors();
    test_memory_stats();
    CHECK_OK(tpu_device_synchronize(0));
    CHECK(tpu_counter_get(TPU_COUNTER_PROGRAM_UNLOAD) > 0);
  }
  return check_finish("test_exec");
}
