"""No leak: after 1,000 training steps the device's allocated memory is back at its baseline."""

import gc

import torch

import xirang


def test_training_returns_memory():
    # earlier tests' tensors caught in reference cycles would otherwise be freed mid-test, by the
    # collector, and the baseline would count them
    gc.collect()
    torch.xirang.synchronize()
    base = torch.xirang.memory_allocated()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to("xirang")
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(8, 16).to("xirang")
    y = torch.randint(0, 4, (8,)).to("xirang")
    after_first = None
    for step in range(1000):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if step == 10:
            # kernels still in flight hold their operands: count what a finished step keeps
            torch.xirang.synchronize()
            after_first = torch.xirang.memory_allocated()
    # steady state: nothing grows once the optimizer state exists
    torch.xirang.synchronize()
    assert torch.xirang.memory_allocated() == after_first
    del model, opt, x, y, loss
    gc.collect()
    torch.xirang.synchronize()
    assert torch.xirang.memory_allocated() == base
