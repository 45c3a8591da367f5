#!/usr/bin/env bash
# Fetches PyTorch's torchgen (pure Python) from the torch wheel of one version, for the side-by-side
# benchmarks. The macOS arm64 wheel is used because it is the smallest; only torchgen/ is extracted.
# Usage: scanner/benches/fetch-torchgen.sh [VERSION]   (default 2.15.0)
# Result: target/bench-cache/tg-VERSION/torchgen
set -euo pipefail
version="${1:-2.15.0}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
cache="$root/target/bench-cache"
mkdir -p "$cache"
cd "$cache"
if [ ! -d "tg-$version/torchgen" ]; then
  python3 -m pip download "torch==$version" --platform macosx_14_0_arm64 --platform macosx_11_0_arm64 \
    --only-binary=:all: --no-deps --python-version 3.11 -d . >/dev/null
  wheel="$(ls torch-"$version"-*.whl | head -n 1)"
  python3 - "$wheel" "tg-$version" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("torchgen/")])
PY
fi
python3 -c "import yaml" 2>/dev/null || python3 -m pip install pyyaml >/dev/null
echo "$cache/tg-$version"
