//! The adapter configuration, `xirang.toml` at the repository root.
//!
//! One file says which PyTorch version and vendor header release the adapter targets, which
//! driver library it loads, how the runtime's device operations map onto driver functions
//! (with fallback chains for optional functions), which operators the generated trait covers,
//! and which kernels need contiguous or non-scalar inputs. `xirang-scan generate` reads it;
//! the other tables (`[bot]`) belong to other commands and are ignored here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{Error, Result, SourceFile};

/// The whole file (only the tables the generator reads).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub adapter: AdapterTable,
    pub pytorch: PytorchTable,
    pub vendor: VendorTable,
    /// Device operation -> driver functions (see [`DriverOp`]).
    pub driver: BTreeMap<String, DriverChain>,
    #[serde(default)]
    pub operators: OperatorsTable,
    #[serde(default)]
    pub kernels: KernelsTable,
    /// Owned by `xirang-scan bot`.
    #[serde(default)]
    pub bot: Option<toml::Value>,
    /// The PyTorch bridge (device `xirang` inside PyTorch): when present, `generate` writes
    /// `bridge_registrations.cpp` (see [`crate::bridge`]).
    #[serde(default)]
    pub bridge: Option<BridgeTable>,
}

/// `[bridge]`: which operators the C++ shim of the PyTorch package registers for the device.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BridgeTable {
    /// Operators the shim implements by hand (factory, view and copy kernels): never registered
    /// to the boxed kernel.
    #[serde(default)]
    pub shim: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdapterTable {
    pub name: String,
    /// Folder of the hand-written runtime (kernels are indexed from here).
    #[serde(default = "default_runtime")]
    pub runtime: String,
    /// Folder the generator writes (and only this one).
    #[serde(default = "default_generated")]
    pub generated: String,
    /// The recipe knowledge base.
    #[serde(default = "default_recipes")]
    pub recipes: String,
    /// The adapter's custom operators (torch_npu `custom:` format).
    #[serde(default)]
    pub custom_operators: Option<String>,
}

fn default_runtime() -> String {
    "adapter-runtime".into()
}
fn default_generated() -> String {
    "generated".into()
}
fn default_recipes() -> String {
    "templates/recipes.toml".into()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PytorchTable {
    /// A snapshot in the store (`v2.3` means the newest 2.3.x).
    pub version: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VendorTable {
    /// Header profile and store folder (`ascend`, `cuda`).
    pub name: String,
    /// Header release in the store.
    pub headers: String,
    /// Shared library the bindings load (`libascendcl.so`); `XIRANG_DRIVER_LIB` overrides it at run time.
    pub library: String,
    /// C type of the status code every mapped function returns.
    pub status_type: String,
    /// The success constant of that type.
    pub success: String,
    /// Prefixes of the constants that become the variants of the generated error enum.
    pub error_prefixes: Vec<String>,
    /// The header's names of the copy directions.
    pub memcpy_kind: MemcpyKinds,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemcpyKinds {
    pub host_to_device: String,
    pub device_to_host: String,
    pub device_to_device: String,
}

/// One device operation's driver functions, tried in order; the first the library exports wins.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum DriverChain {
    /// `malloc = ["aclrtMalloc"]`
    Names(Vec<String>),
    /// `stream_create = [{ fn = "aclrtCreateStreamWithConfig", args = { priority = 0, flag = 0 } }, ...]`
    Detailed(Vec<DriverCandidate>),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DriverCandidate {
    #[serde(rename = "fn")]
    pub function: String,
    /// Values for C parameters the device operation does not take (by C parameter name): an
    /// integer, or the name of a header constant / enumerator.
    #[serde(default)]
    pub args: BTreeMap<String, toml::Value>,
}

impl DriverChain {
    pub fn candidates(&self) -> Vec<DriverCandidate> {
        match self {
            DriverChain::Names(v) => {
                v.iter().map(|n| DriverCandidate { function: n.clone(), args: BTreeMap::new() }).collect()
            }
            DriverChain::Detailed(v) => v.clone(),
        }
    }
}

/// Which operators the generated trait covers.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorsTable {
    /// `backend` (every operator without a CompositeImplicitAutograd kernel: those a backend must
    /// provide inside PyTorch, and those with a CompositeExplicitAutograd kernel upstream, which the
    /// standalone runtime needs too),
    /// `core` (the Core ATen set), or `list` (only `include`).
    #[serde(default = "default_select")]
    pub select: String,
    /// Always add the Core ATen set (tag `core`), even its CompositeImplicitAutograd members.
    #[serde(default = "yes")]
    pub core: bool,
    /// Extra operators (qualified names).
    #[serde(default)]
    pub include: Vec<String>,
    /// Operators left out (qualified names, or base names for every overload).
    #[serde(default)]
    pub exclude: Vec<String>,
    /// The custom-operator file (`custom:` and `custom_derivatives:`; default `custom_ops.yaml`,
    /// a missing file means none). `xirang-scan new-op` adds operators to it.
    #[serde(default)]
    pub custom: Option<String>,
}

fn default_select() -> String {
    "backend".into()
}
fn yes() -> bool {
    true
}

impl Default for OperatorsTable {
    fn default() -> Self {
        OperatorsTable { select: default_select(), core: true, include: Vec::new(), exclude: Vec::new(), custom: None }
    }
}

/// What kernels declare about their inputs (the front-end prepares inputs accordingly).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelsTable {
    /// Operators whose native kernel needs contiguous tensor inputs.
    #[serde(default)]
    pub contiguous: Vec<String>,
    /// Operators whose native kernel cannot take zero-dim tensors (they get shape `[1]`).
    #[serde(default)]
    pub no_zero_dim: Vec<String>,
    /// The Rust type whose `AtenOps` impl the generator writes from the functions marked
    /// `xirang-kernel:` (`generated/native.rs`).
    #[serde(default = "default_adapter_type")]
    pub adapter_type: String,
}

fn default_adapter_type() -> String {
    "crate::kernels::NpuOps".into()
}

impl Default for KernelsTable {
    fn default() -> Self {
        KernelsTable { contiguous: Vec::new(), no_zero_dim: Vec::new(), adapter_type: default_adapter_type() }
    }
}

/// The device operations the runtime needs, with the Rust signature the bindings expose.
/// (role list: how each C parameter of a candidate is bound, in order.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverOp {
    pub name: &'static str,
    pub required: bool,
    pub doc: &'static str,
}

