//! The reverse-mode engine: autograd metadata and graph nodes, recording a call, running backward.

use std::collections::{BinaryHeap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::mode::*;
use super::node::*;
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result};
use crate::generated::ops::{AtenOps, aten};
use crate::ivalue::IValue;
use crate::tensor::Tensor;

// ------------------------------------------------------------------------------------------
// graph
// ------------------------------------------------------------------------------------------

/// Autograd metadata of a tensor that requires grad.
pub struct AutogradMeta {
    /// The node that produced the tensor and which of its outputs it is (`None`: a leaf).
    /// An in-place operator rebases it onto its own node (every handle sharing this metadata sees
    /// the new history, as PyTorch's `rebase_history`).
    grad_fn: Mutex<Option<(Arc<Node>, usize)>>,
    /// Accumulated gradient (leaves).
    grad: Mutex<Option<Tensor>>,
    /// Recorded as a view of a differentiable input (its result shares the input's storage).
    is_view: bool,
}

impl AutogradMeta {
    fn leaf() -> AutogradMeta {
        AutogradMeta { grad_fn: Mutex::new(None), grad: Mutex::new(None), is_view: false }
    }
    fn grad_fn(&self) -> Option<(Arc<Node>, usize)> {
        lock(&self.grad_fn).clone()
    }
}

impl std::fmt::Debug for AutogradMeta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.grad_fn() {
            Some((n, i)) => write!(f, "AutogradMeta(grad_fn={}[{i}])", n.name),
            None => write!(f, "AutogradMeta(leaf)"),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Where a gradient flows.
#[derive(Clone)]
enum Edge {
    /// Input `usize` of a node (the output number of the tensor it came from).
    Node(Arc<Node>, usize),
    /// A leaf's gradient accumulator.
    Leaf(Arc<AutogradMeta>),
}

/// One recorded call.
pub struct Node {
    seq: u64,
    name: &'static str,
    op: &'static str,
    /// `None` once released (after backward without `retain_graph`).
    f: Mutex<Option<Box<dyn BackwardFn>>>,
    /// Per gradient the node returns: where it goes, and the input's sizes and dtype.
    next: Vec<Option<(Edge, Vec<usize>, DType)>>,
    /// Versions of the saved tensors at save time (same order as `saved_tensors()`).
    versions: Vec<u64>,
    /// Number of forward outputs (gradient slots).
    n_outputs: usize,
}

impl Node {
    pub fn name(&self) -> &'static str {
        self.name
    }
    pub fn op(&self) -> &'static str {
        self.op
    }
    /// Whether the saved state was released.
    pub fn is_released(&self) -> bool {
        lock(&self.f).is_none()
    }
}

static SEQ: AtomicU64 = AtomicU64::new(0);

/// The autograd metadata of `t` (the slot `tensor.rs` holds untyped: [`crate::tensor::Attached`];
/// this module puts only [`AutogradMeta`] in it).
fn meta(t: &Tensor) -> Option<&AutogradMeta> {
    t.autograd_slot().as_deref().and_then(|m| m.downcast_ref())
}

/// [`meta`], shared.
fn meta_arc(t: &Tensor) -> Option<Arc<AutogradMeta>> {
    t.autograd_slot().clone().and_then(|m| m.downcast().ok())
}

/// The autograd methods of a tensor (PyTorch's `VariableMethods`): the tensor keeps autograd's
/// metadata in an untyped slot (`xirang_core::tensor::Attached`), and this trait reads it.
/// `requires_grad()` and `detach()` are the tensor's own (they only test or clear the slot).
pub trait TensorAutograd {
    /// A leaf handle that requires grad (`requires_grad_(true)`), or a detached one (`false`).
    /// Shares storage with `self`.
    fn requires_grad_(&self, on: bool) -> Tensor;
    /// Whether the tensor is a leaf (requires grad, made by the user rather than recorded).
    fn is_leaf(&self) -> bool;
    /// The node that produced the tensor (`MmBackward`), if recorded.
    fn grad_fn(&self) -> Option<Arc<Node>>;
    /// The accumulated gradient of a leaf.
    fn grad(&self) -> Option<Tensor>;
    /// Clears the accumulated gradient (`.grad = None`).
    fn zero_grad(&self);
    /// `loss.backward()` for a one-element tensor: seeds the gradient with one.
    fn backward(&self, o: &dyn Ops) -> Result<()>;
}

