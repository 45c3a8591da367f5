"""Streams, events and the generic accelerator API on `xirang`, each against the behaviour of
`torch.cuda` (and PyTorch's OpenReg test device) that it mirrors: work goes to the thread's current
stream, one stream waits for another's events, timing needs `enable_timing`, a block another
stream used is not handed out again before that stream's work is done."""

import threading

import pytest
import torch

import xirang  # noqa: F401


def test_new_streams_are_of_the_current_or_named_device():
    s = torch.xirang.Stream()
    assert s.device_index == torch.xirang.current_device() and s.stream_id != 0
    assert torch.xirang.Stream("xirang:1").device_index == 1
    assert torch.xirang.Stream(1).device == torch.device("xirang", 1)
    # PyTorch's generic stream names no index: the current device's, as CUDA's
    assert torch.Stream("xirang").device_index == torch.xirang.current_device()
    assert torch.xirang.Stream() != s
    with pytest.raises(RuntimeError, match="Invalid device index 7"):
        torch.xirang.Stream(7)
    with pytest.raises(ValueError, match="expected a xirang device"):
        torch.xirang.Stream("cpu")


def test_default_and_current_stream():
    d = torch.xirang.default_stream()
    assert d.stream_id == 0 and d == torch.xirang.current_stream()
    assert torch.xirang.default_stream(1).device_index == 1
    assert torch.xirang.current_stream() == torch.accelerator.current_stream()


def test_stream_context_sets_and_restores_stream_and_device():
    s0, s1 = torch.xirang.Stream(0), torch.xirang.Stream(1)
    with torch.xirang.stream(s0):
        assert torch.xirang.current_stream() == s0
        with torch.xirang.stream(s1):
            # as torch.cuda.stream: the stream's device becomes current too
            assert torch.xirang.current_device() == 1 and torch.xirang.current_stream() == s1
        assert torch.xirang.current_device() == 0 and torch.xirang.current_stream() == s0
        assert torch.xirang.current_stream(1).stream_id == 0
    assert torch.xirang.current_stream().stream_id == 0
    with torch.xirang.stream(None):
        assert torch.xirang.current_stream().stream_id == 0
    # torch.Stream is itself a context manager
    with s0:
        assert torch.xirang.current_stream() == s0
    assert torch.xirang.current_stream().stream_id == 0


def test_set_stream_and_none():
    s = torch.xirang.Stream()
    try:
        torch.xirang.set_stream(s)
        assert torch.xirang.current_stream() == s
        torch.xirang.set_stream(None)  # a no-op, as in torch.cuda
        assert torch.xirang.current_stream() == s
    finally:
        torch.xirang.set_stream(torch.xirang.default_stream())


def test_current_stream_is_per_thread():
    s = torch.xirang.Stream()
    seen = {}

    def worker():
        seen["before"] = torch.xirang.current_stream().stream_id
        torch.xirang.set_stream(s)
        seen["after"] = torch.xirang.current_stream().stream_id
        torch.xirang.set_stream(torch.xirang.default_stream())

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == {"before": 0, "after": s.stream_id}
    assert torch.xirang.current_stream().stream_id == 0


def test_work_on_a_side_stream_matches_the_cpu():
    torch.manual_seed(0)
    a = torch.randn(48, 48)
    expected = a
    for _ in range(4):
        expected = expected @ expected.T / 48
    x = a.to("xirang")
    side = torch.xirang.Stream()
    side.wait_stream(torch.xirang.current_stream())  # x was made on the default stream
    with torch.xirang.stream(side):
        for _ in range(4):
            x = x @ x.T / 48
        done = side.record_event()
    torch.xirang.current_stream().wait_event(done)
    torch.testing.assert_close(x.cpu(), expected)


def test_non_blocking_copies_are_ordered_on_the_stream():
    torch.manual_seed(1)
    host = [torch.randn(1024) for _ in range(8)]
    s = torch.xirang.Stream()
    with torch.xirang.stream(s):
        dev = [h.to("xirang", non_blocking=True) for h in host]
        total = torch.stack(dev).sum(0)
        back = total.to("cpu", non_blocking=True)
    s.synchronize()
    torch.testing.assert_close(back, torch.stack(host).sum(0))


def test_events_record_wait_query_and_time():
    start = torch.xirang.Event(enable_timing=True)
    end = torch.xirang.Event(enable_timing=True)
    start.record()
    x = torch.randn(128, 128, device="xirang")
    for _ in range(8):
        x = torch.tanh(x @ x)
    end.record()
    end.synchronize()
    assert start.query() and end.query()
    ms = start.elapsed_time(end)
    assert ms >= 0.0
    plain = torch.xirang.Event()
    plain.record()
    # the message and type of PyTorch's generic torch.Event (ValueError), as CUDA's words
    with pytest.raises(ValueError, match="Both events must be created with argument 'enable_timing=True'"):
        start.elapsed_time(plain)
    with pytest.raises(RuntimeError, match="cannot be shared between processes"):
        torch.xirang.Event(interprocess=True)


def test_generic_event_on_a_stream():
    s = torch.xirang.Stream()
    e = torch.Event("xirang", enable_timing=True)
    with torch.xirang.stream(s):
        y = torch.ones(64, device="xirang") * 3
    e.record(s)
    torch.accelerator.current_stream().wait_event(e)
    assert y.sum().item() == 192.0
    e.synchronize()
    assert e.query()


