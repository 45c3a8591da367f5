//! `generated/bridge_registrations.cpp`: which operators the PyTorch bridge (device `xirang`,
//! PrivateUse1) hands to the Rust runtime's boxed kernel. Written when xirang.toml has a
//! `[bridge]` table.
//!
//! From the adapter's coverage (the same model `xirang-scan coverage` reports): an operator is
//! registered when a native kernel serves it, or a recipe serves it and PyTorch has no composite
//! kernel for it. Not registered: CompositeImplicitAutograd operators (they decompose inside
//! PyTorch, and a backend kernel would hide their autograd formula), CompositeExplicitAutograd
//! operators served only by recipe or host (PyTorch's composite kernel serves every backend),
//! view operators (PyTorch's metadata kernels keep aliasing exact), the shim's hand-written kernels
//! (`[bridge] shim`), and custom operators (not in the aten library). The rest runs PyTorch's CPU
//! kernel through the shim's fallback.

use askama::Template;

use crate::Inputs;
use crate::coverage::{self, Tier, Upstream};
use crate::error::{Error, Result};

/// The file's name in the generated folder.
pub const FILE: &str = "bridge_registrations.cpp";

/// One registered operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    pub op: String,
    /// `native kernel` or `recipe`, and what PyTorch provides.
    pub why: String,
    /// The shim's kernel: `boxed_kernel` (the Rust runtime) or `fallback_kernel` (PyTorch's CPU
    /// kernel of this very operator, counted by the runtime's policy).
    pub kernel: &'static str,
}

/// The registrations and what was left to PyTorch, by reason.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub registered: Vec<Registered>,
    pub native: usize,
    pub recipe: usize,
    pub decomposes: usize,
    pub optional: usize,
    pub views: usize,
    pub shim: usize,
    pub custom: usize,
    /// Functional operators with a `structured_delegate` that the adapter serves on the host: their
    /// CPU kernel is registered as such (see [`plan`]).
    pub host: usize,
    /// Accelerator-only operators (no CPU kernel upstream) that the runtime's host tier serves.
    pub device_host: usize,
}

#[derive(Template)]
#[template(path = "bridge_registrations.cpp.jinja", escape = "none")]
struct BridgeTemplate<'a> {
    pytorch: &'a str,
    registered: &'a [Registered],
    native: usize,
    recipe: usize,
    decomposes: usize,
    optional: usize,
    views: usize,
    shim: usize,
    custom: usize,
    host: usize,
    device_host: usize,
}

/// Decides the registrations from the adapter's coverage. `custom_file`: the custom-operator file's
/// text when `new-op` is about to write it (else it is read from disk).
pub fn plan(inputs: &Inputs, shim: &[String], custom_file: Option<&crate::error::SourceFile>) -> Result<Plan> {
    let cov = coverage::build(inputs, None)?;
    let custom = match custom_file {
        Some(f) => super::custom::parse_file(f)?.ops.len(),
        None => cov.custom.len(),
    };
    let functions = &inputs.snapshot.registry.functions;
    let by_name: std::collections::HashMap<String, &crate::registry::NativeFunction> =
        functions.iter().map(|f| (f.func.name.to_string(), f)).collect();
    let mut p = Plan { custom, ..Plan::default() };
    for o in &cov.ops {
        // the host tier serves an operator only where PyTorch's CPU has no kernel for it (else the
        // shim's fallback runs PyTorch's own)
        if !(matches!(o.tier, Tier::Native | Tier::Recipe) || (o.tier == Tier::Fallback && o.device_only)) {
            continue;
        }
        let base = o.op.split('.').next().unwrap_or(&o.op);
        if shim.iter().any(|s| s == &o.op || s == base) {
            p.shim += 1;
            continue;
        }
        if o.upstream == Upstream::Decomposes {
            p.decomposes += 1;
            continue;
        }
        if o.tier == Tier::Recipe && o.upstream == Upstream::Optional {
            p.optional += 1;
            continue;
        }
        let Some(f) = by_name.get(&o.op) else {
            return Err(Error::Internal(format!("coverage names {}, which the snapshot does not have", o.op)));
        };
        if f.is_view_op() {
            p.views += 1;
            continue;
        }
        let (tier, n) = match o.tier {
            Tier::Native => ("native kernel", &mut p.native),
            Tier::Fallback => ("host tier", &mut p.device_host),
            _ => ("recipe", &mut p.recipe),
        };
        *n += 1;
        let upstream = match o.upstream {
            Upstream::Required if o.device_only => "PyTorch has only accelerator kernels",
            Upstream::Required => "PyTorch has only device kernels",
            _ => "overrides PyTorch's CompositeExplicitAutograd kernel",
        };
        p.registered.push(Registered { op: o.op.clone(), why: format!("{tier}; {upstream}"), kernel: "boxed_kernel" });
    }
    // A functional operator with a structured delegate whose out= form runs on the host (the adapter
    // registers neither): without a kernel of its own on the device, PyTorch's
    // CompositeExplicitAutogradNonFunctional kernel would allocate the result on the device, shape it
    // as the structured meta function says, and run the out= form on the host over a copy of it; the
    // CPU kernel then resizes that output where the meta function's final shape differs from its
    // first (losses with a reduction: PyTorch's "An output with one or more elements was resized"
    // warning), and the uninitialised output is copied to the host for nothing. Its own CPU kernel
    // through the shim's counted fallback does neither.
    let served: std::collections::HashSet<String> = p.registered.iter().map(|r| r.op.clone()).collect();
    let mut host = Vec::new();
    for f in functions {
        let name = f.func.name.to_string();
        let Some(delegate) = &f.structured_delegate else { continue };
        if f.func.kind() != crate::schema::SchemaKind::Functional
            || Upstream::of(f) != Upstream::Required
            || f.is_view_op()
            || served.contains(&name)
            || served.contains(&delegate.to_string())
            || shim.iter().any(|s| *s == name || s == name.split('.').next().unwrap_or(&name))
        {
            continue;
        }
        host.push(Registered {
            op: name,
            why: "host; PyTorch's CPU kernel of the functional form, not its out= form on a pre-shaped output".into(),
            kernel: "fallback_kernel",
        });
    }
    p.host = host.len();
    p.registered.extend(host);
    p.registered.sort_by(|a, b| a.op.cmp(&b.op));
    Ok(p)
}

