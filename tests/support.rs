//! Shared helpers for the end-to-end tests: where the repository and the upstream corpus are.
use std::path::PathBuf;

/// Root of the repository (the workspace).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ has a parent").to_path_buf()
}

/// `../shared/corpus` relative to the repository root.
pub fn corpus() -> PathBuf {
    repo_root().join("../shared/corpus")
}