impl TensorAutograd for Tensor {
    fn requires_grad_(&self, on: bool) -> Tensor {
        let mut t = self.clone();
        t.set_autograd_slot(if on { Some(Arc::new(AutogradMeta::leaf())) } else { None });
        t
    }

    fn is_leaf(&self) -> bool {
        meta(self).is_none_or(|m| lock(&m.grad_fn).is_none())
    }

    fn grad_fn(&self) -> Option<Arc<Node>> {
        meta(self).and_then(|m| m.grad_fn().map(|(n, _)| n))
    }

    fn grad(&self) -> Option<Tensor> {
        meta(self).and_then(|m| lock(&m.grad).clone())
    }

    fn zero_grad(&self) {
        if let Some(m) = meta(self) {
            *lock(&m.grad) = None;
        }
    }

    fn backward(&self, o: &dyn Ops) -> Result<()> {
        backward(o, std::slice::from_ref(self), None, false)
    }
}

/// Whether any differentiable tensor argument of `op` requires grad or is dual (forward mode):
/// then the call must go through [`record`].
pub fn any_requires_grad(op: &str, args: &[IValue]) -> bool {
    let Some(info) = node_info(op) else { return false };
    info.inputs.iter().any(|&(i, _)| match args.get(i) {
        Some(IValue::Tensor(t)) => t.requires_grad(),
        Some(IValue::TensorList(ts)) => ts.iter().any(Tensor::requires_grad),
        Some(IValue::OptTensorList(ts)) => ts.iter().flatten().any(Tensor::requires_grad),
        _ => false,
    }) || crate::autograd::forward::any_dual(info, args)
}

fn edge_of(t: &Tensor) -> Option<(Edge, Vec<usize>, DType)> {
    let m = meta_arc(t)?;
    let e = match m.grad_fn() {
        Some((n, i)) => Edge::Node(n, i),
        None => Edge::Leaf(m),
    };
    Some((e, t.sizes().to_vec(), t.dtype()))
}

/// Records a call of `op` (boxed arguments `args`, boxed results `outs`) and returns the results
/// with autograd metadata attached to the floating-point tensors. When a differentiable input is
/// dual, the results first get their tangents from the operator's generated jvp
/// (`forward_ad::propagate`); the backward node is recorded only if an input requires grad.
pub fn record(op: &'static str, args: &[IValue], mut outs: Vec<IValue>, f: Box<dyn BackwardFn>) -> Result<Vec<IValue>> {
    let Some(info) = node_info(op) else {
        return Err(Error::Unsupported(format!("autograd: `{op}` has no derivatives.yaml entry in this build")));
    };
    let mut next = Vec::new();
    for &(i, list) in info.inputs {
        match (args.get(i), list) {
            (Some(IValue::Tensor(t)), false) => next.push(edge_of(t)),
            (Some(IValue::TensorList(ts)), true) => next.extend(ts.iter().map(edge_of)),
            (Some(IValue::OptTensorList(ts)), true) => next.extend(ts.iter().map(|t| t.as_ref().and_then(edge_of))),
            _ => next.push(None),
        }
    }
    crate::autograd::forward::propagate(info, args, &mut outs)?;
    if next.iter().all(Option::is_none) {
        return Ok(outs);
    }
    let versions = f.saved_tensors().iter().map(|t| t.version()).collect();
    let n_outputs = outs.iter().map(|v| if let IValue::TensorList(ts) = v { ts.len() } else { 1 }).sum();
    let node = Arc::new(Node {
        seq: SEQ.fetch_add(1, Ordering::Relaxed),
        name: info.node,
        op,
        f: Mutex::new(Some(f)),
        next,
        versions,
        n_outputs,
    });
    let mut k = 0;
    // a result sharing storage with a differentiable input is a view of it (in-place writes to
    // it cannot be recorded: see `inplace_begin`)
    let view_of_input = |t: &Tensor| {
        info.inputs.iter().any(|&(i, _)| match args.get(i) {
            Some(IValue::Tensor(x)) => x.shares_storage(t),
            Some(IValue::TensorList(xs)) => xs.iter().any(|x| x.shares_storage(t)),
            _ => false,
        })
    };
    let attach = |t: &mut Tensor, k: usize, differentiable: bool| {
        if differentiable && t.dtype().is_floating() {
            t.set_autograd_slot(Some(Arc::new(AutogradMeta {
                grad_fn: Mutex::new(Some((node.clone(), k))),
                grad: Mutex::new(None),
                is_view: view_of_input(t),
            })));
        }
    };
    for (r, v) in outs.iter_mut().enumerate() {
        let differentiable = info.differentiable_outputs.get(r).copied().unwrap_or(true);
        match v {
            IValue::Tensor(t) => {
                attach(t, k, differentiable);
                k += 1;
            }
            IValue::TensorList(ts) => {
                for t in ts {
                    attach(t, k, differentiable);
                    k += 1;
                }
            }
            _ => k += 1,
        }
    }
    Ok(outs)
}

