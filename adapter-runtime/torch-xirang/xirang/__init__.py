"""PyTorch device `xirang`: the Xirang adapter runtime as an out-of-tree (PrivateUse1) backend.

    import torch, xirang
    x = torch.randn(2, 3, device="xirang")
    model.to("xirang")
    torch.xirang.device_count(), torch.xirang.fallback_counts()

`import xirang` checks that the installed torch is the one the package was built against (and the
version the adapter was generated for), renames PrivateUse1 to `xirang`, loads the C++ shim (the
allocator, device guard, hooks and kernel registrations) and registers `torch.xirang`. The device
API talks to the Rust runtime through its C ABI (`ctypes`; no CPython extension module).
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
from pathlib import Path

import torch

from . import _build_info

__all__ = [
    "device_count", "is_available", "is_initialized", "synchronize", "current_device", "set_device",
    "device", "manual_seed", "manual_seed_all", "initial_seed", "seed", "get_rng_state", "set_rng_state",
    "get_rng_state_all", "set_rng_state_all",
    "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved", "memory_stats",
    "reset_peak_memory_stats", "reset_accumulated_memory_stats", "reset_max_memory_allocated", "mem_get_info",
    "init", "seed_all", "device_of", "empty_cache", "fallback_counts", "reset_fallback_counts", "set_fallback_mode",
    "fallback_mode", "set_force_fallback", "set_fallback_alert", "pytorch_version",
    "Stream", "Event", "StreamContext", "current_stream", "default_stream", "set_stream", "stream",
]


def _check_versions() -> None:
    have = torch.__version__
    built = _build_info.TORCH
    if have.split("+")[0] != built.split("+")[0]:
        raise ImportError(
            f"xirang was built against torch {built} (the adapter is generated for PyTorch "
            f"{_build_info.GENERATED_FOR}), but torch {have} is installed. Install torch=="
            f"{built.split('+')[0]}, or rebuild the package for this torch: regenerate the adapter for "
            f"{have.split('+')[0]} (xirang.toml [pytorch] version, `xirang-scan generate`) and run "
            "`pip install ./adapter-runtime/torch-xirang` again.")


_check_versions()

# The simulated machine behind the runtime's driver (adapter-runtime/simulator): physical device ids
# and capacity, read when the driver initialises. Two devices unless the environment says otherwise.
os.environ.setdefault("XIRANG_SIM_DEVICES", "0,1")

_LIB = Path(__file__).resolve().parent / "lib"
torch.utils.rename_privateuse1_backend("xirang")
torch.ops.load_library(str(_LIB / "libxirang_shim.so"))
_bridge = ctypes.CDLL(str(_LIB / "libxirang_bridge.so"))
_shim = ctypes.CDLL(str(_LIB / "libxirang_shim.so"))

_i32, _u64, _i64, _sz = ctypes.c_int32, ctypes.c_uint64, ctypes.c_int64, ctypes.c_size_t


class _MemoryStats(ctypes.Structure):
    _fields_ = [(n, _u64) for n in (
        "allocated_bytes", "reserved_bytes", "peak_allocated_bytes", "peak_reserved_bytes", "alloc_count",
        "free_count", "cache_hits", "device_mallocs", "device_frees", "oom_retries", "ooms")]


def _sig(lib, name, res, *args):
    f = getattr(lib, name)
    f.restype = res
    f.argtypes = list(args)
    return f


_last_error = _sig(_bridge, "xirang_last_error", ctypes.c_char_p)
_device_count = _sig(_bridge, "xirang_device_count", _i32)
_current_device = _sig(_bridge, "xirang_current_device", _i32, ctypes.POINTER(_i32))
_set_device = _sig(_bridge, "xirang_set_device", _i32, _i32)
_synchronize = _sig(_bridge, "xirang_synchronize", _i32, _i32)
_memory_stats = _sig(_bridge, "xirang_memory_stats", _i32, _i32, ctypes.POINTER(_MemoryStats))
_reset_peak = _sig(_bridge, "xirang_reset_peak_memory_stats", _i32, _i32)
_empty_cache = _sig(_bridge, "xirang_empty_cache", _i32, _i32)
_reset_accumulated = _sig(_bridge, "xirang_reset_accumulated_memory_stats", _i32, _i32)
_mem_get_info = _sig(_bridge, "xirang_mem_get_info", _i32, _i32, ctypes.POINTER(_u64), ctypes.POINTER(_u64))
_counters_json = _sig(_bridge, "xirang_counters_json", ctypes.c_void_p)
_string_free = _sig(_bridge, "xirang_string_free", None, ctypes.c_void_p)
_reset_counters = _sig(_bridge, "xirang_reset_counters", None)
_set_fallback_mode = _sig(_bridge, "xirang_set_fallback_mode", _i32, _i32)
_fallback_mode = _sig(_bridge, "xirang_fallback_mode", _i32)
_set_force_fallback = _sig(_bridge, "xirang_set_force_fallback", _i32, ctypes.c_char_p, _sz)
_set_fallback_alert = _sig(_bridge, "xirang_set_fallback_alert", _i32, _u64)
_pytorch_version = _sig(_bridge, "xirang_pytorch_version", ctypes.c_char_p)
_manual_seed = _sig(_shim, "xirang_shim_manual_seed", _i32, _i32, _u64)
_initial_seed = _sig(_shim, "xirang_shim_initial_seed", _i32, _i32, ctypes.POINTER(_u64))
_get_rng_state = _sig(_shim, "xirang_shim_get_rng_state", _i32, _i32, ctypes.c_void_p, _u64, ctypes.POINTER(_u64))
_set_rng_state = _sig(_shim, "xirang_shim_set_rng_state", _i32, _i32, ctypes.c_void_p, _u64)

_MODES = {"error": 0, "warn": 1, "silent": 2}


def _ok(status: int, what: str) -> None:
    if status != 0:
        msg = (_last_error() or b"").decode(errors="replace") or f"{what} failed (status {status})"
        if status == 3:
            raise torch.OutOfMemoryError(msg)
        if status == 4:
            raise IndexError(msg)
        if status == 5:
            raise ValueError(msg)
        raise RuntimeError(msg)


def _index(d) -> int:
    """A device argument (None, int, str, torch.device) as a xirang index (-1: the current one)."""
    if d is None:
        return -1
    if isinstance(d, int):
        return d
    d = torch.device(d)
    if d.type != "xirang":
        raise ValueError(f"expected a xirang device, got {d}")
    return -1 if d.index is None else d.index


# --- devices -------------------------------------------------------------------------------------

def device_count() -> int:
    """Visible xirang devices (after XIRANG_VISIBLE_DEVICES)."""
    return int(_device_count())


def is_available() -> bool:
    return device_count() > 0


def is_initialized() -> bool:
    return True


_in_bad_fork = False
_mark_forked = _sig(_bridge, "xirang_mark_forked", None)


def _after_fork_in_child() -> None:
    # the runtime's driver threads do not survive a fork: the child's calls fail with CUDA's error
    # ("Cannot re-initialize ... in forked subprocess"); torch.manual_seed in DataLoader workers
    # skips the device (torch.random._seed_custom_device asks _is_in_bad_fork)
    global _in_bad_fork
    _in_bad_fork = True
    _mark_forked()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _is_in_bad_fork() -> bool:
    return _in_bad_fork


def _lazy_init() -> None:
    pass


def init() -> None:
    """The runtime starts at `import xirang`; nothing is left to initialise (torch.cuda.init)."""
    _lazy_init()


def current_device() -> int:
    out = _i32()
    _ok(_current_device(ctypes.byref(out)), "current_device")
    return out.value


def set_device(d) -> None:
    i = _index(d)
    if i >= 0:
        _ok(_set_device(i), "set_device")


class device:
    """Context manager that changes the current xirang device (as torch.cuda.device)."""

    def __init__(self, d):
        self.idx = _index(d)
        self.prev = -1

    def __enter__(self):
        self.prev = current_device()
        if self.idx >= 0:
            set_device(self.idx)

    def __exit__(self, *exc):
        if self.idx >= 0:
            set_device(self.prev)
        return False


class device_of(device):
    """Context manager that makes the device of `obj` (a tensor or storage) current, or does nothing
    when `obj` is not on xirang (as torch.cuda.device_of)."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if getattr(obj, "device", None) is not None
                         and torch.device(obj.device).type == "xirang" else -1)


