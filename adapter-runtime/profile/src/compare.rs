//! Comparison of a profile against a baseline: a previous xirang profile
//! (operators matched by qualified name) or a PyTorch profile exported by
//! `profile/torch_profile_mlp.py` (format `torch-profile`: `aten::` names,
//! matched by base name, `add.Tensor` ~ `aten::add`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::report::{Format, cell, fmt_ns, markdown_table, text_table};
use xirang_runtime::profile::model::{self, Profile};
use xirang_runtime::profile::{ProfileError, Result};

/// The `format` field of a PyTorch baseline.
pub const TORCH_FORMAT: &str = "torch-profile";

/// One operator of a PyTorch baseline (from `key_averages()`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TorchOp {
    /// `aten::addmm`.
    pub op: String,
    pub calls: u64,
    /// Inclusive CPU time, microseconds.
    pub cpu_time_total_us: f64,
    pub self_cpu_time_total_us: f64,
}

/// A PyTorch CPU profile of the same program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TorchProfile {
    pub format: String,
    pub version: u32,
    /// What produced it (`torch 2.x torch.profiler, train_mlp ...`).
    pub source: String,
    pub ops: Vec<TorchOp>,
}

/// A baseline: either kind.
#[derive(Debug, Clone, PartialEq)]
pub enum Baseline {
    Xirang(Profile),
    Torch(TorchProfile),
}

impl Baseline {
    /// Reads a baseline file (a regular file of at most
    /// [`model::MAX_PROFILE_BYTES`]); the `format` field says which kind it is.
    pub fn read(path: impl AsRef<Path>) -> Result<Baseline> {
        let path = path.as_ref();
        let text = xirang_runtime::io::read_file(path, "a baseline profile", model::MAX_PROFILE_BYTES)?;
        Baseline::parse(&text).map_err(|message| ProfileError::Format {
            path: path.into(),
            what: "baseline profile",
            message,
        })
    }

    /// Parses and checks a baseline (message without the path on error).
    pub fn parse(text: &[u8]) -> std::result::Result<Baseline, String> {
        match model::format_field(text)?.as_ref().and_then(|f| f.as_str()) {
            Some(model::FORMAT) => Profile::parse(text).map(Baseline::Xirang),
            Some(TORCH_FORMAT) => {
                let t: TorchProfile = serde_json::from_slice(text).map_err(|e| e.to_string())?;
                if t.version != 1 {
                    return Err(format!("{TORCH_FORMAT} version {} is not supported (expected 1)", t.version));
                }
                for o in &t.ops {
                    let ok = |x: f64| x.is_finite() && x >= 0.0;
                    if !ok(o.cpu_time_total_us) || !ok(o.self_cpu_time_total_us) {
                        return Err(format!("{}: times must be finite and non-negative", cell(&o.op)));
                    }
                }
                Ok(Baseline::Torch(t))
            }
            Some(other) => Err(format!("format `{}`: expected `{}` or `{TORCH_FORMAT}`", cell(other), model::FORMAT)),
            None => Err(format!("no `format` field (expected `{}` or `{TORCH_FORMAT}`)", model::FORMAT)),
        }
    }
}

/// One operator in the comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub op: String,
    pub base_calls: u64,
    pub new_calls: u64,
    /// Total inclusive host time, nanoseconds.
    pub base_ns: u64,
    pub new_ns: u64,
    /// New over base time per call; `None` when the operator is on one side only.
    pub ratio: Option<f64>,
    pub regression: bool,
}

/// The comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// `xirang` or `torch`.
    pub baseline: &'static str,
    pub threshold: f64,
    /// Sorted: regressions first, then by ratio (descending), then name.
    pub rows: Vec<Row>,
    pub base_total_ns: u64,
    pub new_total_ns: u64,
}

impl Comparison {
    pub fn regressions(&self) -> impl Iterator<Item = &Row> {
        self.rows.iter().filter(|r| r.regression)
    }
}

