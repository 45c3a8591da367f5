//! Three-tier dispatch: native kernel, else composition recipe, else CPU
//! fallback.
//!
//! The generated front-end of every operator (`generated::ops`) wraps the
//! call in [`call`], which pushes a frame whose tier starts as
//! [`Tier::Native`]. The trait's default bodies (used when the adapter has
//! no native kernel) re-mark the frame as [`Tier::Recipe`] or go through
//! [`fallback`], which marks it [`Tier::Fallback`]. When the call returns,
//! the frame's final tier is counted for the operator. Recipes call other
//! operators through their front-ends, so each of those is counted on its
//! own.
//!
//! Policy (read once from the environment, changeable through [`set_policy`]):
//! * `XIRANG_FALLBACK=error|warn|silent` (default `warn`): a fallback is an
//!   error, a one-time warning per operator on stderr, or silent.
//! * `XIRANG_FALLBACK_ALERT=N` (default 1000): when an operator's fallback
//!   count reaches N an alert is printed once (also in `silent` mode) and
//!   recorded in [`alerts`].
//! * `XIRANG_FORCE_FALLBACK=op1,op2` (qualified names such as `add.Tensor`,
//!   or base names such as `add` for every overload): these operators skip
//!   native kernels and recipes and always take the CPU fallback, as DIPU's
//!   force-fallback list does; useful to bisect a wrong kernel.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Mutex, OnceLock, RwLock};

use crate::error::{Error, Result};

pub use crate::observe::Tier;

/// What a fallback does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FallbackMode {
    Error,
    Warn,
    Silent,
}

/// The dispatch policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub mode: FallbackMode,
    /// Fallback count at which an operator raises an alert.
    pub alert_threshold: u64,
    /// Operators (qualified or base names) forced onto the fallback tier.
    pub force_fallback: BTreeSet<String>,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy { mode: FallbackMode::Warn, alert_threshold: 1000, force_fallback: BTreeSet::new() }
    }
}

impl Policy {
    /// The policy the environment asks for; malformed values are errors.
    pub fn from_env() -> Result<Policy> {
        let mut p = Policy::default();
        if let Ok(v) = std::env::var("XIRANG_FALLBACK") {
            p.mode = match v.trim() {
                "error" => FallbackMode::Error,
                "warn" | "" => FallbackMode::Warn,
                "silent" => FallbackMode::Silent,
                other => {
                    return Err(Error::InvalidArgument(format!(
                        "XIRANG_FALLBACK must be error, warn or silent, not `{other}`"
                    )));
                }
            };
        }
        if let Ok(v) = std::env::var("XIRANG_FALLBACK_ALERT") {
            p.alert_threshold = v
                .trim()
                .parse()
                .map_err(|_| Error::InvalidArgument(format!("XIRANG_FALLBACK_ALERT must be a count, not `{v}`")))?;
        }
        if let Ok(v) = std::env::var("XIRANG_FORCE_FALLBACK") {
            p.force_fallback = v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
        }
        Ok(p)
    }

    /// Whether the force-fallback list names `op` (`add.Tensor` is named by `add.Tensor` or `add`).
    pub fn forces(&self, op: &str) -> bool {
        !self.force_fallback.is_empty()
            && (self.force_fallback.contains(op)
                || op.split_once('.').is_some_and(|(base, _)| self.force_fallback.contains(base)))
    }
}

fn policy_lock() -> &'static RwLock<Policy> {
    static POLICY: OnceLock<RwLock<Policy>> = OnceLock::new();
    POLICY.get_or_init(|| {
        let p = Policy::from_env().unwrap_or_else(|e| {
            eprintln!("xirang: {e}; using the default dispatch policy");
            Policy::default()
        });
        FORCES_ANY.store(!p.force_fallback.is_empty(), std::sync::atomic::Ordering::Relaxed);
        RwLock::new(p)
    })
}

/// The current policy.
pub fn policy() -> Policy {
    policy_lock().read().map(|p| p.clone()).unwrap_or_default()
}