fn add<O: Ops + ?Sized>(o: &O, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let _g = no_grad();
    aten::add_tensor(o, a, b, Scalar::Int(1))
}

/// Reduces a gradient to its input's sizes (summing broadcast dimensions) and dtype.
fn fit<O: Ops + ?Sized>(o: &O, g: Tensor, sizes: &[usize], dtype: DType) -> Result<Tensor> {
    let g = if g.sizes() == sizes {
        g
    } else {
        let target: Vec<i64> = sizes.iter().map(|&s| s as i64).collect();
        let r = crate::autograd::helpers::sum_to(o, &g, &target)?;
        if r.sizes() != sizes {
            return Err(Error::InvalidArgument(format!(
                "autograd: gradient of shape {:?} does not fit an input of shape {sizes:?}",
                g.sizes()
            )));
        }
        r
    };
    if g.dtype() == dtype { Ok(g) } else { g.to_dtype(dtype) }
}

/// `torch.autograd.backward(roots, grad_tensors, retain_graph)`: computes the gradients of the
/// roots with respect to the leaves of their graph and accumulates them into the leaves' `.grad()`.
/// `grads` seeds each root (default: one, for one-element roots).
pub fn backward(o: &dyn Ops, roots: &[Tensor], grads: Option<&[Tensor]>, retain_graph: bool) -> Result<()> {
    let _no_grad = no_grad();
    // seed
    let mut seeds: Vec<(Edge, Tensor)> = Vec::new();
    for (i, r) in roots.iter().enumerate() {
        let Some((edge, sizes, dtype)) = edge_of(r) else {
            return Err(Error::InvalidArgument(format!(
                "element {i} of tensors does not require grad and does not have a grad_fn"
            )));
        };
        let g = match grads.and_then(|g| g.get(i)) {
            Some(g) => {
                if g.sizes() != r.sizes() {
                    return Err(Error::InvalidArgument(format!(
                        "grad of shape {:?} given for a root of shape {:?}",
                        g.sizes(),
                        r.sizes()
                    )));
                }
                g.detach()
            }
            None => {
                if r.numel() != 1 {
                    return Err(Error::InvalidArgument(
                        "grad can be implicitly created only for scalar outputs".into(),
                    ));
                }
                let one = Tensor::full(&sizes, Scalar::Int(1), dtype);
                match r.device_ctx() {
                    Some(ctx) => one.to_ctx(ctx)?,
                    None => one,
                }
            }
        };
        seeds.push((edge, g));
    }
    // dependencies: number of edges into each node reachable from the roots
    let mut deps: HashMap<*const Node, usize> = HashMap::new();
    let mut stack: Vec<Arc<Node>> = Vec::new();
    let mut seen: HashMap<*const Node, ()> = HashMap::new();
    for (e, _) in &seeds {
        if let Edge::Node(n, _) = e
            && seen.insert(Arc::as_ptr(n), ()).is_none()
        {
            stack.push(n.clone());
        }
    }
    while let Some(n) = stack.pop() {
        for (e, _, _) in n.next.iter().flatten() {
            if let Edge::Node(m, _) = e {
                *deps.entry(Arc::as_ptr(m)).or_default() += 1;
                if seen.insert(Arc::as_ptr(m), ()).is_none() {
                    stack.push(m.clone());
                }
            }
        }
    }
    // input buffers and the ready queue (newest first)
    struct Ready(u64, Arc<Node>);
    impl PartialEq for Ready {
        fn eq(&self, o: &Ready) -> bool {
            self.0 == o.0
        }
    }
    impl Eq for Ready {}
    impl PartialOrd for Ready {
        fn partial_cmp(&self, o: &Ready) -> Option<std::cmp::Ordering> {
            Some(self.cmp(o))
        }
    }
    impl Ord for Ready {
        fn cmp(&self, o: &Ready) -> std::cmp::Ordering {
            self.0.cmp(&o.0)
        }
    }
    let mut buffers: HashMap<*const Node, Vec<Option<Tensor>>> = HashMap::new();
    let mut ready: BinaryHeap<Ready> = BinaryHeap::new();
    let mut queued: HashMap<*const Node, ()> = HashMap::new();
    let deliver =
        |o: &dyn Ops, buffers: &mut HashMap<*const Node, Vec<Option<Tensor>>>, edge: &Edge, g: Tensor| -> Result<()> {
            match edge {
                Edge::Leaf(m) => {
                    let mut slot = lock(&m.grad);
                    *slot = Some(match slot.take() {
                        Some(old) => add(o, &old, &g)?,
                        None => g,
                    });
                }
                Edge::Node(n, i) => {
                    let b = buffers.entry(Arc::as_ptr(n)).or_insert_with(|| vec![None; n.n_outputs]);
                    if let Some(slot) = b.get_mut(*i) {
                        *slot = Some(match slot.take() {
                            Some(old) => add(o, &old, &g)?,
                            None => g,
                        });
                    }
                }
            }
            Ok(())
        };
    for (e, g) in seeds {
        deliver(o, &mut buffers, &e, g)?;
        if let Edge::Node(n, _) = &e
            && deps.get(&Arc::as_ptr(n)).copied().unwrap_or(0) == 0
            && queued.insert(Arc::as_ptr(n), ()).is_none()
        {
            ready.push(Ready(n.seq, n.clone()));
        }
    }
    while let Some(Ready(_, node)) = ready.pop() {
        let key = Arc::as_ptr(&node);
        let inputs = buffers.remove(&key).unwrap_or_else(|| vec![None; node.n_outputs]);
        let results = {
            let mut f = lock(&node.f);
            let Some(func) = f.as_ref() else {
                return Err(Error::InvalidArgument(format!(
                    "Trying to backward through the graph a second time (or directly access saved tensors after they have already been freed): {} was released. Specify retain_graph=true the first time.",
                    node.name
                )));
            };
            for (k, (t, v)) in func.saved_tensors().iter().zip(&node.versions).enumerate() {
                let now = t.version();
                if now != *v {
                    return Err(Error::InvalidArgument(format!(
                        "one of the variables needed for gradient computation has been modified by an inplace operation: saved tensor {k} of {} ({}) is at version {now}; expected version {v} instead",
                        node.name, node.op
                    )));
                }
            }
            let needs: Vec<bool> = node.next.iter().map(Option::is_some).collect();
            let r = func.apply(o, &inputs, &needs)?;
            if !retain_graph {
                *f = None;
            }
            r
        };
        for (g, slot) in results.into_iter().zip(&node.next) {
            let (Some(g), Some((edge, sizes, dtype))) = (g, slot) else { continue };
            let g = fit(o, g, sizes, *dtype)?;
            deliver(o, &mut buffers, edge, g)?;
        }
        for (edge, _, _) in node.next.iter().flatten() {
            if let Edge::Node(m, _) = edge {
                let p = Arc::as_ptr(m);
                let d = deps.get_mut(&p).ok_or_else(|| Error::InvalidArgument("autograd: graph changed".into()))?;
                *d -= 1;
                if *d == 0 && queued.insert(p, ()).is_none() {
                    ready.push(Ready(m.seq, m.clone()));
                }
            }
        }
    }
    Ok(())
}

