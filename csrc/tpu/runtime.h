/* The torch_tpu runtime's public API: one process-wide runtime over a PJRT
 * plugin, refcounted device storage, and the op call that runs any lowered
 * ATen op. The PyTorch glue (torch_tpu/csrc) is its only client; nothing
 * here knows PyTorch. All functions are thread-safe. */
#ifndef TPU_RUNTIME_H
#define TPU_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpu/dtype.h"
#include "tpu/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- runtime ---- */

/* Opens the plugin once; later calls with any path return OK. On the CPU
 * platform the plugin's own threads get `worker_nice` added to their nice
 * value (0: left alone), so they yield cores to the threads issuing ops, and
 * with `keep_freed_memory` freed host memory stays in the process for the
 * next execution instead of being unmapped and faulted in again. */
tpu_status tpu_runtime_init(const char* plugin_path, int cpu_device_count, int worker_nice,
                            bool keep_freed_memory);
bool tpu_runtime_ready(void);
int tpu_device_count(void);
/* Plugin facts for get_device_name and the metrics report ("" before init). */
const char* tpu_runtime_plugin_path(void);
const char* tpu_runtime_platform(void);
const char* tpu_runtime_platform_version(void);
const char* tpu_runtime_xla_version(void);
const char* tpu_runtime_device_kind(int device);
/* How many of the plugin's threads were given the worker nice value. */
int tpu_runtime_lowered_threads(void);
bool tpu_runtime_keeps_freed_memory(void);
void tpu_runtime_api_version(int* out_major, int* out_minor);

/* ---- storage ---- */

/* A device allocation of `nbytes`, refcounted. Its PJRT buffer is made on
 * first write (reads of never-written storage see zeros). Never dereference
 * a tpu_buffer* as memory: TPU buffers are tiled. */
typedef struct tpu_buffer tpu_buffer;

/* Hands back one reference through out_buffer. */
tpu_status tpu_buffer_create(int device, size_t nbytes, tpu_buffer** out_buffer);
void tpu_buffer_retain(tpu_buffer* buffer);  /* accepts NULL */
void tpu_buffer_release(tpu_buffer* buffer); /* accepts NULL; frees at zero */
size_t tpu_buffer_nbytes(const tpu_buffer* buffer);
int tpu_buffer_device(const tpu_buffer* buffer);

/* Whole-storage byte copies, for PyTorch's untyped storage copies (deepcopy,
 * torch.save, torch.load). The bytes are those of the element type the
 * storage was last written as; both sides have buffer's nbytes. A copy
 * between buffers (same device and size) gives dst src's element type. */
tpu_status tpu_buffer_copy(tpu_buffer* dst, tpu_buffer* src);
tpu_status tpu_buffer_to_host(tpu_buffer* src, void* dst);
/* Stored as uint8 unless dst already holds another element type. */
tpu_status tpu_buffer_from_host(tpu_buffer* dst, const void* src);
/* A tensor of `dtype` is placed on the storage: bytes stored as uint8 are
 * reinterpreted as a wider `dtype`; otherwise nothing changes. */
tpu_status tpu_buffer_retype(tpu_buffer* buffer, tpu_dtype dtype);

/* One measure of a device's storage, as PyTorch's allocator statistics
 * keep it: the live amount, its peak since tpu_memory_reset_peak, and the
 * amounts added and removed since tpu_memory_reset_totals. */
typedef struct tpu_memory_stat {
  int64_t current;
  int64_t peak;
  int64_t allocated;
  int64_t freed;
} tpu_memory_stat;

typedef struct tpu_memory_stats {
  tpu_memory_stat bytes;       /* bytes of storage */
  tpu_memory_stat allocations; /* storages */
} tpu_memory_stats;

/* Zeros for a device index out of range. */
tpu_memory_stats tpu_memory_stats_of(int device);
void tpu_memory_reset_peak(int device);
void tpu_memory_reset_totals(int device);
/* Free and total bytes of the device's memory (see tpu_pjrt_device_memory). */
tpu_status tpu_memory_info(int device, int64_t* out_free, int64_t* out_total);
/* Gives memory kept for reuse back to the system (torch.tpu.empty_cache):
 * the freed host memory kept under the CPU platform's keep_freed_memory.
 * Storage has no cache of its own: a freed storage's buffer is freed. */
void tpu_memory_release_cached(void);

/* ---- tensors: a strided view of a buffer ---- */

