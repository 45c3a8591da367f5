//! Every corpus header (all Ascend releases' `acl/**.h`, all CUDA releases) against an
//! independent string-level reading of the same files.

use crate::common;

use std::collections::BTreeMap;

use common::*;
use xirang_headers::{DeclKind, HeaderSet, Profile};

const ACL_MARKERS: &[&str] = &["ACL_FUNC_VISIBILITY", "MSVP_PROF_API", "ACL_DUMP_API"];
const CUDA_MARKERS: &[&str] = &["CUDAAPI", "CUDARTAPI"];

fn check_functions(vendor: &str, release: &str, set: &HeaderSet, markers: &[&str]) -> usize {
    let dir = header_dir(vendor, release);
    let mut checked = 0;
    for f in &set.files {
        let text = String::from_utf8_lossy(&std::fs::read(dir.join(&f.path)).expect("read")).into_owned();
        let expected = marked_functions(&strip(&text), markers);
        let found: BTreeMap<&str, &xirang_headers::Decl> =
            f.decls.iter().filter(|d| d.kind == DeclKind::Function).map(|d| (d.name.as_str(), d)).collect();
        for (name, count) in &expected {
            let d = found
                .get(name.as_str())
                .unwrap_or_else(|| panic!("{vendor} {release} {}: function {name} lost", f.path));
            let n = d.params.as_ref().map(Vec::len).unwrap_or(0) + usize::from(d.variadic);
            assert_eq!(
                n, *count,
                "{vendor} {release} {}: {name} has {n} parameters, expected {count}: {:?}",
                f.path, d.params
            );
            assert!(d.params.iter().flatten().all(|p| !p.ty.is_empty()), "{name}: empty parameter type");
            assert!(d.ret.as_ref().is_some_and(|r| !r.is_empty()), "{name}: empty return type");
            checked += 1;
        }
        assert!(found.len() >= expected.len(), "{} found fewer functions than marked", f.path);
    }
    checked
}

#[test]
fn every_ascend_header_keeps_every_marked_function_with_its_parameters() {
    let mut total = 0;
    let releases = releases("ascend");
    assert_eq!(releases.len(), 13);
    for r in &releases {
        let set = scan("ascend", r, Profile::Ascend);
        assert!(set.files.len() >= 10, "{r}: only {} files", set.files.len());
        total += check_functions("ascend", r, &set, ACL_MARKERS);
        for f in &set.files {
            assert!(f.diagnostics.is_empty(), "{r} {}: {:?}", f.path, f.diagnostics);
        }
    }
    assert!(total > 8000, "checked {total}");
}

#[test]
fn every_cuda_header_keeps_every_marked_function_with_its_parameters() {
    let mut total = 0;
    let releases = releases("cuda");
    assert_eq!(releases.len(), 7);
    for r in &releases {
        let set = scan("cuda", r, Profile::Cuda);
        total += check_functions("cuda", r, &set, CUDA_MARKERS);
        for f in &set.files {
            assert!(f.diagnostics.is_empty(), "{r} {}: {:?}", f.path, f.diagnostics);
        }
    }
    assert!(total > 5000, "checked {total}");
}

/// The generic profile knows no vendor macro: it must recover exactly what the vendor profiles
/// recover (same functions, same parameter lists, same enumerator values).
#[test]
fn generic_profile_matches_vendor_profiles_on_the_whole_corpus() {
    for (vendor, profile) in [("ascend", Profile::Ascend), ("cuda", Profile::Cuda)] {
        for r in releases(vendor) {
            let a = scan(vendor, &r, profile);
            let b = scan(vendor, &r, Profile::Generic);
            let key = |s: &HeaderSet, k: DeclKind| -> BTreeMap<(String, String), String> {
                s.of_kind(k)
                    .map(|d| {
                        ((d.file.clone(), d.subject()), format!("{:?} {:?} {:?} {:?}", d.ret, d.params, d.value, d.ty))
                    })
                    .collect()
            };
            for k in [DeclKind::Function, DeclKind::Enumerator, DeclKind::Field, DeclKind::Struct, DeclKind::Typedef] {
                assert_eq!(key(&a, k), key(&b, k), "{vendor} {r}: {k:?} differ between {profile} and generic");
            }
        }
    }
}

