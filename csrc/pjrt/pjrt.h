/* The PJRT layer: one loaded plugin, its client and addressable devices.
 * Everything the runtime asks of a PJRT plugin goes through these calls; no
 * other file includes pjrt_c_api.h. Every plugin error becomes a tpu_status
 * carrying the plugin's own message. Callers serialize calls (exec/ holds the
 * runtime lock); this layer keeps no lock of its own. */
#ifndef TPU_PJRT_H
#define TPU_PJRT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpu/dtype.h"
#include "tpu/status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct PJRT_Buffer;
struct PJRT_LoadedExecutable;

typedef struct tpu_pjrt tpu_pjrt;

typedef struct tpu_pjrt_options {
  const char* plugin_path; /* a PJRT plugin .so; required */
  int cpu_device_count;    /* CPU plugin's create option; 0 = plugin default */
  /* On the CPU platform, added to the nice value of the threads the plugin
   * starts while it opens, so they yield the host's cores to the threads
   * issuing work (see pjrt_threads.c); 0 leaves them alone. */
  int worker_nice;
  /* Keep freed host memory in the process instead of returning large blocks
   * to the system at each free (pjrt_host_memory.c). Process-wide and set
   * before the plugin starts its threads, so before its platform is known:
   * ask for it with the CPU plugin only, whose device memory is the host's. */
  bool keep_freed_memory;
} tpu_pjrt_options;

/* Loads the plugin (never dlclosed), checks its API version, initializes it,
 * creates a client and lists addressable devices. *out_pjrt is NULL on error. */
tpu_status tpu_pjrt_open(const tpu_pjrt_options* options, tpu_pjrt** out_pjrt);
/* Destroys the client. Every buffer and executable must be destroyed first.
 * Accepts NULL. */
void tpu_pjrt_close(tpu_pjrt* pjrt);

const char* tpu_pjrt_plugin_path(const tpu_pjrt* pjrt);
const char* tpu_pjrt_platform_name(const tpu_pjrt* pjrt);    /* "cpu", "cuda", "tpu" */
/* Whether an execution takes a buffer of any shape holding the parameter's
 * element type and count. The CPU plugin's buffers are dense row-major bytes
 * and it checks only their size (test_pjrt holds it to that); elsewhere the
 * shapes must match (GPU) or the device layout follows the shape (TPU tiles). */
bool tpu_pjrt_buffers_shape_free(const tpu_pjrt* pjrt);
const char* tpu_pjrt_platform_version(const tpu_pjrt* pjrt);
const char* tpu_pjrt_xla_version(const tpu_pjrt* pjrt);      /* "" when not reported */
int tpu_pjrt_api_major(const tpu_pjrt* pjrt);
int tpu_pjrt_api_minor(const tpu_pjrt* pjrt);
int tpu_pjrt_device_count(const tpu_pjrt* pjrt);
/* How many of the plugin's threads were given worker_nice. */
int tpu_pjrt_lowered_threads(const tpu_pjrt* pjrt);
/* Whether keep_freed_memory took effect. */
bool tpu_pjrt_keeps_freed_memory(const tpu_pjrt* pjrt);
const char* tpu_pjrt_device_kind(const tpu_pjrt* pjrt, int device); /* "" if out of range */
/* The device's free and total memory in bytes: the plugin's limit less its
 * bytes in use where it reports a limit; on the CPU platform, whose device
 * memory is the host's, the host's available and total memory. */
tpu_status tpu_pjrt_device_memory(tpu_pjrt* pjrt, int device, int64_t* out_free, int64_t* out_total);
/* Gives freed memory the process keeps for reuse (keep_freed_memory) back to
 * the system. */
void tpu_pjrt_release_freed_memory(tpu_pjrt* pjrt);

/* Copies a dense row-major host array to a new buffer on `device`. Returns
 * once the host memory may be reused. */
tpu_status tpu_pjrt_buffer_from_host(tpu_pjrt* pjrt, int device, tpu_dtype dtype,
                                     const int64_t* dims, int rank, const void* data,
                                     struct PJRT_Buffer** out_buffer);
/* Copies a buffer to dense row-major host memory of exactly `nbytes`; blocks
 * until done, so it also surfaces the error of the program that made it. */
tpu_status tpu_pjrt_buffer_to_host(tpu_pjrt* pjrt, struct PJRT_Buffer* buffer, void* dst,
                                   size_t nbytes);
/* Blocks until the buffer is ready; returns the error that made it fail. */
tpu_status tpu_pjrt_buffer_await(tpu_pjrt* pjrt, struct PJRT_Buffer* buffer);
void tpu_pjrt_buffer_destroy(tpu_pjrt* pjrt, struct PJRT_Buffer* buffer); /* accepts NULL */

/* Compiles StableHLO MLIR text for one device (portable: runs on any device
 * given to execute). Never sends empty compile options. */
tpu_status tpu_pjrt_compile(tpu_pjrt* pjrt, const char* mlir, size_t mlir_size,
                            struct PJRT_LoadedExecutable** out_executable);
/* Names the compile options tpu_pjrt_compile sends (for cache keys). */
const char* tpu_pjrt_compile_options_name(void);
/* Serialized executable bytes (malloc'd, caller frees) and the reverse. */
tpu_status tpu_pjrt_executable_serialize(tpu_pjrt* pjrt, struct PJRT_LoadedExecutable* executable,
                                         char** out_bytes, size_t* out_size);
tpu_status tpu_pjrt_executable_deserialize(tpu_pjrt* pjrt, const char* bytes, size_t size,
                                           struct PJRT_LoadedExecutable** out_executable);
size_t tpu_pjrt_executable_output_count(tpu_pjrt* pjrt, struct PJRT_LoadedExecutable* executable);
void tpu_pjrt_executable_destroy(tpu_pjrt* pjrt, struct PJRT_LoadedExecutable* executable);

/* Runs on `device`. Fills out_outputs[0..output_count) with new buffers;
 * returns without waiting for the computation. The plugin writes one buffer
 * per output of the program, so output_count must be
 * tpu_pjrt_executable_output_count's (read it once per executable: the
 * plugin builds every output's shape to answer).
 * donated (NULL: none) marks the inputs handed to the program: it may write
 * an output aliased to one in place (tf.aliasing_output), once the work
 * already enqueued that reads it is done. A donated input is unusable
 * afterwards (destroy it), and must appear once in args. */
tpu_status tpu_pjrt_execute(tpu_pjrt* pjrt, struct PJRT_LoadedExecutable* executable, int device,
                            struct PJRT_Buffer* const* args, size_t arg_count, const bool* donated,
                            struct PJRT_Buffer** out_outputs, size_t output_count);

#ifdef __cplusplus
}
#endif

#endif
