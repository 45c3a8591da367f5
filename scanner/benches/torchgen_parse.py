#!/usr/bin/env python3
"""Times PyTorch's own torchgen on one corpus version: parse_native_yaml (native_functions.yaml +
tags.yaml, with autogen expansion) followed by load_derivatives (derivatives.yaml).

Used by the `vs_torchgen` bench binary, which runs the same work in Rust in the same process tree and
prints the ratio. torchgen is pure Python and comes from the torch wheel of that version; see
scripts/fetch-torchgen.sh. Prints one JSON object: {"median_s": ..., "runs": [...], "ops": N}.
"""
import argparse
import json
import statistics
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus_dir", help="folder with native_functions.yaml, tags.yaml, derivatives.yaml")
    ap.add_argument("--torchgen", required=True, help="folder that contains the torchgen package")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    sys.path.insert(0, args.torchgen)
    import torchgen.gen as gen  # noqa: E402
    from torchgen.packaged.autograd import load_derivatives as ld  # noqa: E402

    nf = f"{args.corpus_dir}/native_functions.yaml"
    tags = f"{args.corpus_dir}/tags.yaml"
    deriv = f"{args.corpus_dir}/derivatives.yaml"
    runs = []
    ops = 0
    for _ in range(args.repeat):
        # both functions memoize by path: clear so every run does the full work
        gen._GLOBAL_PARSE_NATIVE_YAML_CACHE.clear()
        if hasattr(ld, "_GLOBAL_LOAD_DERIVATIVE_CACHE"):
            ld._GLOBAL_LOAD_DERIVATIVE_CACHE.clear()
        t = time.perf_counter()
        parsed = gen.parse_native_yaml(nf, tags)
        ld.load_derivatives(deriv, nf, tags)
        runs.append(time.perf_counter() - t)
        ops = len(parsed.native_functions)
    print(json.dumps({"median_s": statistics.median(runs), "runs": runs, "ops": ops}))


if __name__ == "__main__":
    main()