#[test]
fn literal_enumerators_constants_and_defines_have_their_values() {
    for vendor in ["ascend", "cuda"] {
        let profile: Profile = vendor.parse().expect("profile");
        for r in releases(vendor) {
            let set = scan(vendor, &r, profile);
            let dir = header_dir(vendor, &r);
            for f in &set.files {
                let text = String::from_utf8_lossy(&std::fs::read(dir.join(&f.path)).expect("read")).into_owned();
                let (enumerators, constants) = literal_assignments(&strip(&text));
                for (name, v) in enumerators {
                    let d = f
                        .decls
                        .iter()
                        .find(|d| d.kind == DeclKind::Enumerator && d.name == name)
                        .unwrap_or_else(|| panic!("{vendor} {r} {}: enumerator {name} lost", f.path));
                    assert_eq!(d.value, Some(v), "{vendor} {r} {}: {name}", f.path);
                }
                for (name, v) in constants {
                    let d = f.decls.iter().find(|d| d.kind == DeclKind::Constant && d.name == name);
                    assert_eq!(d.and_then(|d| d.value), Some(v), "{vendor} {r} {}: constant {name}", f.path);
                }
                for (name, v) in literal_defines(&text) {
                    let d = f.decls.iter().find(|d| d.kind == DeclKind::Macro && d.name == name);
                    assert_eq!(d.and_then(|d| d.value), Some(v), "{vendor} {r} {}: macro {name}", f.path);
                }
            }
            // nothing left unresolved
            for d in set.decls().filter(|d| matches!(d.kind, DeclKind::Enumerator | DeclKind::Constant)) {
                assert!(d.value.is_some(), "{vendor} {r}: {} = {:?} unresolved", d.subject(), d.expr);
            }
        }
    }
}

#[test]
fn known_values() {
    for r in releases("cuda") {
        let set = scan("cuda", &r, Profile::Cuda);
        assert_eq!(set.value_of("cudaSuccess"), Some(0), "{r}");
        assert_eq!(set.value_of("cudaErrorInvalidValue"), Some(1), "{r}");
        assert_eq!(set.value_of("cudaErrorMemoryAllocation"), Some(2), "{r}");
        assert_eq!(set.value_of("CUDA_SUCCESS"), Some(0), "{r}");
        assert_eq!(set.value_of("CUDA_ERROR_OUT_OF_MEMORY"), Some(2), "{r}");
        assert_eq!(set.value_of("cudaMemcpyDeviceToHost"), Some(2), "{r}");
        assert_eq!(set.value_of("cudaErrorUnknown"), Some(999), "{r}");
        assert_eq!(set.value_of("CU_STREAM_NON_BLOCKING"), Some(1), "{r}");
    }
    // implicit enumerators: cudaDevAttrMax follows cudaDevAttrReserved132 = 132 in 12.1
    assert_eq!(scan("cuda", "v12.1.105", Profile::Cuda).value_of("cudaDevAttrMax"), Some(133));
    assert_eq!(scan("cuda", "v13.5.37", Profile::Cuda).value_of("cudaDevAttrMax"), Some(161));
    for r in releases("ascend") {
        let set = scan("ascend", &r, Profile::Ascend);
        assert_eq!(set.value_of("ACL_ERROR_NONE"), Some(0), "{r}");
        assert_eq!(set.value_of("ACL_SUCCESS"), Some(0), "{r}");
        assert_eq!(set.value_of("ACL_ERROR_INVALID_PARAM"), Some(100000), "{r}");
        assert_eq!(set.value_of("ACL_ERROR_BAD_ALLOC"), Some(200000), "{r}");
        assert_eq!(set.value_of("ACL_ERROR_INTERNAL_ERROR"), Some(500000), "{r}");
        assert_eq!(set.value_of("ACL_RT_SUCCESS"), Some(0), "{r}");
        assert_eq!(set.value_of("ACL_ERROR_RT_PARAM_INVALID"), Some(107000), "{r}");
        assert_eq!(set.value_of("ACL_ERROR_RT_INVALID_DEVICEID"), Some(107001), "{r}");
        assert_eq!(set.value_of("ACL_ERROR_RT_MEMORY_ALLOCATION"), Some(207001), "{r}");
        assert_eq!(set.value_of("ACL_ERROR_RT_INTERNAL_ERROR"), Some(507000), "{r}");
        assert_eq!(set.value_of("ACL_FLOAT16"), Some(1), "{r}");
    }
}