/// Calls `op` by name with boxed arguments through the generated front-ends and records it when a
/// differentiable input requires grad (the boxed twin of the `ag::` front-ends). Recording needs
/// every argument, schema defaults included. An in-place operator is recorded as the `ag::`
/// in-place front-ends do ([`inplace_begin`]); its first result carries the rebased history.
pub fn call<O: Ops + ?Sized>(o: &O, op: &str, args: &[IValue]) -> Result<Vec<IValue>> {
    use crate::generated::ops::{call_boxed_at, call_boxed_at_recorded, has_recorded_front_end, operator_index};
    let Some(i) = operator_index(op) else {
        return Err(Error::InvalidArgument(format!("unknown operator `{op}` (not selected in xirang.toml)")));
    };
    // the operator's `ag::` front-end, with the typed arguments unboxed by its schema
    if has_recorded_front_end(i) {
        return call_boxed_at_recorded(o, i, args);
    }
    // a node but no front-end (an in-place view such as `t_`): refused when it would record,
    // never a result silently without history
    if is_grad_enabled() && node_info(op).is_some() && any_requires_grad(op, args) {
        return Err(Error::Unsupported(format!(
            "autograd: `{op}` has a backward node but no autograd front-end (an in-place view or an in-place operator without a functional twin); call it under no_grad or on tensors that do not require grad"
        )));
    }
    let _g = no_grad();
    call_boxed_at(o, i, args)
}

