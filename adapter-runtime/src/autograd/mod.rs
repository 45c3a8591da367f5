//! Reverse-mode autograd over the generated backward nodes.
//!
//! * **Recording.** The generated autograd front-ends (`generated::ops::ag::<op>`) run the
//!   operator with recording off, then, when gradient mode is on and a differentiable input
//!   requires grad, build the operator's node from their typed arguments and result
//!   (`generated::autograd::<Op>Backward::new`, whose fields are the saved state: tensors saved
//!   *detached*, so a node never keeps its own outputs' graph alive, as burn's `Backward::State`)
//!   and call [`record`]: it looks the operator up in `generated::autograd::NODES`, connects one
//!   edge per differentiable input (to the input's `grad_fn`, or to the leaf's gradient
//!   accumulator) and gives every floating output a `grad_fn` pointing at the node. [`call`], the
//!   by-name entry point, unboxes the arguments by the operator's schema and calls the same
//!   front-end.
//! * **Backward.** [`backward`] counts dependencies over the graph reachable from the roots, then
//!   runs nodes in topological order (ties by recording order, newest first, as PyTorch's
//!   sequence numbers), summing gradients that meet at a node input, reducing each gradient to its
//!   input's shape (the generated nodes return broadcast-shaped gradients) and accumulating into
//!   leaves' `.grad()`.
//! * **Saved tensors.** Released as soon as a node has run unless `retain_graph`; running a
//!   released node again is the error PyTorch gives. Before a node runs, the version counter of
//!   every tensor it saved is compared with the version at save time: an in-place write in
//!   between is an error naming the node and both versions.
//! * **Gradient mode.** [`no_grad`] returns a guard that turns recording off on this thread.
//!
//! Hand-written backward formulas are the `BackwardHooks` methods of the adapter's ops object; the
//! engine calls nodes with the [`Ops`] object passed to [`backward`].
//!
//! Files, each using only those before it in this list (ARCHITECTURE.md's autograd table, checked by
//! `tests/layers.rs`): `node` (what a recorded node is: [`Ops`], [`BackwardFn`], [`NodeInfo`], the
//! saved tensor descriptions), `mode` (gradient mode), [`cap`] (capture helpers of the generated
//! nodes), [`helpers`] (PyTorch's `FunctionsManual.cpp`), [`forward`] (forward mode), `engine`
//! (autograd metadata, the graph, [`record`], [`backward`], [`TensorAutograd`]).

mod engine;
mod mode;
mod node;

pub mod cap;
pub mod forward;
pub mod helpers;

pub use engine::*;
pub use mode::*;
pub use node::*;
