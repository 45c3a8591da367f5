//! Scanning one release's C++ extension headers (PyTorch 2.15.0: 92 headers) and diffing a pair
//! (2.12.1 -> 2.13.0), each against the brief's 100 ms budget. Reads ../shared/corpus; skips what
//! is missing.
use std::path::PathBuf;

use criterion::{Criterion, criterion_group, criterion_main};

fn corpus() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/corpus/pytorch-cxx"))
}

fn bench(c: &mut Criterion) {
    let new = corpus().join("v2.15.0");
    if !new.is_dir() {
        return;
    }
    c.bench_function("scan_dir pytorch-cxx v2.15.0 (92 headers)", |b| {
        b.iter(|| xirang_cxx::scan_dir(&new).map(|s| s.files.len()).unwrap_or(0))
    });
    let (Ok(a), Ok(b2)) =
        (xirang_cxx::scan_dir(&corpus().join("v2.12.1")), xirang_cxx::scan_dir(&corpus().join("v2.13.0")))
    else {
        return;
    };
    c.bench_function("diff pytorch-cxx v2.12.1 -> v2.13.0", |b| b.iter(|| xirang_cxx::diff(&a, &b2).len()));
}

criterion_group!(benches, bench);
criterion_main!(benches);
