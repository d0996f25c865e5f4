/* Events: a mark on the work a device has been given. Recording one runs
 * the device's pending fused ops, then asks the plugin to call back when
 * each live storage of the device is ready, and each storage dropped while
 * its work still ran (inflight.c: a program whose results were all dropped
 * shows in no live storage); the mark is complete when the last callback has
 * come, and that moment is its completion time. So it covers all work
 * enqueued so far, as tpu_device_synchronize does by awaiting the same. */
#include <stdlib.h>
#include <time.h>

#include "exec/graph.h"
#include "exec/runtime_impl.h"
#include "pjrt/pjrt_event.h"

/* One record's state. Shared by the event and each pending callback, so it
 * outlives an event destroyed while its work still runs. */
typedef struct event_mark {
  atomic_int refcount;
  int device;
  pthread_mutex_t mutex;
  pthread_cond_t done_cond;
  int pending;          /* callbacks still to come (+1 while registering) */
  int64_t complete_ns;  /* CLOCK_MONOTONIC when pending reached 0 */
  tpu_status error;     /* the first failure among the marked work (owned) */
} event_mark;

struct tpu_event {
  bool timing;
  int device;        /* -1 until recorded */
  event_mark* mark;  /* the latest record; NULL until recorded; under the runtime lock */
};

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void mark_release(event_mark* m) {
  if (!m || atomic_fetch_sub(&m->refcount, 1) != 1) return;
  tpu_status_free(m->error);
  pthread_cond_destroy(&m->done_cond);
  pthread_mutex_destroy(&m->mutex);
  free(m);
}

/* One marked storage (or the registration itself) is done. */
static void mark_ready(void* user, tpu_status status) {
  event_mark* m = user;
  pthread_mutex_lock(&m->mutex);
  if (status && !m->error)
    m->error = status;
  else
    tpu_status_free(status);
  if (--m->pending == 0) {
    m->complete_ns = now_ns();
    pthread_cond_broadcast(&m->done_cond);
  }
  pthread_mutex_unlock(&m->mutex);
  mark_release(m);
}

/* Storage callbacks still to come, per device. The plugin may run them just
 * after an await of the same storage returns, so a device synchronize waits
 * for them too: every event recorded before it then reads as complete. */
static int callbacks_pending[MAX_DEVICES]; /* under callbacks_mutex */
static pthread_mutex_t callbacks_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t callbacks_done = PTHREAD_COND_INITIALIZER;

static void callbacks_add(int device, int delta) {
  pthread_mutex_lock(&callbacks_mutex);
  callbacks_pending[device] += delta;
  if (callbacks_pending[device] == 0) pthread_cond_broadcast(&callbacks_done);
  pthread_mutex_unlock(&callbacks_mutex);
}

/* One marked storage is ready. */
static void buffer_ready(void* user, tpu_status status) {
  int device = ((event_mark*)user)->device;
  mark_ready(user, status); /* may free the mark */
  callbacks_add(device, -1);
}

void event_callbacks_wait(int device) {
  if (device < 0 || device >= MAX_DEVICES) return;
  pthread_mutex_lock(&callbacks_mutex);
  while (callbacks_pending[device] > 0) pthread_cond_wait(&callbacks_done, &callbacks_mutex);
  pthread_mutex_unlock(&callbacks_mutex);
}

tpu_status tpu_event_create(bool enable_timing, tpu_event** out_event) {
  *out_event = NULL;
  tpu_event* event = calloc(1, sizeof *event);
  if (!event) return TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory creating an event");
  event->timing = enable_timing;
  event->device = -1;
  *out_event = event;
  return NULL;
}

void tpu_event_destroy(tpu_event* event) {
  if (!event) return;
  mark_release(event->mark);
  free(event);
}

int tpu_event_device(const tpu_event* event) { return event->device; }

/* The work writing one marked dropped storage is done. Nothing can read
 * that storage, so the mark does not take its error. */
static void dropped_ready(void* user, tpu_status status) {
  tpu_status_free(status);
  buffer_ready(user, NULL);
}

/* Counts one more callback to come for the mark. */
static void expect_callback(event_mark* m) {
  atomic_fetch_add(&m->refcount, 1);
  pthread_mutex_lock(&m->mutex);
  m->pending++;
  pthread_mutex_unlock(&m->mutex);
  callbacks_add(m->device, 1);
}

/* Registers the mark on one storage's readiness. Lock held. */
static tpu_status watch_buffer(tpu_buffer* b, void* context) {
  event_mark* m = context;
  expect_callback(m);
  tpu_status status = tpu_pjrt_buffer_on_ready(runtime_pjrt(), b->pjrt, b->writer, buffer_ready, m);
  if (status) buffer_ready(m, NULL); /* never called back: undo */
  return status;
}

