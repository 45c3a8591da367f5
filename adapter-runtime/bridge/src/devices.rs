//! Which runtime devices PyTorch sees, in which order, and the calling thread's current device.
//!
//! The runtime numbers the driver's devices `0..n` in ascending physical id (sparse, out-of-order
//! ids included). On top of that, `XIRANG_VISIBLE_DEVICES` selects and orders the devices PyTorch
//! sees as `xirang:0..m`, with `CUDA_VISIBLE_DEVICES`'s rules: a comma-separated list of runtime
//! indices; the list ends at the first entry that is not an index of an existing device or repeats
//! an earlier one (so `"1,x,0"` is `[1]`, `""` hides every device); unset shows all, in order.

use crate::error::{BridgeError, Result};

/// The environment variable that selects and orders the visible devices.
pub const VISIBLE_DEVICES_ENV: &str = "XIRANG_VISIBLE_DEVICES";

/// PyTorch device index -> runtime device index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Visible {
    runtime: Vec<usize>,
}

impl Visible {
    /// Every runtime device, in order.
    pub fn all(count: usize) -> Visible {
        Visible { runtime: (0..count).collect() }
    }

    /// The devices `spec` (a `XIRANG_VISIBLE_DEVICES` value) selects among `count` runtime devices.
    pub fn parse(spec: &str, count: usize) -> Visible {
        let mut runtime = Vec::new();
        for entry in spec.split(',') {
            let Ok(i) = entry.trim().parse::<usize>() else { break };
            if i >= count || runtime.contains(&i) {
                break;
            }
            runtime.push(i);
        }
        Visible { runtime }
    }

    /// From the environment (unset: all).
    pub fn from_env(count: usize) -> Visible {
        match std::env::var(VISIBLE_DEVICES_ENV) {
            Ok(spec) => Visible::parse(&spec, count),
            Err(_) => Visible::all(count),
        }
    }

    /// How many devices PyTorch sees.
    pub fn count(&self) -> usize {
        self.runtime.len()
    }

    /// The runtime index of PyTorch's device `index`.
    pub fn runtime(&self, index: i64) -> Result<usize> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.runtime.get(i).copied())
            .ok_or(BridgeError::Device { index, count: self.runtime.len() })
    }

    /// PyTorch's index of runtime device `runtime` (`None`: not visible).
    pub fn torch(&self, runtime: usize) -> Option<usize> {
        self.runtime.iter().position(|&r| r == runtime)
    }

    /// Runtime indices in PyTorch's order.
    pub fn runtime_indices(&self) -> &[usize] {
        &self.runtime
    }
}

thread_local! {
    /// The calling thread's current device (PyTorch's index), as CUDA's current device is per thread.
    static CURRENT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The calling thread's current device (PyTorch's index; 0 until set).
pub fn current() -> usize {
    CURRENT.with(|c| c.get())
}

/// Sets the calling thread's current device (the caller checked the index).
pub fn set_current(index: usize) {
    CURRENT.with(|c| c.set(index))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visible_devices_follow_cuda_rules() {
        assert_eq!(Visible::parse("1,0", 3).runtime_indices(), &[1, 0]);
        assert_eq!(Visible::parse(" 2 , 0 ", 3).runtime_indices(), &[2, 0]);
        // cut at the first invalid entry: not a number, out of range, repeated
        assert_eq!(Visible::parse("1,x,0", 3).runtime_indices(), &[1]);
        assert_eq!(Visible::parse("0,5,1", 3).runtime_indices(), &[0]);
        assert_eq!(Visible::parse("1,1,0", 3).runtime_indices(), &[1]);
        assert_eq!(Visible::parse("-1,0", 3).runtime_indices(), &[] as &[usize]);
        assert_eq!(Visible::parse("", 3).count(), 0);
        assert_eq!(Visible::all(2).runtime_indices(), &[0, 1]);
    }

    #[test]
    fn indices_map_both_ways() {
        let v = Visible::parse("2,0", 3);
        assert_eq!(v.runtime(0).unwrap(), 2);
        assert_eq!(v.runtime(1).unwrap(), 0);
        assert!(matches!(v.runtime(2), Err(BridgeError::Device { index: 2, count: 2 })));
        assert!(v.runtime(-1).is_err());
        assert_eq!(v.torch(2), Some(0));
        assert_eq!(v.torch(1), None);
    }
}
