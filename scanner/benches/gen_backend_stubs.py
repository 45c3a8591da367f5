"""torchgen's gen_backend_stubs on a backend yaml listing the same operators as xirang's selection.

Usage: gen_backend_stubs.py TORCHGEN_DIR OPS_FILE RUNS
Prints one JSON line: {"runs": [...seconds...], "ops": N, "files": [...]}.
TORCHGEN_DIR is the folder holding torchgen/ (from a wheel: scanner/benches/fetch-torchgen.sh).
"""
import json, os, sys, tempfile, time

tg_dir, ops_file, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
# gen_backend_stubs reads PYTORCH_ROOT/aten/src/ATen/...; a wheel keeps them in torchgen/packaged/ATen
root = tempfile.mkdtemp(prefix="xirang-gbs-")
os.symlink(os.path.join(os.path.abspath(tg_dir), "torchgen"), os.path.join(root, "torchgen"))
os.makedirs(os.path.join(root, "aten/src"))
os.symlink(os.path.join(os.path.abspath(tg_dir), "torchgen/packaged/ATen"), os.path.join(root, "aten/src/ATen"))
sys.path.insert(0, root)
from torchgen import gen_backend_stubs  # noqa: E402

ops = [l.strip() for l in open(ops_file) if l.strip()]
yaml_path = os.path.join(root, "backend.yaml")
with open(yaml_path, "w") as f:
    # XLA, as pytorch/xla's own backend yaml: PrivateUse1 already has kernels in
    # native_functions.yaml, which gen_backend_stubs rejects for an out-of-tree backend
    f.write("backend: XLA\ncpp_namespace: at_xirang\nsupported:\n")
    for op in ops:
        f.write(f"- {op}\n")
times = []
out = os.path.join(root, "out")
import torchgen.gen as tg_gen  # noqa: E402

for _ in range(runs):
    # every run as a fresh process would: torchgen caches the parsed native_functions.yaml
    # (and adds the backend to its indices) at module level
    for cache in ("_GLOBAL_PARSE_NATIVE_YAML_CACHE", "_GLOBAL_PARSE_TAGS_YAML_CACHE"):
        getattr(tg_gen, cache, {}).clear()
    t0 = time.perf_counter()
    gen_backend_stubs.run(yaml_path, out, dry_run=False)
    times.append(time.perf_counter() - t0)
print(json.dumps({"runs": times, "ops": len(ops), "files": sorted(os.listdir(out))}))
