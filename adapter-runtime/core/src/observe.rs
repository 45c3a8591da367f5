//! Observation points of the runtime's lower layers, for an observer above them.
//!
//! The dispatcher (a call's frame and the tier that served it), the caching allocator (blocks it
//! hands out) and tensor transfers (host<->device copies, contiguous copies) report here and
//! name no observer. An observer (the profiler, [`crate::profile`]) installs its [`Hooks`] once
//! and switches them on for a session; while none is active each point costs one relaxed atomic
//! load. So the allocator does not import the profiler, and the profiler, which reads devices and
//! events, sits above the layers it observes.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

/// Which implementation served a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tier {
    Native,
    Recipe,
    Fallback,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Native => "native",
            Tier::Recipe => "recipe",
            Tier::Fallback => "fallback",
        }
    }
}

/// Direction of a host<->device copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyDir {
    HostToDevice,
    DeviceToHost,
}

/// What an observer is told.
#[derive(Debug, Clone, Copy)]
pub struct Hooks {
    /// A dispatcher frame opens for `op`; `true` when the observer wants its [`Hooks::exit`].
    pub enter: fn(&'static str) -> bool,
    /// The innermost frame the observer entered closes, served by the tier.
    pub exit: fn(Tier),
    /// The caching allocator handed out a block of this many bytes.
    pub alloc: fn(usize),
    /// Bytes copied between host and device.
    pub copy: fn(CopyDir, usize),
    /// A non-contiguous tensor was copied to a contiguous one of this many bytes.
    pub contiguous_copy: fn(usize),
}

static HOOKS: OnceLock<Hooks> = OnceLock::new();
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Installs the process's observer (the first one wins; `false` when another is installed).
pub fn install(hooks: Hooks) -> bool {
    HOOKS.set(hooks).is_ok()
}

/// Switches the installed observer on or off.
pub fn set_active(on: bool) {
    ACTIVE.store(on && HOOKS.get().is_some(), Ordering::Relaxed);
}

/// Whether an observer is listening: the only cost of the points when none is.
#[inline(always)]
pub fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

#[inline]
fn hooks() -> Option<&'static Hooks> {
    if active() { HOOKS.get() } else { None }
}

/// A dispatcher frame opens for `op`; `true` when [`exit`] must be called when it closes.
#[inline]
pub fn enter(op: &'static str) -> bool {
    hooks().is_some_and(|h| (h.enter)(op))
}

/// The frame [`enter`] opened closes, served by `tier`.
#[inline]
pub fn exit(tier: Tier) {
    if let Some(h) = HOOKS.get() {
        (h.exit)(tier)
    }
}

/// The caching allocator handed out `bytes` (block size).
#[inline]
pub fn on_alloc(bytes: usize) {
    if let Some(h) = hooks() {
        (h.alloc)(bytes)
    }
}

/// `bytes` were copied between host and device.
#[inline]
pub fn on_copy(dir: CopyDir, bytes: usize) {
    if let Some(h) = hooks() {
        (h.copy)(dir, bytes)
    }
}

/// `Tensor::contiguous` had to copy `bytes` (a non-contiguous input).
#[inline]
pub fn on_contiguous_copy(bytes: usize) {
    if let Some(h) = hooks() {
        (h.contiguous_copy)(bytes)
    }
}
