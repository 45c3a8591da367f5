//! `include/xirang_bridge.h` (hand-written for the shim) agrees with the Rust side: every
//! `XR_*` constant has the value of its Rust counterpart, and the header declares exactly the
//! functions `src/ffi.rs` exports.

use std::collections::BTreeMap;

use xirang_bridge::Status;
use xirang_bridge::abi::*;

const HEADER: &str = include_str!("../include/xirang_bridge.h");
const FFI: &str = include_str!("../src/ffi.rs");

fn header_constants() -> BTreeMap<String, i64> {
    HEADER
        .lines()
        .filter_map(|l| {
            let mut w = l.strip_prefix("#define ")?.split_whitespace();
            let (name, value) = (w.next()?, w.next()?);
            Some((name.to_string(), value.parse().ok()?))
        })
        .collect()
}

#[test]
fn constants_agree() {
    let rust: BTreeMap<String, i64> = [
        ("XR_OK", Status::Ok as i64),
        ("XR_DECLINED", Status::Declined as i64),
        ("XR_ERROR", Status::Error as i64),
        ("XR_OUT_OF_MEMORY", Status::OutOfMemory as i64),
        ("XR_INDEX", Status::Index as i64),
        ("XR_VALUE", Status::Value as i64),
        ("XR_TYPE", Status::Type as i64),
        ("XR_NOT_IMPLEMENTED", Status::NotImplemented as i64),
        ("XR_PANIC", Status::Panic as i64),
        ("XR_TAG_NONE", TAG_NONE as i64),
        ("XR_TAG_TENSOR", TAG_TENSOR as i64),
        ("XR_TAG_TENSOR_LIST", TAG_TENSOR_LIST as i64),
        ("XR_TAG_OPT_TENSOR_LIST", TAG_OPT_TENSOR_LIST as i64),
        ("XR_TAG_INT", TAG_INT as i64),
        ("XR_TAG_INT_LIST", TAG_INT_LIST as i64),
        ("XR_TAG_FLOAT", TAG_FLOAT as i64),
        ("XR_TAG_FLOAT_LIST", TAG_FLOAT_LIST as i64),
        ("XR_TAG_BOOL", TAG_BOOL as i64),
        ("XR_TAG_BOOL_LIST", TAG_BOOL_LIST as i64),
        ("XR_TAG_SCALAR_INT", TAG_SCALAR_INT as i64),
        ("XR_TAG_SCALAR_FLOAT", TAG_SCALAR_FLOAT as i64),
        ("XR_TAG_SCALAR_BOOL", TAG_SCALAR_BOOL as i64),
        ("XR_TAG_SCALAR_LIST", TAG_SCALAR_LIST as i64),
        ("XR_TAG_STR", TAG_STR as i64),
        ("XR_TAG_DTYPE", TAG_DTYPE as i64),
        ("XR_TAG_LAYOUT", TAG_LAYOUT as i64),
        ("XR_TAG_MEMORY_FORMAT", TAG_MEMORY_FORMAT as i64),
        ("XR_TAG_DEVICE", TAG_DEVICE as i64),
        ("XR_TAG_UNSUPPORTED", TAG_UNSUPPORTED as i64),
        ("XR_FLAG_MUTABLE", FLAG_MUTABLE as i64),
        ("XR_FLAG_WRAPPED_NUMBER", FLAG_WRAPPED_NUMBER as i64),
        ("XR_FALLBACK_ERROR", FALLBACK_ERROR as i64),
        ("XR_FALLBACK_WARN", FALLBACK_WARN as i64),
        ("XR_FALLBACK_SILENT", FALLBACK_SILENT as i64),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(header_constants(), rust);
}

#[test]
fn header_declares_every_exported_function() {
    let exported: Vec<&str> = FFI
        .lines()
        .filter_map(|l| l.split("extern \"C\" fn ").nth(1))
        .filter_map(|rest| rest.split('(').next())
        .collect();
    let mut declared: Vec<&str> = HEADER
        .lines()
        .filter(|l| !l.trim_start().starts_with('#') && !l.trim_start().starts_with('*'))
        .filter_map(|l| {
            let i = l.find("xirang_")?;
            let rest = &l[i..];
            let name = rest.split('(').next()?;
            (rest.contains('(') && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')).then_some(name)
        })
        .collect();
    let mut exported_sorted = exported.clone();
    exported_sorted.sort();
    declared.sort();
    assert_eq!(declared, exported_sorted);
    assert!(exported.len() >= 30, "{exported:?}");
}

#[test]
fn struct_layouts_match_the_header() {
    // the header's structs are plain C: sizes follow from the field lists
    assert_eq!(std::mem::size_of::<XrTensor>(), 8 * 7 + 4 * 4);
    assert_eq!(std::mem::size_of::<XrValue>(), 4 + 4 + 8 + 8 + 8 + 8);
    assert_eq!(std::mem::size_of::<XrResult>(), 24);
    assert_eq!(std::mem::size_of::<XrMemoryStats>(), 11 * 8);
}
