//! Native device kernels: the "native kernel library" tier. Each kernel
//! runs on the tensor's device stream through [`Driver::launch_kernel`] and
//! touches device memory only through [`KernelMemory`]. Ops without a
//! native kernel use the host reference implementations in [`crate::ops`].
//!
//! [`Driver::launch_kernel`]: crate::driver::Driver::launch_kernel
//! [`KernelMemory`]: crate::driver::KernelMemory

use std::sync::Arc;

use crate::device::DeviceContext;
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

fn device_of(name: &str, ts: &[&Tensor]) -> Result<Arc<DeviceContext>> {
    let first =
        ts[0].device_ctx().ok_or_else(|| Error::Unsupported(format!("{name}: native kernels need device tensors")))?;
    for t in ts {
        match t.device_ctx() {
            Some(c) if Arc::ptr_eq(c, first) => {}
            _ => {
                return Err(Error::DeviceMismatch(format!("{name}: all tensors must be on {}", first.device())));
            }
        }
    }
    Ok(first.clone())
}

/// Whether `add_f32` can run natively on these inputs.
pub fn add_f32_supported(a: &Tensor, b: &Tensor) -> bool {
    a.dtype() == DType::F32
        && b.dtype() == DType::F32
        && a.sizes() == b.sizes()
        && a.is_contiguous()
        && b.is_contiguous()
        && !a.is_cpu()
        && !b.is_cpu()
}

/// `a + alpha * b` for contiguous float32 device tensors of equal shape,
/// computed by a device kernel (asynchronous on the current stream).
pub fn add_f32(a: &Tensor, b: &Tensor, alpha: Scalar) -> Result<Tensor> {
    if !add_f32_supported(a, b) {
        return Err(Error::Unsupported("add_f32: needs contiguous float32 device tensors of equal shape".into()));
    }
    let ctx = device_of("add_f32", &[a, b])?;
    let out = Tensor::empty(a.sizes(), DType::F32).to_ctx(&ctx)?;
    let n = a.numel();
    if n == 0 {
        return Ok(out);
    }
    let (pa, pb, po) = (a.data_ptr()?, b.data_ptr()?, out.data_ptr()?);
    let alpha = alpha.to_f64() as f32;
    // The kernel keeps its inputs alive until it has run.
    let keep = (a.clone(), b.clone(), out.clone());
    ctx.driver.launch_kernel(
        ctx.physical_id(),
        ctx.current_stream(),
        Box::new(move |mem| {
            let _keep = keep;
            let (mut x, mut y) = (vec![0u8; n * 4], vec![0u8; n * 4]);
            mem.read(pa, &mut x)?;
            mem.read(pb, &mut y)?;
            let z: Vec<u8> = x
                .chunks_exact(4)
                .zip(y.chunks_exact(4))
                .flat_map(|(p, q)| {
                    let p = f32::from_le_bytes([p[0], p[1], p[2], p[3]]);
                    let q = f32::from_le_bytes([q[0], q[1], q[2], q[3]]);
                    (p + alpha * q).to_le_bytes()
                })
                .collect();
            mem.write(po, &z)
        }),
    )?;
    Ok(out)
}

/// A boxed native kernel entry: `Ok(None)` when the kernel does not take
/// these arguments (dtype, device), so the caller falls back.
pub type NativeFn = fn(&[crate::ivalue::IValue]) -> Result<Option<Vec<crate::ivalue::IValue>>>;

/// The native kernel entry of `op`, if the device has one.
pub fn native(op: &str) -> Option<NativeFn> {
    let _ = op;
    None
}

/// The `&'static` name of a natively implemented operator.
pub fn intern(op: &str) -> Option<&'static str> {
    let _ = op;
    None
}
