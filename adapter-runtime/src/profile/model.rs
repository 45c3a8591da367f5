//! The profile file: one record per operator call, and per-operator
//! aggregates.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;

use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use super::{ProfileError, Result};
use std::borrow::Cow;

/// The `format` field of a profile file.
pub const FORMAT: &str = "xirang-profile";
/// The format version this build writes and reads.
pub const VERSION: u32 = 1;
/// The largest profile (or baseline) file the reader takes: 1 GiB, a few
/// million calls.
pub const MAX_PROFILE_BYTES: u64 = 1 << 30;
/// The deepest nesting a profile may record (`depth` of a call; 0: called
/// by the program). Traversals of the call tree stop at this depth.
pub const MAX_DEPTH: u32 = 256;

/// The `format` field of a JSON document (`None`: not an object, or no such
/// field), read without building a tree of the rest of the document.
pub fn format_field(text: &[u8]) -> std::result::Result<Option<serde_json::Value>, String> {
    struct Probe(Option<serde_json::Value>);
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Probe;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a JSON document")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> std::result::Result<Probe, A::Error> {
            let mut format = None;
            while let Some(k) = m.next_key::<String>()? {
                if k == "format" {
                    format = Some(m.next_value::<serde_json::Value>()?);
                } else {
                    m.next_value::<IgnoredAny>()?;
                }
            }
            Ok(Probe(format))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> std::result::Result<Probe, A::Error> {
            while s.next_element::<IgnoredAny>()?.is_some() {}
            Ok(Probe(None))
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> std::result::Result<Probe, E> {
            Ok(Probe(None))
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> std::result::Result<Probe, E> {
            Ok(Probe(None))
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> std::result::Result<Probe, E> {
            Ok(Probe(None))
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> std::result::Result<Probe, E> {
            Ok(Probe(None))
        }
        fn visit_str<E: de::Error>(self, _: &str) -> std::result::Result<Probe, E> {
            Ok(Probe(None))
        }
        fn visit_unit<E: de::Error>(self) -> std::result::Result<Probe, E> {
            Ok(Probe(None))
        }
    }
    impl<'de> Deserialize<'de> for Probe {
        fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Probe, D::Error> {
            d.deserialize_any(V)
        }
    }
    serde_json::from_slice::<Probe>(text).map(|p| p.0).map_err(|e| e.to_string())
}

/// One operator call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Call {
    /// Unique in the profile, in order of entry.
    pub id: u64,
    /// The enclosing call (a recipe or wrapper calling this operator).
    pub parent: Option<u64>,
    /// Nesting depth (0: called by the program).
    pub depth: u32,
    /// Profiler thread number (1, 2, ... in order of first use).
    pub tid: u32,
    /// Qualified operator name (`add.Tensor`).
    pub op: String,
    /// `native`, `recipe` or `fallback`.
    pub tier: String,
    /// Start, in nanoseconds since the session started.
    pub start_ns: u64,
    /// Host (wall) time of the call, nested calls included.
    pub host_ns: u64,
    /// Host time less the nested calls' host time.
    pub self_ns: u64,
    /// Device time between events recorded before the call's first kernel
    /// launch and at its end on the same stream; `None`: no kernel launched.
    pub device_ns: Option<u64>,
    /// Bytes served by the caching allocator (block sizes), nested calls included.
    pub alloc_bytes: u64,
    pub h2d_bytes: u64,
    pub d2h_bytes: u64,
    pub launches: u64,
    /// Copies made by `Tensor::contiguous` for non-contiguous inputs.
    pub contiguous_copies: u64,
    pub contiguous_bytes: u64,
}

impl Call {
    /// The operator without its overload (`add.Tensor` -> `add`).
    pub fn base(&self) -> &str {
        base_name(&self.op)
    }
}

/// `add.Tensor` -> `add`, `aten::add_` -> `add_`.
pub fn base_name(op: &str) -> &str {
    let op = op.strip_prefix("aten::").unwrap_or(op);
    op.split_once('.').map_or(op, |(b, _)| b)
}

/// A profile: the calls sorted by thread and start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub format: String,
    pub version: u32,
    /// Problems met while reading device timings (sorted); the calls
    /// concerned have no `device_ns`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    pub calls: Vec<Call>,
}

/// Aggregate of one operator.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct OpStats {
    pub op: String,
    pub calls: u64,
    pub native: u64,
    pub recipe: u64,
    pub fallback: u64,
    pub host_ns: u64,
    pub self_ns: u64,
    /// Sum over the calls that launched kernels.
    pub device_ns: u64,
    pub alloc_bytes: u64,
    pub h2d_bytes: u64,
    pub d2h_bytes: u64,
    pub launches: u64,
    pub contiguous_copies: u64,
    pub contiguous_bytes: u64,
    /// Host time of the calls served by the fallback / recipe tiers.
    pub fallback_ns: u64,
    pub recipe_ns: u64,
    pub native_ns: u64,
}

