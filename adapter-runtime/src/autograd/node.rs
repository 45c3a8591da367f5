//! What a recorded node is: the adapter's ops the engine runs formulas with, a generated backward
//! node as the engine sees it, the saved tensor descriptions, and the table of recordable operators.

use std::sync::Arc;

use crate::dtype::DType;
use crate::error::Result;
use crate::generated::autograd::{BackwardHooks, NODES};
use crate::generated::ops::AtenOps;
use crate::tensor::Tensor;

/// What the engine needs from the adapter: the operators and the hand-written backward hooks.
pub trait Ops: AtenOps + BackwardHooks {}
impl<T: AtenOps + BackwardHooks + ?Sized> Ops for T {}

/// A generated backward node (`generated::autograd::<Op>Backward`) as the engine sees it.
pub trait BackwardFn: Send + Sync {
    fn name(&self) -> &'static str;
    /// One gradient per differentiable input (a list input gives one per element). `needs[k]`
    /// says whether slot `k` has somewhere to go (PyTorch's `should_compute_output`): a node
    /// skips the formulas of inputs that need no gradient. A missing entry counts as `true`.
    fn apply(&self, o: &dyn Ops, grads: &[Option<Tensor>], needs: &[bool]) -> Result<Vec<Option<Tensor>>>;
    /// The tensors the node saved (their versions are checked before it runs).
    fn saved_tensors(&self) -> Vec<&Tensor>;
}

/// A saved `x.options()` (`x_options`): the dtype and device a formula creates tensors with.
#[derive(Clone)]
pub struct TensorOptions {
    pub dtype: DType,
    /// The device context (`None`: host).
    pub device: Option<Arc<crate::device::DeviceContext>>,
}

impl TensorOptions {
    pub fn of(t: &Tensor) -> TensorOptions {
        TensorOptions { dtype: t.dtype(), device: t.device_ctx().cloned() }
    }

    /// `t` moved to these options' device.
    pub fn place(&self, t: Tensor) -> Result<Tensor> {
        match &self.device {
            Some(ctx) => t.to_ctx(ctx),
            None => Ok(t),
        }
    }
}

/// A saved `x_info` (torchgen's `TypeAndSize`: in-place formulas' `zeros_like(x)`).
#[derive(Clone)]
pub struct TensorInfo {
    pub sizes: Vec<i64>,
    pub options: TensorOptions,
}

/// A saved `x_geometry` (torchgen's `TensorGeometry(x)`): the input's sizes, strides and storage
/// offset (in elements), and its dtype and device.
#[derive(Clone)]
pub struct TensorGeometry {
    pub sizes: Vec<i64>,
    pub strides: Vec<i64>,
    pub storage_offset: i64,
    pub options: TensorOptions,
}

/// A recordable operator (one row of `generated::autograd::NODES`).
pub struct NodeInfo {
    pub op: &'static str,
    pub node: &'static str,
    /// Differentiable inputs: (boxed argument index, is a tensor list).
    pub inputs: &'static [(usize, bool)],
    /// Per forward result: whether it gets a `grad_fn` (torchgen's differentiable outputs:
    /// `native_layer_norm`'s mean and rstd do not).
    pub differentiable_outputs: &'static [bool],
    /// Whether the backward saves the input `self` itself (an in-place call of the operator must
    /// then save a copy of `self` from before the write, as torchgen's `original_self`).
    pub saves_self: bool,
}

/// The node of `op`, if the generator made one.
pub fn node_info(op: &str) -> Option<&'static NodeInfo> {
    NODES.binary_search_by(|n| n.op.cmp(op)).ok().map(|i| &NODES[i])
}
