/* Events without PyTorch: recording, query, synchronize, elapsed time, the
 * fused ops a record runs, and the errors of misuse. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"
#include "tpu/runtime.h"

#define N 768 /* an N x N matmul takes tens of milliseconds on the CPU plugin */

typedef struct square {
  tpu_buffer* buffer;
  tpu_tensor t;
} square;

static square make_square(float fill) {
  square s = {NULL, {0}};
  CHECK_OK(tpu_buffer_create(0, (size_t)N * N * 4, &s.buffer));
  s.t = (tpu_tensor){s.buffer, TPU_F32, 2, {N, N}, {N, 1}, 0};
  float* host = malloc((size_t)N * N * 4);
  for (int i = 0; i < N * N; i++) host[i] = fill;
  CHECK_OK(tpu_tensor_from_host(&s.t, host));
  free(host);
  return s;
}

/* Element [0][0], read on the host (a sync point). */
static float corner(const square* s) {
  float value = 0;
  tpu_tensor one = s->t;
  one.rank = 0;
  CHECK_OK(tpu_tensor_to_host(&one, &value));
  return value;
}

static void release(square* a, square* b, square* c) {
  tpu_buffer_release(a->buffer);
  tpu_buffer_release(b->buffer);
  tpu_buffer_release(c->buffer);
}

/* out = a @ b, enqueued (or recorded, in fused mode). */
static void enqueue_mm(const square* a, const square* b, square* out) {
  tpu_arg args[2] = {{.kind = TPU_ARG_TENSOR, .u.tensor = a->t}, {.kind = TPU_ARG_TENSOR, .u.tensor = b->t}};
  tpu_op_call call = {.name = "mm", .overload = "", .args = args, .arg_count = 2, .outputs = &out->t, .output_count = 1};
  tpu_op_plan* plan = NULL;
  CHECK_OK(tpu_op_lookup(&call, &plan));
  if (!plan) {
    tpu_dtype dtype = TPU_F32;
    int rank = 2;
    const int64_t* sizes = out->t.sizes;
    CHECK_OK(tpu_op_plan_create(&call, 1, &dtype, &rank, &sizes, NULL, NULL, &plan));
  }
  CHECK_OK(tpu_op_execute(plan, &call));
}

static void test_unrecorded_event(void) {
  tpu_event* e = NULL;
  CHECK_OK(tpu_event_create(true, &e));
  bool done = false;
  CHECK_OK(tpu_event_query(e, &done));
  CHECK(done);
  CHECK_OK(tpu_event_synchronize(e));
  CHECK(tpu_event_device(e) == -1);
  double ms = -1;
  tpu_status s = tpu_event_elapsed_ms(e, e, &ms);
  CHECK(s && strstr(tpu_status_message(s), "never recorded"));
  tpu_status_free(s);
  s = tpu_event_record(e, tpu_device_count());
  CHECK(s && tpu_status_code_of(s) == TPU_INVALID_ARGUMENT && strstr(tpu_status_message(s), "tpu:"));
  tpu_status_free(s);
  tpu_event_destroy(e);
  tpu_event_destroy(NULL);
}

static void test_elapsed_time_of_a_matmul(void) {
  square a = make_square(1.0f), b = make_square(2.0f), c = make_square(0.0f);
  enqueue_mm(&a, &b, &c); /* compile outside the timed span */
  CHECK_OK(tpu_device_synchronize(0));
  tpu_event *start = NULL, *end = NULL;
  CHECK_OK(tpu_event_create(true, &start));
  CHECK_OK(tpu_event_create(true, &end));
  CHECK_OK(tpu_event_record(start, 0));
  for (int i = 0; i < 4; i++) enqueue_mm(&a, &b, &c);
  CHECK_OK(tpu_event_record(end, 0));
  CHECK(tpu_event_device(end) == 0);
  CHECK_OK(tpu_event_synchronize(end));
  bool done = false;
  CHECK_OK(tpu_event_query(end, &done));
  CHECK(done);
  CHECK_OK(tpu_event_synchronize(start));
  double ms = 0;
  CHECK_OK(tpu_event_elapsed_ms(start, end, &ms));
  printf("4 matmuls of %dx%d: %.2f ms\n", N, N, ms);
  CHECK(ms > 0.1 && ms < 60000);
  CHECK(corner(&c) == 2.0f * N);

  /* An event without timing measures nothing. */
  tpu_event* plain = NULL;
  CHECK_OK(tpu_event_create(false, &plain));
  CHECK_OK(tpu_event_record(plain, 0));
  CHECK_OK(tpu_event_synchronize(plain));
  tpu_status s = tpu_event_elapsed_ms(start, plain, &ms);
  CHECK(s && strstr(tpu_status_message(s), "enable_timing=True"));
  tpu_status_free(s);

  /* Destroyed while its work still runs: the callbacks outlive it. */
  enqueue_mm(&a, &b, &c);
  CHECK_OK(tpu_event_record(plain, 0));
  tpu_event_destroy(plain);
  CHECK_OK(tpu_device_synchronize(0));
  tpu_event_destroy(start);
  tpu_event_destroy(end);
  release(&a, &b, &c);
}