/* Registers the mark on one dropped storage's readiness. Lock held. */
static tpu_status watch_dropped(struct PJRT_Event* ready, void* context) {
  event_mark* m = context;
  expect_callback(m);
  tpu_status status = tpu_pjrt_event_on_ready(runtime_pjrt(), ready, "a dropped storage", dropped_ready, m);
  if (status) buffer_ready(m, NULL);
  return status;
}

tpu_status tpu_event_record(tpu_event* event, int device) {
  if (device < 0 || device >= tpu_device_count())
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "recording an event on tpu:%d: there are %d tpu devices (0..%d)",
                     device, tpu_device_count(), tpu_device_count() - 1);
  event_mark* m = calloc(1, sizeof *m);
  if (!m) return TPU_ERROR(TPU_OUT_OF_MEMORY, "out of host memory recording an event");
  atomic_init(&m->refcount, 2); /* the event's, and the registration's until it ends */
  m->device = device;
  pthread_mutex_init(&m->mutex, NULL);
  pthread_cond_init(&m->done_cond, NULL);
  m->pending = 1;
  runtime_lock();
  tpu_status status = graph_flush(device);
  if (!status) status = buffers_for_each(device, watch_buffer, m);
  if (!status) status = inflight_for_each(device, watch_dropped, m);
  if (!status) {
    mark_release(event->mark);
    event->mark = m;
    event->device = device;
  }
  runtime_unlock();
  if (status) {
    mark_release(m); /* the reference the event would have held */
    mark_ready(m, NULL);
    return tpu_status_annotate(status, "recording an event on tpu:%d: ", device);
  }
  mark_ready(m, NULL); /* registration done: complete now if everything was ready */
  return NULL;
}

/* The event's latest mark with a reference for the caller, or NULL. */
static event_mark* mark_of(tpu_event* event) {
  runtime_lock();
  event_mark* m = event->mark;
  if (m) atomic_fetch_add(&m->refcount, 1);
  runtime_unlock();
  return m;
}

/* A copy of the mark's error for one caller. Mark mutex held. */
static tpu_status error_of(const event_mark* m) {
  if (!m->error) return NULL;
  return TPU_ERROR(tpu_status_code_of(m->error), "work before this event failed: %s",
                   tpu_status_message(m->error));
}

tpu_status tpu_event_query(tpu_event* event, bool* out_done) {
  *out_done = true;
  event_mark* m = mark_of(event);
  if (!m) return NULL;
  pthread_mutex_lock(&m->mutex);
  *out_done = m->pending == 0;
  tpu_status status = *out_done ? error_of(m) : NULL;
  pthread_mutex_unlock(&m->mutex);
  mark_release(m);
  return status;
}

tpu_status tpu_event_synchronize(tpu_event* event) {
  event_mark* m = mark_of(event);
  if (!m) return NULL;
  pthread_mutex_lock(&m->mutex);
  while (m->pending > 0) pthread_cond_wait(&m->done_cond, &m->mutex);
  tpu_status status = error_of(m);
  pthread_mutex_unlock(&m->mutex);
  mark_release(m);
  return status;
}

/* The completion time of a recorded, complete, timed event. */
static tpu_status completion_ns(tpu_event* event, const char* which, int64_t* out_ns) {
  if (!event->timing)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "elapsed time: the %s event was created without timing; "
                     "create both with enable_timing=True", which);
  event_mark* m = mark_of(event);
  if (!m)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "elapsed time: the %s event was never recorded", which);
  pthread_mutex_lock(&m->mutex);
  bool done = m->pending == 0;
  *out_ns = m->complete_ns;
  pthread_mutex_unlock(&m->mutex);
  mark_release(m);
  if (!done)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "elapsed time: the %s event has not completed; "
                     "call its synchronize() first", which);
  return NULL;
}

tpu_status tpu_event_elapsed_ms(tpu_event* start, tpu_event* end, double* out_ms) {
  *out_ms = 0;
  int64_t from = 0, to = 0;
  TPU_RETURN_IF_ERROR(completion_ns(start, "start", &from));
  TPU_RETURN_IF_ERROR(completion_ns(end, "end", &to));
  if (start->device != end->device)
    return TPU_ERROR(TPU_INVALID_ARGUMENT, "elapsed time between events of tpu:%d and tpu:%d; "
                     "record both on one device", start->device, end->device);
  *out_ms = (double)(to - from) / 1e6;
  return NULL;
}
