//! `generated/autocast.cpp`: device `xirang`'s autocast (the AutocastPrivateUse1 dispatch key), from
//! the autocast policy lists of the targeted PyTorch's C++ headers (`schemas/pytorch-cxx/<v>/autocast.jsonl`,
//! the `AT_FORALL_*` X-macros of `ATen/autocast_mode.h`). Written when xirang.toml has a `[bridge]`
//! table and the store has the C++ interface snapshot of the targeted PyTorch (2.4 and later publish
//! the lists). An autocast list change upstream (`cxx.autocast.*`) is a regeneration of this file.

use askama::Template;

use crate::error::{Error, Result};

/// The file's name in the generated folder.
pub const FILE: &str = "autocast.cpp";

/// One registration line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// `conv1d` or `conv_transpose2d, input`.
    pub args: String,
    /// The `at::autocast::CastPolicy` name.
    pub policy: &'static str,
}

#[derive(Template)]
#[template(path = "autocast.cpp.jinja", escape = "none")]
struct AutocastTemplate<'a> {
    pytorch: &'a str,
    cxx_version: &'a str,
    entries: &'a [Entry],
    lower: usize,
    fp32: usize,
    opt_dtype: usize,
    promote: usize,
    redispatch: usize,
}

/// The CastPolicy of a list (`None`: not a per-operator list this file registers one by one).
fn policy(list: &str) -> Option<&'static str> {
    match list {
        "lower_precision_fp" => Some("lower_precision_fp"),
        "fp32" => Some("fp32"),
        "fp32_set_opt_dtype" => Some("fp32_set_opt_dtype"),
        "promote" => Some("promote"),
        _ => None,
    }
}

/// The registrations, in list order then operator order.
pub fn entries(lists: &[xirang_cxx::AutocastEntry]) -> Vec<Entry> {
    let order = ["lower_precision_fp", "fp32", "fp32_set_opt_dtype", "promote"];
    let mut v: Vec<&xirang_cxx::AutocastEntry> = lists.iter().filter(|e| policy(&e.list).is_some()).collect();
    v.sort_by_key(|e| (order.iter().position(|o| *o == e.list), e.line, e.op.clone()));
    v.into_iter()
        .filter_map(|e| {
            let args = match e.op.split_once('.') {
                Some((op, ov)) => format!("{op}, {ov}"),
                None => e.op.clone(),
            };
            Some(Entry { args, policy: policy(&e.list)? })
        })
        .collect()
}

/// Renders the file for PyTorch `pytorch` from the lists of C++ snapshot `cxx_version`.
pub fn render(pytorch: &str, cxx_version: &str, lists: &[xirang_cxx::AutocastEntry]) -> Result<String> {
    let es = entries(lists);
    let count = |p: &str| es.iter().filter(|e| e.policy == p).count();
    AutocastTemplate {
        pytorch,
        cxx_version,
        entries: &es,
        lower: count("lower_precision_fp"),
        fp32: count("fp32"),
        opt_dtype: count("fp32_set_opt_dtype"),
        promote: count("promote"),
        redispatch: lists.iter().filter(|e| e.list == "different_redispatch_signature").count(),
    }
    .render()
    .map(|mut s| {
        if !s.ends_with('\n') {
            s.push('\n');
        }
        s
    })
    .map_err(|e| Error::Internal(format!("rendering {FILE}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Store;

    #[test]
    fn every_list_entry_of_the_release_is_registered_once() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let st = Store::new(root.join("schemas"));
        let v = st.resolve("pytorch-cxx", "v2.15.0").expect("2.15.0");
        let lists = st.load_cxx_autocast(&v).expect("lists");
        let text = render("v2.15.0", "v2.15.0", &lists).expect("render");
        let per_op = lists.iter().filter(|e| policy(&e.list).is_some()).count();
        assert_eq!(text.matches("  KERNEL_PRIVATEUSEONE(").count(), per_op);
        assert!(text.contains("KERNEL_PRIVATEUSEONE(mm, lower_precision_fp)"));
        assert!(text.contains("KERNEL_PRIVATEUSEONE(pow, Tensor_Scalar, fp32)"));
        assert!(text.contains("KERNEL_PRIVATEUSEONE(sum, dim_IntList, fp32_set_opt_dtype)"));
        assert!(text.contains("KERNEL_PRIVATEUSEONE(cross, promote)"));
        assert!(text.contains("AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(XIRANG_AUTOCAST_REDISPATCH)"));
        // deterministic
        assert_eq!(text, render("v2.15.0", "v2.15.0", &lists).expect("render"));
        // a release without published lists (2.3) gives none
        let old = st.resolve("pytorch-cxx", "v2.3.1").expect("2.3.1");
        assert!(st.load_cxx_autocast(&old).expect("lists").is_empty());
    }
}