static void test_record_runs_pending_fused_ops(void) {
  square a = make_square(1.0f), b = make_square(3.0f), c = make_square(0.0f);
  CHECK_OK(tpu_set_eager_mode(TPU_EAGER_FUSED));
  enqueue_mm(&a, &b, &c);
  CHECK(tpu_pending_op_count(0) == 1);
  tpu_event* e = NULL;
  CHECK_OK(tpu_event_create(false, &e));
  CHECK_OK(tpu_event_record(e, 0));
  CHECK(tpu_pending_op_count(0) == 0);
  CHECK_OK(tpu_event_synchronize(e));
  bool done = false;
  CHECK_OK(tpu_event_query(e, &done));
  CHECK(done);
  CHECK_OK(tpu_set_eager_mode(TPU_EAGER_STRICT));
  CHECK(corner(&c) == 3.0f * N);
  tpu_event_destroy(e);
  release(&a, &b, &c);
}

/* After a device synchronize every event recorded before it is complete,
 * though the plugin may run its ready callbacks just after the awaits
 * return (the race shows on some of these rounds without the wait). */
static void test_synchronize_completes_recorded_events(void) {
  square a = make_square(1.0f), b = make_square(1.0f), c = make_square(0.0f);
  tpu_event* e = NULL;
  CHECK_OK(tpu_event_create(false, &e));
  int incomplete = 0;
  for (int round = 0; round < 50; round++) {
    enqueue_mm(&a, &b, &c);
    CHECK_OK(tpu_event_record(e, 0));
    CHECK_OK(tpu_device_synchronize(0));
    bool done = false;
    CHECK_OK(tpu_event_query(e, &done));
    incomplete += !done;
  }
  CHECK(incomplete == 0);
  tpu_event_destroy(e);
  release(&a, &b, &c);
}

/* Work whose results were all dropped still runs: an event recorded after
 * it is not complete until that work is done, and a device synchronize
 * waits for it. */
static void drop_a_product(const square* a, const square* b) {
  square dropped = make_square(0.0f);
  enqueue_mm(a, b, &dropped);
  tpu_buffer_release(dropped.buffer);
}

static void test_dropped_results_are_waited_for(void) {
  square a = make_square(1.0f), b = make_square(1.0f), c = make_square(0.0f);
  enqueue_mm(&a, &b, &c); /* compile first */
  CHECK_OK(tpu_device_synchronize(0));
  tpu_event* e = NULL;
  CHECK_OK(tpu_event_create(false, &e));
  /* Eight N^3 products take tens of milliseconds, the query microseconds:
   * enough margin for a loaded machine to pause this thread a while. */
  for (int i = 0; i < 8; i++) drop_a_product(&a, &b);
  CHECK_OK(tpu_event_record(e, 0));
  bool done = true;
  CHECK_OK(tpu_event_query(e, &done));
  CHECK(!done);
  CHECK_OK(tpu_device_synchronize(0));
  CHECK_OK(tpu_event_query(e, &done));
  CHECK(done);
  /* 70 at once outgrow the first ring of remembered storages. */
  for (int i = 0; i < 70; i++) drop_a_product(&a, &b);
  CHECK_OK(tpu_event_record(e, 0));
  CHECK_OK(tpu_device_synchronize(0));
  CHECK_OK(tpu_event_query(e, &done));
  CHECK(done);
  tpu_event_destroy(e);
  release(&a, &b, &c);
}

int main(void) {
  if (check_runtime_init()) {
    test_unrecorded_event();
    test_elapsed_time_of_a_matmul();
    test_record_runs_pending_fused_ops();
    test_synchronize_completes_recorded_events();
    test_dropped_results_are_waited_for();
  }
  return check_finish("events");
}
