//! Vendor backend yaml (torchgen's `gen_backend_stubs` format plus torch_npu's keys).
//!
//! Top-level keys: `backend`, `cpp_namespace`, `class_name`, `extra_headers`, `use_out_as_primary`,
//! `device_guard` (settings) and the operator lists `supported`, `autograd`, `full_codegen`,
//! `non_native`, `ir_gen`, `symint`, plus torch_npu's `custom`, `quant`, `tocpu`, `unsupported`.
//! A list entry is an operator name (`add.Tensor`), or a map with `func:` (an operator name or a
//! full schema) and per-entry keys (`op_api`, `impl_ns`, `exposed`, `device_check`, `dispatch`,
//! ...), which are kept as data. Unknown top-level keys are errors, as in torchgen.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{SourceError, SourceFile};
use crate::registry::{parse_schema_node, parse_yaml, scalar};
use crate::schema::{FunctionSchema, OperatorName};
use crate::yaml::{Node, Value};

type Res<T> = Result<T, Box<SourceError>>;

/// The top-level keys holding operator lists.
pub const LIST_KEYS: &[&str] = &[
    "supported",
    "autograd",
    "full_codegen",
    "non_native",
    "ir_gen",
    "symint",
    "custom",
    "quant",
    "tocpu",
    "unsupported",
];

/// The top-level keys holding settings.
pub const SETTING_KEYS: &[&str] =
    &["backend", "cpp_namespace", "class_name", "extra_headers", "use_out_as_primary", "device_guard"];

/// One operator entry of a list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackendEntry {
    /// The operator (`add.Tensor`).
    pub op: OperatorName,
    /// The full schema when the entry gives one (`custom`, torch_npu's codegen lists).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// Per-entry keys other than `func`, as JSON values (strings, booleans, maps).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, serde_json::Value>,
    pub line: u32,
}

/// A parsed backend yaml file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BackendYaml {
    /// File name as given to the loader.
    pub file: String,
    /// Settings (`backend`, `cpp_namespace`, ...), as JSON values.
    pub settings: BTreeMap<String, serde_json::Value>,
    /// List key (`supported`, `custom`, ...) -> entries in file order.
    pub lists: BTreeMap<String, Vec<BackendEntry>>,
}

impl BackendYaml {
    /// Every entry of every list, with its list name.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &BackendEntry)> {
        self.lists.iter().flat_map(|(k, v)| v.iter().map(move |e| (k.as_str(), e)))
    }
    /// The parsed schemas of the entries that give one.
    pub fn schemas(&self) -> Vec<(&BackendEntry, FunctionSchema)> {
        self.entries()
            .filter_map(|(_, e)| e.schema.as_deref().and_then(|s| FunctionSchema::parse(s).ok()).map(|s| (e, s)))
            .collect()
    }
}

/// Lists whose entries name operators of PyTorch (not the vendor's own, as `custom` does).
const UPSTREAM_LISTS: &[&str] = &["supported", "autograd", "full_codegen", "ir_gen", "symint", "tocpu", "unsupported"];

/// Loads a backend yaml and checks its operator names against `names` (sorted: every operator of
/// the versions compared, said as `versions` in the message). A file alone: its own `custom:`
/// section declares the backend's operators; see [`load_all_checked`] for files that go together.
pub fn load_checked(src: &SourceFile, names: &[&str], versions: &str) -> Res<BackendYaml> {
    let mut v = load_all_checked(std::slice::from_ref(src), names, versions)?;
    Ok(v.pop().unwrap_or_default())
}