typedef struct tpu_tensor {
  tpu_buffer* buffer;  /* borrowed */
  tpu_dtype dtype;
  int rank;
  int64_t sizes[TPU_MAX_RANK];
  int64_t strides[TPU_MAX_RANK]; /* in elements */
  int64_t offset;                /* in elements */
} tpu_tensor;

/* Copies a view to dense row-major host memory of numel * itemsize bytes. */
tpu_status tpu_tensor_to_host(const tpu_tensor* src, void* dst);
/* Writes dense row-major host data of the view's dtype and numel into it. */
tpu_status tpu_tensor_from_host(const tpu_tensor* dst, const void* src);
/* Copies src into dst on the device (same device), converting the dtype and
 * broadcasting src to dst's shape. */
tpu_status tpu_tensor_copy(const tpu_tensor* dst, const tpu_tensor* src);

/* ---- op calls ---- */

typedef enum tpu_arg_kind {
  TPU_ARG_NONE = 0,    /* an absent optional */
  TPU_ARG_TENSOR,      /* on the device */
  TPU_ARG_TENSOR_LIST, /* entries may be TPU_ARG_NONE-like: buffer NULL */
  TPU_ARG_SCALAR,      /* a Python number: runtime value, not compiled in */
  TPU_ARG_INT,
  TPU_ARG_FLOAT,
  TPU_ARG_BOOL,
  TPU_ARG_INT_LIST,
  TPU_ARG_DTYPE,
  TPU_ARG_STRING,
  TPU_ARG_RNG,         /* a generator's (seed, offset) */
  TPU_ARG_FLOAT_LIST,  /* float[]: compiled in */
  TPU_ARG_SCALAR_LIST, /* Scalar[] (foreach lr lists): runtime values, as float64 */
} tpu_arg_kind;

typedef struct tpu_arg {
  tpu_arg_kind kind;
  union {
    tpu_tensor tensor;
    struct { const tpu_tensor* items; int count; } tensors; /* item.buffer NULL = None */
    /* type: TPU_BOOL, TPU_I64, TPU_F64 or TPU_C128 (f + imag i) */
    struct { tpu_dtype type; double f; int64_t i; double imag; } scalar;
    int64_t i;
    double f;
    bool b;
    struct { const int64_t* items; int count; } ints;
    struct { const double* items; int count; } floats; /* FLOAT_LIST, SCALAR_LIST */
    tpu_dtype dtype;
    const char* string;
    struct { uint64_t seed; uint64_t offset; } rng;
  } u;
} tpu_arg;

/* How float32 matmuls and convolutions may compute internally, as
 * torch.set_float32_matmul_precision says: HIGHEST in float32 (PyTorch's
 * default), HIGH in a faster form of near-float32 accuracy (TF32 or three
 * bfloat16 passes), MEDIUM in the device's fastest (one bfloat16 pass on a
 * TPU). Zero is HIGHEST, so a zeroed call gets PyTorch's default. */
typedef enum tpu_matmul_precision {
  TPU_MATMUL_HIGHEST = 0,
  TPU_MATMUL_HIGH,
  TPU_MATMUL_MEDIUM,
} tpu_matmul_precision;

/* One ATen op call. `name` is the schema name without namespace ("add_",
 * "add"), overload its overload name ("Tensor", "out", ""). Outputs are the
 * tensors the op writes: in-place self or out= arguments, known from the
 * start (their dtypes are part of the signature), or fresh tensors made
 * after the plan gives their types (then output_count is 0 until
 * tpu_op_execute). Results are converted and written through their views. */
typedef struct tpu_op_call {
  const char* name;
  const char* overload;
  int device;
  const tpu_arg* args;
  int arg_count;
  tpu_tensor* outputs;
  int output_count;
  tpu_matmul_precision matmul_precision; /* part of the signature */
} tpu_op_call;

typedef struct tpu_op_plan tpu_op_plan;

/* Whether any lowering exists for this op name (with or without a trailing
 * "_"). Cheap; lets the glue choose NotImplementedError or CPU fallback. */
bool tpu_op_supported(const char* name, const char* overload);

/* Finds the cached plan for this call's inputs; *out_plan is NULL on a miss
 * (then the caller infers output types and calls tpu_op_plan_create). The
 * plan is owned by the cache and lives until tpu_runtime shuts down. */
tpu_status tpu_op_lookup(const tpu_op_call* call, tpu_op_plan** out_plan);
/* Records the output dtypes, sizes and strides for this call's signature.
 * out_strides (or an entry of it) is NULL for contiguous outputs. host_data
 * is the caller's, kept with the plan (the glue keeps the returns that are
 * not tensors there); it is never freed. */