#[test]
fn vendor_specifics_are_recorded() {
    let cuda = scan("cuda", "v13.5.37", Profile::Cuda);
    // __dv(0) default
    let f = cuda.function("cudaStreamWaitEvent").expect("cudaStreamWaitEvent");
    assert_eq!(f.file, "cuda_device_runtime_api.h");
    let rt = cuda.files.iter().find(|f| f.path == "cuda_runtime_api.h").expect("runtime api");
    let wait = rt.decls.iter().find(|d| d.name == "cudaStreamWaitEvent" && d.kind == DeclKind::Function).expect("decl");
    let ps = wait.params.as_ref().expect("params");
    assert_eq!(ps.len(), 3);
    assert_eq!(
        (ps[2].name.as_str(), ps[2].ty.as_str(), ps[2].default.as_deref()),
        ("flags", "unsigned int", Some("0"))
    );
    // macro renames
    let alias = cuda.decls().find(|d| d.kind == DeclKind::Macro && d.name == "cuCtxCreate").expect("alias");
    assert_eq!(alias.alias_of.as_deref(), Some("cuCtxCreate_v4"));
    let alias = cuda.decls().find(|d| d.kind == DeclKind::Macro && d.name == "cuMemcpyHtoD").expect("alias");
    assert_eq!(alias.alias_of.as_deref(), Some("cuMemcpyHtoD_v2"));
    // deprecation, function level
    assert!(cuda.function("cuDeviceGetProperties").expect("fn").deprecated);
    assert!(cuda.function("cudaGetDriverEntryPoint").expect("fn").deprecated);
    assert!(!cuda.function("cudaMalloc").expect("fn").deprecated);
    // exact signatures
    let m = cuda.function("cudaMalloc").expect("cudaMalloc");
    assert_eq!(m.ret.as_deref(), Some("cudaError_t"));
    let ps: Vec<(&str, &str)> = m.params.iter().flatten().map(|p| (p.name.as_str(), p.ty.as_str())).collect();
    assert_eq!(ps, vec![("devPtr", "void **"), ("size", "size_t")]);
    let g = cuda.function("cuGetErrorString").expect("cuGetErrorString");
    let ps: Vec<(&str, &str)> = g.params.iter().flatten().map(|p| (p.name.as_str(), p.ty.as_str())).collect();
    assert_eq!(ps, vec![("error", "CUresult"), ("pStr", "const char **")]);
    // typedefs: handles and function pointers
    let td = |n: &str| cuda.decls().find(|d| d.kind == DeclKind::Typedef && d.name == n).and_then(|d| d.ty.clone());
    assert_eq!(td("cudaStream_t").as_deref(), Some("struct CUstream_st *"));
    assert_eq!(td("cudaError_t").as_deref(), Some("enum cudaError"));
    assert_eq!(td("cudaHostFn_t").as_deref(), Some("void (*)(void *)"));
    // structs: fields in order with arrays
    let fields: Vec<(String, String)> = cuda
        .of_kind(DeclKind::Field)
        .filter(|d| d.parent.as_deref() == Some("cudaDeviceProp"))
        .take(3)
        .map(|d| (d.name.clone(), d.ty.clone().unwrap_or_default()))
        .collect();
    assert_eq!(fields[0], ("name".to_string(), "char [256]".to_string()));
    assert_eq!(fields[1], ("uuid".to_string(), "cudaUUID_t".to_string()));
    // structs produced by a declaration macro (__cuda_builtin_vector_align8)
    assert!(cuda.of_kind(DeclKind::Struct).any(|d| d.name == "int2" && d.file == "vector_types.h"));

    let acl = scan("ascend", "v2.14.0", Profile::Ascend);
    let q = acl.function("aclrtQueryEvent").expect("aclrtQueryEvent");
    assert!(q.deprecated);
    assert_eq!(q.deprecation.as_deref(), Some("aclrtQueryEvent is deprecated, use aclrtQueryEventStatus instead"));
    // enumerator-level deprecation with message, and its value
    let e = acl.decls().find(|d| d.name == "ACL_RT_LAUNCH_KERNEL_ATTR_LOCAL_MEMORY_SIZE").expect("enumerator");
    assert!(e.deprecated);
    assert_eq!(e.value, Some(2));
    assert_eq!(e.deprecation.as_deref(), Some("Use ACL_RT_LAUNCH_KERNEL_ATTR_DYN_UBUF_SIZE instead"));
    // field-level deprecation in a union
    let u = acl
        .decls()
        .find(|d| {
            d.kind == DeclKind::Field
                && d.parent.as_deref() == Some("aclrtLaunchKernelAttrValue")
                && d.name == "localMemorySize"
        })
        .expect("field");
    assert!(u.deprecated);
    assert!(acl.of_kind(DeclKind::Union).any(|d| d.name == "aclrtLaunchKernelAttrValue"));
    let m = acl.function("aclrtMalloc").expect("aclrtMalloc");
    let ps: Vec<(&str, &str)> = m.params.iter().flatten().map(|p| (p.name.as_str(), p.ty.as_str())).collect();
    assert_eq!(ps, vec![("devPtr", "void **"), ("size", "size_t"), ("policy", "aclrtMemMallocPolicy")]);
    // include graph
    assert!(acl.include_graph.iter().any(|e| e.from == "acl.h" && e.to == "acl_rt.h"));
    assert!(acl.includes_of("acl.h").contains(&"error_codes/rt_error_codes.h".to_string()));
}

