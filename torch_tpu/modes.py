"""Eager execution modes, process-wide:

- "strict" (the default): each op is enqueued and returns at once; an error
  in its execution surfaces at the next sync point, naming the op.
- "debug": each op is also awaited, so its error surfaces at the call that
  caused it. Slow; for finding a failing op.
- "fused": ops are recorded into the device's pending graph, and a sync
  point runs the whole graph as one program (cached by its structure, so a
  loop compiles once). Sync points: reading values on the host (.cpu(), .item(),
  printing), writing host data into a device tensor, torch.tpu.synchronize(),
  torch_tpu.sync(), recording an event, changing the mode. The graph is
  also cut, without waiting, where a step overlaps well with recording the
  next: when another thread records into it (autograd records a backward
  on its own thread) and when an optimizer step begins.

TORCH_TPU_EAGER_MODE sets the mode at import."""
import contextlib
import os

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from . import _C
from . import device as _device

ENV_VAR = "TORCH_TPU_EAGER_MODE"


def set_eager_mode(mode):
    """Switches every thread to `mode` ("strict", "debug" or "fused"),
    running any pending fused ops first."""
    if not isinstance(mode, str):
        raise TypeError(f"eager mode must be a string (strict, debug or fused), got {type(mode).__name__}")
    _C._set_eager_mode(mode)
    _cut_before_optimizer_steps(mode == "fused")


def get_eager_mode():
    return _C._eager_mode()


@contextlib.contextmanager
def eager_mode(mode):
    """Runs the block in `mode`, then restores the previous mode, also when
    the block raises."""
    previous = get_eager_mode()
    set_eager_mode(mode)
    try:
        yield
    finally:
        set_eager_mode(previous)


def _devices(device):
    """None: every device; otherwise the one index torch.tpu resolves."""
    return range(_device.device_count()) if device is None else [_device._index(device)]


def sync(device=None):
    """Runs the pending fused ops of `device` (default: every device). Does
    not wait for them; torch.tpu.synchronize() does."""
    for index in _devices(device):
        _C._sync(index)


_optimizer_hook = None  # while fused: the handle of _run_pending_ops


def _run_pending_ops(optimizer, args, kwargs):
    """Before an optimizer step the pending ops (the backward, cut from the
    forward when autograd's thread began recording it) start running, so
    they run while the step's ops are being recorded."""
    if not torch.compiler.is_compiling():
        sync()


def _cut_before_optimizer_steps(on):
    global _optimizer_hook
    if on and _optimizer_hook is None:
        _optimizer_hook = register_optimizer_step_pre_hook(_run_pending_ops)
    elif not on and _optimizer_hook is not None:
        _optimizer_hook.remove()
        _optimizer_hook = None


def pending_op_count(device=None):
    """Fused ops recorded and not yet run on `device` (default: all devices)."""
    return sum(_C._pending_op_count(index) for index in _devices(device))


def _configure():
    """Applies TORCH_TPU_EAGER_MODE (unset or empty: strict)."""
    mode = os.environ.get(ENV_VAR, "")
    if not mode:
        return
    try:
        set_eager_mode(mode)
    except ValueError as error:
        raise ValueError(f"{ENV_VAR}={mode!r}: {error}") from None
