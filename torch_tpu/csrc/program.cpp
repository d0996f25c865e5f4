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

// A compiled graph's call in one pass: the signature its captured program
// depends on (each tensor's dtype, device, view layout and storage size,
// which inputs share a storage; the other arguments by type and value) and
// its tensor inputs, CPU ones copied to the tpu. Per call, so in C++: a
// train step's graphs take hundreds of tensors, so the key is written a
// few blocks a tensor into a buffer the thread keeps.
py::tuple graph_call(const py::sequence& args) {
  thread_local std::string key;
  key.clear();
  py::list others;
  std::vector<at::Tensor> inputs;
  inputs.reserve(args.size());
  std::unordered_map<const void*, int64_t> cpu_storages, tpu_storages;
  for (const py::handle& a : args) {
    if (!THPVariable_Check(a.ptr())) {
      others.append(py::make_tuple(py::type::handle_of(a), a));
      continue;
    }
    const at::Tensor& t = THPVariable_Unpack(a.ptr());
    bool on_cpu = t.device().type() == c10::kCPU;
    auto& storages = on_cpu ? cpu_storages : tpu_storages;
    const c10::Storage& storage = t.unsafeGetTensorImpl()->unsafe_storage();
    int64_t shared = storages.emplace(storage.data(), static_cast<int64_t>(storages.size())).first->second;
    TensorKey head = {static_cast<int16_t>(t.scalar_type()), static_cast<int16_t>(t.device().type()),
                      static_cast<int16_t>(t.device().index()), static_cast<int16_t>(t.dim()),
                      t.storage_offset(), static_cast<int64_t>(storage.nbytes()),
                      shared * 2 + (on_cpu ? 1 : 0)};
    key.append(reinterpret_cast<const char*>(&head), sizeof head);
    key.append(reinterpret_cast<const char*>(t.sizes().data()), t.dim() * sizeof(int64_t));
    key.append(reinterpret_cast<const char*>(t.strides().data()), t.dim() * sizeof(int64_t));
    inputs.push_back(on_cpu ? t.to(c10::Device(c10::DeviceType::PrivateUse1,
                                               static_cast<c10::DeviceIndex>(current_device())))
                            : t);
  }
  return py::make_tuple(py::make_tuple(py::bytes(key), py::tuple(others)), inputs);
}

}  // namespace

void register_program(py::module& m) {
  py::class_<Program>(m, "_Program").def("run", &Program::run).def("written_inputs", &Program::written_inputs);
  m.def("_graph_call", &graph_call);
  m.def("_capture_begin", &capture_begin);
  m.def("_capture_end", &capture_end);
  m.def("_capture_abort", [](int device) { tpu_capture_abort(device); });
}

}  // namespace torch_tpu
