//! Where the corpus is and its releases in version order.
#![allow(dead_code)]

use std::path::PathBuf;

pub fn corpus() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/corpus"))
}

pub fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn key(v: &str) -> Vec<u64> {
    v.trim_start_matches('v').split('.').map(|s| s.parse().unwrap_or(0)).collect()
}

/// The `pytorch-cxx` releases, oldest first.
pub fn releases() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(corpus().join("pytorch-cxx"))
        .expect("corpus pytorch-cxx folder")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort_by_key(|a| key(a));
    v
}

pub fn scan(v: &str) -> xirang_cxx::CxxSet {
    xirang_cxx::scan_dir(&corpus().join("pytorch-cxx").join(v)).unwrap_or_else(|e| panic!("{v}: {e}"))
}