impl OpStats {
    /// The tier that served most calls (ties: the slower tier).
    pub fn main_tier(&self) -> &'static str {
        if self.fallback >= self.recipe && self.fallback >= self.native && self.fallback > 0 {
            "fallback"
        } else if self.recipe >= self.native && self.recipe > 0 {
            "recipe"
        } else {
            "native"
        }
    }
    /// Mean host time per call in nanoseconds.
    pub fn mean_ns(&self) -> f64 {
        if self.calls == 0 { 0.0 } else { self.host_ns as f64 / self.calls as f64 }
    }
}

impl Profile {
    /// A profile from unordered records: sorted by (thread, start, id),
    /// thread numbers renumbered 1.. in order of first call.
    pub fn from_calls(mut calls: Vec<Call>, warnings: Vec<String>) -> Profile {
        calls.sort_by_key(|c| (c.start_ns, c.id));
        let mut tids: HashMap<u32, u32> = HashMap::new();
        for c in &calls {
            let n = tids.len() as u32 + 1;
            tids.entry(c.tid).or_insert(n);
        }
        for c in &mut calls {
            c.tid = tids[&c.tid];
        }
        calls.sort_by_key(|c| (c.tid, c.start_ns, c.id));
        Profile { format: FORMAT.into(), version: VERSION, warnings, calls }
    }

    /// Reads and checks a profile file: a regular file of at most
    /// [`MAX_PROFILE_BYTES`].
    pub fn read(path: impl AsRef<Path>) -> Result<Profile> {
        let path = path.as_ref();
        let text = crate::io::read_file(path, "a profile", MAX_PROFILE_BYTES)?;
        Profile::parse(&text).map_err(|message| ProfileError::Format {
            path: path.into(),
            what: "xirang profile",
            message,
        })
    }

    /// Parses and checks profile JSON (message without the path on error).
    pub fn parse(text: &[u8]) -> std::result::Result<Profile, String> {
        match format_field(text)?.as_ref().and_then(|f| f.as_str()) {
            Some(FORMAT) => {}
            Some(other) => return Err(format!("format is `{}`, expected `{FORMAT}`", cell(other))),
            None => return Err(format!("no `format` field (expected `{FORMAT}`)")),
        }
        let p: Profile = serde_json::from_slice(text).map_err(|e| e.to_string())?;
        if p.version != VERSION {
            return Err(format!("version {} is not supported (this build reads version {VERSION})", p.version));
        }
        p.check()?;
        Ok(p)
    }

