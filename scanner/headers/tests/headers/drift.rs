//! Header drift between consecutive Ascend releases and between CUDA 12.1 and 13.5, spot-checked
//! against changes read directly in the headers (line numbers in comments are the new header's).

use crate::common;

use common::*;
use xirang_headers::{HeaderChange, HeaderSeverity, Profile, diff, rules};

fn find<'a>(changes: &'a [HeaderChange], rule: &str, subject: &str) -> &'a HeaderChange {
    changes.iter().find(|c| c.rule == rule && c.subject == subject).unwrap_or_else(|| panic!("no {rule} for {subject}"))
}

fn has(changes: &[HeaderChange], rule: &str, subject: &str) -> bool {
    changes.iter().any(|c| c.rule == rule && c.subject == subject)
}

#[test]
fn cuda_12_1_to_13_5() {
    let old = scan("cuda", "v12.1.105", Profile::Cuda);
    let new = scan("cuda", "v13.5.37", Profile::Cuda);
    let ch = diff(&old, &new);
    // cudaThreadExit (deprecated since CUDA 4) is gone from cuda_runtime_api.h
    let c = find(&ch, "header.function.removed", "cudaThreadExit");
    assert_eq!(c.severity, HeaderSeverity::Abi);
    assert_eq!(c.file, "cuda_runtime_api.h");
    for f in ["cudaThreadSynchronize", "cudaSetDoubleForDevice", "cudaLaunchCooperativeKernelMultiDevice"] {
        assert!(has(&ch, "header.function.removed", f), "{f}");
    }
    // cudaMemPrefetchAsync(devPtr, count, int dstDevice, stream) ->
    // (devPtr, count, struct cudaMemLocation location, unsigned int flags, stream)
    let c = find(&ch, "header.function.param_removed", "cudaMemPrefetchAsync");
    assert!(c.message.contains("dstDevice"), "{}", c.message);
    assert!(
        ch.iter().filter(|c| c.rule == "header.function.param_added" && c.subject == "cudaMemPrefetchAsync").count()
            == 2
    );
    // cudaMemAdvise: 4th parameter int device -> struct cudaMemLocation location
    let c = find(&ch, "header.function.param_retyped", "cudaMemAdvise");
    assert!(c.message.contains("`int` to `struct cudaMemLocation`"), "{}", c.message);
    // cudaGraphKernelNodeCopyAttributes(hSrc, hDst) -> (hDst, hSrc)
    assert_eq!(
        find(&ch, "header.function.param_reordered", "cudaGraphKernelNodeCopyAttributes").severity,
        HeaderSeverity::Abi
    );
    // cudaGetDriverEntryPoint became __CUDA_DEPRECATED
    assert_eq!(find(&ch, "header.function.deprecated", "cudaGetDriverEntryPoint").severity, HeaderSeverity::None);
    // cudaDeviceProp lost clockRate etc. and its reserved array shrank from 61 to 56
    assert!(has(&ch, "header.struct.field_removed", "cudaDeviceProp.clockRate"));
    let c = find(&ch, "header.struct.field_retyped", "cudaDeviceProp.reserved");
    assert_eq!((c.old.as_deref(), c.new.as_deref()), (Some("int [61]"), Some("int [56]")));
    // implicit enumerator after cudaDevAttrReserved132 = 132 (12.1) / cudaDevAttrTensorMapLargeTensorMinSize = 160
    let c = find(&ch, "header.enumerator.value_changed", "cudaDeviceAttr::cudaDevAttrMax");
    assert_eq!((c.old.as_deref(), c.new.as_deref()), (Some("133"), Some("161")));
    assert!(has(&ch, "header.enumerator.removed", "cudaDeviceAttr::cudaDevAttrCooperativeMultiDeviceLaunch"));
    // #define cuCtxCreate cuCtxCreate_v2 -> cuCtxCreate_v4, and the function's parameters changed
    let c = find(&ch, "header.macro.alias_changed", "cuCtxCreate");
    assert_eq!((c.old.as_deref(), c.new.as_deref()), (Some("cuCtxCreate_v2"), Some("cuCtxCreate_v4")));
    let c = find(&ch, "header.macro.value_changed", "CUDART_VERSION");
    assert_eq!((c.old.as_deref(), c.new.as_deref()), (Some("12010"), Some("13050")));
    assert!(
        has(&ch, "header.function.added", "cuCtxCreate_v4") || has(&ch, "header.function.param_added", "cuCtxCreate")
    );
    // additions are information only
    assert!(ch.iter().filter(|c| c.rule.ends_with(".added")).all(|c| c.severity == HeaderSeverity::None));
}