/// Replaces the policy (tests, embedding applications).
pub fn set_policy(p: Policy) {
    if let Ok(mut g) = policy_lock().write() {
        FORCES_ANY.store(!p.force_fallback.is_empty(), std::sync::atomic::Ordering::Relaxed);
        *g = p;
    }
}

/// Whether the policy's force-fallback list is not empty, kept beside it by [`set_policy`] and the
/// policy's first read (from the environment), so that every call of every operator does not take
/// the policy's lock to find the usual empty list.
static FORCES_ANY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether `op` is on the force-fallback list.
pub fn forced_fallback(op: &str) -> bool {
    let lock = policy_lock();
    HOST_ONLY.get()
        || (FORCES_ANY.load(std::sync::atomic::Ordering::Relaxed) && lock.read().map(|p| p.forces(op)).unwrap_or(false))
}

thread_local! {
    static HOST_ONLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with every operator forced onto its CPU fallback on this thread, as if all were on
/// the force-fallback list: the runtime's boxed entry ([`crate::boxed`]) runs the host reference
/// this way, to measure the native kernels against it.
pub fn with_host_only<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            HOST_ONLY.set(self.0);
        }
    }
    let _restore = Restore(HOST_ONLY.replace(true));
    f()
}

/// Who runs the CPU fallback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostFallback {
    /// The runtime's host reference implementations (the standalone runtime).
    Runtime,
    /// An embedding application with CPU kernels of its own (PyTorch, through `xirang-bridge`):
    /// a call that would reach the host tier returns [`Error::Declined`] instead, uncounted, and
    /// the application runs the whole operator on its CPU kernels after [`admit_fallback`].
    Decline,
}

static DECLINE_HOST: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Sets who runs the CPU fallback (process-wide).
pub fn set_host_fallback(h: HostFallback) {
    DECLINE_HOST.store(h == HostFallback::Decline, std::sync::atomic::Ordering::Relaxed);
}

/// Who runs the CPU fallback.
pub fn host_fallback() -> HostFallback {
    if DECLINE_HOST.load(std::sync::atomic::Ordering::Relaxed) { HostFallback::Decline } else { HostFallback::Runtime }
}

/// Per-operator call counts by tier.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TierCounts {
    pub native: u64,
    pub recipe: u64,
    pub fallback: u64,
}

impl TierCounts {
    pub fn total(&self) -> u64 {
        self.native + self.recipe + self.fallback
    }
}

/// One operator's counters: atomics, so that counting a call takes no lock.
#[derive(Default)]
struct Counts([AtomicU64; 3]);

impl Counts {
    fn get(&self) -> TierCounts {
        let [n, r, f] = &self.0;
        TierCounts { native: n.load(Relaxed), recipe: r.load(Relaxed), fallback: f.load(Relaxed) }
    }
}

#[derive(Default)]
struct Stats {
    /// One entry per distinct operator name, created on its first call and kept for the process
    /// (PyTorch has about 3,000 overloads): threads cache the references ([`counts_of`]).
    counts: HashMap<&'static str, &'static Counts>,
    warned: BTreeSet<&'static str>,
    alerts: BTreeSet<&'static str>,
}

static STATS: Mutex<Option<Stats>> = Mutex::new(None);

fn with_stats<R>(f: impl FnOnce(&mut Stats) -> R) -> R {
    let mut g = match STATS.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    f(g.get_or_insert_with(Stats::default))
}

