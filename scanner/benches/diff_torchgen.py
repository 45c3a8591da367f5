#!/usr/bin/env python3
"""The Python baseline for the `diff_vs_torchgen` bench: the same comparison as `xirang-scan diff OLD NEW
--format markdown`, done with PyTorch's torchgen.

torchgen has no snapshot store, so each run parses both versions' yaml (parse_native_yaml with autogen
expansion + load_derivatives), then matches operators by name and compares schemas (arguments by name:
added, removed, type, default, keyword-only; returns), dispatch (CompositeImplicitAutograd), structured
status, tags and derivative formulas, and renders a markdown table. Prints one JSON object:
{"median_s": ..., "runs": [...], "changes": N}.
"""
import argparse
import json
import statistics
import sys
import time


def load(gen, ld, d):
    nf, tags, deriv = f"{d}/native_functions.yaml", f"{d}/tags.yaml", f"{d}/derivatives.yaml"
    gen._GLOBAL_PARSE_NATIVE_YAML_CACHE.clear()
    if hasattr(ld, "_GLOBAL_LOAD_DERIVATIVE_CACHE"):
        ld._GLOBAL_LOAD_DERIVATIVE_CACHE.clear()
    parsed = gen.parse_native_yaml(nf, tags)
    derivs = ld.load_derivatives(deriv, nf, tags)
    infos = derivs[0] if isinstance(derivs, tuple) else derivs
    if isinstance(infos, dict):
        infos = list(infos.values())
    ops = {str(f.func.name): f for f in parsed.native_functions}
    keys = {}
    for k, bi in parsed.backend_indices.items():
        for name in bi.index:
            keys.setdefault(str(name), set()).add(str(k))
    formulas = {}
    for info in infos:
        per_key = info.values() if isinstance(info, dict) else [info]
        for di in per_key:
            name = str(di.func.func.name) if di.func is not None else di.name
            formulas[name] = [d.original_formula for d in di.derivatives]
    return ops, formulas, keys


def diff(old, new):
    (oo, of, okeys), (no, nf, nkeys) = old, new
    out = []
    for k in sorted(set(oo) - set(no)):
        out.append(("op.removed", k, str(oo[k].func), ""))
    for k in sorted(set(no) - set(oo)):
        out.append(("op.added", k, "", str(no[k].func)))
    for k in sorted(set(oo) & set(no)):
        a, b = oo[k], no[k]
        if str(a.func) != str(b.func):
            aa = {x.name: (i, x) for i, x in enumerate(a.func.arguments.flat_all)}
            ba = {x.name: (i, x) for i, x in enumerate(b.func.arguments.flat_all)}
            for n in aa.keys() - ba.keys():
                out.append(("arg.removed", k, n, ""))
            for n in ba.keys() - aa.keys():
                out.append(("arg.added", k, "", n))
            for n in aa.keys() & ba.keys():
                (i, x), (j, y) = aa[n], ba[n]
                if str(x.type) != str(y.type):
                    out.append(("arg.retyped", k, str(x.type), str(y.type)))
                if x.default != y.default:
                    out.append(("arg.default_changed", k, str(x.default), str(y.default)))
                if i != j:
                    out.append(("arg.moved", k, str(i), str(j)))
            kw_a = {x.name for x in a.func.arguments.flat_kwarg_only}
            kw_b = {x.name for x in b.func.arguments.flat_kwarg_only}
            for n in (kw_b - kw_a) & aa.keys():
                out.append(("arg.kwarg_only_changed", k, "", n))
            if [str(r) for r in a.func.returns] != [str(r) for r in b.func.returns]:
                out.append(("ret.changed", k, str(a.func.returns), str(b.func.returns)))
        ka, kb = sorted(okeys.get(k, ())), sorted(nkeys.get(k, ()))
        if ka != kb:
            out.append(("dispatch.changed", k, ",".join(ka), ",".join(kb)))
        if (a.structured, str(a.structured_delegate)) != (b.structured, str(b.structured_delegate)):
            out.append(("structured.changed", k, "", ""))
        if sorted(map(str, a.tags)) != sorted(map(str, b.tags)):
            out.append(("tags.changed", k, ",".join(sorted(map(str, a.tags))), ",".join(sorted(map(str, b.tags)))))
        if of.get(k) != nf.get(k):
            out.append(("deriv.changed", k, "", ""))
    return out


def render(changes):
    lines = ["| rule | operator | old | new |", "| --- | --- | --- | --- |"]
    esc = "\\|"
    for r, k, o, n in changes:
        lines.append(f"| `{r}` | `{k}` | {o.replace('|', esc)} | {n.replace('|', esc)} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("old_dir")
    ap.add_argument("new_dir")
    ap.add_argument("--torchgen", required=True, help="folder that contains the torchgen package")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    sys.path.insert(0, args.torchgen)
    import torchgen.gen as gen  # noqa: E402
    from torchgen.packaged.autograd import load_derivatives as ld  # noqa: E402

    runs, n = [], 0
    for _ in range(args.repeat):
        t = time.perf_counter()
        changes = diff(load(gen, ld, args.old_dir), load(gen, ld, args.new_dir))
        render(changes)
        runs.append(time.perf_counter() - t)
        n = len(changes)
    print(json.dumps({"median_s": statistics.median(runs), "runs": runs, "changes": n}))


if __name__ == "__main__":
    main()
