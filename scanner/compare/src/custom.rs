//! The adapter's custom operators in the drift report (`[operators] custom` of `xirang.toml`, see
//! [`crate::generate::custom`]).
//!
//! A custom operator depends on PyTorch in two ways, and [`impacts`] joins both with a report's
//! changes:
//!
//! - its gradient rules and reference formula call aten operators. Each formula is translated the
//!   way `generate` translates it, against the operators of the report's old version
//!   ([`CustomOperators::resolve`]), which gives the exact overloads it calls (`grad * scale` is
//!   `mul.Scalar`). A change that removes such an operator or changes its schema (`op.removed`,
//!   `op.overload_renamed`, `arg.*`, `ret.*`, `out.*`) lands on the formula's line of the
//!   custom-operator file (source `custom`). A formula that does not translate against the old
//!   version is matched by name instead: every functional overload of each function it calls;
//! - its name: a new upstream operator (`op.added`, or the new name of `op.overload_renamed`) with
//!   the same name as a custom operator without a namespace (or in `aten::`), or with the same Rust
//!   method name after [`crate::naming::method_name`] (the adapter implements `AtenOps` and
//!   `CustomOps` on one type), makes `generate` refuse the custom-operator file. Each such pair is a
//!   change of its own, rule [`COLLISION_RULE`] (breaking), landing on the custom operator's `func:`
//!   line.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use crate::diff::{Change, Impact, ImpactSource, Location, RuleSet, Severity, Upstream};
use crate::error::Error;
use crate::generate::autograd::OpIndex;
use crate::generate::config::OperatorsTable;
use crate::generate::custom::{self, ATEN, CustomSet};
use crate::naming;
use crate::registry::NativeFunction;
use crate::schema::SchemaKind;
use crate::snapshot::{Store, Version};

/// The rule of a new upstream operator that collides with a custom operator.
pub const COLLISION_RULE: &str = "custom.name_collision";

/// The custom operators of an adapter, as read from its repository (not yet resolved against a
/// PyTorch version).
#[derive(Debug, Clone)]
pub struct CustomOperators {
    pub set: CustomSet,
    /// The operator selection of `xirang.toml` (formulas call selected operators only); `None`:
    /// every functional operator.
    operators: Option<OperatorsTable>,
}

#[derive(serde::Deserialize)]
struct ConfigFile {
    #[serde(default)]
    operators: Option<toml::Value>,
}

impl CustomOperators {
    /// A custom-operator set, with the `[operators]` selection the formulas are translated with
    /// (`None`: every functional operator).
    pub fn new(set: CustomSet, operators: Option<OperatorsTable>) -> CustomOperators {
        CustomOperators { set, operators }
    }

    /// Reads the `[operators]` table of `xirang.toml` under `root` (the other tables are not the
    /// drift report's business: a file with only `[bot]` is fine) and the custom-operator file it
    /// names (`custom`, default `custom_ops.yaml`, confined to the repository; a missing file is no
    /// operator). `None` when `root` has no `xirang.toml`. A custom-operator file that does not
    /// parse is a positioned error.
    pub fn load(root: &Path) -> Result<Option<CustomOperators>, Error> {
        let path = root.join("xirang.toml");
        if !path.is_file() {
            return Ok(None);
        }
        let text = crate::fsio::read_text(&path, 1 << 20)?;
        let file: ConfigFile = toml::from_str(&text)
            .map_err(|e| Error::Invalid(format!("{}: invalid TOML: {}", path.display(), e.message())))?;
        let operators: OperatorsTable = match file.operators {
            Some(v) => v
                .try_into()
                .map_err(|e: toml::de::Error| Error::Invalid(format!("{} [operators]: {e}", path.display())))?,
            None => OperatorsTable::default(),
        };
        let name = operators.custom.clone().unwrap_or_else(|| custom::DEFAULT_FILE.to_string());
        let file = crate::fsio::confine(root, &name, "[operators] custom")?;
        let set = custom::load(&file, &name)?;
        Ok(Some(CustomOperators { set, operators: Some(operators) }))
    }

    /// The operator base names the formulas may call (what [`CustomOperators::resolve`] needs of a
    /// snapshot).
    pub fn called_names(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for op in &self.set.ops {
            for r in op.grads.iter().flatten() {
                out.extend(custom::called_names(&r.formula.text));
            }
            if let Some(r) = &op.reference {
                out.extend(custom::called_names(&r.text));
            }
        }
        out
    }