def synchronize(d=None) -> None:
    """Waits for every stream of the device (None: the current one)."""
    _ok(_synchronize(_index(d)), "synchronize")


# --- streams and events (streams.py) ------------------------------------------------------------

from .streams import Event, Stream, StreamContext, current_stream, default_stream, set_stream, stream  # noqa: E402


# --- random numbers ------------------------------------------------------------------------------

def manual_seed(seed: int) -> None:
    """Seeds the current device's default generator (and the runtime's kernels' generator)."""
    _ok(_manual_seed(current_device(), int(seed) & 0xFFFF_FFFF_FFFF_FFFF), "manual_seed")


def manual_seed_all(seed: int) -> None:
    _ok(_manual_seed(-1, int(seed) & 0xFFFF_FFFF_FFFF_FFFF), "manual_seed_all")


def initial_seed() -> int:
    out = _u64()
    _ok(_initial_seed(current_device(), ctypes.byref(out)), "initial_seed")
    return out.value


def _random_seed() -> int:
    # as CUDA's generators seed themselves: from the OS, leaving PyTorch's CPU generator alone
    # (torch.seed() would reseed it, and every device)
    return int.from_bytes(os.urandom(8), "little") & 0x7FFF_FFFF_FFFF_FFFF


def seed() -> None:
    """Seeds the current device's generator with a random seed (torch.cuda.seed)."""
    manual_seed(_random_seed())


