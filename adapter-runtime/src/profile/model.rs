//! The profile file: one record per operator call, and per-operator
//! aggregates.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{ProfileError, Result};

/// The `format` field of a profile file.
pub const FORMAT: &str = "xirang-profile";
/// The format version this build writes and reads.
pub const VERSION: u32 = 1;

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

    /// Reads and checks a profile file.
    pub fn read(path: impl AsRef<Path>) -> Result<Profile> {
        let path = path.as_ref();
        let text = std::fs::read(path).map_err(|source| ProfileError::Io { path: path.into(), source })?;
        Profile::parse(&text).map_err(|message| ProfileError::Format {
            path: path.into(),
            what: "xirang profile",
            message,
        })
    }

    /// Parses and checks profile JSON (message without the path on error).
    pub fn parse(text: &[u8]) -> std::result::Result<Profile, String> {
        let v: serde_json::Value = serde_json::from_slice(text).map_err(|e| e.to_string())?;
        match v.get("format").and_then(|f| f.as_str()) {
            Some(FORMAT) => {}
            Some(other) => return Err(format!("format is `{other}`, expected `{FORMAT}`")),
            None => return Err(format!("no `format` field (expected `{FORMAT}`)")),
        }
        let p: Profile = serde_json::from_value(v).map_err(|e| e.to_string())?;
        if p.version != VERSION {
            return Err(format!("version {} is not supported (this build reads version {VERSION})", p.version));
        }
        p.check()?;
        Ok(p)
    }

    /// Structural checks: unique ids, parents exist on the same thread and
    /// enclose their children, tiers are known.
    fn check(&self) -> std::result::Result<(), String> {
        let mut by_id: HashMap<u64, &Call> = HashMap::with_capacity(self.calls.len());
        for c in &self.calls {
            if by_id.insert(c.id, c).is_some() {
                return Err(format!("call id {} appears twice", c.id));
            }
            if !matches!(c.tier.as_str(), "native" | "recipe" | "fallback") {
                return Err(format!("call {} ({}): unknown tier `{}`", c.id, c.op, c.tier));
            }
            if c.self_ns > c.host_ns {
                return Err(format!("call {} ({}): self_ns exceeds host_ns", c.id, c.op));
            }
            if c.start_ns.checked_add(c.host_ns).is_none() {
                return Err(format!("call {} ({}): start_ns + host_ns overflows", c.id, c.op));
            }
        }
        for c in &self.calls {
            if let Some(pid) = c.parent {
                let Some(p) = by_id.get(&pid) else {
                    return Err(format!("call {} ({}): parent {pid} does not exist", c.id, c.op));
                };
                if p.tid != c.tid || c.start_ns < p.start_ns || c.start_ns + c.host_ns > p.start_ns + p.host_ns {
                    return Err(format!("call {} ({}) is not inside its parent {pid} ({})", c.id, c.op, p.op));
                }
            }
        }
        Ok(())
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
        self.calls.iter().filter(|c| c.parent.is_none()).map(|c| c.host_ns).sum()
    }

    /// Per-operator aggregates, sorted by host time (descending), then name.
    /// Recursive calls of an operator inside itself count once for time.
    pub fn by_operator(&self) -> Vec<OpStats> {
        self.aggregate(|c| c.op.clone())
    }

    /// Aggregates keyed by `key` (e.g. the base name), sorted like
    /// [`Profile::by_operator`].
    pub fn aggregate(&self, key: impl Fn(&Call) -> String) -> Vec<OpStats> {
        let by_id: HashMap<u64, &Call> = self.calls.iter().map(|c| (c.id, c)).collect();
        let mut m: BTreeMap<String, OpStats> = BTreeMap::new();
        for c in &self.calls {
            let k = key(c);
            // an ancestor with the same key already counts this time
            let mut nested = false;
            let mut p = c.parent;
            while let Some(id) = p {
                let Some(pc) = by_id.get(&id) else { break };
                if key(pc) == k {
                    nested = true;
                    break;
                }
                p = pc.parent;
            }
            let s = m.entry(k.clone()).or_insert_with(|| OpStats { op: k, ..OpStats::default() });
            s.calls += 1;
            s.self_ns += c.self_ns;
            match c.tier.as_str() {
                "fallback" => s.fallback += 1,
                "recipe" => s.recipe += 1,
                _ => s.native += 1,
            }
            if nested {
                continue;
            }
            s.host_ns += c.host_ns;
            match c.tier.as_str() {
                "fallback" => s.fallback_ns += c.host_ns,
                "recipe" => s.recipe_ns += c.host_ns,
                _ => s.native_ns += c.host_ns,
            }
            s.device_ns += c.device_ns.unwrap_or(0);
            s.alloc_bytes += c.alloc_bytes;
            s.h2d_bytes += c.h2d_bytes;
            s.d2h_bytes += c.d2h_bytes;
            s.launches += c.launches;
            s.contiguous_copies += c.contiguous_copies;
            s.contiguous_bytes += c.contiguous_bytes;
        }
        let mut v: Vec<OpStats> = m.into_values().collect();
        v.sort_by(|a, b| b.host_ns.cmp(&a.host_ns).then_with(|| a.op.cmp(&b.op)));
        v
    }
}