    /// Resolves what every formula calls against `functions` (the operators of the report's old
    /// version; those whose base names [`CustomOperators::called_names`] lists suffice).
    pub fn resolve(&self, functions: &[NativeFunction]) -> CustomUses {
        let selected: BTreeSet<String> = match &self.operators {
            Some(t) => {
                crate::generate::ops::select_by(t, functions).iter().map(|(f, _)| f.func.name.to_string()).collect()
            }
            None => functions.iter().map(|f| f.func.name.to_string()).collect(),
        };
        let index = OpIndex::new(functions, &selected);
        let by_method: HashMap<String, String> =
            functions.iter().map(|f| (naming::method_name(&f.func.name), f.func.name.to_string())).collect();
        let mut ops = Vec::new();
        for op in &self.set.ops {
            let mut uses: Vec<OperatorUse> = Vec::new();
            for fc in custom::formula_calls(op, &index) {
                let (names, exact): (BTreeSet<String>, bool) = match &fc.methods {
                    Some(ms) => (ms.iter().filter_map(|m| by_method.get(m).cloned()).collect(), true),
                    None => (
                        functions
                            .iter()
                            .filter(|f| f.func.kind() == SchemaKind::Functional && fc.names.contains(&f.func.name.name))
                            .map(|f| f.func.name.to_string())
                            .collect(),
                        false,
                    ),
                };
                for n in names {
                    uses.push(OperatorUse { op: n, what: fc.what.clone(), line: fc.line, exact });
                }
            }
            uses.sort_by(|a, b| (a.line, &a.op, &a.what).cmp(&(b.line, &b.op, &b.what)));
            uses.dedup();
            ops.push(CustomOpUses {
                qualified: op.qualified(),
                name: op.schema.name.to_string(),
                aten: op.ns() == ATEN,
                method: op.method(),
                schema: op.schema_text(),
                line: op.func.line(),
                uses,
            });
        }
        CustomUses { file: self.set.file.clone(), ops }
    }

    /// [`CustomOperators::resolve`] against version `v` of `store`, parsing only the operators the
    /// formulas may call (the pair path of `diff`, which never loads a whole snapshot).
    pub fn resolve_in(&self, store: &Store, v: &Version) -> Result<CustomUses, Error> {
        let names = self.called_names();
        let functions =
            if names.is_empty() { Vec::new() } else { store.load_pytorch_operators(v, |n| names.contains(n))? };
        Ok(self.resolve(&functions))
    }
}

/// The custom operators with the aten operators their formulas call in one PyTorch version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CustomUses {
    /// The custom-operator file as configured (`custom_ops.yaml`).
    pub file: String,
    pub ops: Vec<CustomOpUses>,
}

/// One custom operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomOpUses {
    /// `xirang::scaled_gelu`.
    pub qualified: String,
    /// `name.overload` without the namespace.
    pub name: String,
    /// No namespace, or `aten::`: the operator name itself can collide with PyTorch's.
    pub aten: bool,
    /// The `CustomOps` method (`naming::method_name` of the name).
    pub method: String,
    /// The schema with its namespace.
    pub schema: String,
    /// Line of the `func:` entry in the custom-operator file.
    pub line: u32,
    /// The aten operators its formulas call, by line.
    pub uses: Vec<OperatorUse>,
}

/// An aten operator called by a formula of a custom operator.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct OperatorUse {
    /// The operator (`mul.Scalar`).
    pub op: String,
    /// `gradient rule of `self`` or `reference`.
    pub what: String,
    /// Line of the formula in the custom-operator file.
    pub line: u32,
    /// Found by translating the formula (else by the name of a function it calls).
    pub exact: bool,
}

/// Whether a change removes an operator or changes its schema.
fn schema_change(rule: &str) -> bool {
    matches!(rule, "op.removed" | "op.overload_renamed")
        || matches!(rule.split('.').next(), Some("arg" | "ret" | "out"))
}

/// The upstream operator name a change brings in: the subject of `op.added`, the new name of
/// `op.overload_renamed`.
fn new_name(c: &Change) -> Option<&str> {
    match c.rule.as_str() {
        "op.added" => Some(c.subject.as_str()),
        "op.overload_renamed" => c.detail.as_deref(),
        _ => None,
    }
}

