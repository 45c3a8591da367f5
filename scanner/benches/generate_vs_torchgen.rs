//! `xirang-scan generate` (load xirang.toml, the PyTorch and header snapshots, compile recipes,
//! render every file of generated/) side by side with torchgen's `gen_backend_stubs` on a
//! backend yaml listing the same operators, in one run. Target: regeneration under 1 s.
//!
//! `cargo bench -p xirang-scan --bench generate_vs_torchgen`. torchgen comes from
//! `scanner/benches/fetch-torchgen.sh 2.3.1` (or `TORCHGEN_PATH`); without it the Python side
//! is skipped with a message.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use xirang_scan::generate::{self, Inputs, config::LoadedConfig};
use xirang_scan::snapshot::Store;

const RUNS: usize = 10;
const TARGET_S: f64 = 1.0;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().ok_or("no repo root")?.to_path_buf();
    let store = Store::new(root.join("schemas"));
    let mut times = Vec::new();
    let mut n_ops = 0;
    for _ in 0..RUNS {
        let t = Instant::now();
        let cfg = LoadedConfig::load(&root.join("xirang.toml"))?;
        let inputs = Inputs::load(cfg, &store)?;
        let (files, ops) = generate::render_all(&inputs)?;
        std::hint::black_box(&files);
        n_ops = ops;
        times.push(t.elapsed());
    }
    let ours = median(times);
    let exe = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release/xirang-scan");
    let mut proc_times = Vec::new();
    if exe.is_file() {
        for _ in 0..RUNS {
            let t = Instant::now();
            let o = Command::new(&exe).arg("generate").arg("--check").current_dir(&root).output()?;
            proc_times.push(t.elapsed());
            if !o.status.success() {
                println!("note         generate --check reports stale files (timing still valid)");
                break;
            }
        }
    }
    println!("generate     {n_ops} operators, median of {RUNS}: {:.1} ms in process", ours.as_secs_f64() * 1e3);
    if !proc_times.is_empty() {
        println!("  CLI        generate --check median {:.1} ms", median(proc_times).as_secs_f64() * 1e3);
    }
    println!(
        "target       regeneration < {TARGET_S:.0} s: {}",
        if ours.as_secs_f64() < TARGET_S { "met" } else { "NOT met" }
    );

    let tg = std::env::var_os("TORCHGEN_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/bench-cache/tg-2.3.1"));
    if !tg.join("torchgen").is_dir() {
        println!("torchgen     skipped: no torchgen at {} (scanner/benches/fetch-torchgen.sh 2.3.1)", tg.display());
        return Ok(());
    }
    let ops_file = std::env::temp_dir().join(format!("xirang-gbs-ops-{}.txt", std::process::id()));
    let ops_text = std::fs::read_to_string(root.join("generated/ops.rs"))?;
    let list: Vec<&str> = ops_text
        .lines()
        .skip_while(|l| !(l.starts_with("pub static OPERATORS") || l.starts_with("pub const OPERATORS")))
        .skip(1)
        .take_while(|l| !l.starts_with("];"))
        .map(|l| l.trim().trim_matches(|c| c == '"' || c == ','))
        .collect();
    if list.is_empty() {
        return Err("no OPERATORS table in generated/ops.rs".into());
    }
    std::fs::write(&ops_file, list.join("\n"))?;
    let out = Command::new("python3")
        .arg(root.join("scanner/benches/gen_backend_stubs.py"))
        .arg(&tg)
        .arg(&ops_file)
        .arg("3")
        .output()?;
    let _ = std::fs::remove_file(&ops_file);
    if !out.status.success() {
        println!("torchgen     skipped: python failed: {}", String::from_utf8_lossy(&out.stderr).trim());
        return Ok(());
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let mut runs: Vec<f64> = v["runs"].as_array().ok_or("runs")?.iter().filter_map(|x| x.as_f64()).collect();
    runs.sort_by(f64::total_cmp);
    let py = runs[runs.len() / 2];
    println!("torchgen     gen_backend_stubs on {} operators, median of {}: {:.0} ms", v["ops"], runs.len(), py * 1e3);
    println!("ratio        torchgen / xirang = {:.1}x", py / ours.as_secs_f64());
    Ok(())
}