tpu_status tpu_op_plan_create(const tpu_op_call* call, int output_count,
                              const tpu_dtype* out_dtypes, const int* out_ranks,
                              const int64_t* const* out_sizes, const int64_t* const* out_strides,
                              void* host_data, tpu_op_plan** out_plan);
int tpu_op_plan_output_count(const tpu_op_plan* plan);
/* *out_strides is NULL for a contiguous output. */
void tpu_op_plan_output(const tpu_op_plan* plan, int index, tpu_dtype* out_dtype, int* out_rank,
                        const int64_t** out_sizes, const int64_t** out_strides);
void* tpu_op_plan_host_data(const tpu_op_plan* plan);
/* Lowers (once per output layout), compiles (cached) and runs the call,
 * writing every output. */
tpu_status tpu_op_execute(tpu_op_plan* plan, const tpu_op_call* call);

/* ---- eager modes ---- */

/* STRICT (the default) enqueues each op and returns; an execution error
 * surfaces at the next sync, naming the op. DEBUG also awaits every op, so
 * its error surfaces at the call. FUSED records ops into the device's
 * pending graph; a sync point runs the whole graph as one program (cached
 * by its text, so a loop compiles once). */
typedef enum tpu_eager_mode {
  TPU_EAGER_STRICT = 0,
  TPU_EAGER_DEBUG,
  TPU_EAGER_FUSED,
} tpu_eager_mode;

/* Runs any pending fused ops first. Process-wide. */
tpu_status tpu_set_eager_mode(tpu_eager_mode mode);
tpu_eager_mode tpu_get_eager_mode(void);
/* Runs the pending fused ops of `device` (enqueues; does not wait). Every
 * host read, host write and synchronize does this itself. */
tpu_status tpu_sync(int device);
/* Ops recorded and not yet run on `device`. */
int tpu_pending_op_count(int device);

/* ---- captured programs (torch.compile) ---- */

/* A graph of op calls captured once and run many times as one program. */
typedef struct tpu_program tpu_program;

/* Records every op on `device` into a new graph, whatever the eager mode,
 * after running pending fused ops. Nothing runs until tpu_program_run; a
 * host read of a captured value fails. */
tpu_status tpu_capture_begin(int device);
/* Ends the capture: reads of the storages of `inputs` become the program's
 * parameters (other storages it read are kept as constants), and the
 * storages of `outputs` its results. Drops the capture on error. */
tpu_status tpu_capture_end(int device, tpu_buffer* const* inputs, int input_count,
                           tpu_buffer* const* outputs, int output_count, tpu_program** out_program);
void tpu_capture_abort(int device);
/* Whether a capture is recording `device`'s ops. */
bool tpu_capturing(int device);
/* Ends the capture as a replayable graph (torch.accelerator.Graph, as a CUDA
 * graph): every storage the capture read or wrote that is still held outside
 * it, whether made before or during the capture, becomes an input, read at
 * each run as it then is and written in place where the capture wrote it;
 * storages freed during the capture were its temporaries. Hands back the
 * program and those storages, one reference each, in *out_storages (the
 * caller frees the array and releases each). */
tpu_status tpu_capture_end_replayable(int device, tpu_program** out_program, tpu_buffer*** out_storages,
                                      int* out_count);
/* Runs the program on new input storages (same sizes and dtypes as at
 * capture). Hands back one new reference per output: a fresh storage, or an
 * input's own when the output is that input. Inputs the graph wrote are
 * updated in place. Random ops draw (seed, offset + k) for k below
 * tpu_program_rng_count. */
tpu_status tpu_program_run(tpu_program* program, tpu_buffer* const* inputs, int input_count,
                           uint64_t rng_seed, uint64_t rng_offset, tpu_buffer** out_outputs);
uint64_t tpu_program_rng_count(const tpu_program* program);
/* Whether a run writes input `index` in place. */
bool tpu_program_writes_input(const tpu_program* program, int index);
int tpu_program_input_count(const tpu_program* program);
int tpu_program_output_count(const tpu_program* program);
void tpu_program_free(tpu_program* program); /* accepts NULL */

/* ---- metrics ---- */

