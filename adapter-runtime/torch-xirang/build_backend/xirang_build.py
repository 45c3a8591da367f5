"""PEP 517 backend of the torch-xirang package (standard library only).

`pip install ./adapter-runtime/torch-xirang` calls `build_wheel`, which
1. asks the *target* interpreter (`python -I`, so pip's build isolation does not hide the torch
   installed there) for torch's version, headers, libraries and C++ ABI;
2. builds the Rust C ABI as a shared library: `cargo build --release -p xirang-bridge --lib` (the
   cargo workspace itself never needs torch; `XIRANG_BRIDGE_LIB=path/libxirang_bridge.so` takes one
   already built instead: CI passes the one its `cargo test --workspace` linked);
3. compiles the thin C++ shim (`csrc/*.cpp`, the generated `generated/bridge_registrations.cpp` and
   `generated/autocast.cpp`)
   against that torch, one `c++` per file, in parallel, and links `libxirang_shim.so`;
4. writes the wheel (a zip with `RECORD`) holding the Python package, both libraries and
   `_build_info.py` (the torch it was built against, the PyTorch version the adapter was generated
   for), which `import xirang` checks.

ARCHITECTURE.md says why not setuptools + torch.utils.cpp_extension, maturin, pyo3 or cc.
"""

from __future__ import annotations

import base64
import concurrent.futures
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

NAME = "torch_xirang"
VERSION = "0.1.0"
PKG = Path(__file__).resolve().parent.parent  # adapter-runtime/torch-xirang
ROOT = PKG.parent.parent  # the cargo workspace
BUILD = PKG / "build"

PROBE = r"""
import json, os, sys
import torch, torch.utils.cpp_extension as ext
print(json.dumps({
    "torch": torch.__version__,
    "include": ext.include_paths(),
    "lib": os.path.join(os.path.dirname(torch.__file__), "lib"),
    "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
    "python": sys.version.split()[0],
}))
"""


class BuildError(RuntimeError):
    pass


def _log(msg: str) -> None:
    print(f"torch-xirang: {msg}", file=sys.stderr, flush=True)


def _run(cmd: list[str], cwd: Path | None = None, env: dict | None = None) -> str:
    _log(" ".join(shlex.quote(c) for c in cmd))
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stdout[:30000])
        raise BuildError(f"`{cmd[0]}` failed (exit {p.returncode}): {' '.join(cmd[:6])} ...")
    return p.stdout