    /// Structural checks: unique ids; tiers are known; a parent is an
    /// earlier record on the same thread that encloses its child in time
    /// (so parent links cannot form a cycle); `depth` is 0 without a parent
    /// and the parent's plus one with one, at most [`MAX_DEPTH`].
    fn check(&self) -> std::result::Result<(), String> {
        let mut index: HashMap<u64, usize> = HashMap::with_capacity(self.calls.len());
        for (i, c) in self.calls.iter().enumerate() {
            let op = cell(&c.op);
            if index.contains_key(&c.id) {
                return Err(format!("call id {} appears twice", c.id));
            }
            if !matches!(c.tier.as_str(), "native" | "recipe" | "fallback") {
                return Err(format!("call {} ({op}): unknown tier `{}`", c.id, cell(&c.tier)));
            }
            if c.self_ns > c.host_ns {
                return Err(format!("call {} ({op}): self_ns exceeds host_ns", c.id));
            }
            let Some(end) = c.start_ns.checked_add(c.host_ns) else {
                return Err(format!("call {} ({op}): start_ns + host_ns overflows", c.id));
            };
            if c.depth > MAX_DEPTH {
                return Err(format!(
                    "call {} ({op}): nesting depth {} is over the limit of {MAX_DEPTH}",
                    c.id, c.depth
                ));
            }
            match c.parent {
                None if c.depth != 0 => {
                    return Err(format!("call {} ({op}) has no parent but depth {} (expected 0)", c.id, c.depth));
                }
                None => {}
                Some(pid) => {
                    let Some(&pi) = index.get(&pid) else {
                        let later = pid == c.id || self.calls[i + 1..].iter().any(|d| d.id == pid);
                        return Err(if later {
                            format!("call {} ({op}): parent {pid} is not an earlier record (parents come first)", c.id)
                        } else {
                            format!("call {} ({op}): parent {pid} does not exist", c.id)
                        });
                    };
                    let p = &self.calls[pi];
                    if p.tid != c.tid || c.start_ns < p.start_ns || end > p.start_ns + p.host_ns {
                        return Err(format!("call {} ({op}) is not inside its parent {pid} ({})", c.id, cell(&p.op)));
                    }
                    if c.depth != p.depth + 1 {
                        return Err(format!(
                            "call {} ({op}): depth {}, but its parent {pid} has depth {}",
                            c.id, c.depth, p.depth
                        ));
                    }
                }
            }
            index.insert(c.id, i);
        }
        Ok(())
    }

    /// Each call's parent as an index into `calls`, when the parent is an
    /// earlier record (always, in a checked profile). Following these links
    /// always ends: each one goes to a smaller index.
    pub fn parent_indices(&self) -> Vec<Option<usize>> {
        let mut index: HashMap<u64, usize> = HashMap::with_capacity(self.calls.len());
        let mut out = Vec::with_capacity(self.calls.len());
        for (i, c) in self.calls.iter().enumerate() {
            out.push(c.parent.and_then(|pid| index.get(&pid).copied()));
            index.entry(c.id).or_insert(i);
        }
        out
    }

