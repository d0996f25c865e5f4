"""torch_tpu: the "tpu" device for PyTorch, on a C runtime over PJRT.

Importing torch is enough: PyTorch's backend autoload imports this package.
"""
import contextlib
import os


def _autoload():
    """Entry point for PyTorch's backend autoload: importing is the work.
    Defined before `import torch`, which may itself call it."""


import torch  # noqa: E402

from . import _plugin

torch.utils.rename_privateuse1_backend("tpu")

from . import _C  # noqa: E402  (needs the backend name first)

_plugin_path = _plugin.find_plugin()
_C._init(_plugin_path, int(os.environ.get("TORCH_TPU_CPU_DEVICES", "0")), _plugin.worker_nice(),
         _plugin.keep_freed_memory(_plugin_path))

from . import _meta  # noqa: E402,F401 (meta kernels PyTorch lacks)
from . import _nested  # noqa: E402,F401 (nn.TransformerEncoder's nested fast path)
from . import _ctc_loss  # noqa: E402,F401 (F.ctc_loss keeps tensor lengths on the device)
from . import _linalg  # noqa: E402,F401 (linalg.solve, det and slogdet on the LU factors)
from . import cache  # noqa: E402
from . import device as _device_module  # noqa: E402
from . import metrics  # noqa: E402,F401
from . import modes  # noqa: E402
from .modes import eager_mode, get_eager_mode, set_eager_mode, sync  # noqa: E402,F401

cache._configure()
if torch.distributed.is_available():
    from . import distributed  # noqa: E402

    distributed._register()
metrics._configure()
modes._configure()

torch._register_device_module("tpu", _device_module)
torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_storage=True)
# bfloat16 is the TPU's native low-precision type (torch.autocast("tpu") default).
torch.set_autocast_dtype("tpu", torch.bfloat16)

if os.environ.get("TORCH_TPU_CPU_FALLBACK", "0") not in ("", "0"):
    _C._set_cpu_fallback(True)


@contextlib.contextmanager
def cpu_fallback(enabled=True):
    """Runs ops that have no tpu lowering on the CPU inside the block (each
    counted per op in torch_tpu.metrics.counters()["cpu_fallback_ops"])."""
    previous = _C._cpu_fallback_enabled()
    _C._set_cpu_fallback(enabled)
    try:
        yield
    finally:
        _C._set_cpu_fallback(previous)


def _print_on_host():
    """Formats tpu tensors from one host copy: printing is a sync point, and
    the formatter's data-dependent steps (masked_select) belong on the host.
    The device suffix still comes from the tpu tensor."""
    import torch._tensor_str as tensor_str

    original = tensor_str._tensor_str

    def tensor_str_on_host(self, indent):
        if self.device.type == "tpu":
            self = self.cpu()
        return original(self, indent)

    tensor_str._tensor_str = tensor_str_on_host


_print_on_host()