// ------------------------------------------------------------------------------------------
// in-place operators
// ------------------------------------------------------------------------------------------

/// `(op, the operator whose node records it)` for in-place `op` (`add_.Tensor` -> `add.Tensor`, or
/// `op` itself when derivatives.yaml has an entry for the in-place form), if `op` is a recordable
/// in-place operator of this build.
pub fn inplace_node(op: &str) -> Option<(&'static str, &'static str)> {
    let t = &crate::generated::ops::INPLACE_NODES;
    t.binary_search_by(|(k, _)| k.cmp(&op)).ok().map(|i| t[i])
}

/// What [`inplace_begin`] keeps for [`inplace_end`].
pub struct InplacePre {
    op: &'static str,
    node_op: &'static str,
    /// The autograd metadata of the written tensor before the write (rebased by `inplace_end`).
    meta: Option<Arc<AutogradMeta>>,
    /// Copies of the arguments taken before the write (argument index, copy carrying the
    /// argument's history): `self` when the node saves it (torchgen's `original_self`), and any
    /// other tensor argument that aliases `self` (`x.mul_(x)`).
    originals: Vec<(usize, Tensor)>,
}

impl InplacePre {
    /// Argument `i` as the node must save it: the copy taken before the write when there is one
    /// (`self` when the node saves it, an argument aliasing `self`), else `t` itself.
    pub fn original<'a>(&'a self, i: usize, t: &'a Tensor) -> &'a Tensor {
        self.originals.iter().find(|(j, _)| *j == i).map_or(t, |(_, c)| c)
    }
}

