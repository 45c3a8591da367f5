//! The json report (schema: `schemas/format/diff-report.schema.json`).

use serde::Serialize;

use super::{AllowNote, Change, Impact, Report};
use crate::error::Error;

/// Name and version written in every json report.
pub const FORMAT_NAME: &str = "xirang-diff-report";
pub const FORMAT_VERSION: u32 = 1;

#[derive(Serialize)]
struct Summary {
    breaking: usize,
    action: usize,
    info: usize,
    suppressed: usize,
    to_edit: usize,
    generated: usize,
}

#[derive(Serialize)]
struct Json<'a> {
    format: &'static str,
    format_version: u32,
    title: &'a str,
    old: &'a str,
    new: &'a str,
    summary: Summary,
    changes: &'a [Change],
    impact: &'a [Impact],
    suppressed: &'a [Change],
    allow_notes: &'a [AllowNote],
    kernels_indexed: usize,
    backend_files: &'a [String],
    #[serde(skip_serializing_if = "str::is_empty")]
    adapter_summary: &'a str,
}

/// Pretty JSON with a trailing newline; deterministic (the report is sorted, keys in fixed order).
pub fn render(r: &Report) -> Result<String, Error> {
    let [(_, breaking), (_, action), (_, info)] = r.counts();
    let j = Json {
        format: FORMAT_NAME,
        format_version: FORMAT_VERSION,
        title: &r.title,
        old: &r.old,
        new: &r.new,
        summary: Summary {
            breaking,
            action,
            info,
            suppressed: r.suppressed.len(),
            to_edit: r.to_edit().count(),
            generated: r.generated().count(),
        },
        changes: &r.changes,
        impact: &r.impact,
        suppressed: &r.suppressed,
        allow_notes: &r.allow_notes,
        kernels_indexed: r.kernels_indexed,
        backend_files: &r.backend_files,
        adapter_summary: &r.adapter_summary,
    };
    let mut s = serde_json::to_string_pretty(&j).map_err(|e| Error::Internal(format!("json report: {e}")))?;
    s.push('\n');
    Ok(s)
}
