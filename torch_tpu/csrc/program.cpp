// Captured programs for torch.compile: the glue around tpu_capture_* and
// tpu_program_run. Converts tensors to storages and back; the graph work
// is the C runtime's.
#include <torch/csrc/autograd/python_variable.h>
#include <torch/extension.h>

#include <unordered_map>

#include "bridge.h"

namespace torch_tpu {
namespace {

void release_buffer(void* context) { tpu_buffer_release(static_cast<tpu_buffer*>(context)); }

tpu_buffer* buffer_of(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, what, " must be a tpu tensor, got one on ",
              t.device());
  return static_cast<tpu_buffer*>(t.storage().data_ptr().get());
}

std::vector<tpu_buffer*> buffers_of(const std::vector<at::Tensor>& tensors, const char* what) {
  std::vector<tpu_buffer*> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) out.push_back(buffer_of(t, what));
  return out;
}

// The view an output had at capture; each run returns the same view of
// that output's new storage.
struct OutputView {
  at::ScalarType dtype;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t offset;
};

class Program {
 public:
  Program(tpu_program* program, int device, std::vector<OutputView> views)
      : program_(program), device_(device), views_(std::move(views)) {}
  ~Program() { tpu_program_free(program_); }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) {
    std::vector<tpu_buffer*> in = buffers_of(inputs, "a compiled graph's input");
    uint64_t seed = 0, offset = 0;
    uint64_t draws = tpu_program_rng_count(program_);
    if (draws) reserve_rng_offsets(device_, draws, &seed, &offset);
    std::vector<tpu_buffer*> out(views_.size());
    {
      py::gil_scoped_release release;
      check(tpu_program_run(program_, in.data(), static_cast<int>(in.size()), seed, offset, out.data()));
    }
    // Outputs on one storage share one Storage (each holds one reference).
    std::unordered_map<tpu_buffer*, c10::Storage> storages;
    std::vector<at::Tensor> tensors;
    tensors.reserve(out.size());
    c10::Device device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device_));
    for (size_t k = 0; k < out.size(); k++) {
      tpu_buffer* b = out[k];
      auto found = storages.find(b);
      if (found == storages.end()) {
        c10::Storage storage(c10::Storage::use_byte_size_t(), tpu_buffer_nbytes(b),
                             c10::DataPtr(b, b, &release_buffer, device), allocator(), true);
        found = storages.emplace(b, std::move(storage)).first;
      } else {
        tpu_buffer_release(b);
      }
      const OutputView& v = views_[k];
      auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(found->second),
                                                      c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                      caffe2::TypeMeta::fromScalarType(v.dtype));
      impl->set_sizes_and_strides(v.sizes, v.strides, v.offset);
      tensors.emplace_back(std::move(impl));
    }
    return tensors;
  }

  std::vector<int> written_inputs() const {
    std::vector<int> out;
    for (int i = 0; i < tpu_program_input_count(program_); i++)
      if (tpu_program_writes_input(program_, i)) out.push_back(i);
    return out;
  }

 private:
  tpu_program* program_;
  int device_;
  std::vector<OutputView> views_;
};

void capture_begin(int device) {
  check_device_index(device);
  check(tpu_capture_begin(device));
}

std::unique_ptr<Program> capture_end(int device, const std::vector<at::Tensor>& inputs,
                                     const std::vector<at::Tensor>& outputs) {
  std::vector<tpu_buffer*> in = buffers_of(inputs, "a captured graph's input");
  std::vector<tpu_buffer*> out = buffers_of(outputs, "a captured graph's output");
  std::vector<OutputView> views;
  for (const auto& t : outputs)
    views.push_back({t.scalar_type(), t.sizes().vec(), t.strides().vec(), t.storage_offset()});
  tpu_program* program = nullptr;
  {
    py::gil_scoped_release release;  // compiles
    check(tpu_capture_end(device, in.data(), static_cast<int>(in.size()), out.data(),
                          static_cast<int>(out.size()), &program));
  }
  return std::make_unique<Program>(program, device, std::move(views));
}

// One tensor's part of a call's key, ahead of its sizes and strides.
struct TensorKey {
  int16_t dtype, device_type, device_index, dim;
  int64_t offset, nbytes, shared;
};

