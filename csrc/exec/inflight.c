/* Storages dropped before the work writing them had finished, kept as their
 * ready events. A program whose results were all dropped still runs, and no
 * live storage shows it: a device synchronize and an event record wait on
 * these besides the live storages, as CUDA code timing a loop of discarded
 * results expects. (Asking the plugin for every execution's completion
 * event instead made strict training steps about 30% slower on the CPU
 * plugin.) Their errors are not reported from here: nothing
 * can read those results. Everything here but storage_destroy runs under the
 * runtime lock. */
#include <stdlib.h>

#include "exec/runtime_impl.h"
#include "pjrt/pjrt_event.h"

/* A ring per device, oldest first. Work completes about in issue order, so
 * when the ring is full the completed events are dropped from its front. */
typedef struct {
  struct PJRT_Event** events;
  size_t head, count, capacity;
} inflight_ring;

static inflight_ring rings[MAX_DEVICES];

static struct PJRT_Event** at(inflight_ring* r, size_t i) { return &r->events[(r->head + i) % r->capacity]; }

static struct PJRT_Event* take_oldest(inflight_ring* r) {
  struct PJRT_Event* oldest = *at(r, 0);
  r->head = (r->head + 1) % r->capacity;
  r->count--;
  return oldest;
}

static bool grow(inflight_ring* r) {
  size_t capacity = r->capacity ? 2 * r->capacity : 64;
  struct PJRT_Event** events = malloc(capacity * sizeof *events);
  if (!events) return false;
  for (size_t i = 0; i < r->count; i++) events[i] = *at(r, i);
  free(r->events);
  *r = (inflight_ring){events, 0, r->count, capacity};
  return true;
}

static void add(int device, struct PJRT_Event* ready) {
  inflight_ring* r = &rings[device];
  /* Pruned only when full, so most drops cost one readiness check. */
  if (r->count == r->capacity)
    while (r->count && tpu_pjrt_event_is_ready(runtime_pjrt(), *at(r, 0)))
      tpu_pjrt_event_destroy(runtime_pjrt(), take_oldest(r));
  if (r->count == r->capacity && !grow(r)) {
    /* No room to remember it: wait for it now. */
    tpu_status_free(tpu_pjrt_event_await(runtime_pjrt(), ready, "awaiting a dropped storage"));
    return;
  }
  *at(r, r->count++) = ready;
}

struct PJRT_Event* storage_destroy(struct PJRT_Buffer* storage) {
  if (!storage) return NULL;
  tpu_pjrt* pjrt = runtime_pjrt();
  struct PJRT_Event* ready = NULL;
  /* A storage that cannot say (a donated one) has nothing left to wait for. */
  tpu_status_free(tpu_pjrt_buffer_ready_event(pjrt, storage, &ready));
  if (ready && tpu_pjrt_event_is_ready(pjrt, ready)) {
    tpu_pjrt_event_destroy(pjrt, ready);
    ready = NULL;
  }
  tpu_pjrt_buffer_destroy(pjrt, storage);
  return ready;
}

void inflight_add(int device, struct PJRT_Event* ready) {
  if (ready) add(device, ready);
}

void inflight_drop_storage(int device, struct PJRT_Buffer* storage) {
  inflight_add(device, storage_destroy(storage));
}

void inflight_await_all(int device) {
  inflight_ring* r = &rings[device];
  while (r->count)
    tpu_status_free(tpu_pjrt_event_await(runtime_pjrt(), take_oldest(r), "awaiting a dropped storage"));
}

tpu_status inflight_for_each(int device, tpu_status (*fn)(struct PJRT_Event* ready, void* context),
                             void* context) {
  inflight_ring* r = &rings[device];
  for (size_t i = 0; i < r->count; i++) TPU_RETURN_IF_ERROR(fn(*at(r, i), context));
  return NULL;
}