    /// Writes the profile as pretty JSON.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let text = self.to_json();
        std::fs::write(path, text).map_err(|source| ProfileError::Io { path: path.into(), source })
    }

    /// The profile as JSON text (one call per line).
    pub fn to_json(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!("{{\n  \"format\": \"{FORMAT}\",\n  \"version\": {VERSION},\n"));
        if !self.warnings.is_empty() {
            s.push_str(&format!(
                "  \"warnings\": {},\n",
                serde_json::to_string(&self.warnings).unwrap_or_else(|_| "[]".into())
            ));
        }
        s.push_str("  \"calls\": [");
        for (i, c) in self.calls.iter().enumerate() {
            s.push_str(if i == 0 { "\n    " } else { ",\n    " });
            s.push_str(&serde_json::to_string(c).unwrap_or_default());
        }
        s.push_str(if self.calls.is_empty() { "]\n}\n" } else { "\n  ]\n}\n" });
        s
    }

    /// Host time of the calls made by the program itself (depth 0).
    pub fn top_level_ns(&self) -> u64 {
        self.calls.iter().filter(|c| c.parent.is_none()).fold(0u64, |a, c| a.saturating_add(c.host_ns))
    }

    /// Per-operator aggregates, sorted by host time (descending), then name.
    /// Recursive calls of an operator inside itself count once for time.
    pub fn by_operator(&self) -> Vec<OpStats> {
        self.aggregate(|c| c.op.clone())
    }

    /// Aggregates keyed by `key` (e.g. the base name), sorted like
    /// [`Profile::by_operator`].
    ///
    /// Ancestors are looked up at most [`MAX_DEPTH`] levels up (a checked
    /// profile is never deeper); sums saturate at `u64::MAX`.
    pub fn aggregate(&self, key: impl Fn(&Call) -> String) -> Vec<OpStats> {
        let keys: Vec<String> = self.calls.iter().map(key).collect();
        let parents = self.parent_indices();
        let mut m: BTreeMap<&str, OpStats> = BTreeMap::new();
        for (i, c) in self.calls.iter().enumerate() {
            let k = keys[i].as_str();
            // an ancestor with the same key already counts this time
            let nested =
                std::iter::successors(parents[i], |&j| parents[j]).take(MAX_DEPTH as usize).any(|j| keys[j] == k);
            let s = m.entry(k).or_insert_with(|| OpStats { op: k.to_string(), ..OpStats::default() });
            let add = |a: &mut u64, b: u64| *a = a.saturating_add(b);
            add(&mut s.calls, 1);
            add(&mut s.self_ns, c.self_ns);
            match c.tier.as_str() {
                "fallback" => add(&mut s.fallback, 1),
                "recipe" => add(&mut s.recipe, 1),
                _ => add(&mut s.native, 1),
            }
            if nested {
                continue;
            }
            add(&mut s.host_ns, c.host_ns);
            match c.tier.as_str() {
                "fallback" => add(&mut s.fallback_ns, c.host_ns),
                "recipe" => add(&mut s.recipe_ns, c.host_ns),
                _ => add(&mut s.native_ns, c.host_ns),
            }
            add(&mut s.device_ns, c.device_ns.unwrap_or(0));
            add(&mut s.alloc_bytes, c.alloc_bytes);
            add(&mut s.h2d_bytes, c.h2d_bytes);
            add(&mut s.d2h_bytes, c.d2h_bytes);
            add(&mut s.launches, c.launches);
            add(&mut s.contiguous_copies, c.contiguous_copies);
            add(&mut s.contiguous_bytes, c.contiguous_bytes);
        }
        let mut v: Vec<OpStats> = m.into_values().collect();
        v.sort_by(|a, b| b.host_ns.cmp(&a.host_ns).then_with(|| a.op.cmp(&b.op)));
        v
    }
}

/// The widest table cell, in characters: a longer cell (an operator name
/// read from a file) is cut to this width, ending in `...`. The longest
/// PyTorch operator name with its overload has 61 characters.
pub const MAX_CELL_CHARS: usize = 80;

/// `s` cut to at most `max` characters (a cut one ends in `...`), with
/// control characters escaped (`\n`, `\u{1b}`) so that it stays on one line
/// and cannot drive a terminal. Escapes are never split.
pub fn cut(s: &str, max: usize) -> Cow<'_, str> {
    let plain = |c: char| !c.is_control();
    if s.chars().take(max.saturating_add(1)).count() <= max && s.chars().all(plain) {
        return Cow::Borrowed(s);
    }
    let keep = max.saturating_sub(3);
    let (mut out, mut n, mut keep_bytes) = (String::new(), 0usize, 0usize);
    for ch in s.chars() {
        if plain(ch) {
            out.push(ch);
            n += 1;
        } else {
            for e in ch.escape_debug() {
                out.push(e);
                n += 1;
            }
        }
        if n <= keep {
            keep_bytes = out.len();
        } else if n > max {
            out.truncate(keep_bytes);
            out.push_str("...");
            return Cow::Owned(out);
        }
    }
    Cow::Owned(out)
}

/// [`cut`] to [`MAX_CELL_CHARS`]: a table cell, or a name in a message.
pub fn cell(s: &str) -> Cow<'_, str> {
    cut(s, MAX_CELL_CHARS)
}
