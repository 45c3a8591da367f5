"""Shared fixtures: every test runs on a clean fallback policy and counters."""

import os

# the simulated machine: three devices with sparse physical ids (the runtime renumbers them 0, 1, 2
# by physical id; XIRANG_VISIBLE_DEVICES then selects among those)
os.environ.setdefault("XIRANG_SIM_DEVICES", "7,2,5")

import pytest  # noqa: E402
import torch  # noqa: E402

import xirang  # noqa: E402


@pytest.fixture(autouse=True)
def clean_policy():
    xirang.set_fallback_mode("silent")
    xirang.set_force_fallback([])
    xirang.set_fallback_alert(0)
    xirang.reset_fallback_counts()
    torch.xirang.set_device(0)
    yield
    xirang.set_fallback_mode("silent")
    xirang.set_force_fallback([])
