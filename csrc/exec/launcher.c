/* The launcher thread (see launcher.h): a queue of execute calls, run in
 * order by one thread started on first use. */
#include <pthread.h>
#include <stdlib.h>

#include "exec/launcher.h"
#include "exec/runtime_impl.h"

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static launch_job* head; /* the queue, under mutex */
static launch_job* tail;
static bool running; /* a job is between the queue and done */
static bool started;

static void run(launch_job* job) {
  job->status = tpu_pjrt_execute(runtime_pjrt(), job->executable, job->device, job->args, job->arg_count,
                                 job->donated, job->results, job->result_count);
  for (size_t i = job->status ? job->replaced_count : 0; i < job->dropped_count; i++)
    job->dropped_ready[i] = storage_destroy(job->dropped[i]);
}

static void* launcher_main(void* unused) {
  (void)unused;
  pthread_mutex_lock(&mutex);
  for (;;) {
    while (!head) pthread_cond_wait(&changed, &mutex);
    launch_job* job = head;
    head = job->next;
    if (!head) tail = NULL;
    running = true;
    pthread_mutex_unlock(&mutex);
    run(job);
    pthread_mutex_lock(&mutex);
    job->done = true;
    running = false;
    pthread_cond_broadcast(&changed);
  }
  return NULL;
}

/* At exit the plugin's statics are torn down: no execute call may be
 * under way then. */
static void wait_idle(void) {
  pthread_mutex_lock(&mutex);
  while (head || running) pthread_cond_wait(&changed, &mutex);
  pthread_mutex_unlock(&mutex);
}

static bool start(void) {
  pthread_t thread;
  if (pthread_create(&thread, NULL, launcher_main, NULL) != 0) return false;
  pthread_detach(thread);
  atexit(wait_idle);
  return true;
}

void launch_submit(launch_job* job) {
  job->next = NULL;
  job->done = false;
  pthread_mutex_lock(&mutex);
  if (!started) started = start();
  if (!started) {
    pthread_mutex_unlock(&mutex);
    run(job);
    job->done = true;
    return;
  }
  if (tail)
    tail->next = job;
  else
    head = job;
  tail = job;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&mutex);
}

void launch_wait(launch_job* job) {
  pthread_mutex_lock(&mutex);
  while (!job->done) pthread_cond_wait(&changed, &mutex);
  pthread_mutex_unlock(&mutex);
}
