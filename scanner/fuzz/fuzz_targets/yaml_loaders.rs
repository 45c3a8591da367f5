//! Fuzzes the yaml loaders (tags.yaml, native_functions.yaml with autogen expansion,
//! derivatives.yaml against a small registry, backend yaml): never panic, errors carry positions
//! inside the file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xirang_scan::SourceFile;
use xirang_scan::{backend, derivatives, registry};

const BASE: &str = "- func: abs(Tensor self) -> Tensor\n  variants: function, method\n  dispatch:\n    CPU: abs\n  autogen: abs.out\n- func: add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor\n";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let src = SourceFile::new("fuzz.yaml", text);
    let check = |e: &xirang_scan::SourceError| {
        assert!(e.line >= 1 && e.col >= 1);
        assert!(e.span.offset() <= text.len());
    };
    if let Err(e) = registry::load_tags(&src) {
        check(&e);
    }
    if let Err(e) = registry::load_native_functions(&src, Vec::new()) {
        check(&e);
    }
    if let Err(e) = backend::load_backend_yaml(&src) {
        check(&e);
    }
    let base = registry::load_native_functions(&SourceFile::new("nf.yaml", BASE), Vec::new()).expect("base registry");
    if let Err(e) = derivatives::load_derivatives(&src, &base) {
        check(&e);
    }
});
