"""Storage and serialization on `xirang`, as on CUDA: `torch.save` / `torch.load` of device tensors,
views and state_dicts (with and without `map_location`, `weights_only=True`), `copy.deepcopy`, and
`untyped_storage()` of a device tensor (device, nbytes, data_ptr, resize_)."""

import copy
import io

import pytest
import torch

import xirang  # noqa: F401


def _round_trip(obj, **load):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load)


@pytest.mark.parametrize("weights_only", [True, False])
def test_tensors_come_back_on_their_device(weights_only):
    torch.manual_seed(0)
    a = torch.randn(3, 4).to("xirang")
    b = torch.arange(6, dtype=torch.int64).to("xirang:1")
    out = _round_trip({"a": a, "b": b}, weights_only=weights_only)
    assert out["a"].device == torch.device("xirang", 0) and out["b"].device == torch.device("xirang", 1)
    assert torch.equal(out["a"].cpu(), a.cpu()) and torch.equal(out["b"].cpu(), b.cpu())


def test_map_location_moves_them():
    a = torch.randn(5).to("xirang:1")
    assert _round_trip(a, map_location="cpu").device == torch.device("cpu")
    assert _round_trip(a, map_location="xirang:0").device == torch.device("xirang", 0)
    assert _round_trip(a, map_location={"xirang:1": "xirang:0"}).device == torch.device("xirang", 0)
    back = _round_trip(torch.randn(2), map_location="xirang")
    assert back.device.type == "xirang"


def test_views_stay_views_of_one_storage():
    base = torch.arange(12, dtype=torch.float32).to("xirang")
    view = base[2:8].view(2, 3)
    a, v = _round_trip((base, view), weights_only=True)
    assert v.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
    assert v.storage_offset() == 2 and torch.equal(v.cpu(), view.cpu())
    v.add_(100)  # shared, as saved: writing the view writes the base
    assert a[2].item() == 102.0


def test_state_dict_round_trip_trains_the_same():
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).to("xirang")
    sd = _round_trip(model.state_dict(), weights_only=True)
    other = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).to("xirang")
    other.load_state_dict(sd)
    x = torch.randn(3, 4).to("xirang")
    assert torch.equal(model(x).cpu(), other(x).cpu())
    opt = torch.optim.Adam(model.parameters())
    model(x).sum().backward()
    opt.step()
    osd = _round_trip(opt.state_dict(), weights_only=True)
    assert osd["state"][0]["exp_avg"].device.type == "xirang"


def test_deepcopy_copies_device_memory():
    a = torch.randn(4, 4).to("xirang")
    b = copy.deepcopy(a)
    assert b.device == a.device and b.untyped_storage().data_ptr() != a.untyped_storage().data_ptr()
    assert torch.equal(a.cpu(), b.cpu())
    b.zero_()
    assert not torch.equal(a.cpu(), b.cpu())
    # views deep-copied together keep sharing
    base = torch.arange(6.0).to("xirang")
    pair = copy.deepcopy((base, base[1:]))
    assert pair[1].untyped_storage().data_ptr() == pair[0].untyped_storage().data_ptr()


def test_untyped_storage_of_a_device_tensor():
    t = torch.arange(10, dtype=torch.float32).to("xirang")
    s = t.untyped_storage()
    assert s.device == t.device and s.nbytes() == 40 and s.data_ptr() == t.data_ptr()
    s.resize_(80)
    assert s.nbytes() == 80
    assert torch.equal(t.cpu(), torch.arange(10, dtype=torch.float32))  # the first 40 bytes are kept
    assert s.cpu().nbytes() == 80 and s.cpu().device.type == "cpu"
    s.resize_(0)
    assert s.nbytes() == 0