/// Entries of a thread's cache of counters: the operator name's address and length, its counters.
type CacheEntry = Option<(usize, usize, &'static Counts)>;
const CACHE_SLOTS: usize = 64;

/// What a thread keeps of the dispatcher's state (one thread-local: one lookup per access).
struct ThreadState {
    frames: RefCell<Vec<Tier>>,
    /// Why the last native kernel on this thread declined its arguments (for the fallback
    /// warning: "runs on the CPU fallback ... because ...").
    declined: RefCell<Option<String>>,
    /// The tier that served the last top-level call on this thread.
    last: Cell<Tier>,
    /// Counters by the address of the operator name (direct-mapped): a call counts itself without
    /// taking the stats lock or hashing its name.
    cache: RefCell<[CacheEntry; CACHE_SLOTS]>,
}

thread_local! {
    static STATE: ThreadState = const {
        ThreadState {
            frames: RefCell::new(Vec::new()),
            declined: RefCell::new(None),
            last: Cell::new(Tier::Native),
            cache: RefCell::new([None; CACHE_SLOTS]),
        }
    };
}

/// The counters of `op`, from the thread's cache or, on a miss, the shared table.
fn counts_of(st: &ThreadState, op: &'static str) -> &'static Counts {
    let (addr, len) = (op.as_ptr() as usize, op.len());
    let slot = (addr >> 3 ^ addr >> 11) % CACHE_SLOTS;
    let mut cache = st.cache.borrow_mut();
    if let Some((a, l, c)) = cache[slot]
        && a == addr
        && l == len
    {
        return c;
    }
    let c = with_stats(|s| *s.counts.entry(op).or_insert_with(|| Box::leak(Box::default())));
    cache[slot] = Some((addr, len, c));
    c
}

fn count(c: &Counts, tier: Tier) {
    c.0[tier as usize].fetch_add(1, Relaxed);
}

/// Counts one call of `op` on `tier`.
pub fn record(op: &'static str, tier: Tier) {
    STATE.with(|st| count(counts_of(st, op), tier))
}

/// A snapshot of the per-operator tier counters, sorted by operator (operators not called since
/// the last reset are left out).
pub fn counters() -> BTreeMap<&'static str, TierCounts> {
    with_stats(|s| s.counts.iter().map(|(k, v)| (*k, v.get())).filter(|(_, c)| c.total() > 0).collect())
}

/// Operators that crossed the fallback alert threshold.
pub fn alerts() -> Vec<&'static str> {
    with_stats(|s| s.alerts.iter().copied().collect())
}

/// Clears counters, warnings and alerts.
pub fn reset_counters() {
    with_stats(|s| {
        s.counts.values().flat_map(|c| &c.0).for_each(|a| a.store(0, Relaxed));
        s.warned.clear();
        s.alerts.clear();
    })
}

/// The tier that served the last top-level operator call on this thread (for boxed callers that
/// report it, such as the precision suite).
pub fn last_tier() -> Tier {
    STATE.with(|st| st.last.get())
}

/// Records why a native kernel declined its arguments (its `Unsupported` message); the next
/// fallback warning on this thread names it.
fn note_declined(why: String) {
    STATE.with(|st| *st.declined.borrow_mut() = Some(why));
}

fn take_declined() -> Option<String> {
    STATE.with(|st| st.declined.borrow_mut().take())
}

/// Runs one operator call through the dispatcher: the frame starts as
/// [`Tier::Native`]; default bodies re-mark it; the final tier is counted.
///
/// The frame is reported to the observation points ([`crate::observe`]): while a profiling
/// session listens the call is recorded there; otherwise that costs one relaxed atomic load.
pub fn call<R>(op: &'static str, f: impl FnOnce() -> Result<R>) -> Result<R> {
    STATE.with(|st| {
        let mut fr = st.frames.borrow_mut();
        if fr.is_empty() {
            // a new top-level call: an earlier decline's reason is stale
            st.declined.borrow_mut().take();
        }
        fr.push(Tier::Native)
    });
    let observed = crate::observe::enter(op);
    let out = f();
    // a declined call ran on no tier: the embedding application's CPU fallback counts it
    let counted = !matches!(out, Err(Error::Declined(_)));
    let tier = STATE.with(|st| {
        let t = {
            let mut fr = st.frames.borrow_mut();
            let t = fr.pop().unwrap_or(Tier::Native);
            if fr.is_empty() {
                st.last.set(t);
            }
            t
        };
        if counted {
            count(counts_of(st, op), t);
        }
        t
    });
    if observed {
        crate::observe::exit(tier);
    }
    out
}

/// Whether an `Error::Unsupported` from the adapter's `AtenOps` method is a native kernel declining
/// the call: the frame is still on the native tier (a default body that ran a recipe or the
/// fallback has re-marked it, and its error stands). Records the reason for the fallback warning
/// and marks the fallback tier; the generated front-end then runs the CPU fallback.
pub fn declined(why: &str) -> bool {
    let native = STATE.with(|st| st.frames.borrow().last().is_some_and(|t| *t == Tier::Native));
    if native {
        note_declined(why.to_string());
        mark(Tier::Fallback);
    }
    native
}