def test_record_stream_keeps_a_block_until_the_stream_is_done():
    torch.xirang.synchronize()
    torch.manual_seed(2)
    a = torch.randn(256, 256)
    x = a.to("xirang")
    side = torch.xirang.Stream()
    side.wait_stream(torch.xirang.current_stream())
    with torch.xirang.stream(side):
        y = x
        for _ in range(6):
            y = y @ y.T / 256
    x.record_stream(side)
    del x
    # the default stream allocates again at once: it must not get x's block while side reads it
    junk = [torch.full((256, 256), 7.0, device="xirang") for _ in range(4)]
    expected = a
    for _ in range(6):
        expected = expected @ expected.T / 256
    side.synchronize()
    torch.testing.assert_close(y.cpu(), expected)
    assert all(j[0, 0].item() == 7.0 for j in junk)
    with pytest.raises(RuntimeError, match="the stream is of xirang:1"):
        torch.ones(2, device="xirang:0").record_stream(torch.xirang.Stream(1))


def test_torch_accelerator_reaches_the_device():
    assert torch.accelerator.current_accelerator() == torch.device("xirang")
    assert torch.accelerator.device_count() == torch.xirang.device_count()
    assert torch.accelerator.is_available()
    torch.accelerator.synchronize()
    x = torch.empty(1 << 20, device="xirang")
    assert torch.accelerator.memory_allocated() == torch.xirang.memory_allocated() >= x.nbytes
    assert torch.accelerator.max_memory_allocated() == torch.xirang.max_memory_allocated()
    assert torch.accelerator.memory_reserved() == torch.xirang.memory_reserved()
    free, total = torch.accelerator.get_memory_info()
    assert (free, total) == torch.xirang.mem_get_info() and 0 < free <= total
    stats = torch.accelerator.memory_stats()
    assert stats["allocated_bytes.all.current"] == torch.xirang.memory_allocated()
    torch.accelerator.reset_accumulated_memory_stats()
    assert torch.xirang.memory_stats()["alloc_count"] == 0
    y = torch.empty(16, device="xirang")
    assert torch.accelerator.memory_stats()["allocation.all.allocated"] == 1
    del x, y
    torch.accelerator.reset_peak_memory_stats()
    assert torch.accelerator.max_memory_allocated() == torch.accelerator.memory_allocated()
    torch.accelerator.empty_cache()
    assert torch.xirang.memory_reserved() == torch.xirang.memory_allocated()


def test_device_of_and_device_module():
    assert torch.get_device_module("xirang") is torch.xirang
    t = torch.ones(1, device="xirang:1")
    with torch.xirang.device_of(t):
        assert torch.xirang.current_device() == 1
    assert torch.xirang.current_device() == 0
    with torch.xirang.device_of(torch.ones(1)):
        assert torch.xirang.current_device() == 0


def test_module_functions_mirror_torch_cuda():
    torch.xirang.init()
    assert torch.xirang.is_initialized() and torch.xirang.is_available()
    torch.xirang.manual_seed(7)
    assert torch.xirang.initial_seed() == 7
    torch.xirang.seed_all()
    first = torch.xirang.initial_seed()
    with torch.xirang.device(1):
        # one random seed for every device
        assert torch.xirang.initial_seed() == first
        torch.xirang.seed()  # a random seed for the current device only
        assert torch.xirang.initial_seed() != first
    assert torch.xirang.initial_seed() == first
    torch.xirang.reset_max_memory_allocated()
    assert torch.xirang.max_memory_allocated() == torch.xirang.memory_allocated()
    torch.xirang.reset_accumulated_memory_stats()
    assert torch.xirang.memory_stats()["free_count"] == 0


def test_stream_context_class_rng_state_all_and_reserved_peak():
    assert torch.xirang.streams.Stream is torch.xirang.Stream
    s = torch.xirang.Stream()
    with torch.xirang.StreamContext(s) as entered:
        assert entered is s and torch.xirang.current_stream() == s
    assert torch.xirang.current_stream().stream_id == 0
    torch.xirang.manual_seed_all(3)
    states = torch.xirang.get_rng_state_all()
    first = [torch.randn(4, device=f"xirang:{i}").cpu() for i in range(2)]
    torch.xirang.manual_seed_all(4)
    torch.xirang.set_rng_state_all(states)
    again = [torch.randn(4, device=f"xirang:{i}").cpu() for i in range(2)]
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert torch.xirang.max_memory_reserved() >= torch.xirang.memory_reserved()


def test_query_answers_and_an_idle_stream_is_complete():
    # (that a query does not wait is the simulator's test: tests/simulator.rs, event_query_answers_without_waiting)
    s = torch.xirang.Stream()
    assert s.query(), "an idle stream is complete, as cudaStreamQuery says"
    with torch.xirang.stream(s):
        x = torch.randn(256, 256, device="xirang")
        for _ in range(20):
            x = torch.tanh(x @ x / 256)
        e = torch.xirang.Event()
        e.record()
    e.query(), s.query()  # either answer, without waiting
    s.synchronize()
    assert e.query() and s.query()
    assert torch.xirang.Event().query(), "an event never recorded is complete"
