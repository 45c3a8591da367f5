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
#[cfg(test)]
use crate::generate::Inputs;
use crate::generate::config::LoadedConfig;
use crate::snapshot::PytorchSnapshot;
use xirang_index::adapter_index::{AdapterIndex, TRAIT_NAME};

/// The coverage states of one version of PyTorch with this adapter: the tiers of the coverage
/// report ([`coverage::tiers`]; the driver headers and autograd columns play no part). `index`:
/// the adapter of the repository, already indexed by the caller (`None`: indexed here).
pub fn states_of(
    cfg: &LoadedConfig,
    snap: &PytorchSnapshot,
    index: Option<&AdapterIndex>,
) -> Result<BTreeMap<String, OpState>> {
    // the repository's index (of `adapter-runtime/`) covers the runtime the configuration names
    // when that lies inside it
    let model = crate::generate::tier_model(cfg, snap)?;
    states_of_model(cfg, snap, index, &model)
}

/// [`states_of`] with the snapshot's tier model already built ([`crate::generate::tier_model`]).
pub fn states_of_model(
    cfg: &LoadedConfig,
    snap: &PytorchSnapshot,
    index: Option<&AdapterIndex>,
    model: &crate::generate::TierModel,
) -> Result<BTreeMap<String, OpState>> {
    let runtime = cfg.config.adapter.runtime.trim_start_matches("./").trim_end_matches('/');
    let dir = crate::diff::pipeline::ADAPTER_DIR;
    let index = index.filter(|_| runtime == dir || runtime.starts_with(&format!("{dir}/")));
    let c = coverage::tiers_of_model(cfg, snap, index, model)?;
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

/// Both versions' states for a comparison, or `None` without a configuration. `kernels`: the
/// index of the repository's adapter (`adapter-runtime/`), reused for both versions; `None` when
/// the comparison indexed another tree (`diff --adapter DIR`), and the adapter is indexed here.
pub fn adapter_states(
    cfg: Option<&LoadedConfig>,
    old: &PytorchSnapshot,
    new: &PytorchSnapshot,
    kernels: &AdapterIndex,
    repository_index: bool,
) -> Result<Option<AdapterStates>> {
    let Some(cfg) = cfg else { return Ok(None) };
    let index = repository_index.then_some(kernels);
    let (o, n) = std::thread::scope(|s| {
        let h = s.spawn(|| states_of(cfg, old, index));
        let n = states_of(cfg, new, index);
        (h.join(), n)
    });
    let o = o.map_err(|_| crate::Error::Internal("the coverage thread panicked".into()))??;
    Ok(Some(AdapterStates { old: o, new: n?, kernel_file: kernel_file(kernels) }))
}

/// [`adapter_states`] with both snapshots' tier models already built ([`crate::generate::tier_model`],
/// `models`: old, new), as `diff` builds them while it indexes the adapter.
pub fn adapter_states_of_models(
    cfg: &LoadedConfig,
    (old, new): (&PytorchSnapshot, &PytorchSnapshot),
    models: (&crate::generate::TierModel, &crate::generate::TierModel),
    kernels: &AdapterIndex,
    repository_index: bool,
) -> Result<AdapterStates> {
    let index = repository_index.then_some(kernels);
    let (o, n) = std::thread::scope(|s| {
        let h = s.spawn(|| states_of_model(cfg, old, index, models.0));
        let n = states_of_model(cfg, new, index, models.1);
        (h.join(), n)
    });
    let o = o.map_err(|_| crate::Error::Internal("the coverage thread panicked".into()))??;
    Ok(AdapterStates { old: o, new: n?, kernel_file: kernel_file(kernels) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Store;

    /// The tiers `diff` joins (the shared index, no schema text, no autograd columns) are those of
    /// the whole coverage report, for the oldest and newest snapshots of the store.
    #[test]
    fn the_tiers_are_the_coverage_reports() {
        let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
        let cfg = config_at(root).unwrap().expect("xirang.toml");
        let store = Store::new(root.join("schemas"));
        let vs = store.versions("pytorch");
        let (old, new) = store.load_pytorch_both(&vs[0], &vs[vs.len() - 1]).unwrap();
        let kernels = crate::diff::pipeline::index_adapter(root, &[&old, &new]).unwrap();
        for snap in [&old, &new] {
            let inputs = Inputs::for_snapshot(cfg.clone(), &store, snap.clone()).unwrap();
            let mut want = states(&coverage::build(&inputs, None).unwrap());
            for f in &snap.registry.functions {
                if let Some(st) = want.get_mut(&f.func.name.to_string()) {
                    st.foreign = foreign(f);
                }
            }
            assert_eq!(states_of(&cfg, snap, Some(&kernels)).unwrap(), want, "{}", snap.meta.version);
            assert_eq!(states_of(&cfg, snap, None).unwrap(), want, "{} (indexed here)", snap.meta.version);
        }
    }
}
