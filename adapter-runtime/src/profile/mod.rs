//! Operator-level profiling of the dispatcher.
//!
//! Every operator call goes through [`crate::dispatch::call`], which reports its frame to the
//! observation points of [`crate::observe`]; the profiler is the observer there (it installs its
//! hooks when a session starts), so the dispatcher and the allocator never import it. While a
//! profiling session is running, each call becomes a [`Call`] record: the
//! operator, the tier that served it, host time, device time (two driver
//! events recorded on the stream of the call's first kernel launch, resolved
//! when the session stops), bytes served by the caching allocator,
//! host<->device bytes copied, kernel launches and implicit contiguous
//! copies. Nested calls (a recipe calling other operators) keep their parent,
//! so the records form one call tree per thread.
//!
//! With no session running the dispatcher pays one relaxed atomic load and a
//! branch per call ([`enabled`]); the allocator, copy and launch hooks pay the
//! same.
//!
//! Starting a session:
//! * `XIRANG_PROFILE=<file>` and [`from_env`], which returns a [`Guard`] that
//!   writes the profile (JSON, see [`model::Profile`]) when dropped
//!   (`examples/train_mlp.rs` does this);
//! * [`Guard::to_file`], or [`start`] / [`stop`] for the profile in memory.
//!
//! The profile is read back by the `xirang-prof` crate (`adapter-runtime/profile`), its own crate
//! so that its dependencies (inferno, clap, toml) stay out of the runtime and the bridge's shared
//! library: `report` (summary table, Chrome trace, flame graph), `compare` (against a previous
//! profile or a PyTorch baseline) and `advise` (tuning advice from `profile/advice.toml`).

pub mod model;

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use crate::device::DeviceContext;
use crate::driver::{EventId, StreamId};
pub use crate::observe::CopyDir;
use crate::observe::Tier;

pub use model::{Call, Profile};

