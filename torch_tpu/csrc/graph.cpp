// torch.accelerator.Graph on the tpu: a capture of eager ops replayed as one
// program, as a CUDA graph replays its kernels. The capture and the program
// are the C runtime's (tpu_capture_end_replayable); this registers them as
// PyTorch's graph implementation for the device.
#include <ATen/core/GraphImplInterface.h>

#include "bridge.h"

namespace torch_tpu {
namespace {

class TpuGraph final : public at::GraphImplInterface {
 public:
  explicit TpuGraph(const at::GraphImplArgs&) {}
  ~TpuGraph() override { reset(); }

  // One pool, the device's: storages made in a capture are its tensors'.
  void capture_begin(c10::MempoolId_t, at::GraphCaptureMode) override {
    TORCH_CHECK(!program_, "this graph already holds a capture; call reset() before capturing again");
    device_ = current_device();
    check(tpu_capture_begin(device_));
  }

  // PyTorch's bindings release the GIL around these calls.
  void capture_end() override {
    check(tpu_capture_end_replayable(device_, &program_, &storages_, &count_));
  }

  void instantiate() override {}  // compiled at capture_end

  // Reads the captured storages as they are now and writes those the
  // capture wrote; random ops draw new numbers each replay.
  void replay() override {
    TORCH_CHECK(program_, "replay() of a graph that holds no capture: capture with `with graph:` first");
    uint64_t seed = 0, offset = 0, draws = tpu_program_rng_count(program_);
    if (draws) reserve_rng_offsets(device_, draws, &seed, &offset);
    tpu_buffer* no_outputs = nullptr;
    check(tpu_program_run(program_, storages_, count_, seed, offset, &no_outputs));
  }

  void reset() override {
    tpu_program_free(program_);
    program_ = nullptr;
    for (int i = 0; i < count_; i++) tpu_buffer_release(storages_[i]);
    free(storages_);
    storages_ = nullptr;
    count_ = 0;
  }

  c10::MempoolId_t pool() const override { return {0, 0}; }
  void enable_debug_mode() override {}
  void debug_dump(const std::string&) override {
    TORCH_CHECK(false, "tpu graphs have no debug_dump; set TORCH_TPU_DUMP_DIR to write each compiled program");
  }

 private:
  int device_ = 0;
  tpu_program* program_ = nullptr;
  tpu_buffer** storages_ = nullptr;  // one reference each
  int count_ = 0;
};

}  // namespace

// At import, once the backend has its name (the registry's key is the
// device type's name).
void register_graph() {
  at::GraphImplRegistry()->Register(c10::DeviceTypeName(c10::DeviceType::PrivateUse1, false),
                                    [](const at::GraphImplArgs& args) -> std::unique_ptr<at::GraphImplInterface> {
                                      return std::make_unique<TpuGraph>(args);
                                    });
}

}  // namespace torch_tpu
