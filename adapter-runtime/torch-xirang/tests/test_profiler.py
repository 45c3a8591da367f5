"""PyTorch's profiler over a training step on `xirang`. `torch.autograd.profiler.profile(use_device=
"xirang")` (PyTorch's KINETO_PRIVATEUSE1_FALLBACK state) gives every operator a device time: runtime
events on the stream around it (csrc/profiler.cpp, the PrivateUse1 profiler stubs, as CUDA's).
`torch.profiler.profile(activities=[CPU, PrivateUse1])` asks for a Kineto activity profiler plugin,
which the package does not register yet: it lists the device's operators with host times only."""

import json

import torch
from torch.profiler import ProfilerActivity, profile

import xirang  # noqa: F401


def _step():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).to("xirang")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(32, 64, device="xirang")
    y = torch.randint(0, 10, (32,), device="xirang")

    def run():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    return run


def test_torch_profiler_lists_the_device_operators(tmp_path):
    step = _step()
    step()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        step()
        torch.xirang.synchronize()
    events = {e.key: e for e in prof.key_averages()}
    for op in ("aten::addmm", "aten::mm", "aten::threshold_backward"):
        assert op in events and events[op].cpu_time_total > 0, (op, sorted(events))
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace))
    names = {e.get("name") for e in json.loads(trace.read_text())["traceEvents"]}
    assert "aten::addmm" in names


def test_legacy_profiler_with_use_device():
    step = _step()
    step()
    with torch.autograd.profiler.profile(use_device="xirang") as prof:
        step()
    averages = prof.key_averages()
    totals = {e.key: e.device_time_total for e in averages}
    # the matrix products ran on the device: each has device time, measured between runtime events
    for op in ("aten::addmm", "aten::mm"):
        assert totals.get(op, 0) > 0, totals
    assert "xirang" in averages.table(sort_by="self_device_time_total", row_limit=5).lower()