/// The tier composition of a generated front-end: `r`, the adapter's `AtenOps` method's result,
/// unless a native kernel declined the call ([`declined`]), then the CPU fallback.
#[inline]
pub fn native_or<R>(r: Result<R>, fallback: impl FnOnce() -> Result<R>) -> Result<R> {
    match r {
        Err(Error::Unsupported(ref why)) if declined(why) => fallback(),
        r => r,
    }
}

/// A native kernel's precondition, checked by the generated `AtenOps` methods
/// (`generated/native.rs`): every tensor argument is on one device (zero-dim host tensors
/// included: the fallback mixes them in). Otherwise the kernel declines the call.
pub fn kernel_devices(
    op: &str,
    tensors: &[Option<&crate::tensor::Tensor>],
    lists: &[&[crate::tensor::Tensor]],
) -> Result<()> {
    let mut first: Option<&std::sync::Arc<crate::device::DeviceContext>> = None;
    for t in tensors.iter().flatten().copied().chain(lists.iter().flat_map(|l| l.iter())) {
        let Some(c) = t.device_ctx() else {
            return Err(Error::Unsupported(format!("{op}: its tensor arguments are not all on one device")));
        };
        match first {
            None => first = Some(c),
            Some(f) if std::sync::Arc::ptr_eq(f, c) => {}
            Some(_) => {
                return Err(Error::Unsupported(format!("{op}: its tensor arguments are not all on one device")));
            }
        }
    }
    if first.is_none() {
        return Err(Error::Unsupported(format!("{op}: no device tensor among its arguments")));
    }
    Ok(())
}

/// Marks the innermost frame (called by generated default bodies).
pub fn mark(tier: Tier) {
    STATE.with(|st| {
        if let Some(top) = st.frames.borrow_mut().last_mut() {
            *top = tier;
        }
    })
}

/// A recipe's `requires = ["same_dtype(...)"]` (generated `*_requires` functions): the tensors
/// share one dtype. Otherwise the recipe declines and the CPU fallback raises PyTorch's error.
pub fn require_same_dtype(op: &str, ts: &[&crate::tensor::Tensor]) -> Result<()> {
    match ts.split_first() {
        Some((first, rest)) if rest.iter().any(|t| t.dtype() != first.dtype()) => {
            Err(Error::Unsupported(format!("{op}: its recipe requires one dtype across its tensor arguments")))
        }
        _ => Ok(()),
    }
}

/// A recipe's `requires = ["same_shape(...)"]`: the tensors have one shape (no broadcasting).
pub fn require_same_shape(op: &str, ts: &[&crate::tensor::Tensor]) -> Result<()> {
    match ts.split_first() {
        Some((first, rest)) if rest.iter().any(|t| t.sizes() != first.sizes()) => {
            Err(Error::Unsupported(format!("{op}: its recipe requires one shape across its tensor arguments")))
        }
        _ => Ok(()),
    }
}

/// A recipe's `requires = ["dim(t, n)"]`: `t` has `n` dimensions.
pub fn require_dim(op: &str, t: &crate::tensor::Tensor, n: usize) -> Result<()> {
    if t.dim() == n {
        Ok(())
    } else {
        Err(Error::Unsupported(format!("{op}: its recipe requires {n}-dimensional input, got {}", t.dim())))
    }
}