// Numbers a call's tensors by storage, in order of first sight: which
// inputs share a storage is part of the key. An open-addressing table the
// thread keeps, as a node per tensor (a train step's graphs take hundreds)
// cost more than the rest of the key.
class StorageNumbers {
 public:
  void reset(size_t tensors) {
    bits_ = 4;
    while ((size_t{1} << bits_) < 2 * tensors) bits_++;
    slots_.assign(size_t{1} << bits_, Slot{});
    counts_[0] = counts_[1] = 0;
  }
  int64_t number(const void* storage, bool on_cpu) {
    size_t mask = slots_.size() - 1;
    // Fibonacci hashing: storages are aligned, so their low bits say little.
    uint64_t mixed = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(storage)) * 0x9E3779B97F4A7C15ull;
    for (size_t i = static_cast<size_t>(mixed >> (64 - bits_));; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (s.used && s.storage == storage && s.on_cpu == on_cpu) return s.number;
      if (!s.used) {
        s = {storage, on_cpu, true, counts_[on_cpu]++};
        return s.number;
      }
    }
  }

 private:
  struct Slot {
    const void* storage = nullptr;
    bool on_cpu = false, used = false;
    int64_t number = 0;
  };
  std::vector<Slot> slots_;
  int bits_ = 4;
  int64_t counts_[2] = {0, 0};
};

// A compiled graph's calls: each call's signature, which its captured
// program depends on (each tensor's dtype, device, view layout and storage
// size, which inputs share a storage; the other arguments by type and
// value), and its tensor inputs, CPU ones copied to the tpu. The tensor
// part of a signature runs to kilobytes in a train step's graphs: it is
// written a few blocks a tensor into a buffer the thread keeps and
// interned here as a number, so a call allocates and hashes no key object.
class GraphCalls {
 public:
  py::tuple call(const py::sequence& args) {
    thread_local std::string key;
    thread_local StorageNumbers storages;
    key.clear();
    storages.reset(args.size());
    py::list others;
    std::vector<at::Tensor> inputs;
    inputs.reserve(args.size());
    for (const py::handle& a : args) {
      if (!THPVariable_Check(a.ptr())) {
        others.append(py::make_tuple(py::type::handle_of(a), a));
        continue;
      }
      const at::Tensor& t = THPVariable_Unpack(a.ptr());
      bool on_cpu = t.device().type() == c10::kCPU;
      const c10::Storage& storage = t.unsafeGetTensorImpl()->unsafe_storage();
      TensorKey head = {static_cast<int16_t>(t.scalar_type()), static_cast<int16_t>(t.device().type()),
                        static_cast<int16_t>(t.device().index()), static_cast<int16_t>(t.dim()),
                        t.storage_offset(), static_cast<int64_t>(storage.nbytes()),
                        storages.number(storage.data(), on_cpu) * 2 + (on_cpu ? 1 : 0)};
      key.append(reinterpret_cast<const char*>(&head), sizeof head);
      key.append(reinterpret_cast<const char*>(t.sizes().data()), t.dim() * sizeof(int64_t));
      key.append(reinterpret_cast<const char*>(t.strides().data()), t.dim() * sizeof(int64_t));
      inputs.push_back(on_cpu ? t.to(c10::Device(c10::DeviceType::PrivateUse1,
                                                 static_cast<c10::DeviceIndex>(current_device())))
                              : t);
    }
    // Looked up before inserting: emplace would copy the key first, and a
    // large allocation makes glibc consolidate its free lists.
    auto found = ids_.find(key);
    int64_t id = found != ids_.end() ? found->second
                                     : ids_.emplace(key, static_cast<int64_t>(ids_.size())).first->second;
    return py::make_tuple(py::make_tuple(id, py::tuple(others)), inputs);
  }

 private:
  std::unordered_map<std::string, int64_t> ids_;
};

}  // namespace

void register_program(py::module& m) {
  py::class_<Program>(m, "_Program").def("run", &Program::run).def("written_inputs", &Program::written_inputs);
  py::class_<GraphCalls>(m, "_GraphCalls").def(py::init<>()).def("call", &GraphCalls::call);
  m.def("_capture_begin", &capture_begin);
  m.def("_capture_end", &capture_end);
  m.def("_capture_abort", [](int device) { tpu_capture_abort(device); });
  m.def("_capturing", [](int device) { return tpu_capturing(device); });
}

}  // namespace torch_tpu