/// Before an in-place operator writes `args[0]` (`self`): decides whether the call must be
/// recorded and checks what PyTorch checks. `Ok(None)`: nothing to record (grad mode off, or no
/// differentiable argument requires grad). Errors: a leaf that requires grad written in place
/// (PyTorch's message); a view of a differentiable tensor written in place (PyTorch rebases the
/// base's history through `CopySlices`, which this engine does not: refused rather than a
/// gradient that ignores the write); a dual (forward-mode) argument.
pub fn inplace_begin<O: AtenOps + ?Sized>(
    o: &O,
    op: &'static str,
    node_op: &'static str,
    args: &[IValue],
) -> Result<Option<InplacePre>> {
    if !is_grad_enabled() {
        return Ok(None);
    }
    let Some(info) = node_info(node_op) else {
        return Err(Error::Unsupported(format!("autograd: `{node_op}` has no derivatives.yaml entry in this build")));
    };
    if crate::autograd::forward::any_dual(info, args) {
        return Err(Error::Unsupported(format!(
            "forward-mode AD: in-place `{op}` on a dual tensor is not supported (the jvp would have to write the tangent in place)"
        )));
    }
    if !any_requires_grad(node_op, args) {
        return Ok(None);
    }
    let Some(IValue::Tensor(self_)) = args.first() else {
        return Err(Error::InvalidArgument(format!("autograd: in-place `{op}` needs `self` as its first argument")));
    };
    if let Some(m) = meta(self_) {
        if lock(&m.grad_fn).is_none() {
            return Err(Error::InvalidArgument(format!(
                "{op}: a leaf Variable that requires grad is being used in an in-place operation."
            )));
        }
        if m.is_view {
            return Err(Error::Unsupported(format!(
                "autograd: in-place `{op}` on a view of a tensor that requires grad: PyTorch rebases the base's history (CopySlices), which this engine does not; write into a copy (`clone()`) or the base instead"
            )));
        }
    }
    let copy = |t: &Tensor| -> Result<Tensor> {
        let _g = no_grad();
        let mut c = aten::clone(o, &t.detach(), None)?;
        c.set_autograd_slot(t.autograd_slot().clone());
        Ok(c)
    };
    let mut originals = Vec::new();
    if node_op != op && info.saves_self {
        originals.push((0, copy(self_)?));
    }
    for (i, a) in args.iter().enumerate().skip(1) {
        if let IValue::Tensor(t) = a
            && t.shares_storage(self_)
        {
            originals.push((i, copy(t)?));
        }
    }
    Ok(Some(InplacePre { op, node_op, meta: meta_arc(self_), originals }))
}

/// After the in-place write: records the node (the functional operator's, over the arguments as
/// they were before the write, with `result` the written tensor) and rebases the written tensor's
/// history onto it. Returns `r` (the written tensor) with the new history. Every handle that
/// shares `self`'s autograd metadata sees the new history; a `self` that did not require grad
/// before has no metadata to share, so only the returned handle carries it (use the result).
pub fn inplace_end(pre: InplacePre, args: &[IValue], r: Tensor, f: Box<dyn BackwardFn>) -> Result<Tensor> {
    let mut cargs = args.to_vec();
    for (i, t) in pre.originals {
        if let Some(slot) = cargs.get_mut(i) {
            *slot = IValue::Tensor(t);
        }
    }
    let outs = record(pre.node_op, &cargs, vec![IValue::Tensor(r.detach())], f)?;
    let Some(IValue::Tensor(out)) = outs.into_iter().next() else {
        return Err(Error::InvalidArgument(format!("autograd: in-place `{}` recorded no result", pre.op)));
    };
    let Some(new) = meta(&out).and_then(|m| m.grad_fn()) else {
        return Ok(out);
    };
    let m = match pre.meta {
        Some(m) => {
            *lock(&m.grad_fn) = Some(new);
            m
        }
        // the written tensor is not a view of its own input
        None => Arc::new(AutogradMeta { grad_fn: Mutex::new(Some(new)), grad: Mutex::new(None), is_view: false }),
    };
    let mut t = r;
    t.set_autograd_slot(Some(m));
    Ok(t)
}

/// `torch.autograd.grad`-style helper: the gradients of `root` with respect to `inputs` (leaves
/// that require grad), without touching their `.grad()`.
pub fn grad(o: &dyn Ops, root: &Tensor, inputs: &[Tensor], retain_graph: bool) -> Result<Vec<Option<Tensor>>> {
    let saved: Vec<Option<Tensor>> = inputs.iter().map(|t| t.grad()).collect();
    for t in inputs {
        t.zero_grad();
    }
    let r = backward(o, std::slice::from_ref(root), None, retain_graph);
    let out = inputs.iter().map(|t| t.grad()).collect();
    for (t, s) in inputs.iter().zip(saved) {
        if let Some(m) = meta(t) {
            *lock(&m.grad) = s;
        }
    }
    r.map(|()| out)
}
