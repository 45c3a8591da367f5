//! `xirang-scan diff v2.1 v2.3 --format markdown` end to end, and the same comparison done in Python
//! with PyTorch's torchgen (`diff_torchgen.py`: parse both versions' yaml, compare, render), in the
//! same run, side by side, with the ratio.
//!
//! Our side is measured twice:
//! - in process: the library calls the CLI makes (resolve both versions, `Store::load_pytorch_pair`,
//!   index the adapter, `pytorch_pair_report`, render markdown, drop everything);
//! - the CLI: wall time of the `xirang-scan` process (start, load, diff, join the adapter's coverage
//!   of both versions, render, print, exit), and the same with `--no-coverage`.
//!
//! It also checks that the pair path renders byte for byte what the full load (`load_pytorch` of
//! both versions + `pytorch_report`) renders, and times that full path for comparison.
//!
//! `cargo bench -p xirang-scan --bench diff_vs_torchgen` (env: TORCHGEN_PATH = folder containing
//! `torchgen/`, default target/bench-cache/tg-2.3.1, created by `scanner/benches/fetch-torchgen.sh
//! 2.3.1`; XIRANG_BENCH_PY_REPEAT = Python runs, default 1). Without python3 or a torchgen only our
//! side runs, and the output says why. Target (issue #4): the CLI under 50 ms on the 2-core CI
//! machine, and faster than Python; the target line says whether this run met it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use xirang_scan::compare::{PairDiff, PytorchDiff, pytorch_pair_report, pytorch_report};
use xirang_scan::diff::custom::CustomOperators;
use xirang_scan::diff::impact::GeneratedIndex;
use xirang_scan::diff::pipeline::{index_adapter, index_adapter_pair, repo_root};
use xirang_scan::diff::{RuleSet, report_markdown};
use xirang_scan::snapshot::Store;

const OLD: &str = "v2.1";
const NEW: &str = "v2.3";
const RUNS: usize = 20;
const TARGET_MS: f64 = 50.0;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// What `xirang-scan diff OLD NEW --format markdown` does, as library calls; returns the markdown.
fn ours(store: &Store, rules: &RuleSet) -> Res<(usize, String)> {
    let (va, vb) = (store.resolve("pytorch", OLD)?, store.resolve("pytorch", NEW)?);
    let pair = store.load_pytorch_pair(&va, &vb)?;
    let root = repo_root(store);
    let kernels = index_adapter_pair(&root, &pair)?;
    let generated = GeneratedIndex::load(&root);
    let title = format!("pytorch {} -> {}", pair.old.meta.version, pair.new.meta.version);
    let custom = match CustomOperators::load(&root)? {
        Some(c) => Some(c.resolve_in(store, &va)?),
        None => None,
    };
    let d = PairDiff {
        title,
        kernels: &kernels,
        backends: &[],
        generated: &generated,
        allow: None,
        today: "2026-01-01",
        states: None,
        custom: custom.as_ref(),
    };
    let r = pytorch_pair_report(&pair, d, rules);
    Ok((r.changes.len(), report_markdown::render(&r, rules)))
}

/// The same through full snapshots (every operator parsed): the reference output.
fn ours_full(store: &Store, rules: &RuleSet) -> Res<(usize, String)> {
    let (va, vb) = (store.resolve("pytorch", OLD)?, store.resolve("pytorch", NEW)?);
    let old = store.load_pytorch(&va)?;
    let new = store.load_pytorch(&vb)?;
    let root = repo_root(store);
    let kernels = index_adapter(&root, &[&old, &new])?;
    let generated = GeneratedIndex::load(&root);
    let title = format!("pytorch {} -> {}", old.meta.version, new.meta.version);
    let custom = CustomOperators::load(&root)?.map(|c| c.resolve(&old.registry.functions));
    let d = PytorchDiff {
        old: &old,
        new: &new,
        title,
        kernels: &kernels,
        backends: &[],
        generated: &generated,
        allow: None,
        today: "2026-01-01",
        states: None,
        custom: custom.as_ref(),
    };
    let r = pytorch_report(d, rules);
    Ok((r.changes.len(), report_markdown::render(&r, rules)))
}

fn time<T>(mut f: impl FnMut() -> Res<T>) -> Res<(Duration, Duration)> {
    let mut runs = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let t = Instant::now();
        std::hint::black_box(f()?);
        runs.push(t.elapsed());
    }
    let min = runs.iter().min().copied().unwrap_or_default();
    Ok((median(runs), min))
}