/// Compares `new` with `base`: an operator regresses when its time per call
/// grew by more than `threshold` (a ratio, e.g. 1.2) and its new total time
/// is at least `min_ns`.
pub fn compare(base: &Baseline, new: &Profile, threshold: f64, min_ns: u64) -> Comparison {
    let (kind, base_ops, new_ops, base_total): (&'static str, BTreeMap<String, (u64, u64)>, _, u64) = match base {
        Baseline::Xirang(b) => (
            "xirang",
            b.by_operator().into_iter().map(|s| (s.op, (s.calls, s.host_ns))).collect(),
            new.by_operator(),
            b.top_level_ns(),
        ),
        Baseline::Torch(t) => {
            let mut m: BTreeMap<String, (u64, u64)> = BTreeMap::new();
            for o in &t.ops {
                let e = m.entry(model::base_name(&o.op).to_string()).or_default();
                e.0 = e.0.saturating_add(o.calls);
                e.1 = e.1.saturating_add((o.cpu_time_total_us * 1e3).round() as u64);
            }
            // torch's top level is unknown from key averages: the sum of self times
            let total =
                t.ops.iter().fold(0u64, |a, o| a.saturating_add((o.self_cpu_time_total_us * 1e3).round() as u64));
            ("torch", m, new.aggregate(|c| c.base().to_string()), total)
        }
    };
    let mut rows: BTreeMap<String, Row> = BTreeMap::new();
    for (op, (calls, ns)) in &base_ops {
        rows.insert(
            op.clone(),
            Row {
                op: op.clone(),
                base_calls: *calls,
                new_calls: 0,
                base_ns: *ns,
                new_ns: 0,
                ratio: None,
                regression: false,
            },
        );
    }
    for s in new_ops {
        let r = rows.entry(s.op.clone()).or_insert_with(|| Row {
            op: s.op.clone(),
            base_calls: 0,
            new_calls: 0,
            base_ns: 0,
            new_ns: 0,
            ratio: None,
            regression: false,
        });
        r.new_calls = s.calls;
        r.new_ns = s.host_ns;
    }
    let mut rows: Vec<Row> = rows.into_values().collect();
    for r in &mut rows {
        if r.base_calls > 0 && r.new_calls > 0 && r.base_ns > 0 {
            let per = |ns: u64, n: u64| ns as f64 / n as f64;
            let ratio = per(r.new_ns, r.new_calls) / per(r.base_ns, r.base_calls);
            r.ratio = Some(ratio);
            r.regression = ratio > threshold && r.new_ns >= min_ns;
        }
    }
    rows.sort_by(|a, b| {
        b.regression
            .cmp(&a.regression)
            .then_with(|| b.ratio.unwrap_or(-1.0).total_cmp(&a.ratio.unwrap_or(-1.0)))
            .then_with(|| a.op.cmp(&b.op))
    });
    Comparison { baseline: kind, threshold, rows, base_total_ns: base_total, new_total_ns: new.top_level_ns() }
}

/// Renders a comparison.
pub fn render(c: &Comparison, format: Format) -> String {
    let mut out = String::new();
    let n = c.regressions().count();
    let head = format!(
        "baseline: {} profile, total {} -> {}; {n} operator(s) slower per call than {:.2}x",
        c.baseline,
        fmt_ns(c.base_total_ns),
        fmt_ns(c.new_total_ns),
        c.threshold
    );
    let cells = |r: &Row| {
        vec![
            r.op.clone(),
            r.base_calls.to_string(),
            r.new_calls.to_string(),
            fmt_ns(r.base_ns),
            fmt_ns(r.new_ns),
            r.ratio.map_or_else(
                || if r.base_calls == 0 { "new only".into() } else { "base only".into() },
                |x| format!("{x:.2}x"),
            ),
            if r.regression { "REGRESSION".into() } else { String::new() },
        ]
    };
    let headers = ["operator", "base calls", "new calls", "base time", "new time", "ratio/call", ""];
    let right = [false, true, true, true, true, true, false];
    match format {
        Format::Markdown => {
            let _ = writeln!(out, "### Profile comparison\n\n{head}\n");
            let rows: Vec<Vec<String>> = c
                .rows
                .iter()
                .map(|r| {
                    let mut v = cells(r);
                    if r.regression {
                        v[6] = "**regression**".into();
                    }
                    v
                })
                .collect();
            out.push_str(&markdown_table(&headers, &rows, &right, &[true]));
        }
        Format::Table => {
            let _ = writeln!(out, "{head}\n");
            let rows: Vec<Vec<String>> = c.rows.iter().map(cells).collect();
            out.push_str(&text_table(&headers, &rows, &right, false));
        }
    }
    out
}
