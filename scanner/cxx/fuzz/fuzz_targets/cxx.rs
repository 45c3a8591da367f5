//! The C++ interface scanner and the C++ adapter index never panic, whatever the bytes: the input is
//! read as a header (as `ATen/autocast_mode.h`, so the autocast X-macro reader runs too) and as an
//! adapter source; the scanned file is diffed against an empty set and against itself (nothing).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data).into_owned();
    if let Ok(f) = xirang_cxx::scan_source("ATen/autocast_mode.h", &text) {
        for d in &f.diagnostics {
            assert!(d.line >= 1 && d.column >= 1);
        }
        let set = xirang_cxx::CxxSet { files: vec![f] };
        let empty = xirang_cxx::CxxSet::default();
        let _ = xirang_cxx::diff(&empty, &set);
        let _ = xirang_cxx::diff(&set, &empty);
        assert!(xirang_cxx::diff(&set, &set).is_empty());
    }
    let _ = xirang_cxx::index::index_sources(&[("fuzz.cpp".to_string(), text)]);
});
