// Conversions between PyTorch and the C runtime: statuses to exceptions,
// dtypes, and tensors to tpu_tensor views. Only the glue includes this.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/Allocator.h>

extern "C" {
#include "tpu/runtime.h"
}

namespace torch_tpu {

// Raises a failed status as a Python exception: UNIMPLEMENTED as
// NotImplementedError, everything else as RuntimeError. Frees the status.
void check(tpu_status status);

tpu_dtype to_tpu_dtype(at::ScalarType type, const char* op);
at::ScalarType to_scalar_type(tpu_dtype dtype);

// The view of a tpu tensor (borrowing its storage's buffer).
tpu_tensor to_tpu_tensor(const at::Tensor& t, const char* op);

c10::Allocator* allocator();
int current_device();
void set_current_device(int index);
// Raises a clear error for an index outside 0..device_count-1.
void check_device_index(int index);

// The default generator of a device; random ops advance its offset.
const at::Generator& default_generator(int device);
// (seed, offset) for one random op on `generator` (or the default).
void next_rng_state(const std::optional<at::Generator>& generator, int device, uint64_t* seed,
                    uint64_t* offset);

// Reserves `count` consecutive offsets of the device's default generator
// (a compiled graph's random ops); (seed, first offset) come back.
void reserve_rng_offsets(int device, uint64_t count, uint64_t* seed, uint64_t* offset);

// The one boxed kernel that runs every lowered ATen op (fallback.cpp).
void tpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Whether unsupported ops run on the CPU, and the per-op fallback counts.
bool cpu_fallback_enabled();
void set_cpu_fallback(bool enabled);
void count_cpu_fallback(const std::string& op);
std::map<std::string, int64_t> cpu_fallback_counts();
void reset_cpu_fallback_counts();

}  // namespace torch_tpu
