/* Diagnostics without PyTorch: recompilation reasons and program dumps. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/check.h"
#include "tpu/runtime.h"

/* out = a * b over fresh storages of `dtype` and `sizes`, outputs given. */
static tpu_status run_mul(tpu_dtype dtype, int rank, const int64_t* sizes) {
  int64_t numel = 1;
  for (int d = 0; d < rank; d++) numel *= sizes[d];
  tpu_buffer* buffers[3] = {NULL, NULL, NULL};
  tpu_tensor t[3];
  tpu_status status = NULL;
  for (int i = 0; i < 3 && !status; i++) {
    status = tpu_buffer_create(0, (size_t)numel * tpu_dtype_size(dtype), &buffers[i]);
    t[i] = (tpu_tensor){buffers[i], dtype, rank, {0}, {0}, 0};
    int64_t stride = 1;
    for (int d = rank - 1; d >= 0; d--) {
      t[i].sizes[d] = sizes[d];
      t[i].strides[d] = stride;
      stride *= sizes[d];
    }
  }
  tpu_arg args[2] = {{.kind = TPU_ARG_TENSOR, .u.tensor = t[0]}, {.kind = TPU_ARG_TENSOR, .u.tensor = t[1]}};
  tpu_op_call call = {.name = "mul", .overload = "Tensor", .args = args, .arg_count = 2, .outputs = &t[2], .output_count = 1};
  tpu_op_plan* plan = NULL;
  if (!status) status = tpu_op_lookup(&call, &plan);
  if (!status && !plan) status = tpu_op_plan_create(&call, 1, &dtype, &rank, &sizes, NULL, NULL, &plan);
  if (!status) status = tpu_op_execute(plan, &call);
  if (!status) status = tpu_device_synchronize(0);
  for (int i = 0; i < 3; i++) tpu_buffer_release(buffers[i]);
  return status;
}

static char last_reason[512];

static const char* latest_reason(void) {
  int kept = (int)(tpu_recompile_count() < TPU_RECOMPILE_REASONS_MAX ? tpu_recompile_count()
                                                                      : TPU_RECOMPILE_REASONS_MAX);
  last_reason[0] = '\0';
  if (kept > 0) CHECK(tpu_recompile_reason(kept - 1, last_reason, sizeof last_reason));
  return last_reason;
}

static void test_recompile_reasons(void) {
  tpu_recompile_reasons_clear();
  int64_t rows4[2] = {4, 128}, rows4_wide[2] = {4, 256}, cube[3] = {2, 2, 2};
  CHECK_OK(run_mul(TPU_F32, 2, rows4));
  CHECK(tpu_recompile_count() == 0); /* the op's first signature is no recompile */
  CHECK_OK(run_mul(TPU_F32, 2, rows4));
  CHECK(tpu_recompile_count() == 0); /* the same one again: a cached plan */
  CHECK_OK(run_mul(TPU_F32, 2, rows4_wide));
  CHECK(strcmp(latest_reason(), "aten::mul.Tensor: input 0 dim 1 changed 128 -> 256") == 0);
  CHECK_OK(run_mul(TPU_BF16, 2, rows4_wide));
  CHECK(strcmp(latest_reason(), "aten::mul.Tensor: input 0 dtype changed float32 -> bfloat16") == 0);
  CHECK_OK(run_mul(TPU_BF16, 3, cube));
  CHECK(strcmp(latest_reason(), "aten::mul.Tensor: input 0 rank changed 2 -> 3") == 0);
  CHECK(tpu_recompile_count() == 3);
  char out[16];
  CHECK(!tpu_recompile_reason(3, out, sizeof out));
  CHECK(!tpu_recompile_reason(-1, out, sizeof out));
  CHECK(tpu_recompile_reason(0, out, sizeof out) && strlen(out) == sizeof out - 1); /* truncated */

  /* The list keeps the latest TPU_RECOMPILE_REASONS_MAX, oldest first. */
  for (int64_t n = 1; n <= TPU_RECOMPILE_REASONS_MAX + 5; n++) CHECK_OK(run_mul(TPU_F32, 1, &n));
  CHECK(tpu_recompile_count() == 3 + TPU_RECOMPILE_REASONS_MAX + 5);
  char first[256];
  CHECK(tpu_recompile_reason(0, first, sizeof first));
  char expect[256];
  /* 72 reasons: 3 above, then n = 1 (dtype), n = 2..69 (dim 0); the 9th
   * is n = 6's. */
  snprintf(expect, sizeof expect, "aten::mul.Tensor: input 0 dim 0 changed %d -> %d", 5, 6);
  CHECK(strcmp(first, expect) == 0);
  CHECK(!tpu_recompile_reason(TPU_RECOMPILE_REASONS_MAX, first, sizeof first));
  tpu_recompile_reasons_clear();
  CHECK(tpu_recompile_count() == 0 && !tpu_recompile_reason(0, first, sizeof first));
}

static int count_dumps(const char* dir, char* out_name, size_t size) {
  DIR* d = opendir(dir);
  int n = 0;
  for (struct dirent* e; d && (e = readdir(d));) {
    size_t len = strlen(e->d_name);
    if (len > 5 && strcmp(e->d_name + len - 5, ".mlir") == 0) {
      n++;
      snprintf(out_name, size, "%s", e->d_name);
    }
  }
  if (d) closedir(d);
  return n;
}

static void test_dump_dir(void) {
  char dir[] = "/tmp/torch_tpu_dump_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  CHECK_OK(tpu_dump_configure(dir));
  int64_t sizes[2] = {3, 5};
  CHECK_OK(run_mul(TPU_I32, 2, sizes)); /* a program this process has not built */
  char name[256] = "";
  CHECK(count_dumps(dir, name, sizeof name) == 1);
  CHECK(strlen(name) == 32 + 5); /* 128-bit key hash in hex, then .mlir */
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE* f = fopen(path, "r");
  char text[8192] = "";
  size_t got = f ? fread(text, 1, sizeof text - 1, f) : 0;
  text[got] = '\0';
  if (f) fclose(f);
  char header[128];
  snprintf(header, sizeof header, "// torch_tpu program %.32s\n// key: program text", name);
  CHECK(strncmp(text, header, strlen(header)) == 0);
  CHECK(strstr(text, "tensor<3x5xi32>") != NULL);
  CHECK(strstr(text, "stablehlo.multiply") != NULL);
  CHECK_OK(run_mul(TPU_I32, 2, sizes)); /* built already: no second file */
  CHECK(count_dumps(dir, name, sizeof name) == 1);

  CHECK_OK(tpu_dump_configure(""));
  int64_t other[2] = {3, 7};
  CHECK_OK(run_mul(TPU_I32, 2, other));
  CHECK(count_dumps(dir, name, sizeof name) == 1); /* off again */
  unlink(path);
  rmdir(dir);

  tpu_status missing = tpu_dump_configure("/nonexistent/torch_tpu_dump");
  CHECK(missing && strstr(tpu_status_message(missing), "/nonexistent/torch_tpu_dump") != NULL);
  tpu_status_free(missing);
}

int main(void) {
  if (check_runtime_init()) {
    test_recompile_reasons();
    test_dump_dir();
  }
  return check_finish("diagnostics");
}
