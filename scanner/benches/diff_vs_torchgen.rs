//! `xirang-scan diff v2.1 v2.3` end to end (load two snapshots from the store, diff, index the adapter,
//! render markdown), and the same comparison done in Python with PyTorch's torchgen
//! (`diff_torchgen.py`: parse both versions' yaml, compare, render), in the same run.
//!
//! `cargo bench -p xirang-scan --bench diff_vs_torchgen` (env: TORCHGEN_PATH = folder containing
//! `torchgen/`; default target/bench-cache/tg-2.3.1, created by `scanner/benches/fetch-torchgen.sh
//! 2.3.1`). Without a torchgen only our side runs. Target (issue #4): under 50 ms, faster than Python.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use xirang_scan::diff::committed::{PytorchDiff, index_adapter, pytorch_report, repo_root};
use xirang_scan::diff::impact::GeneratedIndex;
use xirang_scan::diff::{RuleSet, report_markdown};
use xirang_scan::snapshot::Store;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ours(store: &Store, rules: &RuleSet) -> (usize, usize) {
    let (va, vb) = (store.resolve("pytorch", "v2.1").expect("v2.1"), store.resolve("pytorch", "v2.3").expect("v2.3"));
    let old = store.load_pytorch(&va).expect("load");
    let new = store.load_pytorch(&vb).expect("load");
    let root = repo_root(store);
    let kernels = index_adapter(&root, &[&old, &new]).expect("adapter index");
    let generated = GeneratedIndex::load(&root);
    let r = pytorch_report(
        PytorchDiff {
            old: &old,
            new: &new,
            title: "bench".into(),
            kernels: &kernels,
            backends: &[],
            generated: &generated,
            allow: None,
            today: "2026-01-01",
        },
        rules,
    );
    let md = report_markdown::render(&r, rules);
    (r.changes.len(), md.len())
}

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let store = Store::new(root.join("schemas"));
    let rules = RuleSet::builtin();
    let (n, md) = ours(&store, &rules);
    let runs: Vec<Duration> = (0..20)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(ours(&store, &rules));
            t.elapsed()
        })
        .collect();
    let rust = median(runs.clone());
    let min = runs.iter().min().copied().unwrap_or_default();
    println!(
        "xirang-scan  diff v2.1 v2.3: {n} changes, {md} bytes of markdown, median {:.1} ms, min {:.1} ms (20 runs; target < 50 ms)",
        ms(rust),
        ms(min)
    );

    // the new version's torchgen parses both files (a newer one rejects the old yaml's Dimname types)
    let (va, vb) = (store.resolve("pytorch", "v2.1").expect("v2.1"), store.resolve("pytorch", "v2.3").expect("v2.3"));
    let tgv = vb.to_string().trim_start_matches('v').to_string();
    let tg = std::env::var_os("TORCHGEN_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/bench-cache").join(format!("tg-{tgv}")));
    if !tg.join("torchgen").is_dir() {
        println!(
            "torchgen     not found at {} (run scanner/benches/fetch-torchgen.sh {tgv}); not compared",
            tg.display()
        );
        return;
    }
    let corpus = root.join("../shared/corpus/pytorch");
    let out = Command::new("python3")
        .arg(root.join("scanner/benches/diff_torchgen.py"))
        .arg(corpus.join(va.to_string()))
        .arg(corpus.join(vb.to_string()))
        .arg("--torchgen")
        .arg(&tg)
        .output();
    let out = match out {
        Ok(o) if o.status.success() => o,
        Ok(o) => {
            println!("python       failed: {}", String::from_utf8_lossy(&o.stderr));
            return;
        }
        Err(e) => {
            println!("python       not run: {e}");
            return;
        }
    };
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let py = Duration::from_secs_f64(j["median_s"].as_f64().unwrap_or(f64::NAN));
    println!("torchgen     same comparison in Python: {} changes, {:.1} ms (1 run)", j["changes"], ms(py));
    println!("ratio        xirang-scan is {:.0}x faster", py.as_secs_f64() / rust.as_secs_f64());
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
