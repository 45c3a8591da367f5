"""Streams and events of device `xirang`, as `torch.cuda`'s: `torch.xirang.Stream`, `Event`,
`current_stream`, `default_stream`, `set_stream`, `stream(...)`.

They are PyTorch's generic `torch.Stream` / `torch.Event`, which reach the runtime through the
device guard (`csrc/guard.cpp`): a stream's id is the runtime's stream (0 is the default stream of
each device), an event is the runtime's event. Work goes to the calling thread's current stream of
the device (PyTorch's current stream is thread-local); the runtime orders each stream's kernels and
copies, and `Stream.wait_event` / `wait_stream` make one stream wait for another's work so far.

`Event.query()` and `Stream.query()` never wait: the driver's `aclrtQueryEventStatus` (the
`event_query` operation of `[driver]` in xirang.toml) says whether the recorded work has run.
"""

from __future__ import annotations

import torch

__all__ = ["Stream", "Event", "StreamContext", "current_stream", "default_stream", "set_stream", "stream"]


def _device_index(device) -> int:
    """A device argument (None, int, str, torch.device) as a xirang index (None: the current one)."""
    if device is None:
        return torch.accelerator.current_device_index()
    if isinstance(device, int):
        index = device
    else:
        d = torch.device(device)
        if d.type != "xirang":
            raise ValueError(f"expected a xirang device, got {d}")
        index = torch.accelerator.current_device_index() if d.index is None else d.index
    count = torch.accelerator.device_count()
    if not 0 <= index < count:
        raise RuntimeError(f"Invalid device index {index}: xirang has {count} devices (0 to {count - 1})")
    return index


class Stream(torch.Stream):
    """A stream of a xirang device (as `torch.cuda.Stream`): `Stream()` is a new stream of the
    current device, `Stream("xirang:1")` one of device 1. `with stream:` makes it current."""

    def __new__(cls, device=None, priority: int = 0, **kwargs):
        if kwargs:
            # an existing stream by its ids (stream_id, device_index, device_type), as torch.Stream
            return super().__new__(cls, priority=priority, **kwargs)
        return super().__new__(cls, device=torch.device("xirang", _device_index(device)), priority=priority)

    def wait_event(self, event) -> None:
        """Work queued on this stream from now on waits for `event` (recorded on any stream)."""
        event.wait(self)

    def wait_stream(self, stream) -> None:
        """Work queued on this stream from now on waits for the work queued on `stream` so far."""
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        """Records `event` (a new `Event` when None) on this stream and returns it."""
        if event is None:
            event = Event()
        event.record(self)
        return event

    @property
    def device(self) -> torch.device:
        return torch.device("xirang", self.device_index)

    def __repr__(self) -> str:
        return f"<torch.xirang.Stream device=xirang:{self.device_index} stream_id={self.stream_id}>"


class Event:
    """An event of a xirang device (as `torch.cuda.Event`): `record()` on a stream, `wait()` from
    another, `synchronize()`, `query()`, and `elapsed_time(end)` in milliseconds between two events
    made with `enable_timing=True`. It holds PyTorch's generic `torch.Event` (`.event`), as
    `torch.cuda.Event` is not a `torch.Event` either (`torch.Event.elapsed_time` takes only its own
    type)."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False,
                 device=None):
        if interprocess:
            raise RuntimeError("xirang events cannot be shared between processes (interprocess=True): the "
                               "simulated driver's events live in one process")
        self.event = torch.Event(torch.device("xirang", _device_index(device)), enable_timing=enable_timing,
                                 blocking=blocking, interprocess=False)

    @property
    def device(self) -> torch.device:
        return self.event.device

    def record(self, stream=None) -> None:
        """Records the event on `stream` (None: the current stream of the event's device)."""
        self.event.record(current_stream(self.device.index) if stream is None else stream)

    def wait(self, stream=None) -> None:
        """Work queued on `stream` (None: the current stream) from now on waits for this event."""
        self.event.wait(current_stream(self.device.index) if stream is None else stream)

    def query(self) -> bool:
        return self.event.query()

    def synchronize(self) -> None:
        """Waits for the work recorded before the event."""
        self.event.synchronize()

    def elapsed_time(self, end_event: "Event") -> float:
        """Milliseconds from this event to `end_event` (both recorded, both with enable_timing)."""
        return self.event.elapsed_time(end_event.event if isinstance(end_event, Event) else end_event)

    def __repr__(self) -> str:
        return f"<torch.xirang.Event device={self.device}>"


def _wrap(s: torch.Stream) -> Stream:
    return Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)


def current_stream(device=None) -> Stream:
    """The calling thread's current stream of `device` (None: the current device)."""
    return _wrap(torch.accelerator.current_stream(_device_index(device)))


def default_stream(device=None) -> Stream:
    """The default stream (id 0) of `device` (None: the current device)."""
    index = _device_index(device)
    kind = torch.accelerator.current_stream(index).device_type
    return Stream(stream_id=0, device_index=index, device_type=kind)


def set_stream(stream) -> None:
    """Makes `stream` the calling thread's current stream of its device, and its device the current
    device (as `torch.accelerator.set_stream`). None does nothing, as in `torch.cuda`."""
    if stream is None:
        return
    torch.accelerator.set_stream(stream)


class StreamContext:
    """Selects a stream for the `with` block (as `torch.cuda.StreamContext`): inside it the stream is
    current for its device and that device is current; on exit both come back. None does nothing."""

    def __init__(self, stream):
        self.stream = stream
        self._prev_device = -1
        self._prev_stream = None

    def __enter__(self):
        if self.stream is None:
            return None
        self._prev_device = torch.accelerator.current_device_index()
        self._prev_stream = torch.accelerator.current_stream(self.stream.device_index)
        torch.accelerator.set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.stream is None:
            return False
        torch.accelerator.set_stream(self._prev_stream)
        torch.accelerator.set_device_index(self._prev_device)
        return False


def stream(stream) -> StreamContext:
    """`with torch.xirang.stream(s):` runs the block's work on `s` (None: unchanged)."""
    return StreamContext(stream)