/// Every device operation `[driver]` may map. `required` ones must resolve at load time.
pub const DRIVER_OPS: &[DriverOp] = &[
    DriverOp { name: "init", required: true, doc: "initialise the driver (config file path or null)" },
    DriverOp { name: "finalize", required: false, doc: "shut the driver down" },
    DriverOp { name: "device_count", required: true, doc: "number of visible devices" },
    DriverOp { name: "set_device", required: true, doc: "make a device current for this thread" },
    DriverOp { name: "get_device", required: false, doc: "the device current on this thread" },
    DriverOp { name: "reset_device", required: false, doc: "release a device's resources" },
    DriverOp { name: "malloc", required: true, doc: "allocate device memory" },
    DriverOp { name: "free", required: true, doc: "free device memory" },
    DriverOp { name: "memcpy", required: true, doc: "synchronous copy (H2D, D2H, D2D by kind)" },
    DriverOp { name: "memcpy_async", required: false, doc: "copy ordered on a stream" },
    DriverOp { name: "memset", required: true, doc: "fill device memory with a byte" },
    DriverOp { name: "memset_async", required: false, doc: "fill device memory with a byte, ordered on a stream" },
    DriverOp { name: "stream_create", required: true, doc: "create a stream" },
    DriverOp { name: "stream_destroy", required: true, doc: "destroy a stream" },
    DriverOp { name: "stream_synchronize", required: true, doc: "wait for a stream's work" },
    DriverOp { name: "synchronize_device", required: false, doc: "wait for all work of the current device" },
    DriverOp { name: "event_create", required: false, doc: "create an event" },
    DriverOp { name: "event_record", required: false, doc: "record an event on a stream" },
    DriverOp { name: "event_synchronize", required: false, doc: "wait for an event" },
    DriverOp { name: "event_elapsed", required: false, doc: "milliseconds between two recorded events" },
    DriverOp { name: "event_query", required: false, doc: "whether an event's work has completed, without waiting" },
    DriverOp { name: "event_destroy", required: false, doc: "destroy an event" },
    DriverOp { name: "stream_wait_event", required: false, doc: "make a stream wait for an event" },
    DriverOp { name: "memory_info", required: false, doc: "free and total device memory" },
    DriverOp { name: "malloc_host", required: false, doc: "allocate page-locked host memory (pinned)" },
    DriverOp { name: "free_host", required: false, doc: "free page-locked host memory" },
    DriverOp { name: "error_text", required: false, doc: "text of the most recent error" },
];

/// A loaded configuration and where it came from.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    pub config: Config,
    /// The repository root (the folder holding the file).
    pub root: PathBuf,
    pub source: SourceFile,
}

