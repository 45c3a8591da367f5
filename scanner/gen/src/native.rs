//! The native tier, attached by the generator: every function of the hand-written runtime marked
//! `/// xirang-kernel: <op>` becomes that operator's method of the adapter's `AtenOps` impl
//! (`generated/native.rs`), the way torchgen turns a backend yaml's kernel names into
//! registrations. Adding a kernel is writing one function with the marker and running
//! `xirang-scan generate`; there is no table to edit.
//!
//! The generated method checks that the call's tensors are all on one device (else the kernel
//! declines: `Error::Unsupported`) and calls the function with the trait method's typed arguments
//! in schema order. The operator front-end (`generated/ops.rs`, `aten::`) composes the tiers: a
//! declined kernel falls back to the CPU fallback of the same operator, counted there.

use std::collections::BTreeMap;
use std::path::Path;

use askama::Template;

use super::ops::OpCtx;
use crate::adapter_index::{self, AdapterIndex};
use crate::error::{Error, Result};

/// The generated file.
pub const FILE: &str = "native.rs";

/// One operator served by a marked kernel.
#[derive(Debug, Clone)]
pub struct NativeKernel {
    pub qualified: String,
    pub schema: String,
    pub method: String,
    /// `, a: &Tensor, b: Scalar` as the trait declares them.
    pub params: String,
    pub ret: String,
    /// `crate::kernels::elementwise::add_tensor`.
    pub path: String,
    /// `a, b` (the parameters in order).
    pub args: String,
    /// `Some(self_), weight` (tensor and optional tensor arguments).
    pub tensors: String,
    /// `tensors` (tensor-list arguments).
    pub lists: String,
    /// `adapter-runtime/src/kernels/elementwise.rs` (no line: the file must not go stale when a
    /// kernel moves inside its file).
    pub file: String,
}

#[derive(Template)]
#[template(path = "native.rs.jinja", escape = "none")]
struct NativeTemplate<'a> {
    pytorch: &'a str,
    adapter_type: &'a str,
    kernels: &'a [NativeKernel],
}

/// The Rust module path of a source file of the runtime crate (`src/kernels/nn.rs` ->
/// `crate::kernels::nn`), or `None` for a file outside `src/`.
fn module_path(file: &str, src_prefix: &str) -> Option<String> {
    let rel = file.strip_prefix(src_prefix)?.strip_suffix(".rs")?;
    let mut parts: Vec<&str> = rel.split('/').collect();
    if parts.last().is_some_and(|l| *l == "mod" || *l == "lib" || *l == "main") {
        parts.pop();
    }
    if parts.iter().any(|p| p.is_empty() || p.contains(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))) {
        return None;
    }
    Some(std::iter::once("crate").chain(parts).collect::<Vec<_>>().join("::"))
}

/// The marked kernels of the runtime at `runtime` (`[adapter] runtime`), matched to the selected
/// operators. Two functions marked for one operator are an error naming both.
pub fn attach(ops: &[OpCtx], index: &AdapterIndex, src_prefix: &str) -> Result<Vec<NativeKernel>> {
    let by_op: BTreeMap<&str, &OpCtx> = ops.iter().map(|o| (o.qualified.as_str(), o)).collect();
    let mut found: BTreeMap<&str, (&adapter_index::Kernel, String)> = BTreeMap::new();
    for k in &index.kernels {
        let Some(name) = k.item.strip_prefix("fn ") else { continue };
        let Some(module) = module_path(&k.file, src_prefix) else { continue };
        let Some(op) = by_op.get(k.op.as_str()) else { continue };
        if let Some((first, _)) = found.get(op.qualified.as_str()) {
            return Err(Error::Invalid(format!(
                "two kernels are marked `xirang-kernel: {}`: {}:{} (`{}`) and {}:{} (`{}`); keep one",
                op.qualified, first.file, first.line, first.item, k.file, k.line, k.item
            )));
        }
        found.insert(op.qualified.as_str(), (k, format!("{module}::{name}")));
    }
    Ok(found
        .into_iter()
        .map(|(q, (k, path))| {
            let o = by_op[q];
            NativeKernel {
                qualified: o.qualified.clone(),
                schema: o.schema.clone(),
                method: o.method.clone(),
                params: o.params.iter().map(|p| format!(", {}: {}", p.name, p.ty)).collect(),
                ret: o.ret.clone(),
                path,
                args: o.params.iter().map(|p| p.name.clone()).collect::<Vec<_>>().join(", "),
                tensors: o.kernel_tensors.join(", "),
                lists: o.kernel_lists.join(", "),
                file: k.file.clone(),
            }
        })
        .collect())
}