/// Renders the file.
pub fn render(inputs: &Inputs, shim: &[String], custom_file: Option<&crate::error::SourceFile>) -> Result<String> {
    let p = plan(inputs, shim, custom_file)?;
    BridgeTemplate {
        pytorch: &inputs.snapshot.meta.version,
        registered: &p.registered,
        native: p.native,
        recipe: p.recipe,
        decomposes: p.decomposes,
        optional: p.optional,
        views: p.views,
        shim: p.shim,
        custom: p.custom,
        host: p.host,
        device_host: p.device_host,
    }
    .render()
    .map(|mut s| {
        if !s.ends_with('\n') {
            s.push('\n');
        }
        s
    })
    .map_err(|e| Error::Internal(format!("rendering {FILE}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LoadedConfig;
    use crate::snapshot::Store;

    /// The repository's adapter, configuration and targeted snapshot.
    fn repo_plan(shim: &[&str]) -> (Plan, Inputs) {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let cfg = LoadedConfig::load(&root.join("xirang.toml")).expect("xirang.toml");
        let store = Store::discover(Some(&root.join("schemas"))).expect("store");
        let inputs = Inputs::load(cfg, &store).expect("inputs");
        let shim: Vec<String> = shim.iter().map(|s| s.to_string()).collect();
        (plan(&inputs, &shim, None).expect("plan"), inputs)
    }

    #[test]
    fn registrations_follow_what_pytorch_provides() {
        let (p, inputs) = repo_plan(&["copy_", "empty"]);
        let names: Vec<&str> = p.registered.iter().map(|r| r.op.as_str()).collect();
        assert!(names.windows(2).all(|w| w[0] < w[1]), "sorted and unique");
        assert_eq!(p.registered.len(), p.native + p.recipe + p.host + p.device_host);
        // a native kernel of an operator PyTorch has only device kernels for
        assert!(names.contains(&"add.Tensor") && names.contains(&"mm"));
        let by_name = |n: &str| inputs.snapshot.registry.get(n).unwrap_or_else(|| panic!("{n}"));
        for r in &p.registered {
            let f = by_name(&r.op);
            // never a view, never an operator that decomposes inside PyTorch
            assert!(!f.is_view_op(), "{} is a view", r.op);
            assert_ne!(Upstream::of(f), Upstream::Decomposes, "{}", r.op);
            // a recipe only where PyTorch has no composite kernel
            if r.why.starts_with("recipe") {
                assert_eq!(Upstream::of(f), Upstream::Required, "{}", r.op);
            }
            // PyTorch's CPU kernel by name: only functional operators with a structured delegate
            // that the adapter serves neither directly nor through the delegate
            if r.kernel == "fallback_kernel" {
                let d = f.structured_delegate.as_ref().unwrap_or_else(|| panic!("{} has no delegate", r.op));
                assert_eq!(f.func.kind(), crate::schema::SchemaKind::Functional, "{}", r.op);
                assert!(!names.contains(&d.to_string().as_str()), "{}: its delegate {d} is served", r.op);
            } else {
                assert_eq!(r.kernel, "boxed_kernel");
            }
        }
        assert!(names.contains(&"smooth_l1_loss") && !names.contains(&"smooth_l1_loss.out"));
        assert!(p.host > 0);
        // the shim's list wins, by qualified or base name
        assert!(!names.iter().any(|n| *n == "copy_" || n.starts_with("empty.")));
        let (without, _) = repo_plan(&[]);
        assert!(without.registered.len() >= p.registered.len());
    }
}