#[test]
fn scanning_is_deterministic_and_round_trips() {
    let a = scan("ascend", "v2.14.0", Profile::Ascend);
    let b = scan("ascend", "v2.14.0", Profile::Ascend);
    let ja = xirang_headers::to_jsonl(&a);
    assert_eq!(ja, xirang_headers::to_jsonl(&b));
    let json = serde_json::to_string(&a).expect("serialize");
    let back: HeaderSet = serde_json::from_str(&json).expect("deserialize");
    assert_eq!(back, a);
    // jsonl: one object per declaration, required fields, sorted by file then line
    let mut last = (String::new(), 0u64);
    let mut lines = 0;
    for line in ja.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("json");
        let kind = v["kind"].as_str().expect("kind");
        assert!(v["name"].is_string() && v["file"].is_string() && v["line"].is_u64());
        if kind == "function" {
            assert!(v["return"].is_string());
            assert!(
                v["params"].as_array().expect("params").iter().all(|p| p["name"].is_string() && p["type"].is_string())
            );
        }
        if kind == "enumerator" {
            assert!(v["value"].is_i64());
        }
        assert!(v["deprecated"].is_boolean());
        let key = (v["file"].as_str().unwrap_or("").to_string(), v["line"].as_u64().unwrap_or(0));
        assert!(key >= last, "{line}");
        last = key;
        lines += 1;
    }
    assert_eq!(lines, a.decls().count());
}