typedef enum tpu_counter {
  TPU_COUNTER_COMPILE = 0,
  TPU_COUNTER_CACHE_HIT,
  TPU_COUNTER_EXECUTE,
  TPU_COUNTER_TRANSFER_TO_DEVICE,
  TPU_COUNTER_TRANSFER_TO_HOST,
  TPU_COUNTER_BYTES_TO_DEVICE,
  TPU_COUNTER_BYTES_TO_HOST,
  TPU_COUNTER_COMPILE_NANOS,
  TPU_COUNTER_DISK_HIT,   /* programs loaded from the disk cache */
  TPU_COUNTER_DISK_WRITE, /* programs written to it */
  TPU_COUNTER_PROGRAM_UNLOAD, /* executables unloaded to bound how many stay loaded */
  TPU_COUNTER_IN_PLACE,       /* storages a program wrote in place (their buffer donated) */
  TPU_COUNTER_DISK_PREFETCH,  /* disk hits found loaded by the warm-start prefetch */
  TPU_COUNTER_COUNT
} tpu_counter;

const char* tpu_counter_name(tpu_counter counter); /* "compile", "cache_hit", ... */
int64_t tpu_counter_get(tpu_counter counter);
void tpu_counter_add(tpu_counter counter, int64_t amount);
void tpu_counters_reset(void);

/* ---- diagnostics ---- */

/* Recompilation reasons: a new plan for an op that already had one with
 * another signature records the first difference, e.g. "aten::add.Tensor:
 * input 0 dim 1 changed 128 -> 256". The latest TPU_RECOMPILE_REASONS_MAX
 * are kept. */
#define TPU_RECOMPILE_REASONS_MAX 64
int64_t tpu_recompile_count(void); /* reasons noted since the last clear */
/* Copies kept reason `index` (0 = oldest kept) into out, truncated to
 * size; false when index is past the kept ones. */
bool tpu_recompile_reason(int index, char* out, size_t size);
void tpu_recompile_reasons_clear(void);

/* Writes every program compiled from now on into `dir` as <key hash>.mlir:
 * a comment header naming its cache key, then the StableHLO text. NULL or
 * "" stops. Failed writes are skipped, never an op's error. */
tpu_status tpu_dump_configure(const char* dir);

/* ---- persistent compile cache ---- */

/* Keeps compiled programs in `dir` (NULL or "" turns it off), at most
 * `max_bytes`, keyed by program text and this plugin's identity (platform,
 * PJRT and XLA versions, plugin file, compile options). Call after init. */
tpu_status tpu_cache_configure(const char* dir, int64_t max_bytes);
/* The directory ("" when off), its files and bytes, and the bound. */
void tpu_cache_stats(const char** out_dir, int64_t* out_entries, int64_t* out_bytes,
                     int64_t* out_max_bytes);
tpu_status tpu_cache_clear(void);
/* Starts loading the last session's programs from the disk cache on a
 * thread of its own, once per process (see csrc/cache/prefetch.h); the
 * first step then finds them loaded. */
void tpu_cache_prefetch(void);
/* Stops that thread and waits for it (at exit). */
void tpu_cache_prefetch_stop(void);

/* Blocks until all work enqueued on `device` is done, including work whose
 * results were all dropped; returns the first error of a result still held. */
tpu_status tpu_device_synchronize(int device);

/* ---- events ---- */

/* A point in a device's work, as a CUDA event is. Recording one runs the
 * device's pending fused ops and marks all work enqueued on the device so
 * far; the event is complete when that work is. A device has one in-order
 * queue that all its streams share, so waiting on an event orders nothing
 * that was not ordered already. */
typedef struct tpu_event tpu_event;

/* Hands back an unrecorded event (complete, no time) through out_event. */
tpu_status tpu_event_create(bool enable_timing, tpu_event** out_event);
/* Accepts NULL. Work the event waits on goes on without it. */
void tpu_event_destroy(tpu_event* event);
/* Marks the work enqueued on `device` until now, replacing any earlier mark. */
tpu_status tpu_event_record(tpu_event* event, int device);
/* Whether the marked work is done (true if never recorded); the work's
 * first error if it failed. */
tpu_status tpu_event_query(tpu_event* event, bool* out_done);
/* Blocks until the marked work is done; returns its first error. */
tpu_status tpu_event_synchronize(tpu_event* event);
/* Milliseconds from the completion of start's work to that of end's; both
 * must be recorded with timing enabled and complete. The completion time
 * is when the last marked buffer became ready, or the record time when
 * all of them already were. */
tpu_status tpu_event_elapsed_ms(tpu_event* start, tpu_event* end, double* out_ms);
int tpu_event_device(const tpu_event* event); /* -1 until recorded */

#ifdef __cplusplus
}
#endif

#endif