/// Joins a report's changes with the custom operators: the impacts on the custom-operator file
/// (source [`ImpactSource::Custom`]) of the changes to operators the formulas call, and for every
/// new upstream operator that collides with a custom operator a new [`COLLISION_RULE`] change with
/// its impact. Returns (impacts, new changes); both unsorted.
pub fn impacts(custom: &CustomUses, changes: &[Change], rules: &RuleSet) -> (Vec<Impact>, Vec<Change>) {
    let mut impacts = Vec::new();
    let mut added = Vec::new();
    let mut by_op: HashMap<&str, Vec<(&CustomOpUses, &OperatorUse)>> = HashMap::new();
    for o in &custom.ops {
        for u in &o.uses {
            by_op.entry(u.op.as_str()).or_default().push((o, u));
        }
    }
    for c in changes.iter().filter(|c| c.upstream == Upstream::Pytorch) {
        if c.severity <= Severity::Action && schema_change(&c.rule) {
            for (o, u) in by_op.get(c.subject.as_str()).into_iter().flatten() {
                impacts.push(Impact {
                    subject: c.subject.clone(),
                    rule: c.rule.clone(),
                    severity: c.severity,
                    source: ImpactSource::Custom,
                    location: Location::new(&custom.file, Some(u.line)),
                    item: format!("{} of {}", u.what, o.qualified),
                    fingerprint: c.fingerprint.clone(),
                    action: format!("update the formula: it calls `{}`, and {}", c.subject, c.message),
                });
            }
        }
        let Some(new) = new_name(c) else { continue };
        let new_method = naming::method_name_of(new);
        for o in &custom.ops {
            let why = if o.aten && o.name == new {
                format!("has the name of custom operator `{}`", o.qualified)
            } else if new_method.as_deref() == Some(o.method.as_str()) {
                format!("has the Rust method `{}` of custom operator `{}`", o.method, o.qualified)
            } else {
                continue;
            };
            let at = format!("{}:{}", custom.file, o.line);
            let x = Change::new(
                rules,
                COLLISION_RULE,
                Upstream::Pytorch,
                new,
                Some(o.qualified.clone()),
                None,
                Some(o.schema.clone()),
                c.new.clone(),
                format!("new operator `aten::{new}` {why} ({at})"),
            )
            .at(c.upstream_location.clone());
            impacts.push(Impact {
                subject: x.subject.clone(),
                rule: x.rule.clone(),
                severity: x.severity,
                source: ImpactSource::Custom,
                location: Location::new(&custom.file, Some(o.line)),
                item: format!("custom operator {}", o.qualified),
                fingerprint: x.fingerprint.clone(),
                action: format!(
                    "rename `{}` (another namespace, an alias or overload name) with its kernel file and callers, \
                     or drop it if `aten::{new}` replaces it",
                    o.qualified
                ),
            });
            added.push(x);
        }
    }
    (impacts, added)
}

#[cfg(test)]
mod tests {
    use super::*;
    use xirang_ir::error::SourceFile;

    fn set(text: &str) -> CustomSet {
        custom::parse_file(&SourceFile::new("custom_ops.yaml", text)).expect("custom file")
    }

    fn functions(schemas: &[&str]) -> Vec<NativeFunction> {
        schemas
            .iter()
            .enumerate()
            .map(|(i, s)| {
                serde_json::from_value(serde_json::json!({
                    "func": s, "dispatch": {"CPU": "x"}, "variants": ["function"], "line": i + 1,
                }))
                .expect("function")
            })
            .collect()
    }

    const FILE: &str = "custom:\n  - func: \"xirang::scaled_gelu(Tensor self, float scale=1.0) -> Tensor\"\n    reference: \"gelu(self) * scale\"\ncustom_derivatives:\n  - name: \"xirang::scaled_gelu(Tensor self, float scale=1.0) -> Tensor\"\n    self: \"gelu_backward(grad * scale, self)\"\n";

    #[test]
    fn formulas_resolve_to_the_overloads_they_call() {
        let fs = functions(&[
            "gelu(Tensor self, *, str approximate='none') -> Tensor",
            "gelu_backward(Tensor grad_output, Tensor self, *, str approximate='none') -> Tensor",
            "mul.Tensor(Tensor self, Tensor other) -> Tensor",
            "mul.Scalar(Tensor self, Scalar other) -> Tensor",
            "mul.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
        ]);
        let c = CustomOperators::new(set(FILE), None);
        assert!(c.called_names().is_superset(&["gelu", "gelu_backward", "mul"].map(String::from).into()));
        let u = c.resolve(&fs);
        assert_eq!(u.file, "custom_ops.yaml");
        let o = &u.ops[0];
        assert_eq!(
            (o.qualified.as_str(), o.method.as_str(), o.line, o.aten),
            ("xirang::scaled_gelu", "scaled_gelu", 2, false)
        );
        let got: Vec<(&str, &str, u32, bool)> =
            o.uses.iter().map(|x| (x.op.as_str(), x.what.as_str(), x.line, x.exact)).collect();
        assert_eq!(
            got,
            [
                ("gelu", "reference", 3, true),
                ("mul.Scalar", "reference", 3, true),
                ("gelu_backward", "gradient rule of `self`", 6, true),
                ("mul.Scalar", "gradient rule of `self`", 6, true),
            ]
        );
        // without gelu_backward the rule does not translate: every functional overload it names
        let fs = functions(&[
            "mul.Tensor(Tensor self, Tensor other) -> Tensor",
            "mul.Scalar(Tensor self, Scalar other) -> Tensor",
        ]);
        let u = c.resolve(&fs);
        let got: Vec<(&str, u32, bool)> = u.ops[0].uses.iter().map(|x| (x.op.as_str(), x.line, x.exact)).collect();
        assert_eq!(
            got,
            [("mul.Scalar", 3, false), ("mul.Tensor", 3, false), ("mul.Scalar", 6, false), ("mul.Tensor", 6, false)]
        );
    }
}