/// Checks the fallback policy for `op` (error mode, warn once, alert). The caller counts the
/// fallback afterwards ([`record`] with [`Tier::Fallback`]); an embedding application that runs
/// the CPU fallback itself calls both.
pub fn admit_fallback(op: &'static str) -> Result<()> {
    let p = policy_lock().read().map(|p| (p.mode, p.alert_threshold)).unwrap_or((FallbackMode::Warn, 1000));
    let (mode, threshold) = p;
    if mode == FallbackMode::Error {
        return Err(Error::Unsupported(format!(
            "{op} has no native kernel or recipe on this device and XIRANG_FALLBACK=error forbids the CPU fallback"
        )));
    }
    let (first, alert) = with_stats(|s| {
        let n = s.counts.get(op).map_or(0, |c| c.get().fallback) + 1;
        let first = s.warned.insert(op);
        let alert = n >= threshold && s.alerts.insert(op);
        (first, alert)
    });
    let why = take_declined();
    if first && mode == FallbackMode::Warn {
        let because = why.map(|w| format!("; the device kernel declined: {w}")).unwrap_or_default();
        eprintln!("xirang: warning: {op} runs on the CPU fallback (copy to host, compute, copy back){because}");
    }
    if alert {
        eprintln!("xirang: alert: {op} reached {threshold} CPU fallbacks; it is hot enough to deserve a native kernel");
    }
    Ok(())
}

/// Enters the CPU-fallback tier for `op` before its host reference implementation runs (the
/// generated `fallback::` functions call it): marks the tier, honours the decline mode of an
/// embedding application that runs the fallback itself, and checks the policy ([`admit_fallback`]).
///
/// A generated default body reaches the fallback for every operator without a native kernel or
/// recipe; the generated front-end reaches it when a native kernel declines its arguments
/// ([`declined`]) or the policy forces the operator onto the fallback.
pub fn admit_host(op: &'static str) -> Result<()> {
    mark(Tier::Fallback);
    if host_fallback() == HostFallback::Decline {
        return Err(Error::Declined(op.to_string()));
    }
    admit_fallback(op)
}

/// [`admit_host`] for an operator PyTorch has kernels for only on accelerators (no CPU kernel): an
/// embedding application has no CPU kernel to run it on, so the runtime's host implementation runs
/// even in [`HostFallback::Decline`] mode, counted and under the policy like any fallback.
pub fn admit_accelerator_only_host(op: &'static str) -> Result<()> {
    mark(Tier::Fallback);
    admit_fallback(op)
}

/// The error of the CPU-fallback tier for an operator without a host reference implementation
/// (marks the tier as [`admit_host`] does; the policy is not consulted: nothing runs).
pub fn no_host(op: &'static str) -> Error {
    mark(Tier::Fallback);
    if host_fallback() == HostFallback::Decline {
        return Error::Declined(op.to_string());
    }
    Error::Unsupported(format!("{op}: no native kernel, no composition recipe and no host reference implementation"))
}

/// After a fallback: makes `out` hold `result` unless the host implementation already wrote it.
pub fn write_back(result: &crate::tensor::Tensor, out: &mut crate::tensor::Tensor) -> Result<()> {
    if result.shares_storage(out) && result.sizes() == out.sizes() && result.strides() == out.strides() {
        return Ok(());
    }
    crate::reference::write_out(result, out)
}

/// Front-end validation: every device tensor among the arguments is on one device (zero-dim
/// host tensors mix with device tensors, as in PyTorch).
pub fn check_devices(op: &str, tensors: &[Option<&crate::tensor::Tensor>]) -> Result<()> {
    let mut first: Option<crate::device::Device> = None;
    for t in tensors.iter().flatten() {
        let d = t.device();
        if d == crate::device::Device::Cpu && t.dim() == 0 {
            continue;
        }
        match first {
            None => first = Some(d),
            Some(f) if f != d => {
                return Err(Error::DeviceMismatch(format!(
                    "{op}: expected all tensors to be on the same device, but found at least two devices, {f} and {d}"
                )));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Front-end validation of a list whose length the schema fixes (`int[2] stride`): `n`
/// values, or one value that stands for all of them.
pub fn check_len(op: &str, arg: &str, len: usize, n: usize) -> Result<()> {
    if len == n || len == 1 {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!("{op}: `{arg}` must have {n} elements (or 1), got {len}")))
    }
}

/// Zero-dim promotion for kernels that declared they cannot take scalars: a zero-dim tensor
/// becomes shape `[1]` (the front-end reshapes the result back).
pub fn at_least_1d(t: &crate::tensor::Tensor) -> Result<crate::tensor::Tensor> {
    if t.dim() == 0 { t.reshape(&[1]) } else { Ok(t.clone()) }
}
