//! Gradient mode: whether the autograd front-ends record (`no_grad`, `enable_grad`), per thread.

use std::cell::Cell;

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// Whether calls are recorded on this thread.
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(Cell::get)
}

/// Restores the previous gradient mode when dropped.
#[must_use = "recording is off only while the guard lives"]
pub struct GradModeGuard(bool);

impl Drop for GradModeGuard {
    fn drop(&mut self) {
        GRAD_ENABLED.with(|g| g.set(self.0));
    }
}

/// Turns recording off until the guard is dropped (`torch.no_grad()`).
pub fn no_grad() -> GradModeGuard {
    GradModeGuard(GRAD_ENABLED.with(|g| g.replace(false)))
}

/// Turns recording on until the guard is dropped (`torch.enable_grad()`).
pub fn enable_grad() -> GradModeGuard {
    GradModeGuard(GRAD_ENABLED.with(|g| g.replace(true)))
}
