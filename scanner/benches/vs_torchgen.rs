//! Parse one PyTorch version (native_functions.yaml + tags.yaml with autogen expansion, then
//! derivatives.yaml) with xirang-scan and with PyTorch's own torchgen (`parse_native_yaml` +
//! `load_derivatives`, from the torch wheel of that version), in the same run, and print the ratio.
//!
//! `cargo bench -p xirang-scan --bench vs_torchgen` (env: XIRANG_BENCH_VERSION=v2.15.0,
//! TORCHGEN_PATH=folder containing `torchgen/`; default target/bench-cache/tg-<version>, which
//! `scanner/benches/fetch-torchgen.sh <version>` creates). Without a torchgen, only our side runs.
//! Target (issue #2): at least 20x faster than torchgen.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use xirang_scan::SourceFile;
use xirang_scan::registry::{self, TorchgenVersion};
use xirang_scan::version::Version;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ours(dir: &Path, tg: TorchgenVersion) -> (usize, usize) {
    let read = |n: &str| SourceFile::new(n, std::fs::read_to_string(dir.join(n)).expect("read corpus file"));
    let tags = registry::load_tags(&read("tags.yaml")).expect("tags");
    let reg = registry::load_native_functions_as(&read("native_functions.yaml"), tags, tg).expect("registry");
    let derivs = xirang_scan::derivatives::load_derivatives(&read("derivatives.yaml"), &reg).expect("derivatives");
    (reg.functions.len(), derivs.len())
}

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let version = std::env::var("XIRANG_BENCH_VERSION").unwrap_or_else(|_| "v2.15.0".into());
    let v = Version::parse(&version).expect("XIRANG_BENCH_VERSION is a version");
    let dir = root.join("../shared/corpus/pytorch").join(v.to_string());
    let tg = v.torchgen();

    // warm up, then time
    let (ops, derivs) = ours(&dir, tg);
    let runs: Vec<Duration> = (0..30)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(ours(&dir, tg));
            t.elapsed()
        })
        .collect();
    let rust = median(runs);
    println!("xirang-scan  {v}: {ops} operators, {derivs} derivative entries, median {:.2} ms (30 runs)", ms(rust));

    let tg_path = std::env::var_os("TORCHGEN_PATH").map(PathBuf::from).unwrap_or_else(|| {
        root.join("target/bench-cache").join(format!("tg-{}", v.to_string().trim_start_matches('v')))
    });
    if !tg_path.join("torchgen").is_dir() {
        println!(
            "torchgen     not found at {} (run scanner/benches/fetch-torchgen.sh {}); ratio not measured",
            tg_path.display(),
            v.to_string().trim_start_matches('v')
        );
        return;
    }
    let out = Command::new("python3")
        .arg(root.join("scanner/benches/torchgen_parse.py"))
        .arg(&dir)
        .arg("--torchgen")
        .arg(&tg_path)
        .args(["--repeat", "3"])
        .output()
        .expect("run python3");
    if !out.status.success() {
        println!("torchgen     failed: {}", String::from_utf8_lossy(&out.stderr));
        return;
    }
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("torchgen_parse.py prints json");
    let py = Duration::from_secs_f64(j["median_s"].as_f64().unwrap_or(f64::NAN));
    println!("torchgen     {v}: {} operators, median {:.1} ms (3 runs)", j["ops"], ms(py));
    println!(
        "ratio        xirang-scan is {:.0}x faster than torchgen (target: >= 20x)",
        py.as_secs_f64() / rust.as_secs_f64()
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
