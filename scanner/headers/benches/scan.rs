//! Parses one release's full ACL header set (torch_npu 2.14.0: 20 headers, ~12k lines) and, for
//! scale, one CUDA release (6 headers, ~50k lines).
use std::path::PathBuf;

use criterion::{Criterion, criterion_group, criterion_main};
use xirang_headers::{Profile, scan_dir};

fn corpus() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/corpus"))
}

fn bench(c: &mut Criterion) {
    let acl = corpus().join("ascend/v2.14.0/acl");
    if acl.is_dir() {
        c.bench_function("scan_dir ascend v2.14.0 acl (full header set)", |b| {
            b.iter(|| scan_dir(Profile::Ascend, &acl).map(|s| s.files.len()).unwrap_or(0))
        });
        c.bench_function("scan_dir generic profile, ascend v2.14.0 acl", |b| {
            b.iter(|| scan_dir(Profile::Generic, &acl).map(|s| s.files.len()).unwrap_or(0))
        });
    }
    let cuda = corpus().join("cuda/v13.5.37");
    if cuda.is_dir() {
        let mut g = c.benchmark_group("cuda");
        g.sample_size(10);
        g.bench_function("scan_dir cuda v13.5.37", |b| {
            b.iter(|| scan_dir(Profile::Cuda, &cuda).map(|s| s.files.len()).unwrap_or(0))
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
