"""torch.tpu: the device module, shaped like torch.cuda."""
import torch

from . import _C
from .streams import Event, Stream, StreamContext, current_stream, default_stream, set_stream, stream  # noqa: F401


def is_available():
    return _C._runtime_info()["device_count"] > 0


def init():
    """Nothing to do: the runtime starts when torch_tpu is imported."""


def is_initialized():
    """True: the runtime starts when torch_tpu is imported (DeviceMesh and
    FSDP2 ask)."""
    return True


def device_count():
    return _C._runtime_info()["device_count"]


def current_device():
    return _C._current_device()


def _index(device):
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != "tpu":
        raise ValueError(f"expected a tpu device, got {device}")
    return current_device() if device.index is None else device.index


def set_device(device):
    _C._set_device(_index(device))


def synchronize(device=None):
    """Runs the device's pending fused ops and waits for every op enqueued
    on it; raises the first error."""
    _C._synchronize(_index(device))


def get_device_name(device=None):
    """The plugin's platform and the device kind, e.g. "cpu (XLA cpu device)"."""
    info = _C._runtime_info()
    return f"{info['platform']} ({_C._device_kind(_index(device))})"


def get_device_properties(device=None):
    info = dict(_C._runtime_info())
    info["device_kind"] = _C._device_kind(_index(device))
    return info


# Memory: the runtime's own count of device storage, through PyTorch's
# torch.accelerator functions (the allocator is a c10::DeviceAllocator). A
# storage is its own device allocation, so reserved equals allocated.


def memory_stats(device=None):
    """torch.cuda.memory_stats's keys; the "all" pool only."""
    return torch.accelerator.memory_stats(_index(device))


def memory_allocated(device=None):
    return torch.accelerator.memory_allocated(_index(device))


def max_memory_allocated(device=None):
    return torch.accelerator.max_memory_allocated(_index(device))


def memory_reserved(device=None):
    return torch.accelerator.memory_reserved(_index(device))


def max_memory_reserved(device=None):
    return torch.accelerator.max_memory_reserved(_index(device))


def reset_peak_memory_stats(device=None):
    torch.accelerator.reset_peak_memory_stats(_index(device))


def reset_accumulated_memory_stats(device=None):
    torch.accelerator.reset_accumulated_memory_stats(_index(device))


def mem_get_info(device=None):
    """(free, total) bytes: the plugin's limit less its use; on the CPU
    platform the host's available and total memory."""
    return torch.accelerator.get_memory_info(_index(device))


def empty_cache():
    """Gives memory kept for reuse back to the system: freed host memory that
    TORCH_TPU_CPU_KEEP_FREED_MEMORY=1 keeps (CPU platform); storage itself is
    freed when its last tensor goes."""
    torch.accelerator.empty_cache()


def memory_summary(device=None, abbreviated=False):
    """A short readable form of memory_stats (the runtime's storages)."""
    stats = memory_stats(device)

    def mib(n):
        return f"{n / 2**20:.1f} MiB"

    return (f"tpu:{_index(device)} memory: {mib(stats['allocated_bytes.all.current'])} in "
            f"{stats['allocation.all.current']} storages (peak {mib(stats['allocated_bytes.all.peak'])}); "
            f"{stats['allocation.all.allocated']} allocated and {stats['allocation.all.freed']} freed "
            f"since the last reset ({mib(stats['allocated_bytes.all.allocated'])} and "
            f"{mib(stats['allocated_bytes.all.freed'])}); reserved equals allocated")


def _generator(device=None):
    return _C._default_generator(_index(device))


def manual_seed(seed, device=None):
    _generator(device).manual_seed(int(seed))


def manual_seed_all(seed):
    for i in range(device_count()):
        _C._default_generator(i).manual_seed(int(seed))


def seed(device=None):
    return _generator(device).seed()


def seed_all():
    for i in range(device_count()):
        _C._default_generator(i).seed()


def initial_seed(device=None):
    return _generator(device).initial_seed()


def get_rng_state_all():
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states):
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def get_rng_state(device=None):
    return _generator(device).get_state()


def set_rng_state(new_state, device=None):
    _generator(device).set_state(new_state)


def _is_in_bad_fork():
    return False


def get_amp_supported_dtype():
    """Dtypes torch.autocast("tpu") may cast to."""
    return [torch.bfloat16, torch.float16]


def is_bf16_supported(including_emulation=True):
    return True


class device:
    """Context manager that makes `index` the current tpu device."""

    def __init__(self, index):
        self.index = _index(index)
        self.previous = None

    def __enter__(self):
        self.previous = current_device()
        set_device(self.index)

    def __exit__(self, *exc):
        set_device(self.previous)
        return False


# Graphs, named as in torch.cuda: a tpu graph is torch.accelerator.Graph.
Graph = torch.accelerator.Graph


class graph:
    """`with torch.tpu.graph(g):` captures into `g` (a torch.tpu.Graph), as
    torch.cuda.graph does; `pool` and `stream` are accepted (the device has
    one queue and one memory pool)."""

    def __init__(self, tpu_graph, pool=None, stream=None, capture_error_mode="global"):
        self.graph = tpu_graph

    def __enter__(self):
        self.graph.__enter__()

    def __exit__(self, *exc):
        self.graph.__exit__(*exc)


def is_current_stream_capturing():
    """Whether a graph capture (torch.tpu.Graph) is recording the current device's ops."""
    return _C._capturing(current_device())


def device_of(obj):
    """The device context of a tensor: its tpu device, or the current one."""
    return device(obj.get_device() if obj.device.type == "tpu" else current_device())