def seed_all() -> None:
    """Seeds every device's generator with one random seed (torch.cuda.seed_all)."""
    manual_seed_all(_random_seed())


def _rng_index(device) -> int:
    i = _index(device)
    return current_device() if i < 0 else i


def get_rng_state(device="xirang") -> torch.Tensor:
    """The state of the device's default generator, as a CPU byte tensor (as torch.cuda's)."""
    i = _rng_index(device)
    n = _u64()
    _ok(_get_rng_state(i, None, 0, ctypes.byref(n)), "get_rng_state")
    out = torch.empty(n.value, dtype=torch.uint8)
    _ok(_get_rng_state(i, out.data_ptr(), n.value, ctypes.byref(n)), "get_rng_state")
    return out


def set_rng_state(new_state: torch.Tensor, device="xirang") -> None:
    """Restores the device's default generator from `get_rng_state`'s tensor."""
    t = new_state.detach().to("cpu", torch.uint8).contiguous()
    _ok(_set_rng_state(_rng_index(device), t.data_ptr(), t.numel()), "set_rng_state")


def get_rng_state_all() -> list:
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states) -> None:
    for i, s in enumerate(new_states):
        set_rng_state(s, i)


# --- memory --------------------------------------------------------------------------------------

def memory_stats(d=None) -> dict:
    s = _MemoryStats()
    _ok(_memory_stats(_index(d), ctypes.byref(s)), "memory_stats")
    return {name: int(getattr(s, name)) for name, _ in _MemoryStats._fields_}


def memory_allocated(d=None) -> int:
    return memory_stats(d)["allocated_bytes"]


def max_memory_allocated(d=None) -> int:
    return memory_stats(d)["peak_allocated_bytes"]


def memory_reserved(d=None) -> int:
    return memory_stats(d)["reserved_bytes"]


def max_memory_reserved(d=None) -> int:
    return memory_stats(d)["peak_reserved_bytes"]


def reset_peak_memory_stats(d=None) -> None:
    _ok(_reset_peak(_index(d)), "reset_peak_memory_stats")


def reset_accumulated_memory_stats(d=None) -> None:
    """Zeroes the allocation, free, cache-hit and driver-call counts; byte gauges and peaks stay."""
    _ok(_reset_accumulated(_index(d)), "reset_accumulated_memory_stats")


def reset_max_memory_allocated(d=None) -> None:
    """The peak of allocated bytes starts again from the current value (resets both peaks)."""
    reset_peak_memory_stats(d)


def mem_get_info(d=None) -> tuple:
    """(free, total) bytes of the device, as the driver reports them (torch.cuda.mem_get_info)."""
    free, total = _u64(), _u64()
    _ok(_mem_get_info(_index(d), ctypes.byref(free), ctypes.byref(total)), "mem_get_info")
    return free.value, total.value


