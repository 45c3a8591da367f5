//! The runtime: a driver, its devices renumbered to `0..n` (ascending physical id), and the
//! current device.
//!
//! The current device here is one index per [`Runtime`], shared by every thread that holds it
//! (a Rust program that drives several devices passes contexts explicitly). PyTorch's current
//! device is per thread, as CUDA's: the bridge keeps that one itself (`xirang-bridge`'s
//! `devices::current`) and does not read this one. [`Runtime::set_current_device`] also makes the
//! device current in the driver, which for ACL (`aclrtSetDevice`) is the calling thread's only.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crate::device::{AllocatorStats, Device, DeviceContext, DeviceMap};
use crate::driver::acl::AclDriver;
use crate::driver::{Driver, MemInfo, StreamId};
use crate::error::{Error, Result};

/// A driver plus its devices. Cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

struct Inner {
    driver: Arc<dyn Driver>,
    map: DeviceMap,
    devices: Vec<Arc<DeviceContext>>,
    current: AtomicUsize,
}

impl Drop for Inner {
    /// Finished kernels hold tensors whose blocks hold their device context, which holds the
    /// driver that lists the finished kernels: wait for the streams (the driver drops the
    /// finished kernels then), so the contexts can go and give their cached blocks back.
    fn drop(&mut self) {
        for d in &self.devices {
            let _ = d.synchronize();
        }
    }
}

impl Runtime {
    /// Initialize `driver` and discover its devices.
    pub fn new(driver: Arc<dyn Driver>) -> Result<Runtime> {
        driver.init()?;
        let map = DeviceMap::new(driver.physical_device_ids()?)?;
        let devices = map
            .physical_ids()
            .iter()
            .enumerate()
            .map(|(i, &p)| Arc::new(DeviceContext::new(driver.clone(), i, p)))
            .collect();
        Ok(Runtime { inner: Arc::new(Inner { driver, map, devices, current: AtomicUsize::new(0) }) })
    }

    /// A process-wide runtime over the linked simulator (configured from
    /// the environment unless `xirang_acl_sim::configure` was called).
    pub fn simulator() -> Result<Runtime> {
        static RT: OnceLock<std::result::Result<Runtime, Error>> = OnceLock::new();
        RT.get_or_init(|| Runtime::new(Arc::new(AclDriver::simulator()))).clone()
    }

    pub fn driver(&self) -> &Arc<dyn Driver> {
        &self.inner.driver
    }
    pub fn device_map(&self) -> &DeviceMap {
        &self.inner.map
    }
    pub fn device_count(&self) -> usize {
        self.inner.devices.len()
    }
    /// Per-device context of logical device `index`.
    pub fn device(&self, index: usize) -> Result<&Arc<DeviceContext>> {
        self.inner.devices.get(index).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "invalid device index {index}: {} device(s) available",
                self.inner.devices.len()
            ))
        })
    }
    /// Context for a `Device` (errors for `Cpu`).
    pub fn context(&self, device: Device) -> Result<&Arc<DeviceContext>> {
        match device {
            Device::Npu(i) => self.device(i),
            Device::Cpu => Err(Error::InvalidArgument("cpu has no device context".into())),
        }
    }
    /// This runtime's current device (shared by all threads; see the module docs).
    pub fn current_device(&self) -> usize {
        self.inner.current.load(Ordering::Relaxed)
    }
    /// Sets this runtime's current device for every thread, and makes it current in the driver on
    /// the calling thread (`aclrtSetDevice` is per thread).
    pub fn set_current_device(&self, index: usize) -> Result<()> {
        let ctx = self.device(index)?;
        self.inner.driver.set_device(ctx.physical_id())?;
        self.inner.current.store(index, Ordering::Relaxed);
        Ok(())
    }
    /// Current stream of the current device.
    pub fn current_stream(&self) -> Result<StreamId> {
        Ok(self.device(self.current_device())?.current_stream())
    }
    pub fn memory_stats(&self, index: usize) -> Result<AllocatorStats> {
        Ok(self.device(index)?.stats())
    }
    pub fn mem_info(&self, index: usize) -> Result<MemInfo> {
        let ctx = self.device(index)?;
        self.inner.driver.mem_info(ctx.physical_id())
    }
    pub fn empty_cache(&self, index: usize) -> Result<()> {
        self.device(index)?.empty_cache()
    }
    pub fn synchronize(&self, index: usize) -> Result<()> {
        self.device(index)?.synchronize()
    }
}
