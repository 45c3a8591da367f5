//! The C++ adapter index: the bridge's own shim, and a real vendor adapter (op-plugin).

use crate::common;

#[test]
fn the_bridge_shim_is_indexed() {
    let root = common::repo();
    let idx = xirang_cxx::index::index_dir(&root.join("adapter-runtime/torch-xirang/csrc"), &root).expect("index");
    let class =
        |n: &str| idx.classes.iter().find(|c| c.name.ends_with(n)).unwrap_or_else(|| panic!("{n}: {:?}", idx.classes));
    let guard = class("XirangGuardImpl");
    assert!(guard.bases.iter().any(|b| b.ends_with("DeviceGuardImplInterface")));
    for m in ["type", "exchangeDevice", "getStream", "deviceCount", "record", "elapsedTime"] {
        assert!(guard.methods.iter().any(|x| x.name == m), "{m}");
    }
    assert!(class("XirangAllocator").methods.iter().any(|m| m.name == "copy_data"));
    assert!(class("XirangHooks").methods.iter().any(|m| m.name == "getDefaultGenerator"));
    assert_eq!(idx.subclasses_of("c10::impl::DeviceGuardImplInterface").count(), 1);
    assert!(idx.uses_of("C10_REGISTER_GUARD_IMPL").count() >= 1);
    assert!(idx.uses_of("REGISTER_ALLOCATOR").count() >= 1);
    assert!(idx.uses_of("RegisterPrivateUse1HooksInterface").count() >= 1);
    assert!(idx.uses_of("TORCH_LIBRARY_IMPL").count() >= 2);
    // the boxed fallback and the factory/view registrations
    assert!(idx.registrations.iter().any(|r| r.key == "PrivateUse1" && r.op.is_empty()), "{:?}", idx.registrations);
    assert!(idx.registrations.iter().any(|r| r.key == "PrivateUse1" && r.op == "empty.memory_format"));
}

#[test]
fn torch_library_impl_blocks_and_kernel_scopes() {
    let src = r#"
namespace at_npu { namespace native {
at::Tensor XLANativeFunctions::add(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  return self;
}
}}
namespace op_api {
static at::Tensor helper(const at::Tensor& x) { return x; }
#if VERSION_BETWEEN(V2R1, V2R3)
at::Tensor& add_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha, at::Tensor& out) {
  return out;
}
#endif
}
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("add.Tensor", TORCH_FN(op_api::add));
  m.impl("add.out", &op_api::add_out);
  m.fallback(torch::CppFunction::makeFallthrough());
}
C10_REGISTER_GUARD_IMPL(PrivateUse1, MyGuard);
"#;
    let idx = xirang_cxx::index::index_sources(&[("k.cpp".into(), src.into())]).expect("index");
    let names: Vec<(&str, &str)> = idx.kernels.iter().map(|k| (k.scope.as_str(), k.name.as_str())).collect();
    assert_eq!(names, vec![("XLANativeFunctions", "add"), ("op_api", "add_out")]);
    let out = &idx.kernels[1];
    assert_eq!(out.gates, vec!["VERSION_BETWEEN(V2R1,V2R3)".to_string()]);
    assert_eq!(
        out.params.iter().map(|p| p.ty.as_str()).collect::<Vec<_>>(),
        vec!["const at::Tensor&", "const at::Tensor&", "const at::Scalar&", "at::Tensor&"]
    );
    assert_eq!(idx.kernels[0].ret, "at::Tensor");
    let regs: Vec<(&str, &str)> = idx.registrations.iter().map(|r| (r.op.as_str(), r.function.as_str())).collect();
    assert_eq!(
        regs,
        vec![
            ("add.Tensor", "TORCH_FN(op_api::add)"),
            ("add.out", "&op_api::add_out"),
            ("", "torch::CppFunction::makeFallthrough()")
        ]
    );
    assert!(idx.uses_of("C10_REGISTER_GUARD_IMPL").count() == 1);
}

/// Kernel definitions of op-plugin, counted independently of tree-sitter: non-static functions
/// defined at the top level of `namespace op_api {` / `namespace acl_op {` blocks, found by line
/// patterns (a definition starts at column 0 inside the namespace, with a return type and a name).
fn independent_count(text: &str) -> usize {
    let mut n = 0;
    let mut in_ns = false;
    let mut depth: i32 = 0;
    let mut pending = String::new();
    for l in text.lines() {
        let t = l.trim_end();
        if !in_ns {
            if (t.starts_with("namespace op_api") || t.starts_with("namespace acl_op")) && t.ends_with('{') {
                in_ns = true;
                depth = 0;
            }
            continue;
        }
        if depth == 0 && t.starts_with('}') && t.contains("namespace") || (depth == 0 && t == "}") {
            in_ns = false;
            continue;
        }
        if depth == 0 && !t.is_empty() && !t.starts_with(' ') && !t.starts_with('#') && !t.starts_with("//") {
            pending.push_str(t);
            pending.push(' ');
        }
        let opens = t.matches('{').count() as i32;
        let closes = t.matches('}').count() as i32;
        if depth == 0 && opens > 0 {
            let p = pending.trim_start();
            let is_fn = p.contains('(')
                && !p.starts_with("static ")
                && !p.starts_with("inline ")
                && !p.starts_with("using ")
                && !p.starts_with("struct ")
                && !p.starts_with("class ")
                && !p.starts_with("namespace ")
                && !p.starts_with("template")
                && !p.contains(" = ");
            if is_fn {
                n += 1;
            }
            pending.clear();
        } else if depth == 0 && t.ends_with(';') {
            pending.clear();
        }
        depth += opens - closes;
        if depth < 0 {
            in_ns = false;
            depth = 0;
        }
    }
    n
}

#[test]
fn op_plugin_kernel_definitions_are_indexed() {
    let root = common::corpus().join("adapters/op-plugin");
    let ops = root.join("op_plugin/ops");
    let idx = xirang_cxx::index::index_dir(&ops, &root).expect("index");
    let mut present = 0;
    let mut files = Vec::new();
    collect(&ops, &mut files);
    for f in &files {
        present += independent_count(&std::fs::read_to_string(f).expect("read"));
    }
    let indexed = idx.kernels.iter().filter(|k| k.scope == "op_api" || k.scope == "acl_op").count();
    eprintln!(
        "op-plugin: {indexed} kernel definitions indexed, {present} present (line-pattern count), {} files",
        files.len()
    );
    assert!(present > 1000, "{present}");
    // at least 95% of what is there (the parser may find a few the line patterns miss)
    assert!(indexed * 100 >= present * 95, "{indexed} of {present}");
    assert!(
        indexed <= present + present / 20,
        "{indexed} of {present}: more than the line count, something double-counts"
    );
    // VERSION_BETWEEN gates are kept
    assert!(idx.kernels.iter().any(|k| k.gates.iter().any(|g| g.contains("VERSION_BETWEEN"))));
}

fn collect(d: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(d).expect("dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "cpp") {
            out.push(p);
        }
    }
}