/// Loads backend yamls that go together (torch_npu's `npu_native_functions.yaml` and
/// `npu_native_functions_by_codegen.yaml`, the bot's `[bot] backend_yaml` list, the files of one
/// `diff --backend ...`) and checks every operator name they list against `names`: an entry of
/// `supported`/`autograd`/`symint`/... names an operator of PyTorch, or one that any of the files
/// declares in its `custom:` section (the backend's own operator, as torch_npu's code generator
/// reads it), or it is a typo: a positioned error with a suggestion. What `diff --backend` and the
/// bot's `[bot] backend_yaml` both do.
pub fn load_all_checked(srcs: &[SourceFile], names: &[&str], versions: &str) -> Res<Vec<BackendYaml>> {
    let yamls: Vec<BackendYaml> = srcs.iter().map(load_backend_yaml).collect::<Res<_>>()?;
    let custom = custom_names(&yamls);
    let known = |n: &str| names.binary_search(&n).is_ok() || custom.contains(n);
    for (src, yaml) in srcs.iter().zip(&yamls) {
        check_operator_names(
            src,
            yaml,
            &known,
            names.iter().copied().chain(custom.iter().map(String::as_str)),
            versions,
        )?;
    }
    Ok(yamls)
}

/// The operators the files declare as the backend's own (`custom:` entries), by full name.
pub fn custom_names(yamls: &[BackendYaml]) -> std::collections::BTreeSet<String> {
    yamls.iter().flat_map(|y| y.lists.get("custom").into_iter().flatten()).map(|e| e.op.to_string()).collect()
}

/// Checks that every entry of the lists naming PyTorch operators names one that `known` accepts
/// (entries that give a full schema are the vendor's own and are not checked). `src` is the
/// file the yaml was loaded from (for the position); `candidates` feed the suggestion.
pub fn check_operator_names<'a>(
    src: &SourceFile,
    yaml: &BackendYaml,
    known: &dyn Fn(&str) -> bool,
    candidates: impl Iterator<Item = &'a str> + Clone,
    versions: &str,
) -> Res<()> {
    for (list, e) in yaml.entries() {
        if !UPSTREAM_LISTS.contains(&list) || e.schema.is_some() {
            continue;
        }
        let name = e.op.to_string();
        if known(&name) {
            continue;
        }
        let hint = crate::suggest::hint(&name, candidates.clone());
        // the name on its line
        let line_start = src.pos_of_marker(e.line as usize, 0).offset;
        let line_text = src.text()[line_start..].lines().next().unwrap_or("");
        let col = line_text.find(&name).unwrap_or(0);
        let pos = src.pos_of_offset(line_start + col);
        return Err(Box::new(src.error(
            pos,
            name.len(),
            format!(
                "`{list}` entry `{name}` names no operator of PyTorch {versions}, and no `custom:` entry of the \
                 backend declares it{hint}"
            ),
        )));
    }
    Ok(())
}

fn err(src: &SourceFile, node: &Node, msg: impl Into<String>) -> Box<SourceError> {
    let len = node.as_str().map(|s| s.len().max(1)).unwrap_or(1);
    Box::new(src.error(node.pos, len, msg))
}

fn to_json(node: &Node) -> serde_json::Value {
    match &node.value {
        Value::Scalar { text, plain } => {
            if *plain && let Some(b) = node.as_bool() {
                return serde_json::Value::Bool(b);
            }
            if node.is_null() && *plain {
                return serde_json::Value::Null;
            }
            serde_json::Value::String(text.clone())
        }
        Value::Seq(xs) => serde_json::Value::Array(xs.iter().map(to_json).collect()),
        Value::Map(kv) => serde_json::Value::Object(
            kv.iter().map(|(k, v)| (k.as_str().unwrap_or_default().to_string(), to_json(v))).collect(),
        ),
    }
}

