// torch_tpu._C: the Python entry points of the runtime (init, device facts,
// memory, counters, RNG state, CPU fallback switch, eager modes, diagnostics,
// current streams).
#include <torch/csrc/Event.h>
#include <torch/extension.h>

#include "bridge.h"
#include "stream.h"

namespace torch_tpu {
namespace {

void init(const std::string& plugin_path, int cpu_device_count, int worker_nice, bool keep_freed_memory) {
  check(tpu_runtime_init(plugin_path.c_str(), cpu_device_count, worker_nice, keep_freed_memory));
}

py::dict runtime_info() {
  py::dict info;
  int major = 0, minor = 0;
  tpu_runtime_api_version(&major, &minor);
  info["plugin_path"] = tpu_runtime_plugin_path();
  info["platform"] = tpu_runtime_platform();
  info["platform_version"] = tpu_runtime_platform_version();
  info["xla_version"] = tpu_runtime_xla_version();
  info["pjrt_api_version"] = std::to_string(major) + "." + std::to_string(minor);
  info["device_count"] = tpu_device_count();
  info["worker_threads_niced"] = tpu_runtime_lowered_threads();
  info["keeps_freed_host_memory"] = tpu_runtime_keeps_freed_memory();
  return info;
}

std::string device_kind(int device) {
  check_device_index(device);
  return tpu_runtime_device_kind(device);
}

py::dict counters() {
  py::dict out;
  for (int c = 0; c < TPU_COUNTER_COUNT; c++)
    out[tpu_counter_name(static_cast<tpu_counter>(c))] = tpu_counter_get(static_cast<tpu_counter>(c));
  int64_t total = 0;
  py::dict per_op;
  for (const auto& [op, n] : cpu_fallback_counts()) {
    per_op[op.c_str()] = n;
    total += n;
  }
  out["cpu_fallback"] = total;
  out["cpu_fallback_ops"] = per_op;
  out["recompile"] = tpu_recompile_count();
  return out;
}

void reset_counters() {
  tpu_counters_reset();
  reset_cpu_fallback_counts();
  tpu_recompile_reasons_clear();
}

py::list recompile_reasons() {
  py::list out;
  char reason[512];
  for (int i = 0; tpu_recompile_reason(i, reason, sizeof reason); i++) out.append(reason);
  return out;
}

// Eager modes by name; the runtime's enum stays inside the glue.
const std::pair<const char*, tpu_eager_mode> eager_modes[] = {
    {"strict", TPU_EAGER_STRICT}, {"debug", TPU_EAGER_DEBUG}, {"fused", TPU_EAGER_FUSED}};

void set_eager_mode(const std::string& name) {
  for (const auto& [known, mode] : eager_modes) {
    if (name != known) continue;
    py::gil_scoped_release release;  // runs any pending fused ops
    check(tpu_set_eager_mode(mode));
    return;
  }
  std::string names;
  for (const auto& [known, mode] : eager_modes) names += std::string(names.empty() ? "" : ", ") + known;
  TORCH_CHECK_VALUE(false, "unknown eager mode '", name, "'; use one of: ", names);
}

std::string eager_mode() {
  tpu_eager_mode current = tpu_get_eager_mode();
  for (const auto& [name, mode] : eager_modes)
    if (mode == current) return name;
  return "unknown";
}

void sync_device(int device) {
  check_device_index(device);
  py::gil_scoped_release release;
  check(tpu_sync(device));
}

at::Generator generator(int device) { return default_generator(device); }

py::dict cache_stats() {
  const char* dir;
  int64_t entries, bytes, max_bytes;
  tpu_cache_stats(&dir, &entries, &bytes, &max_bytes);
  py::dict out;
  out["dir"] = dir;
  out["entries"] = entries;
  out["bytes"] = bytes;
  out["max_bytes"] = max_bytes;
  return out;
}

void synchronize(int device) {
  check_device_index(device);
  py::gil_scoped_release release;
  check(tpu_device_synchronize(device));
}

}  // namespace
}  // namespace torch_tpu

namespace torch_tpu {
void register_program(py::module& m);  // program.cpp
void register_graph();                   // graph.cpp
}

PYBIND11_MODULE(_C, m) {
  torch_tpu::register_program(m);
  torch_tpu::register_graph();
  using namespace torch_tpu;
  m.def("_init", &init);
  m.def("_runtime_info", &runtime_info);
  m.def("_device_kind", &device_kind);
  m.def("_current_device", &current_device);
  m.def("_set_device", &set_current_device);
  m.def("_synchronize", &synchronize);
  m.def("_default_generator", &generator);
  m.def("_counters", &counters);
  m.def("_reset_counters", &reset_counters);
  m.def("_set_cpu_fallback", &set_cpu_fallback);
  m.def("_cache_configure", [](const std::string& dir, int64_t max_bytes) {
    check(tpu_cache_configure(dir.c_str(), max_bytes));
  });
  m.def("_cache_stats", &cache_stats);
  m.def("_cache_clear", [] { check(tpu_cache_clear()); });
  m.def("_cache_prefetch", [] { tpu_cache_prefetch(); });
  m.def("_cache_prefetch_stop", [] {
    py::gil_scoped_release no_gil;  // waits for the loader's current file
    tpu_cache_prefetch_stop();
  });
  m.def("_cpu_fallback_enabled", &cpu_fallback_enabled);
  m.def("_recompile_reasons", &recompile_reasons);
  m.def("_dump_configure", [](const std::string& dir) { check(tpu_dump_configure(dir.c_str())); });
  m.def("_set_eager_mode", &set_eager_mode);
  m.def("_eager_mode", &eager_mode);
  m.def("_sync", &sync_device);
  m.def("_pending_op_count", [](int d) { check_device_index(d); return tpu_pending_op_count(d); });
  m.def("_current_stream", [](int d) {
    c10::Stream s = current_stream(d);
    return py::make_tuple(s.id(), s.device_index(), static_cast<int>(s.device_type()));
  });
  // torch.Event.elapsed_time accepts only exact torch.Event objects; this
  // also takes torch.tpu.Event, its subclass.
  m.def("_event_elapsed_time", [](py::handle start, py::handle end) {
    TORCH_CHECK_TYPE(THPEvent_Check(start.ptr()) && THPEvent_Check(end.ptr()),
                     "elapsed_time expects two torch.Event objects");
    return reinterpret_cast<THPEvent*>(start.ptr())->event.elapsedTime(
        reinterpret_cast<THPEvent*>(end.ptr())->event);
  });
  m.def("_set_stream", [](int64_t id, int d, int type) {
    set_current_stream(c10::Stream::unpack3(id, static_cast<c10::DeviceIndex>(d), static_cast<c10::DeviceType>(type)));
  });
}