def probe_torch() -> dict:
    """What the target environment's torch is (never the isolated build environment's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    p = subprocess.run([sys.executable, "-I", "-c", PROBE], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise BuildError(
            "torch-xirang is built against the torch installed in the target environment, and "
            f"`{sys.executable} -I -c 'import torch'` failed:\n{p.stderr[-3000:]}\n"
            "Install it first: pip install torch")
    return json.loads(p.stdout.strip().splitlines()[-1])


def generated_pytorch_version() -> str:
    text = (ROOT / "generated" / "mod.rs").read_text()
    m = re.search(r'PYTORCH_VERSION:\s*&str\s*=\s*"([^"]+)"', text)
    if not m:
        raise BuildError("generated/mod.rs names no PYTORCH_VERSION: run `xirang-scan generate`")
    return m.group(1).lstrip("v")


def cargo_build() -> Path:
    """The bridge's shared library: `cargo build --release -p xirang-bridge --lib`, or the library
    `XIRANG_BRIDGE_LIB` names, already built (CI: the one `cargo test --workspace` just linked, so the
    runtime is not compiled a second time; the bridge's tests do not measure speed)."""
    prebuilt = os.environ.get("XIRANG_BRIDGE_LIB")
    if prebuilt:
        lib = (ROOT / prebuilt).resolve()  # a relative path is the workspace's (pip builds elsewhere)
        _log(f"XIRANG_BRIDGE_LIB: using {lib} (not built here)")
    else:
        cargo = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
        target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
        _run([cargo, "build", "--release", "--locked", "-p", "xirang-bridge", "--lib"], cwd=ROOT)
        lib = target / "release" / "libxirang_bridge.so"
    if not lib.is_file():
        raise BuildError(f"no {lib}" + (" (XIRANG_BRIDGE_LIB)" if prebuilt else ": cargo built none"))
    return lib


def _compile(cxx: str, flags: list[str], src: Path, obj: Path) -> Path:
    cmd = [cxx, *flags, "-c", str(src), "-o", str(obj)]
    stamp = obj.with_suffix(".cmd")
    key = hashlib.sha256((" ".join(cmd) + "\n").encode() + src.read_bytes()
                         + b"".join(h.read_bytes() for h in sorted((PKG / "csrc").glob("*.h")))
                         + (ROOT / "adapter-runtime/bridge/include/xirang_bridge.h").read_bytes()).hexdigest()
    if obj.is_file() and stamp.is_file() and stamp.read_text() == key:
        return obj
    _run(cmd)
    stamp.write_text(key)
    return obj


def build_shim(info: dict, bridge: Path) -> Path:
    BUILD.mkdir(parents=True, exist_ok=True)
    cxx = os.environ.get("CXX", "c++")
    flags = ["-std=c++20", "-O2", "-fPIC", "-fvisibility=hidden", "-w",
             f"-D_GLIBCXX_USE_CXX11_ABI={1 if info['cxx11_abi'] else 0}",
             "-I", str(PKG / "csrc"), "-I", str(ROOT / "adapter-runtime/bridge/include")]
    for inc in info["include"]:
        flags += ["-isystem", inc]
    sources = sorted((PKG / "csrc").glob("*.cpp")) + [ROOT / "generated" / "bridge_registrations.cpp"]
    # autocast for the device, from the autocast lists of the targeted PyTorch's headers (written by
    # `generate` when the store has that release's C++ interface snapshot)
    autocast = ROOT / "generated" / "autocast.cpp"
    if autocast.is_file():
        sources.append(autocast)
    for s in sources:
        if not s.is_file():
            raise BuildError(f"{s} is missing (the registrations are written by `xirang-scan generate`)")
    jobs = max(1, min(len(sources), os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        objs = list(pool.map(lambda s: _compile(cxx, flags, s, BUILD / (s.stem + ".o")), sources))
    shutil.copy2(bridge, BUILD / bridge.name)
    out = BUILD / "libxirang_shim.so"
    _run([cxx, "-shared", "-o", str(out), *map(str, objs), "-L", str(BUILD), "-lxirang_bridge",
          "-L", info["lib"], "-lc10", "-ltorch_cpu", "-ltorch", "-Wl,-rpath,$ORIGIN", "-Wl,--no-as-needed"])
    return out


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _metadata() -> str:
    return (f"Metadata-Version: 2.1\nName: torch-xirang\nVersion: {VERSION}\n"
            "Summary: PyTorch device `xirang`: the Xirang adapter runtime as an out-of-tree PrivateUse1 backend\n"
            "Requires-Python: >=3.9\n")


def _wheel_name() -> str:
    return f"{NAME}-{VERSION}-py3-none-linux_x86_64.whl"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    info = probe_torch()
    generated = generated_pytorch_version()
    built_for = info["torch"].split("+")[0]
    if built_for != generated:
        raise BuildError(
            f"the adapter was generated for PyTorch {generated}, the target environment has torch "
            f"{info['torch']}: install torch=={generated}, or regenerate the adapter for {built_for} "
            f"(xirang.toml [pytorch] version, then `xirang-scan generate`)")
    bridge = cargo_build()
    shim = build_shim(info, bridge)
    files: dict[str, bytes] = {}
    for p in sorted((PKG / "xirang").rglob("*.py")):
        files["xirang/" + p.relative_to(PKG / "xirang").as_posix()] = p.read_bytes()
    files["xirang/_build_info.py"] = (
        "# written by the torch-xirang build backend\n"
        f"TORCH = {info['torch']!r}\nGENERATED_FOR = {generated!r}\n").encode()
    files["xirang/lib/libxirang_shim.so"] = shim.read_bytes()
    files["xirang/lib/libxirang_bridge.so"] = (BUILD / "libxirang_bridge.so").read_bytes()
    dist = f"{NAME}-{VERSION}.dist-info"
    files[f"{dist}/METADATA"] = _metadata().encode()
    files[f"{dist}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: xirang_build\nRoot-Is-Purelib: false\n"
                              b"Tag: py3-none-linux_x86_64\n")
    files[f"{dist}/top_level.txt"] = b"xirang\n"
    record = "".join(f"{n},{_record_hash(d)},{len(d)}\n" for n, d in files.items()) + f"{dist}/RECORD,,\n"
    files[f"{dist}/RECORD"] = record.encode()
    out = Path(wheel_directory) / _wheel_name()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in files.items():
            zi = zipfile.ZipInfo(n, date_time=(1980, 1, 1, 0, 0, 0))
            zi.external_attr = (0o755 if n.endswith(".so") else 0o644) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, d)
    _log(f"wrote {out.name} (built against torch {info['torch']}, Python {info['python']})")
    return out.name


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    dist = Path(metadata_directory) / f"{NAME}-{VERSION}.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text(_metadata())
    (dist / "WHEEL").write_text("Wheel-Version: 1.0\nGenerator: xirang_build\nRoot-Is-Purelib: false\n"
                                "Tag: py3-none-linux_x86_64\n")
    return dist.name