impl LoadedConfig {
    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<LoadedConfig> {
        let text = crate::fsio::read_text(path, 1 << 20)?;
        let source = SourceFile::new(path.display().to_string(), text);
        let config = parse(&source)?;
        let root = path.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
        let root = if root.as_os_str().is_empty() { PathBuf::from(".") } else { root };
        let lc = LoadedConfig { config, root, source };
        lc.check_paths()?;
        Ok(lc)
    }

    /// Every path of the file stays inside the repository (the folder holding the file): the
    /// generator writes `[adapter] generated` and `new-op` writes the custom-operator file, so a
    /// `../x`, `/tmp/x` or `.` there would write outside the tool's folders (or over the repository).
    fn check_paths(&self) -> Result<()> {
        let a = &self.config.adapter;
        let mut paths: Vec<(&[&str], &str, &str)> = vec![
            (&["adapter", "generated"], &a.generated, "[adapter] generated"),
            (&["adapter", "runtime"], &a.runtime, "[adapter] runtime"),
            (&["adapter", "recipes"], &a.recipes, "[adapter] recipes"),
        ];
        if let Some(c) = &self.config.operators.custom {
            paths.push((&["operators", "custom"], c, "[operators] custom"));
        }
        for (keys, rel, what) in paths {
            if let Err(e) = crate::fsio::confine(&self.root, rel, what) {
                return Err(self.error_at(keys, e.to_string()));
            }
        }
        // the generated folder must not hold the hand-written runtime
        let (generated, runtime) = (Path::new(&a.generated), Path::new(&a.runtime));
        if runtime.starts_with(generated) {
            return Err(self.error_at(
                &["adapter", "generated"],
                format!(
                    "[adapter] generated = `{}` contains the hand-written runtime `{}`; the generator owns that folder",
                    a.generated, a.runtime
                ),
            ));
        }
        Ok(())
    }