/// Wall time of the CLI process, stdout discarded (`extra`: more arguments, `--no-coverage`).
fn cli(exe: &Path, store: &Path, extra: &[&str]) -> Res<(Duration, Duration)> {
    time(|| {
        let st = Command::new(exe)
            .args(["diff", OLD, NEW, "--format", "markdown", "--store"])
            .arg(store)
            .args(extra)
            .stdout(Stdio::null())
            .status()?;
        if st.success() { Ok(()) } else { Err(format!("xirang-scan exited with {st}").into()) }
    })
}

fn main() -> Res<()> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let store = Store::new(root.join("schemas"));
    let rules = RuleSet::builtin();

    let (n, md) = ours(&store, &rules)?;
    let (n_full, md_full) = ours_full(&store, &rules)?;
    if md != md_full || n != n_full {
        return Err("the pair path renders a different report than the full load".into());
    }
    let (lib, lib_min) = time(|| ours(&store, &rules))?;
    let (full, full_min) = time(|| ours_full(&store, &rules))?;
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_xirang-scan"));
    let (proc, proc_min) = cli(&exe, &store.root, &[])?;
    let (bare, bare_min) = cli(&exe, &store.root, &["--no-coverage"])?;
    println!("xirang-scan diff {OLD} {NEW} --format markdown: {n} changes, {} bytes of markdown", md.len());
    println!(
        "  in process   median {:6.1} ms  min {:6.1} ms  ({RUNS} runs; load_pytorch_pair + index + diff + render)",
        ms(lib),
        ms(lib_min)
    );
    println!(
        "  CLI process  median {:6.1} ms  min {:6.1} ms  ({RUNS} runs; wall time of `xirang-scan diff`, \
         the adapter's coverage of both versions joined)",
        ms(proc),
        ms(proc_min)
    );
    println!(
        "  CLI, no cov. median {:6.1} ms  min {:6.1} ms  ({RUNS} runs; `xirang-scan diff --no-coverage`)",
        ms(bare),
        ms(bare_min)
    );
    println!(
        "  full load    median {:6.1} ms  min {:6.1} ms  (load_pytorch of both + pytorch_report: same output, checked)",
        ms(full),
        ms(full_min)
    );
    let met = ms(proc) < TARGET_MS;
    println!(
        "target       CLI median < {TARGET_MS:.0} ms: {} ({:.1} ms)",
        if met { "met" } else { "NOT met" },
        ms(proc)
    );

    // Python: the new version's torchgen parses both files (a newer one rejects the old yaml's Dimname types)
    let (va, vb) = (store.resolve("pytorch", OLD)?, store.resolve("pytorch", NEW)?);
    let tgv = vb.to_string().trim_start_matches('v').to_string();
    let tg = std::env::var_os("TORCHGEN_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/bench-cache").join(format!("tg-{tgv}")));
    if !tg.join("torchgen").is_dir() {
        println!(
            "torchgen     skipped: no torchgen at {} (run scanner/benches/fetch-torchgen.sh {tgv} or set TORCHGEN_PATH); \
             no ratio",
            tg.display()
        );
        return Ok(());
    }
    let repeat = std::env::var("XIRANG_BENCH_PY_REPEAT").ok().and_then(|s| s.parse::<u32>().ok()).unwrap_or(1).max(1);
    let corpus = root.join("../shared/corpus/pytorch");
    let out = Command::new("python3")
        .arg(root.join("scanner/benches/diff_torchgen.py"))
        .arg(corpus.join(va.to_string()))
        .arg(corpus.join(vb.to_string()))
        .arg("--torchgen")
        .arg(&tg)
        .arg("--repeat")
        .arg(repeat.to_string())
        .output();
    let out = match out {
        Ok(o) if o.status.success() => o,
        Ok(o) => {
            println!("torchgen     skipped: python failed: {}", String::from_utf8_lossy(&o.stderr).trim());
            return Ok(());
        }
        Err(e) => {
            println!("torchgen     skipped: python3 not run: {e}");
            return Ok(());
        }
    };
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let Some(py_s) = j["median_s"].as_f64() else {
        println!("torchgen     skipped: unexpected output: {}", String::from_utf8_lossy(&out.stdout).trim());
        return Ok(());
    };
    let py = Duration::from_secs_f64(py_s);
    println!(
        "torchgen     same comparison in Python: {} changes, median {:.1} ms ({repeat} run(s), in process, \
         interpreter start and imports not counted)",
        j["changes"],
        ms(py)
    );
    println!(
        "ratio        xirang-scan is {:.0}x faster in process, {:.0}x faster as a CLI process",
        py.as_secs_f64() / lib.as_secs_f64(),
        py.as_secs_f64() / proc.as_secs_f64()
    );
    Ok(())
}