/// The marked host reference implementations (`/// xirang-fallback: <op>`) of the runtime, matched
/// to the selected operators: operator -> function path. Two functions marked for one operator are
/// an error naming both.
pub fn attach_hosts(ops: &[OpCtx], index: &AdapterIndex, src_prefix: &str) -> Result<BTreeMap<String, String>> {
    let selected: std::collections::BTreeSet<&str> = ops.iter().map(|o| o.qualified.as_str()).collect();
    let mut found: BTreeMap<String, (&adapter_index::Kernel, String)> = BTreeMap::new();
    for k in &index.fallbacks {
        let Some(name) = k.item.strip_prefix("fn ") else { continue };
        let Some(module) = module_path(&k.file, src_prefix) else { continue };
        if !selected.contains(k.op.as_str()) {
            continue;
        }
        if let Some((first, _)) = found.get(&k.op) {
            return Err(Error::Invalid(format!(
                "two host implementations are marked `xirang-fallback: {}`: {}:{} (`{}`) and {}:{} (`{}`); keep one",
                k.op, first.file, first.line, first.item, k.file, k.line, k.item
            )));
        }
        found.insert(k.op.clone(), (k, format!("{module}::{name}")));
    }
    Ok(found.into_iter().map(|(op, (_, path))| (op, path)).collect())
}

/// Indexes the runtime folder and renders `generated/native.rs`; also returns the marked host
/// implementations ([`attach_hosts`]) found by the same index.
pub fn render(
    pytorch: &str,
    adapter_type: &str,
    ops: &[OpCtx],
    runtime: &Path,
    root: &Path,
) -> Result<(String, Vec<NativeKernel>, BTreeMap<String, String>)> {
    let is_path = adapter_type.split("::").all(|seg| {
        let mut c = seg.chars();
        c.next().is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
            && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
    });
    if !is_path {
        return Err(Error::Invalid(format!(
            "[kernels] adapter_type = \"{adapter_type}\" is not a Rust type path (such as `crate::kernels::NpuOps`)"
        )));
    }
    let (kernels, hosts) = if runtime.is_dir() {
        let folder = crate::coverage::index_folder(runtime);
        let map = adapter_index::method_map(std::iter::empty());
        let index = adapter_index::index_dir(&folder, root, &map)?;
        let rel = folder.strip_prefix(root).unwrap_or(&folder).to_string_lossy().replace('\\', "/");
        let prefix = format!("{rel}/");
        (attach(ops, &index, &prefix)?, attach_hosts(ops, &index, &prefix)?)
    } else {
        (Vec::new(), BTreeMap::new())
    };
    let text = NativeTemplate { pytorch, adapter_type, kernels: &kernels }
        .render()
        .map_err(|e| Error::Internal(format!("rendering {FILE}: {e}")))?;
    Ok((text, kernels, hosts))
}

#[cfg(test)]
mod tests {
    use super::module_path;

    #[test]
    fn module_paths_follow_the_file_layout() {
        let p = "adapter-runtime/src/";
        assert_eq!(module_path("adapter-runtime/src/kernels/nn.rs", p).as_deref(), Some("crate::kernels::nn"));
        assert_eq!(module_path("adapter-runtime/src/kernels/mod.rs", p).as_deref(), Some("crate::kernels"));
        assert_eq!(module_path("adapter-runtime/src/lib.rs", p).as_deref(), Some("crate"));
        assert_eq!(module_path("adapter-runtime/tests/x.rs", p), None);
        assert_eq!(module_path("adapter-runtime/src/my-mod.rs", p), None);
    }
}