/// Errors of the profiler and of the tools that read profiles.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("a profiling session is already running")]
    AlreadyRunning,
    #[error("no profiling session is running")]
    NotRunning,
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A profile, baseline or rules file that is not a regular file or is
    /// over its size limit ([`model::MAX_PROFILE_BYTES`], [`advise::MAX_RULES_BYTES`]).
    #[error(transparent)]
    Read(#[from] crate::io::ReadError),
    #[error("{path}: not a valid {what}: {message}")]
    Format { path: PathBuf, what: &'static str, message: String },
    #[error("advice rules {path}: {message}")]
    Rules { path: PathBuf, message: String },
    #[error("device timing: {0}")]
    Device(#[from] crate::error::Error),
    #[error("flame graph: {0}")]
    Flamegraph(String),
}

/// Result alias of the profiler.
pub type Result<T, E = ProfileError> = std::result::Result<T, E>;

/// Session number; frames opened in another session are not recorded.
static GENERATION: AtomicU64 = AtomicU64::new(0);
static NEXT_TID: AtomicU32 = AtomicU32::new(1);

/// Whether a session is running: the only cost of profiling when it is off.
#[inline(always)]
pub fn enabled() -> bool {
    crate::observe::active()
}

struct DeviceSpan {
    ctx: Arc<DeviceContext>,
    stream: StreamId,
    start: EventId,
}

struct Open {
    generation: u64,
    op: &'static str,
    id: u64,
    parent: Option<u64>,
    depth: u32,
    start: Instant,
    child_ns: u64,
    alloc_bytes: u64,
    h2d_bytes: u64,
    d2h_bytes: u64,
    launches: u64,
    contiguous_copies: u64,
    contiguous_bytes: u64,
    device: Option<DeviceSpan>,
}

/// A call whose device time is resolved when the session stops.
struct PendingDevice {
    index: usize,
    ctx: Arc<DeviceContext>,
    start: EventId,
    end: EventId,
}

struct Session {
    generation: u64,
    origin: Instant,
    next_id: u64,
    calls: Vec<Call>,
    pending: Vec<PendingDevice>,
    events: Vec<(Arc<DeviceContext>, EventId)>,
    device_errors: Vec<String>,
}

static SESSION: Mutex<Option<Session>> = Mutex::new(None);

fn session() -> MutexGuard<'static, Option<Session>> {
    SESSION.lock().unwrap_or_else(|p| p.into_inner())
}

thread_local! {
    static STACK: RefCell<Vec<Open>> = const { RefCell::new(Vec::new()) };
    static TID: Cell<u32> = const { Cell::new(0) };
}

fn tid() -> u32 {
    TID.with(|t| {
        if t.get() == 0 {
            t.set(NEXT_TID.fetch_add(1, Ordering::Relaxed));
        }
        t.get()
    })
}

/// Starts a session. Errors when one is already running.
pub fn start() -> Result<()> {
    let mut g = session();
    if g.is_some() {
        return Err(ProfileError::AlreadyRunning);
    }
    let generation = GENERATION.fetch_add(1, Ordering::Relaxed) + 1;
    *g = Some(Session {
        generation,
        origin: Instant::now(),
        next_id: 0,
        calls: Vec::new(),
        pending: Vec::new(),
        events: Vec::new(),
        device_errors: Vec::new(),
    });
    crate::observe::install(crate::observe::Hooks {
        enter,
        exit,
        alloc: on_alloc,
        copy: on_copy,
        contiguous_copy: on_contiguous_copy,
    });
    crate::observe::set_active(true);
    Ok(())
}

/// Stops the session and returns its profile (device times resolved:
/// waits for the events recorded on the device streams).
pub fn stop() -> Result<Profile> {
    let s = {
        let mut g = session();
        crate::observe::set_active(false);
        g.take().ok_or(ProfileError::NotRunning)?
    };
    let Session { mut calls, pending, events, mut device_errors, .. } = s;
    for p in pending {
        let d = p.ctx.driver();
        let r = d
            .synchronize_event(p.ctx.physical_id(), p.end)
            .and_then(|()| d.event_elapsed_ms(p.ctx.physical_id(), p.start, p.end));
        match r {
            Ok(ms) => {
                if let Some(c) = calls.get_mut(p.index) {
                    c.device_ns = Some((f64::from(ms) * 1e6).round().max(0.0) as u64);
                }
            }
            Err(e) => device_errors.push(e.to_string()),
        }
    }
    for (ctx, ev) in events {
        let _ = ctx.driver().destroy_event(ctx.physical_id(), ev);
    }
    device_errors.sort();
    device_errors.dedup();
    Ok(Profile::from_calls(calls, device_errors))
}

/// Opens a frame for `op` (called by the dispatcher when [`enabled`]).
/// Returns whether a frame was pushed.
pub fn enter(op: &'static str) -> bool {
    let (generation, id) = {
        let mut g = session();
        let Some(s) = g.as_mut() else { return false };
        let id = s.next_id;
        s.next_id += 1;
        (s.generation, id)
    };
    STACK.with(|st| {
        let mut st = st.borrow_mut();
        let (parent, depth) = match st.last() {
            Some(p) if p.generation == generation => (Some(p.id), p.depth + 1),
            _ => (None, 0),
        };
        st.push(Open {
            generation,
            op,
            id,
            parent,
            depth,
            start: Instant::now(),
            child_ns: 0,
            alloc_bytes: 0,
            h2d_bytes: 0,
            d2h_bytes: 0,
            launches: 0,
            contiguous_copies: 0,
            contiguous_bytes: 0,
            device: None,
        });
    });
    true
}

/// Closes the frame opened by [`enter`] with the tier that served the call.
pub fn exit(tier: Tier) {
    let end = Instant::now();
    let Some(f) = STACK.with(|st| st.borrow_mut().pop()) else { return };
    let host_ns = end.duration_since(f.start).as_nanos() as u64;
    // Counters are inclusive: fold this frame into its parent.
    STACK.with(|st| {
        if let Some(p) = st.borrow_mut().last_mut()
            && p.generation == f.generation
        {
            p.child_ns += host_ns;
            p.alloc_bytes += f.alloc_bytes;
            p.h2d_bytes += f.h2d_bytes;
            p.d2h_bytes += f.d2h_bytes;
            p.launches += f.launches;
            p.contiguous_copies += f.contiguous_copies;
            p.contiguous_bytes += f.contiguous_bytes;
        }
    });
    // The end event goes on the stream before the session lock is taken.
    let mut end_event = None;
    let mut device_error = None;
    if let Some(d) = &f.device {
        let drv = d.ctx.driver();
        match drv.create_event(d.ctx.physical_id()) {
            Ok(ev) => match drv.record_event(d.ctx.physical_id(), ev, d.stream) {
                Ok(()) => end_event = Some(ev),
                Err(e) => {
                    let _ = drv.destroy_event(d.ctx.physical_id(), ev);
                    device_error = Some(e.to_string());
                }
            },
            Err(e) => device_error = Some(e.to_string()),
        }
    }
    let mut g = session();
    let Some(s) = g.as_mut() else {
        drop(g);
        if let (Some(d), Some(ev)) = (&f.device, end_event) {
            let _ = d.ctx.driver().destroy_event(d.ctx.physical_id(), ev);
        }
        return;
    };
    if s.generation != f.generation {
        return;
    }
    let start_ns = f.start.saturating_duration_since(s.origin).as_nanos() as u64;
    let index = s.calls.len();
    s.calls.push(Call {
        id: f.id,
        parent: f.parent,
        depth: f.depth,
        tid: tid(),
        op: f.op.to_string(),
        tier: tier.as_str().to_string(),
        start_ns,
        host_ns,
        self_ns: host_ns.saturating_sub(f.child_ns),
        device_ns: None,
        alloc_bytes: f.alloc_bytes,
        h2d_bytes: f.h2d_bytes,
        d2h_bytes: f.d2h_bytes,
        launches: f.launches,
        contiguous_copies: f.contiguous_copies,
        contiguous_bytes: f.contiguous_bytes,
    });
    if let Some(e) = device_error {
        s.device_errors.push(e);
    }
    if let (Some(d), Some(end)) = (f.device, end_event) {
        s.events.push((d.ctx.clone(), end));
        s.pending.push(PendingDevice { index, ctx: d.ctx, start: d.start, end });
    }
}

fn with_top(f: impl FnOnce(&mut Open)) {
    STACK.with(|st| {
        if let Some(top) = st.borrow_mut().last_mut() {
            f(top)
        }
    })
}

/// The caching allocator served `bytes` (block size).
#[inline]
pub fn on_alloc(bytes: usize) {
    if enabled() {
        with_top(|t| t.alloc_bytes += bytes as u64);
    }
}

/// `bytes` were copied between host and device.
#[inline]
pub fn on_copy(dir: CopyDir, bytes: usize) {
    if enabled() {
        with_top(|t| match dir {
            CopyDir::HostToDevice => t.h2d_bytes += bytes as u64,
            CopyDir::DeviceToHost => t.d2h_bytes += bytes as u64,
        });
    }
}

/// `Tensor::contiguous` had to copy `bytes` (a non-contiguous input).
#[inline]
pub fn on_contiguous_copy(bytes: usize) {
    if enabled() {
        with_top(|t| {
            t.contiguous_copies += 1;
            t.contiguous_bytes += bytes as u64;
        });
    }
}

/// A kernel is about to be launched on `stream` of `ctx`: counts it and,
/// for the open frames that have no device span yet, records their start
/// event on that stream.
#[inline]
pub fn on_launch(ctx: &Arc<DeviceContext>, stream: StreamId) {
    if enabled() {
        launch_slow(ctx, stream);
    }
}

fn launch_slow(ctx: &Arc<DeviceContext>, stream: StreamId) {
    let generation = GENERATION.load(Ordering::Relaxed);
    let needs = STACK.with(|st| {
        let mut st = st.borrow_mut();
        if let Some(top) = st.last_mut() {
            top.launches += 1;
        }
        st.iter().any(|f| f.generation == generation && f.device.is_none())
    });
    if !needs {
        return;
    }
    let drv = ctx.driver();
    let ev = match drv.create_event(ctx.physical_id()) {
        Ok(ev) => ev,
        Err(e) => return note_device_error(e.to_string()),
    };
    if let Err(e) = drv.record_event(ctx.physical_id(), ev, stream) {
        let _ = drv.destroy_event(ctx.physical_id(), ev);
        return note_device_error(e.to_string());
    }
    STACK.with(|st| {
        for f in st.borrow_mut().iter_mut().filter(|f| f.generation == generation && f.device.is_none()) {
            f.device = Some(DeviceSpan { ctx: ctx.clone(), stream, start: ev });
        }
    });
    if let Some(s) = session().as_mut() {
        s.events.push((ctx.clone(), ev));
    } else {
        let _ = drv.destroy_event(ctx.physical_id(), ev);
    }
}

fn note_device_error(e: String) {
    if let Some(s) = session().as_mut() {
        s.device_errors.push(e);
    }
}

/// A running session that writes its profile to a file when dropped (or
/// when [`Guard::finish`] is called, which reports errors).
pub struct Guard {
    path: PathBuf,
    done: bool,
}

impl Guard {
    /// Starts a session whose profile goes to `path`.
    pub fn to_file(path: impl AsRef<Path>) -> Result<Guard> {
        start()?;
        Ok(Guard { path: path.as_ref().to_path_buf(), done: false })
    }

    /// Where the profile will be written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops the session, writes the file and returns the profile.
    pub fn finish(mut self) -> Result<Profile> {
        self.done = true;
        let p = stop()?;
        p.write(&self.path)?;
        Ok(p)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        match stop().and_then(|p| p.write(&self.path)) {
            Ok(()) => {}
            Err(e) => eprintln!("xirang: profile not written: {e}"),
        }
    }
}

/// A session writing to `$XIRANG_PROFILE` when that variable is set and not
/// empty.
pub fn from_env() -> Result<Option<Guard>> {
    match std::env::var_os("XIRANG_PROFILE") {
        Some(p) if !p.is_empty() => Guard::to_file(PathBuf::from(p)).map(Some),
        _ => Ok(None),
    }
}