/// Loads a backend yaml file.
pub fn load_backend_yaml(src: &SourceFile) -> Res<BackendYaml> {
    let root = parse_yaml(src)?;
    let mut out = BackendYaml { file: src.name().to_string(), ..Default::default() };
    if root.is_null() {
        return Ok(out);
    }
    let Some(map) = root.as_map() else {
        return Err(err(src, &root, format!("a backend yaml must be a mapping, found {}", root.kind_name())));
    };
    for (k, v) in map {
        let Some(key) = k.as_str() else {
            return Err(err(src, k, "keys must be strings"));
        };
        if SETTING_KEYS.contains(&key) {
            out.settings.insert(key.to_string(), to_json(v));
        } else if LIST_KEYS.contains(&key) {
            let list = out.lists.entry(key.to_string()).or_default();
            if v.is_null() {
                continue;
            }
            let Some(items) = v.as_seq() else {
                return Err(err(src, v, format!("`{key}` must be a list of operators, found {}", v.kind_name())));
            };
            for item in items {
                list.push(load_entry(src, key, item)?);
            }
        } else {
            let mut valid: Vec<&str> = SETTING_KEYS.iter().chain(LIST_KEYS).copied().collect();
            valid.sort_unstable();
            return Err(err(src, k, format!("unknown key `{key}` in backend yaml (valid keys: {})", valid.join(", "))));
        }
    }
    Ok(out)
}

fn load_entry(src: &SourceFile, list: &str, item: &Node) -> Res<BackendEntry> {
    match &item.value {
        Value::Scalar { text, .. } => {
            if list == "custom" {
                return Err(err(
                    src,
                    item,
                    "`custom` entries need a full schema: `- func: ns_op(Tensor self) -> Tensor`",
                ));
            }
            let op = OperatorName::parse(text.trim())
                .map_err(|e| err(src, item, format!("invalid operator name `{text}`: {}", e.message)))?;
            Ok(BackendEntry { op, schema: None, extra: BTreeMap::new(), line: item.pos.line })
        }
        Value::Map(kv) => {
            let func = item.get("func").ok_or_else(|| err(src, item, "entry has no `func:` key"))?;
            let text = scalar(src, func, "func")?;
            let (op, schema) = if text.contains('(') {
                let s = parse_schema_node(src, func)?;
                (s.name.clone(), Some(s.to_string()))
            } else {
                if list == "custom" {
                    return Err(err(src, func, "`custom` entries need a full schema, not just a name"));
                }
                let op = OperatorName::parse(text.trim())
                    .map_err(|e| err(src, func, format!("invalid operator name `{text}`: {}", e.message)))?;
                (op, None)
            };
            let mut extra = BTreeMap::new();
            for (k, v) in kv {
                let key = k.as_str().ok_or_else(|| err(src, k, "keys must be strings"))?;
                if key != "func" {
                    extra.insert(key.to_string(), to_json(v));
                }
            }
            Ok(BackendEntry { op, schema, extra, line: func.pos.line })
        }
        Value::Seq(_) => Err(err(src, item, "expected an operator name or a `func:` entry, found a list")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_names_and_schemas() {
        let src = SourceFile::new(
            "b.yaml",
            "backend: NPU\ncpp_namespace: at_npu::native\nsupported:\n  - abs\n  - func: clone\n    op_api: True\ncustom:\n  - func: npu_foo(Tensor self) -> Tensor\n    exposed: true\nautograd: []\n",
        );
        let b = load_backend_yaml(&src).unwrap();
        assert_eq!(b.lists["supported"].len(), 2);
        assert_eq!(b.lists["supported"][1].extra["op_api"], serde_json::Value::Bool(true));
        assert_eq!(b.lists["custom"][0].schema.as_deref(), Some("npu_foo(Tensor self) -> Tensor"));
        assert_eq!(b.settings["backend"], serde_json::json!("NPU"));
    }

    #[test]
    fn errors_are_positioned() {
        let src = SourceFile::new("b.yaml", "backend: NPU\nsuported:\n  - abs\n");
        let e = load_backend_yaml(&src).unwrap_err();
        assert_eq!((e.line, e.col), (2, 1));
        let src = SourceFile::new("b.yaml", "custom:\n  - func: npu_foo(Tensr self) -> Tensor\n");
        let e = load_backend_yaml(&src).unwrap_err();
        assert_eq!((e.line, e.col), (2, 19));
        let src = SourceFile::new("b.yaml", "custom:\n  - npu_foo\n");
        assert!(load_backend_yaml(&src).is_err());
    }
}
