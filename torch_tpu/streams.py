"""torch.tpu streams and events, shaped like torch.cuda's so code written for
CUDA (and FSDP2's use of the device module's streams and events) runs.

A tpu device runs its work in one in-order queue. Every stream of a device
is a name for that queue: work issued under any stream runs in issue order,
so wait_stream and wait_event are ordering no-ops and correctness never
depends on them. Events are real: recording one runs pending fused ops and
marks everything enqueued on the device so far; query() says whether that
work is done, synchronize() waits for it, and elapsed_time() measures
between the completion of two such marks (create with enable_timing=True).
torch.Stream(device="tpu"), torch.Event(device="tpu") and
torch.accelerator's stream functions use the same implementation."""
import torch

from . import _C
from . import device as _device  # the torch.tpu module; it imports this one


def _tpu_device(device):
    """A torch.device of type tpu with an index (None: the current one)."""
    return torch.device("tpu", _device._index(device))


def _check_tpu_stream(stream, what):
    if not isinstance(stream, torch.Stream):
        raise TypeError(f"{what} expects a torch.Stream, got {type(stream).__name__}")
    if stream.device.type != "tpu":
        raise ValueError(f"{what} expects a tpu stream, got a stream of {stream.device}")


class Stream(torch.Stream):
    """A tpu stream: Stream(device=None, priority=0). Priorities are accepted
    and have no effect (one queue per device)."""

    def __new__(cls, device=None, priority=0, **existing):
        if existing:  # stream_id, device_index, device_type of a stream that exists
            return super().__new__(cls, priority=priority, **existing)
        return super().__new__(cls, device=_tpu_device(device), priority=priority)

    def record_event(self, event=None):
        """Records `event` (default: a new torch.tpu.Event) on this stream
        and returns it."""
        event = Event() if event is None else event
        event.record(self)
        return event

    def __repr__(self):
        return f"<torch.tpu.Stream device={self.device} stream_id={self.stream_id}>"


class Event(torch.Event):
    """A tpu event: Event(enable_timing=False, blocking=False,
    interprocess=False). synchronize() always blocks the calling thread;
    interprocess events are not supported (as for torch.Event)."""

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        return super().__new__(cls, device=_tpu_device(None), enable_timing=enable_timing,
                               blocking=blocking, interprocess=interprocess)

    def record(self, stream=None):
        """Marks the work enqueued so far on `stream`'s device (default: the
        current device)."""
        if stream is None:
            stream = current_stream()
        _check_tpu_stream(stream, "Event.record")
        super().record(stream)

    def wait(self, stream=None):
        """Makes `stream` wait for this event: already so (one queue)."""
        if stream is not None:
            _check_tpu_stream(stream, "Event.wait")
        super().wait(stream)

    def elapsed_time(self, end_event):
        """Milliseconds from the completion of this event's work to that of
        `end_event`'s; both recorded with enable_timing=True and complete."""
        return _C._event_elapsed_time(self, end_event)

    def __repr__(self):
        return f"<torch.tpu.Event {self.event_id:#x}>" if self.event_id else "<torch.tpu.Event uninitialized>"


def _wrap(stream_id, device_index, device_type):
    return Stream(stream_id=stream_id, device_index=device_index, device_type=device_type)


def current_stream(device=None):
    """The calling thread's current stream of `device` (default: current)."""
    return _wrap(*_C._current_stream(_tpu_device(device).index))


def default_stream(device=None):
    _, index, device_type = _C._current_stream(_tpu_device(device).index)
    return _wrap(0, index, device_type)


def set_stream(stream):
    """Makes `stream` the calling thread's current stream of its device."""
    if stream is None:
        return
    _check_tpu_stream(stream, "torch.tpu.set_stream")
    _C._set_stream(stream.stream_id, stream.device_index, stream.device_type)


class StreamContext:
    """Makes `stream` current on its device inside the block, then restores
    the previous one. None does nothing."""

    def __init__(self, stream):
        if stream is not None:
            _check_tpu_stream(stream, "torch.tpu.stream")
        self.stream = stream
        self.previous = None

    def __enter__(self):
        if self.stream is not None:
            self.previous = current_stream(self.stream.device)
            set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.stream is not None:
            set_stream(self.previous)
        return False


def stream(stream):
    """Context manager: `with torch.tpu.stream(s): ...` runs the block with
    `s` as the current stream."""
    return StreamContext(stream)