    /// Finds `xirang.toml` in `dir` or its ancestors.
    pub fn discover(dir: &Path) -> Result<LoadedConfig> {
        let mut cur = Some(dir);
        while let Some(d) = cur {
            let p = d.join("xirang.toml");
            if p.is_file() {
                return LoadedConfig::load(&p);
            }
            cur = d.parent();
        }
        Err(Error::Usage(format!("no xirang.toml in {} or any parent folder (pass --config FILE)", dir.display())))
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// The byte span of a key path in the file (for positioned errors), e.g. `["driver", "malloc"]`.
    pub fn span_of(&self, keys: &[&str]) -> (usize, usize) {
        span_of(self.source.text(), keys)
    }

    /// A positioned error at a key of the file.
    pub fn error_at(&self, keys: &[&str], message: impl Into<String>) -> Error {
        let (start, len) = self.span_of(keys);
        let pos = self.source.pos_of_offset(start);
        Error::Source(Box::new(self.source.error(pos, len, message)))
    }
}

/// Parses the file, with positioned errors.
pub fn parse(source: &SourceFile) -> Result<Config> {
    let config: Config = toml::from_str(source.text()).map_err(|e| {
        let (start, len) = e.span().map_or((0, 0), |r| (r.start, r.end.saturating_sub(r.start)));
        let pos = source.pos_of_offset(start);
        Error::Source(Box::new(source.error(pos, len, format!("invalid xirang.toml: {}", e.message()))))
    })?;
    let lc = LoadedConfig { config: config.clone(), root: PathBuf::from("."), source: source.clone() };
    for name in config.driver.keys() {
        if !DRIVER_OPS.iter().any(|o| o.name == name) {
            let known: Vec<&str> = DRIVER_OPS.iter().map(|o| o.name).collect();
            return Err(lc.error_at(
                &["driver", name],
                format!("unknown device operation `{name}`; known: {}", known.join(", ")),
            ));
        }
    }
    for (name, chain) in &config.driver {
        if chain.candidates().is_empty() {
            return Err(lc.error_at(
                &["driver", name],
                format!("[driver] {name} lists no driver function; name at least one, or remove the line"),
            ));
        }
    }
    for op in DRIVER_OPS.iter().filter(|o| o.required) {
        if !config.driver.contains_key(op.name) {
            return Err(
                lc.error_at(&["driver"], format!("[driver] must map the required device operation `{}`", op.name))
            );
        }
    }
    match config.operators.select.as_str() {
        "backend" | "core" | "list" => {}
        other => {
            return Err(lc.error_at(
                &["operators", "select"],
                format!("operators.select must be backend, core or list, not `{other}`"),
            ));
        }
    }
    Ok(config)
}

/// Best-effort byte span of `a.b` in a TOML text: the `[a]` header line, then a `b =` line in it.
fn span_of(text: &str, keys: &[&str]) -> (usize, usize) {
    let mut offset = 0;
    let mut in_table = keys.len() < 2;
    let mut found: Option<(usize, usize)> = None;
    for line in text.split_inclusive('\n') {
        let t = line.trim();
        if let Some(h) = t.strip_prefix('[').and_then(|s| s.split(']').next()) {
            in_table = keys.first().is_some_and(|k| h.trim() == *k);
            if in_table && keys.len() == 1 {
                return (offset + (line.len() - line.trim_start().len()), t.len());
            }
        } else if in_table
            && let Some(k) = keys.last()
            && t.split('=').next().is_some_and(|lhs| lhs.trim() == *k)
        {
            found = Some((offset + (line.len() - line.trim_start().len()), t.len()));
            break;
        }
        offset += line.len();
    }
    found.unwrap_or((0, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: &str = r#"
[adapter]
name = "t"
[pytorch]
version = "v2.3"
[vendor]
name = "ascend"
headers = "v2.3.1.post6"
library = "libascendcl.so"
status_type = "aclError"
success = "ACL_SUCCESS"
error_prefixes = ["ACL_ERROR_"]
memcpy_kind = { host_to_device = "ACL_MEMCPY_HOST_TO_DEVICE", device_to_host = "ACL_MEMCPY_DEVICE_TO_HOST", device_to_device = "ACL_MEMCPY_DEVICE_TO_DEVICE" }
[driver]
init = ["aclInit"]
device_count = ["aclrtGetDeviceCount"]
set_device = ["aclrtSetDevice"]
malloc = ["aclrtMalloc"]
free = ["aclrtFree"]
memcpy = ["aclrtMemcpy"]
memset = ["aclrtMemset"]
stream_create = [{ fn = "aclrtCreateStreamWithConfig", args = { priority = 0, flag = 0 } }, { fn = "aclrtCreateStream" }]
stream_destroy = ["aclrtDestroyStream"]
stream_synchronize = ["aclrtSynchronizeStream"]
"#;

    #[test]
    fn minimal_config_parses() {
        let c = parse(&SourceFile::new("x.toml", MIN)).unwrap();
        assert_eq!(c.driver["stream_create"].candidates().len(), 2);
        assert_eq!(c.operators.select, "backend");
    }

    #[test]
    fn unknown_device_operation_is_positioned() {
        let text = MIN.replace("free = [\"aclrtFree\"]", "frees = [\"aclrtFree\"]");
        let e = parse(&SourceFile::new("x.toml", text)).unwrap_err();
        let Error::Source(se) = e else { panic!("{e}") };
        assert!(se.to_string().contains("unknown device operation `frees`"), "{se}");
    }

    #[test]
    fn an_empty_chain_is_an_error() {
        let text = MIN.replace("free = [\"aclrtFree\"]", "free = []");
        let e = parse(&SourceFile::new("x.toml", text)).unwrap_err();
        assert!(format!("{e}").contains("[driver] free lists no driver function"), "{e}");
    }

    #[test]
    fn paths_stay_inside_the_repository() {
        let root = std::env::temp_dir().join(format!("xirang-cfg-paths-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        for (bad, why) in [
            ("generated = \"/tmp/x\"", "absolute"),
            ("generated = \"../x\"", "out of the repository"),
            ("generated = \".\"", "repository root"),
            ("generated = \"adapter-runtime/..\"", "out of the repository"),
            ("generated = \"adapter-runtime\"\nruntime = \"adapter-runtime\"", "contains the hand-written runtime"),
        ] {
            let text = MIN.replace("name = \"t\"", &format!("name = \"t\"\n{bad}"));
            std::fs::write(root.join("xirang.toml"), &text).unwrap();
            let e = LoadedConfig::load(&root.join("xirang.toml")).unwrap_err();
            let Error::Source(se) = &e else { panic!("{e}") };
            assert!(se.message.contains(why), "{bad}: {se}");
            assert!(se.line > 1, "{bad}: not positioned: {se}");
        }
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn missing_required_operation_is_an_error() {
        let text = MIN.replace("memset = [\"aclrtMemset\"]\n", "");
        let e = parse(&SourceFile::new("x.toml", text)).unwrap_err();
        assert!(e.to_string().contains("memset") || format!("{e:?}").contains("memset"));
    }
}
