"""The fallback policy inside PyTorch: counters, warn, error mode, force-fallback list, alerts."""

import os
import subprocess
import sys

import pytest
import torch

import xirang


def test_native_and_fallback_counters():
    a = torch.randn(4, 4, device="xirang")
    xirang.reset_fallback_counts()
    (a + a).cpu()
    torch.linalg.qr(a)  # no kernel in the adapter: PyTorch's CPU kernel
    c = xirang.fallback_counts()
    assert c["add.Tensor"]["native"] == 1
    assert c["add.Tensor"]["fallback"] == 0
    assert sum(v["fallback"] for k, v in c.items() if k.startswith("linalg_qr")) >= 1, c


def test_error_mode_names_the_operator():
    a = torch.randn(3, 3, device="xirang")
    xirang.set_fallback_mode("error")
    assert xirang.fallback_mode() == "error"
    with pytest.raises(RuntimeError, match="linalg_qr"):
        torch.linalg.qr(a)
    # natively served operators still run
    torch.testing.assert_close((a * 2).cpu(), a.cpu() * 2)


def test_force_fallback_list():
    a = torch.randn(5, device="xirang")
    xirang.set_force_fallback(["mul.Tensor"])
    xirang.reset_fallback_counts()
    r = a * a
    torch.testing.assert_close(r.cpu(), a.cpu() * a.cpu())
    c = xirang.fallback_counts()["mul.Tensor"]
    assert c["fallback"] == 1 and c["native"] == 0


def test_bad_mode_is_a_value_error():
    with pytest.raises(ValueError):
        xirang.set_fallback_mode("loud")


def test_environment_policy_warns_once():
    code = ("import torch, xirang\n"
            "a = torch.ones(3, 3, device='xirang')\n"
            "for _ in range(3): torch.linalg.qr(a)\n"
            "print(xirang.fallback_mode())\n")
    env = dict(os.environ, XIRANG_FALLBACK="warn")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "warn"
    assert r.stderr.count("linalg_qr") == 1, r.stderr
    env["XIRANG_FALLBACK"] = "error"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "RuntimeError" in r.stderr and "linalg_qr" in r.stderr


def test_backward_with_an_absent_optional_tensor_stays_on_the_device():
    # autograd passes a saved `Tensor? weight` that was None as an undefined tensor: it is "no
    # tensor" to the kernel (it used to send nll_loss_backward to the CPU fallback every step)
    x = torch.randn(6, 5).to("xirang").requires_grad_()
    y = torch.tensor([0, 1, 4, 2, 3, 1]).to("xirang")
    xc = x.detach().cpu().requires_grad_()
    xirang.reset_fallback_counts()
    xirang.set_fallback_mode("error")
    torch.nn.functional.cross_entropy(x, y).backward()
    torch.nn.functional.cross_entropy(xc, y.cpu()).backward()
    torch.testing.assert_close(x.grad.cpu(), xc.grad)
    assert xirang.fallback_counts()["nll_loss_backward"]["native"] == 1


def test_the_warning_says_why_the_device_kernel_declined():
    code = ("import torch, xirang\n"
            "a = torch.ones(3, 3, dtype=torch.int64, device='xirang')\n"
            "print((a @ a).cpu().sum().item())\n")
    env = dict(os.environ, XIRANG_FALLBACK="warn")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "27"
    line = next(ln for ln in r.stderr.splitlines() if "warning: mm runs on the CPU fallback" in ln)
    assert "declined: mm: dtype torch.int64" in line, line


def test_functional_operators_run_their_own_cpu_kernel_not_the_out_form():
    # smooth_l1_loss has only a structured delegate (smooth_l1_loss.out) that the adapter does not
    # serve: PyTorch's composite kernel would run the out= form on a pre-shaped output, which the CPU
    # kernel resizes with a deprecation warning. Registered with the shim's fallback, the functional
    # form runs on the CPU as it is, counted under its own name.
    import warnings

    import torch.nn.functional as F

    torch.manual_seed(0)
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    for reduction in ["mean", "sum", "none"]:
        xirang.reset_fallback_counts()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = F.smooth_l1_loss(a.to("xirang"), b.to("xirang"), reduction=reduction)
        assert got.device.type == "xirang"
        torch.testing.assert_close(got.cpu(), F.smooth_l1_loss(a, b, reduction=reduction))
        c = xirang.fallback_counts()
        assert c.get("smooth_l1_loss", {}).get("fallback") == 1, c
        assert "smooth_l1_loss.out" not in c or c["smooth_l1_loss.out"]["fallback"] == 0, c


@pytest.mark.parametrize(
    "fn",
    [
        lambda t: torch.amin(t, dim=1),
        lambda t: torch.argmax(t, dim=0),
        lambda t: torch.cumsum(t, dim=1),
        lambda t: torch.topk(t, 2, dim=1),
        lambda t: torch.clamp(t, -0.5, 0.5),
        lambda t: torch.pow(t, 2),
        lambda t: torch.nn.functional.mse_loss(t, t * 0.5),
        lambda t: torch.nn.functional.avg_pool2d(t.reshape(1, 1, 4, 6), 2),
    ],
)
def test_host_registered_functional_operators_match_cpu(fn):
    torch.manual_seed(1)
    t = torch.randn(4, 6)
    got, want = fn(t.to("xirang")), fn(t)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        assert g.device.type == "xirang"
        torch.testing.assert_close(g.cpu(), w)
