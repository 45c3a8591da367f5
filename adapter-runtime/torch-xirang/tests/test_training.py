"""torch.nn + torch.optim training on `xirang` against `cpu`: same initialisation, same data, nothing
changed but the device; the losses agree within 1e-4 relative for 50 steps."""

import copy

import torch

import xirang


def train(model, device, data, steps=50, lr=0.05):
    model = copy.deepcopy(model).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    losses = []
    for i in range(steps):
        x, y = (t.to(device) for t in data[i % len(data)])
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def batches(n, dim, classes, seed):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(16, n, dim, generator=g) if n else torch.randn(16, dim, generator=g),
             torch.randint(0, classes, (16,), generator=g)) for _ in range(10)]


def close(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        assert abs(x - y) <= 1e-4 * max(abs(y), 1e-6), f"step {i}: xirang {x} cpu {y}"


def test_mlp_matches_cpu():
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.GELU(),
                              torch.nn.Linear(64, 10))
    data = batches(0, 32, 10, 1)
    xirang.reset_fallback_counts()
    on_device = train(mlp, "xirang", data)
    close(on_device, train(mlp, "cpu", data))
    counts = xirang.fallback_counts()
    assert counts.get("addmm", {}).get("native", 0) > 0, counts


class Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0,
                                                      batch_first=True)
        self.head = torch.nn.Linear(32, 5)

    def forward(self, x):
        return self.head(self.layer(x).mean(dim=1))


def test_transformer_encoder_layer_matches_cpu():
    torch.manual_seed(0)
    model = Classifier()
    data = batches(6, 32, 5, 2)
    close(train(model, "xirang", data, lr=0.01), train(model, "cpu", data, lr=0.01))
