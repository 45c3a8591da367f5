//! Renderings of a profile: summary table (terminal, markdown), Chrome
//! trace-event JSON (Perfetto, `chrome://tracing`), folded stacks and a
//! flame graph SVG (inferno).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use serde_json::json;

pub use xirang_runtime::profile::model::{MAX_CELL_CHARS, cell, cut};
use xirang_runtime::profile::model::{MAX_DEPTH, OpStats, Profile};
use xirang_runtime::profile::{ProfileError, Result};

/// A plain-text table: every cell through [`cell`], columns as wide as
/// their widest cell (so at most [`MAX_CELL_CHARS`]), two spaces apart,
/// right-aligned where `right[i]`; `rule`: a dashed line under the header.
pub(crate) fn text_table(headers: &[&str], rows: &[Vec<String>], right: &[bool], rule: bool) -> String {
    let cells: Vec<Vec<Cow<str>>> = rows.iter().map(|r| r.iter().map(|c| cell(c)).collect()).collect();
    let mut w: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in &cells {
        for (i, c) in r.iter().enumerate().take(w.len()) {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |v: &[&str]| {
        let mut l = String::new();
        for (i, c) in v.iter().enumerate().take(w.len()) {
            if i > 0 {
                l.push_str("  ");
            }
            let pad = " ".repeat(w[i].saturating_sub(c.chars().count()));
            if right.get(i).copied().unwrap_or(false) {
                l.push_str(&pad);
                l.push_str(c);
            } else {
                l.push_str(c);
                l.push_str(&pad);
            }
        }
        l.trim_end().to_string()
    };
    let mut out = String::new();
    let _ = writeln!(out, "{}", line(headers));
    if rule {
        let _ = writeln!(out, "{}", w.iter().map(|n| "-".repeat(*n)).collect::<Vec<_>>().join("  "));
    }
    for r in &cells {
        let v: Vec<&str> = r.iter().map(|c| c.as_ref()).collect();
        let _ = writeln!(out, "{}", line(&v));
    }
    out
}

/// A markdown (GFM) table: every cell through [`cell`], `|` escaped (other
/// cells may hold markdown: `**regression**`); columns in `code` are code
/// spans (a cell holding a backtick is escaped text instead), right-aligned
/// where `right[i]`.
pub(crate) fn markdown_table(headers: &[&str], rows: &[Vec<String>], right: &[bool], code: &[bool]) -> String {
    let md = |i: usize, c: &str| -> String {
        let c = cell(c);
        if !code.get(i).copied().unwrap_or(false) {
            c.replace('|', "\\|")
        } else if !c.contains('`') {
            format!("`{}`", c.replace('|', "\\|"))
        } else {
            // a code span cannot hold this name as it is: escaped text
            let mut e = String::with_capacity(c.len());
            for ch in c.chars() {
                if matches!(ch, '\\' | '`' | '*' | '_' | '<' | '>' | '[' | ']' | '|') {
                    e.push('\\');
                }
                e.push(ch);
            }
            e
        }
    };
    let row = |v: Vec<String>| {
        let mut l = String::from("|");
        for c in v {
            l.push_str(if c.is_empty() { " |" } else { " " });
            if !c.is_empty() {
                l.push_str(&c);
                l.push_str(" |");
            }
        }
        l
    };
    let mut out = String::new();
    let _ = writeln!(out, "{}", row(headers.iter().map(|h| h.to_string()).collect()));
    let _ = writeln!(
        out,
        "|{}",
        (0..headers.len())
            .map(|i| if right.get(i).copied().unwrap_or(false) { " ---: |" } else { " --- |" })
            .collect::<String>()
    );
    for r in rows {
        let _ = writeln!(out, "{}", row(r.iter().enumerate().take(headers.len()).map(|(i, c)| md(i, c)).collect()));
    }
    out
}

/// Summary formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Markdown,
}

/// `1234567` ns -> `1.235 ms`.
pub fn fmt_ns(ns: u64) -> String {
    let n = ns as f64;
    if ns >= 1_000_000_000 {
        format!("{:.3} s", n / 1e9)
    } else if ns >= 1_000_000 {
        format!("{:.3} ms", n / 1e6)
    } else if ns >= 1_000 {
        format!("{:.1} us", n / 1e3)
    } else {
        format!("{ns} ns")
    }
}

/// `1536` -> `1.5 KiB`.
pub fn fmt_bytes(b: u64) -> String {
    let n = b as f64;
    if b >= 1 << 30 {
        format!("{:.1} GiB", n / (1u64 << 30) as f64)
    } else if b >= 1 << 20 {
        format!("{:.1} MiB", n / (1u64 << 20) as f64)
    } else if b >= 1 << 10 {
        format!("{:.1} KiB", n / 1024.0)
    } else {
        format!("{b} B")
    }
}

fn tiers(s: &OpStats) -> String {
    let mut v = Vec::new();
    for (n, name) in [(s.native, "native"), (s.recipe, "recipe"), (s.fallback, "fallback")] {
        if n > 0 {
            v.push(format!("{name} {n}"));
        }
    }
    v.join(", ")
}

const HEADERS: [&str; 11] =
    ["operator", "calls", "tiers", "host", "host %", "self", "device", "alloc", "h2d", "d2h", "launches"];

fn rows(p: &Profile) -> Vec<Vec<String>> {
    let total = p.top_level_ns().max(1) as f64;
    p.by_operator()
        .iter()
        .map(|s| {
            vec![
                s.op.clone(),
                s.calls.to_string(),
                tiers(s),
                fmt_ns(s.host_ns),
                format!("{:.1}", 100.0 * s.host_ns as f64 / total),
                fmt_ns(s.self_ns),
                if s.device_ns > 0 { fmt_ns(s.device_ns) } else { "-".into() },
                fmt_bytes(s.alloc_bytes),
                fmt_bytes(s.h2d_bytes),
                fmt_bytes(s.d2h_bytes),
                s.launches.to_string(),
            ]
        })
        .collect()
}

/// The per-operator summary (sorted by host time, nested calls included).
pub fn summary(p: &Profile, format: Format) -> String {
    let rows = rows(p);
    let calls = p.calls.len();
    let top = p.calls.iter().filter(|c| c.parent.is_none()).count();
    let head = format!(
        "{calls} operator calls ({top} from the program, {} nested), {} operators, host time {}",
        calls - top,
        rows.len(),
        fmt_ns(p.top_level_ns())
    );
    let right: Vec<bool> = (0..HEADERS.len()).map(|i| i >= 3).collect();
    let mut out = String::new();
    match format {
        Format::Markdown => {
            let _ = writeln!(out, "### Operator profile\n\n{head}\n");
            out.push_str(&markdown_table(&HEADERS, &rows, &right, &[true]));
        }
        Format::Table => {
            let _ = writeln!(out, "{head}\n");
            out.push_str(&text_table(&HEADERS, &rows, &right, true));
        }
    }
    for w in &p.warnings {
        let _ = writeln!(out, "\nwarning: {}", cut(w, 1000));
    }
    out
}

/// Chrome trace-event JSON: one complete (`"ph": "X"`) event per call, `ts`
/// and `dur` in microseconds, `pid` 1, `tid` the profiler thread number,
/// `cat` the tier, `args` the counters.
pub fn chrome_trace(p: &Profile) -> String {
    let mut events = Vec::with_capacity(p.calls.len() + 2);
    events.push(json!({"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "xirang"}}));
    let mut tids: Vec<u32> = p.calls.iter().map(|c| c.tid).collect();
    tids.sort_unstable();
    tids.dedup();
    for t in tids {
        events.push(
            json!({"name": "thread_name", "ph": "M", "pid": 1, "tid": t, "args": {"name": format!("host thread {t}")}}),
        );
    }
    for c in &p.calls {
        let mut args = json!({
            "tier": c.tier,
            "alloc_bytes": c.alloc_bytes,
            "h2d_bytes": c.h2d_bytes,
            "d2h_bytes": c.d2h_bytes,
            "launches": c.launches,
            "self_us": c.self_ns as f64 / 1e3,
        });
        if let Some(d) = c.device_ns {
            args["device_us"] = json!(d as f64 / 1e3);
        }
        if c.contiguous_copies > 0 {
            args["contiguous_copies"] = json!(c.contiguous_copies);
            args["contiguous_bytes"] = json!(c.contiguous_bytes);
        }
        events.push(json!({
            "name": c.op,
            "cat": c.tier,
            "ph": "X",
            "pid": 1,
            "tid": c.tid,
            "ts": c.start_ns as f64 / 1e3,
            "dur": c.host_ns as f64 / 1e3,
            "args": args,
        }));
    }
    let doc =
        json!({"traceEvents": events, "displayTimeUnit": "ns", "otherData": {"producer": "xirang-runtime profile"}});
    let mut s = serde_json::to_string(&doc).unwrap_or_default();
    s.push('\n');
    s
}

/// One frame of a folded stack: `op [tier]`, each cut to
/// [`MAX_CELL_CHARS`], with `;`, blanks and control characters as `_`.
fn frame(op: &str, tier: &str) -> String {
    let clean = |s: &str| {
        cell(s)
            .chars()
            .map(|c| if c == ';' || c.is_whitespace() || c.is_control() { '_' } else { c })
            .collect::<String>()
    };
    format!("{} [{}]", clean(op), clean(tier))
}

/// Folded stacks (`outer;inner self_ns`), one line per distinct stack,
/// sorted; frames are `op [tier]`, weights are self host time in ns.
///
/// The stacks form a tree built in one pass over the calls (a call's parent
/// is an earlier record), at most [`MAX_DEPTH`] + 1 frames deep: in a
/// profile built in memory and not checked, a call whose parent is not an
/// earlier record, or would be too deep, starts a new stack.
pub fn folded(p: &Profile) -> String {
    let mut out = String::new();
    for (k, v) in folded_stacks(p) {
        let _ = writeln!(out, "{k} {v}");
    }
    out
}

/// The stacks of [`folded`] and their weights.
fn folded_stacks(p: &Profile) -> BTreeMap<String, u64> {
    let parents = p.parent_indices();
    let mut frame_ids: HashMap<String, usize> = HashMap::new();
    let mut frames: Vec<String> = Vec::new();
    // stack tree: (enclosing node, frame) -> node
    let mut node_ids: HashMap<(Option<usize>, usize), usize> = HashMap::new();
    let mut nodes: Vec<(Option<usize>, usize, u32)> = Vec::new(); // (up, frame, depth)
    let mut weight: Vec<u64> = Vec::new();
    let mut node_of: Vec<usize> = Vec::with_capacity(p.calls.len());
    for (i, c) in p.calls.iter().enumerate() {
        let f = frame(&c.op, &c.tier);
        let f = match frame_ids.get(&f) {
            Some(&id) => id,
            None => {
                frames.push(f.clone());
                frame_ids.insert(f, frames.len() - 1);
                frames.len() - 1
            }
        };
        let up = parents[i].map(|j| node_of[j]).filter(|&n| nodes[n].2 < MAX_DEPTH);
        let depth = up.map_or(0, |n| nodes[n].2 + 1);
        let n = *node_ids.entry((up, f)).or_insert_with(|| {
            nodes.push((up, f, depth));
            weight.push(0);
            nodes.len() - 1
        });
        node_of.push(n);
        weight[n] = weight[n].saturating_add(c.self_ns.max(1));
    }
    let mut stacks: BTreeMap<String, u64> = BTreeMap::new();
    for (n, &w) in weight.iter().enumerate() {
        let mut path = Vec::new();
        let mut at = Some(n);
        while let Some(k) = at {
            path.push(frames[nodes[k].1].as_str());
            at = nodes[k].0;
        }
        path.reverse();
        let e = stacks.entry(path.join(";")).or_default();
        *e = e.saturating_add(w);
    }
    stacks
}

/// A flame graph SVG of the folded stacks (inferno; deterministic colours).
/// Errors when the profile has no calls, or when the stacks' total weight
/// (self host time) does not fit in 64 bits: inferno adds the weights up
/// in a u64.
pub fn flamegraph(p: &Profile, title: &str) -> Result<String> {
    let stacks = folded_stacks(p);
    let total: u128 = stacks.values().map(|&w| u128::from(w)).sum();
    if total > u128::from(u64::MAX) {
        return Err(ProfileError::Flamegraph(format!(
            "the stacks' total self time ({total} ns) does not fit in 64 bits"
        )));
    }
    let mut folded = String::new();
    for (k, v) in &stacks {
        let _ = writeln!(folded, "{k} {v}");
    }
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_string();
    opts.count_name = "ns".to_string();
    opts.hash = true;
    opts.deterministic = true;
    let mut svg = Vec::new();
    if folded.is_empty() {
        return Err(ProfileError::Flamegraph("the profile has no calls".into()));
    }
    inferno::flamegraph::from_lines(&mut opts, folded.lines(), &mut svg)
        .map_err(|e| ProfileError::Flamegraph(e.to_string()))?;
    String::from_utf8(svg).map_err(|e| ProfileError::Flamegraph(e.to_string()))
}