def empty_cache() -> None:
    """Returns the cached blocks of every device to the driver."""
    for i in range(device_count()):
        _ok(_empty_cache(i), "empty_cache")


# --- the fallback policy -------------------------------------------------------------------------

def fallback_counts() -> dict:
    """Per operator, how many calls each tier served: {"add.Tensor": {"native": 3, "recipe": 0,
    "fallback": 0}, ...}. `fallback` counts the calls PyTorch's CPU kernels ran."""
    p = _counters_json()
    if not p:
        raise RuntimeError("xirang: reading the counters failed")
    try:
        return json.loads(ctypes.string_at(p).decode())
    finally:
        _string_free(p)


def reset_fallback_counts() -> None:
    _reset_counters()


def set_fallback_mode(mode: str) -> None:
    """What a call to PyTorch's CPU kernels does: "error" (raise RuntimeError naming the operator),
    "warn" (warn once per operator; the default) or "silent". Same as XIRANG_FALLBACK."""
    if mode not in _MODES:
        raise ValueError(f"fallback mode {mode!r}: expected one of {sorted(_MODES)}")
    _ok(_set_fallback_mode(_MODES[mode]), "set_fallback_mode")


def fallback_mode() -> str:
    return {v: k for k, v in _MODES.items()}[_fallback_mode()]


def set_force_fallback(ops) -> None:
    """Operators that always run PyTorch's CPU kernel (qualified `add.Tensor` or base `add` names);
    the same as XIRANG_FORCE_FALLBACK."""
    s = ops if isinstance(ops, str) else ",".join(ops)
    b = s.encode()
    _ok(_set_force_fallback(b, len(b)), "set_force_fallback")


def set_fallback_alert(threshold: int) -> None:
    """Alert once an operator's fallback count reaches `threshold` (0: never); XIRANG_FALLBACK_ALERT."""
    t = int(threshold)
    if t < 0:
        raise ValueError(f"fallback alert threshold {t}: expected 0 (never) or a positive count")
    _ok(_set_fallback_alert(t if t > 0 else 0xFFFF_FFFF_FFFF_FFFF), "set_fallback_alert")


def pytorch_version() -> str:
    """The PyTorch version the adapter's operators were generated for."""
    return _pytorch_version().decode()


def get_amp_supported_dtype():
    return [torch.float16, torch.bfloat16]


# --- modules -------------------------------------------------------------------------------------

_module_apply = torch.nn.Module._apply
_applying = threading.local()


def _apply_keeping_ties(self, fn, recurse=True):
    """`Module._apply` (what `.to()`, `.xirang()`, `.half()` run) that keeps tied parameters tied.

    PyTorch moves a parameter in place, one Parameter object for all its names, only between the
    backends `TensorImpl::has_compatible_shallow_copy_type` lists (CPU, CUDA, MPS, HIP, XPU, HPU,
    MTIA; not PrivateUse1); otherwise every module gets a Parameter of its own, so `model.to("xirang")`
    unties what the model ties (GPT-2's output layer and input embedding) and trains another model
    (pytorch/pytorch#116255). After the move, each name of a parameter that was shared points at the
    one new Parameter again. A no-op where the move kept the ties."""
    if not recurse or getattr(_applying, "active", False):
        return _module_apply(self, fn, recurse)
    groups = {}
    for mod in self.modules():
        for name, p in mod._parameters.items():
            if p is not None:
                groups.setdefault(id(p), (p, []))[1].append((mod, name))
    shared = [names for _, names in groups.values() if len(names) > 1]
    _applying.active = True
    try:
        out = _module_apply(self, fn, recurse)
    finally:
        _applying.active = False
    for names in shared:
        first_mod, first_name = names[0]
        first = first_mod._parameters[first_name]
        for mod, name in names[1:]:
            if mod._parameters[name] is not first:
                mod._parameters[name] = first
    return out


torch.nn.Module._apply = _apply_keeping_ties


def _register() -> None:
    import sys

    torch._register_device_module("xirang", sys.modules[__name__])
    torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_storage=True)


_register()