#[test]
fn consecutive_ascend_releases() {
    let rs = releases("ascend");
    let sets: Vec<_> = rs.iter().map(|r| scan("ascend", r, Profile::Ascend)).collect();
    let mut per_pair = Vec::new();
    for w in 0..sets.len() - 1 {
        per_pair.push(diff(&sets[w], &sets[w + 1]));
    }
    let at = |from: &str| {
        let i = rs.iter().position(|r| r == from).expect("release");
        &per_pair[i]
    };
    // identical header trees give no drift
    for r in ["v2.3.1.post6", "v2.9.0.post9", "v2.12.0.post3", "v2.13.0"] {
        assert!(at(r).is_empty(), "{r}: {:?}", at(r).first());
    }
    // 2.1.0 -> 2.3.1: the batch memcpy API and the device resource limit API disappear
    let ch = at("v2.1.0.post17");
    for f in ["aclrtMemcpyBatch", "aclrtMemcpyBatchAsync", "aclrtSetDeviceResLimit"] {
        assert_eq!(find(ch, "header.function.removed", f).severity, HeaderSeverity::Abi);
    }
    // static const int ACL_ERROR_RT_LINK_ERROR = 507056 (acl_base.h) is gone
    assert_eq!(find(ch, "header.constant.removed", "ACL_ERROR_RT_LINK_ERROR").old.as_deref(), Some("507056"));
    assert!(has(ch, "header.enumerator.removed", "aclFormat::ACL_FORMAT_FRACTAL_NZ_C0_16"));
    // 2.5.1 -> 2.6.0: aclprofCreateConfig's aicoreEvents became const, tag renames
    let ch = at("v2.5.1.post1");
    let c = find(ch, "header.function.param_retyped", "aclprofCreateConfig");
    assert!(c.message.contains("`aclprofAicoreEvents *` to `const aclprofAicoreEvents *`"), "{}", c.message);
    assert_eq!(find(ch, "header.typedef.retagged", "aclCANNPackageVersion").severity, HeaderSeverity::Source);
    // array size written through a macro (UCE_INFO_RESERVED_SIZE = 14) is not a change
    assert!(!has(ch, "header.struct.field_retyped", "aclrtMemUceInfo.reserved"));
    // error_codes/rt_error_codes.h: the 86 `static const int32_t ACL_ERROR_RT_* = ...` (and
    // ACLNN_*, ACL_RT_SUCCESS) became `#define`s with the same values: information, no removals
    let c = find(ch, "header.constant.spelling_changed", "ACL_ERROR_RT_AICORE_EXCEPTION");
    assert_eq!(c.severity, HeaderSeverity::None);
    assert_eq!(
        (c.old.as_deref(), c.new.as_deref()),
        (
            Some("const int32_t ACL_ERROR_RT_AICORE_EXCEPTION = 507015"),
            Some("#define ACL_ERROR_RT_AICORE_EXCEPTION 507015")
        )
    );
    assert_eq!(ch.iter().filter(|c| c.rule == "header.constant.spelling_changed").count(), 86);
    assert!(!ch.iter().any(|c| c.rule == "header.constant.removed"));
    assert!(!has(ch, "header.macro.added", "ACL_ERROR_RT_AICORE_EXCEPTION"));
    // 2.11 -> 2.12: ACL_PROF_SCALE dropped, ACL_PROF_ARGS_MAX 15 -> 17, eventFlag uint64_t -> uint32_t
    let ch = at("v2.11.0.post3");
    let c = find(ch, "header.enumerator.value_changed", "aclprofConfigType::ACL_PROF_ARGS_MAX");
    assert_eq!((c.old.as_deref(), c.new.as_deref()), (Some("15"), Some("17")));
    assert_eq!(
        find(ch, "header.enumerator.removed", "aclprofConfigType::ACL_PROF_SCALE").severity,
        HeaderSeverity::Source
    );
    let c = find(ch, "header.struct.field_retyped", "aclmdlRIEventRecordTaskParams.eventFlag");
    assert_eq!((c.old.as_deref(), c.new.as_deref()), (Some("uint64_t"), Some("uint32_t")));
    assert_eq!(c.severity, HeaderSeverity::Abi);
    // every pair: ids from the catalogue, deterministic order
    let ids: Vec<&str> = rules().iter().map(|r| r.id).collect();
    for ch in &per_pair {
        for c in ch {
            assert!(ids.contains(&c.rule), "{}", c.rule);
            let r = rules().iter().find(|r| r.id == c.rule).expect("rule");
            assert_eq!(r.severity, c.severity);
        }
        let mut sorted = ch.clone();
        sorted.sort_by(|x, y| (&x.file, x.line, x.rule, &x.subject).cmp(&(&y.file, y.line, y.rule, &y.subject)));
        assert_eq!(&sorted, ch);
    }
    assert_eq!(diff(&sets[0], &sets[1]), per_pair[0]);
}

