//! Every release scans, and what a backend implements is there with the right shape.

use crate::common;

#[test]
fn every_release_scans_with_the_backend_interfaces() {
    let rels = common::releases();
    assert_eq!(rels.len(), 25, "{rels:?}");
    for v in &rels {
        let set = common::scan(v);
        // every header of the release is read (none skipped as unreadable)
        let on_disk = walk(&common::corpus().join("pytorch-cxx").join(v));
        assert_eq!(set.files.len(), on_disk, "{v}: files read");
        // PrivateUse1HooksInterface arrived in 2.1
        let hooks = if v == "v2.0.1" { "at::CUDAHooksInterface" } else { "at::PrivateUse1HooksInterface" };
        for class in [
            "c10::Allocator",
            "c10::impl::DeviceGuardImplInterface",
            hooks,
            "c10::GeneratorImpl",
            "c10::TensorImpl",
            "torch::Library",
        ] {
            let c = set.class(class).unwrap_or_else(|| panic!("{v}: {class} missing"));
            assert!(!c.members.is_empty(), "{v}: {class} has no members");
        }
        let dg = set.class("c10::impl::DeviceGuardImplInterface").expect("guard");
        for pure in [
            "type",
            "exchangeDevice",
            "getDevice",
            "setDevice",
            "uncheckedSetDevice",
            "getStream",
            "exchangeStream",
            "deviceCount",
        ] {
            let m = dg.members.iter().find(|m| m.name == pure).unwrap_or_else(|| panic!("{v}: {pure}"));
            assert!(m.pure && m.is_virtual, "{v}: {pure} should be pure virtual: {}", m.signature());
        }
        let alloc = set.class("c10::Allocator").expect("allocator");
        let allocate = alloc.members.iter().find(|m| m.name == "allocate").expect("allocate");
        assert!(allocate.pure);
        // the registration surface
        assert!(set.macros().any(|m| m.name == "TORCH_LIBRARY_IMPL"), "{v}");
        assert!(set.macros().any(|m| m.name == "C10_REGISTER_GUARD_IMPL"), "{v}");
        assert!(set.macros().any(|m| m.name == "REGISTER_ALLOCATOR"), "{v}");
        // no file is lost to the parser: every diagnostic is positioned inside its file
        for d in set.diagnostics() {
            assert!(d.line >= 1 && d.column >= 1, "{v}: {d:?}");
        }
    }
}

fn walk(dir: &std::path::Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir).expect("dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            n += walk(&p);
        } else if p.extension().is_some_and(|x| x == "h" || x == "hpp") {
            n += 1;
        }
    }
    n
}

#[test]
fn defaults_that_throw_are_told_from_working_defaults() {
    let set = common::scan("v2.15.0");
    let dg = set.class("c10::impl::DeviceGuardImplInterface").expect("guard");
    let get = |n: &str| dg.members.iter().find(|m| m.name == n).unwrap_or_else(|| panic!("{n}"));
    // `{ TORCH_CHECK(false, "...") }` without a `;` (the macro brings it)
    assert!(get("getDefaultStream").default_throws);
    assert!(get("synchronizeDevice").default_throws);
    assert!(get("elapsedTime").default_throws);
    assert!(!get("recordDataPtrOnStream").default_throws && get("recordDataPtrOnStream").has_default);
    assert!(!get("destroyEvent").default_throws);
    let hooks = set.class("at::PrivateUse1HooksInterface").expect("hooks");
    let h = |n: &str| hooks.members.iter().find(|m| m.name == n).unwrap_or_else(|| panic!("{n}"));
    // FAIL_PRIVATEUSE1HOOKS_FUNC is a macro of the header that expands to TORCH_CHECK_NOT_IMPLEMENTED(false, ...)
    assert!(h("getDefaultGenerator").default_throws);
    assert!(h("resizePrivateUse1Bytes").default_throws && h("resizePrivateUse1Bytes").is_virtual);
    assert!(!h("isPinnedPtr").default_throws);
    assert_eq!(h("isBuilt").specifier.as_deref(), Some("override"));
    assert_eq!(hooks.bases, vec!["AcceleratorHooksInterface".to_string()]);
}

#[test]
fn autocast_lists_are_read_from_the_x_macros() {
    let set = common::scan("v2.15.0");
    let lists: std::collections::BTreeSet<&str> = set.autocast().map(|e| e.list.as_str()).collect();
    for l in ["lower_precision_fp", "fp32", "fp32_set_opt_dtype", "different_redispatch_signature", "promote"] {
        assert!(lists.contains(l), "{lists:?}");
    }
    let has = |list: &str, op: &str| set.autocast().any(|e| e.list == list && e.op == op);
    assert!(has("lower_precision_fp", "mm"));
    assert!(has("lower_precision_fp", "conv_transpose2d.input"));
    assert!(has("fp32", "pow.Tensor_Scalar"));
    assert!(has("fp32_set_opt_dtype", "sum.dim_IntList"));
    assert!(has("different_redispatch_signature", "norm.Scalar"));
    assert!(has("promote", "cross"));
    // an independent count: the `_(` entries of the AT_FORALL_ lists of the file, by string search
    let text =
        std::fs::read_to_string(common::corpus().join("pytorch-cxx/v2.15.0/ATen/autocast_mode.h")).expect("file");
    let mut want = 0;
    let mut inside = false;
    for l in text.lines() {
        if l.starts_with("#define AT_FORALL_") && !l.contains("DEPRECATED") {
            inside = true;
        }
        if inside {
            if !l.starts_with("#define") {
                want += l.matches("_(").count();
            }
            if !l.trim_end().ends_with('\\') {
                inside = false;
            }
        }
    }
    assert_eq!(set.autocast().filter(|e| e.list != "deprecated_autocast_backends").count(), want);
    // before 2.4 the lists lived in a .cpp
    assert_eq!(common::scan("v2.3.1").autocast().count(), 0);
}

#[test]
fn source_tree_and_wheel_layouts_are_found() {
    let tmp = std::env::temp_dir().join(format!("xirang-cxx-layout-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let src = common::corpus().join("pytorch-cxx/v2.15.0");
    // a wheel: torch/include/...
    copy(&src, &tmp.join("wheel/torch/include"));
    // a source tree: c10/, aten/src/ATen/, torch/
    copy(&src.join("c10"), &tmp.join("tree/c10"));
    copy(&src.join("ATen"), &tmp.join("tree/aten/src/ATen"));
    copy(&src.join("torch"), &tmp.join("tree/torch"));
    let a = common::scan("v2.15.0");
    let w = xirang_cxx::scan_dir(&tmp.join("wheel")).expect("wheel");
    let t = xirang_cxx::scan_dir(&tmp.join("tree")).expect("tree");
    assert_eq!(a, w);
    assert_eq!(a, t);
    let err = xirang_cxx::scan_dir(&tmp).expect_err("no headers at the top");
    assert!(err.to_string().contains("holds none of PyTorch's C++ extension headers"), "{err}");
    let _ = std::fs::remove_dir_all(&tmp);
}

fn copy(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            copy(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).expect("copy");
        }
    }
}

#[test]
fn scanning_is_deterministic() {
    let a = serde_json::to_string(&common::scan("v2.9.0")).expect("json");
    let b = serde_json::to_string(&common::scan("v2.9.0")).expect("json");
    assert_eq!(a, b);
}
