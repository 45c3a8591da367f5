//! The adapter's side of a PyTorch comparison: its coverage in both versions.
//!
//! The drift engine (`diff`) knows changes, kernels and backend yaml; whether an operator is
//! covered (native, recipe, host fallback) is the coverage report's (`coverage`, above the
//! generator). This module joins the two for a comparison: for each version it builds the
//! coverage of the operators `xirang.toml` selects, with this adapter's kernels, recipes and host
//! implementations, and hands the drift engine an [`AdapterStates`] (which operators are
//! reachable before and after). The CLI `diff`, the bot and `diffs` call it; without a
//! `xirang.toml` there is nothing to join.

use std::collections::BTreeMap;
use std::path::Path;

use crate::coverage::{self, Tier};
use crate::diff::{AdapterStates, OpState};
use crate::error::Result;
use crate::generate::Inputs;
use crate::generate::config::LoadedConfig;
use crate::snapshot::{PytorchSnapshot, Store};
use xirang_index::adapter_index::{AdapterIndex, TRAIT_NAME};

/// The coverage states of one version of PyTorch with this adapter.
pub fn states_of(cfg: &LoadedConfig, store: &Store, snap: &PytorchSnapshot) -> Result<BTreeMap<String, OpState>> {
    let inputs = Inputs::for_snapshot(cfg.clone(), store, snap.clone())?;
    let c = coverage::build(&inputs, None)?;
    let mut s = states(&c);
    for f in &snap.registry.functions {
        if let Some(st) = s.get_mut(&f.func.name.to_string()) {
            st.foreign = foreign(f);
        }
    }
    Ok(s)
}

/// Whether PyTorch implements `f` only for other devices: no CPU kernel (of any layout) and no
/// composite kernel, only CUDA, MPS, XPU, ... kernels.
pub fn foreign(f: &crate::registry::NativeFunction) -> bool {
    f.device_only()
}

/// The drift engine's view of a coverage report.
pub fn states(c: &coverage::Coverage) -> BTreeMap<String, OpState> {
    c.ops
        .iter()
        .map(|o| {
            let how = match o.tier {
                Tier::Native => format!("native at {}", o.at.as_deref().unwrap_or("?")),
                Tier::Recipe => format!("recipe {}", o.recipe.as_deref().unwrap_or("?")),
                Tier::Fallback => format!("host fallback at {}", o.at.as_deref().unwrap_or("?")),
                Tier::None => {
                    format!("none: {}", o.reason.as_deref().unwrap_or("no kernel, recipe or host implementation"))
                }
            };
            (o.op.clone(), OpState { reachable: o.tier != Tier::None, how, core: o.core, foreign: false })
        })
        .collect()
}

/// The file holding most of the adapter's kernels (functions marked `xirang-kernel:`, or
/// hand-written `impl AtenOps for ...` methods): where a kernel is added. Test files do not count.
pub fn kernel_file(kernels: &AdapterIndex) -> Option<String> {
    let prefix = format!("impl {TRAIT_NAME} for ");
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    let is_kernel = |k: &&xirang_index::adapter_index::Kernel| {
        (k.item.starts_with(&prefix) || k.item.starts_with("fn "))
            && !k.file.split('/').any(|part| part == "tests" || part == "benches" || part == "examples")
    };
    for k in kernels.kernels.iter().filter(is_kernel) {
        *count.entry(k.file.as_str()).or_default() += 1;
    }
    count.into_iter().max_by_key(|(f, n)| (*n, std::cmp::Reverse(*f))).map(|(f, _)| f.to_string())
}

/// The adapter of the repository at `root`: its `xirang.toml`, when there is one.
pub fn config_at(root: &Path) -> Result<Option<LoadedConfig>> {
    let p = root.join("xirang.toml");
    if !p.is_file() {
        return Ok(None);
    }
    Ok(LoadedConfig::load(&p).map(Some)?)
}

/// Both versions' states for a comparison, or `None` without a configuration.
pub fn adapter_states(
    cfg: Option<&LoadedConfig>,
    store: &Store,
    old: &PytorchSnapshot,
    new: &PytorchSnapshot,
    kernels: &AdapterIndex,
) -> Result<Option<AdapterStates>> {
    let Some(cfg) = cfg else { return Ok(None) };
    let (o, n) = std::thread::scope(|s| {
        let h = s.spawn(|| states_of(cfg, store, old));
        let n = states_of(cfg, store, new);
        (h.join(), n)
    });
    let o = o.map_err(|_| crate::Error::Internal("the coverage thread panicked".into()))??;
    Ok(Some(AdapterStates { old: o, new: n?, kernel_file: kernel_file(kernels) }))
}