#[test]
fn rule_catalogue_is_well_formed() {
    let mut ids: Vec<&str> = rules().iter().map(|r| r.id).collect();
    let n = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), n, "duplicate rule ids");
    for r in rules() {
        assert!(r.id.starts_with("header."));
        assert!(!r.explanation.is_empty() && !r.remedy.is_empty());
    }
    for id in [
        "header.function.added",
        "header.function.removed",
        "header.function.param_added",
        "header.function.param_removed",
        "header.function.param_retyped",
        "header.function.param_renamed",
        "header.function.return_changed",
        "header.function.deprecated",
        "header.enumerator.added",
        "header.enumerator.removed",
        "header.enumerator.value_changed",
        "header.struct.field_added",
        "header.struct.field_removed",
        "header.struct.field_retyped",
        "header.struct.field_reordered",
        "header.typedef.changed",
        "header.macro.value_changed",
    ] {
        assert!(ids.contains(&id), "{id}");
    }
}

#[test]
fn constant_spelling_change_with_the_same_value_is_information() {
    let old = vec![(
        "codes.h".to_string(),
        "#define ERR_BASE 100000\n\
         static const int32_t ERR_A = 100001;\n\
         static const int32_t ERR_B = 100002;\n\
         #define ERR_C 300\n\
         static const int ERR_D = 400;\n\
         static const int ERR_E = 500;\n"
            .to_string(),
    )];
    let new = vec![(
        "codes.h".to_string(),
        "#define ERR_BASE 100000\n\
         #define ERR_A (ERR_BASE + 1)\n\
         #define ERR_B 100003\n\
         static const int ERR_C = 0x12C;\n\
         static const int ERR_D = 400;\n\
         #define ERR_E ERR_D\n"
            .to_string(),
    )];
    let a = xirang_headers::scan_sources(Profile::Ascend, &old).expect("old");
    let b = xirang_headers::scan_sources(Profile::Ascend, &new).expect("new");
    let ch = diff(&a, &b);
    let got: Vec<(&str, &str)> = ch.iter().map(|c| (c.rule, c.subject.as_str())).collect();
    // static const -> #define (an expression with the same value) and #define -> static const (hex)
    let c = find(&ch, "header.constant.spelling_changed", "ERR_A");
    assert_eq!(c.severity, HeaderSeverity::None);
    assert_eq!((c.file.as_str(), c.line), ("codes.h", 2));
    assert_eq!(
        (c.old.as_deref(), c.new.as_deref()),
        (Some("const int32_t ERR_A = 100001"), Some("#define ERR_A 100001"))
    );
    let c = find(&ch, "header.constant.spelling_changed", "ERR_C");
    assert_eq!((c.old.as_deref(), c.new.as_deref()), (Some("#define ERR_C 300"), Some("const int ERR_C = 300")));
    for name in ["ERR_A", "ERR_C"] {
        assert_eq!(got.iter().filter(|(_, s)| *s == name).count(), 1, "{name}: {got:?}");
    }
    // a changed value stays a removal and an addition
    assert_eq!(find(&ch, "header.constant.removed", "ERR_B").severity, HeaderSeverity::Source);
    assert!(has(&ch, "header.macro.added", "ERR_B"));
    assert!(!has(&ch, "header.constant.spelling_changed", "ERR_B"));
    // a macro taking another constant's value (`#define ERR_E ERR_D`: 400, was 500) is no respelling
    assert!(has(&ch, "header.constant.removed", "ERR_E"), "{got:?}");
    assert!(!has(&ch, "header.constant.spelling_changed", "ERR_D"));
    // the rule is information without a "replace uses" remedy
    let r = rules().iter().find(|r| r.id == "header.constant.spelling_changed").expect("rule");
    assert_eq!(r.severity, HeaderSeverity::None);
    assert!(!r.remedy.to_lowercase().contains("replace"), "{}", r.remedy);
}
