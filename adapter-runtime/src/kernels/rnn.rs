//! Device kernels of the fused recurrent cells (`nn.LSTM`, `nn.GRU`, `nn.LSTMCell`, `nn.GRUCell`
//! on a PrivateUse1 device). PyTorch has CUDA and XPU kernels for them and no CPU kernel, so
//! these are the only tier that serves them on `xirang`. The math is shared with the host
//! reference tier ([`crate::reference::rnn`]); a kernel loads its operands, computes in f64 and stores
//! its results as the inputs' dtype, in one launch on the current stream.

use super::{Real, device_of, launch, unsupported, with_real};
use crate::driver::DevicePtr;
use crate::error::{Error, Result};
use crate::reference::rnn;
use crate::tensor::Tensor;

/// Runs `compute` on the f64 values of `inputs` (absent ones stay `None`) in one kernel and
/// stores its results into fresh tensors of `out_sizes`. All tensors share one dtype.
fn cell_kernel<const N: usize>(
    name: &'static str,
    inputs: &[Option<&Tensor>],
    out_sizes: [Vec<usize>; N],
    compute: impl Fn(&[Option<Vec<f64>>]) -> [Vec<f64>; N] + Send + 'static,
) -> Result<[Tensor; N]> {
    let present: Vec<&Tensor> = inputs.iter().flatten().copied().collect();
    let ctx = device_of(name, &present)?;
    let d = present[0].dtype();
    if present.iter().any(|t| t.dtype() != d) {
        return unsupported(name, "mixed dtypes take the host tier");
    }
    let owned: Vec<Option<Tensor>> = inputs
        .iter()
        .map(|t| t.map(|t| super::contiguous(t).map(|c| c.into_owned())).transpose())
        .collect::<Result<_>>()?;
    let outs: Vec<Tensor> = out_sizes.iter().map(|s| Tensor::empty_on(&ctx, s, d)).collect::<Result<_>>()?;
    let in_ptrs: Vec<Option<(DevicePtr, usize)>> = owned
        .iter()
        .map(|t| t.as_ref().map(|t| Ok::<_, crate::error::Error>((t.data_ptr()?, t.numel()))).transpose())
        .collect::<Result<_>>()?;
    let out_ptrs: Vec<(DevicePtr, usize)> =
        outs.iter().map(|t| Ok((t.data_ptr()?, t.numel()))).collect::<Result<_>>()?;
    let mut keep: Vec<Tensor> = owned.into_iter().flatten().collect();
    keep.extend(outs.iter().cloned());
    with_real!(name, d, T => launch(&ctx, keep, move |mem| {
        let mut vals = Vec::with_capacity(in_ptrs.len());
        for p in &in_ptrs {
            vals.push(match p {
                Some((p, n)) => Some(T::load(mem, *p, *n, d)?.into_iter().map(|v| v.to_f64()).collect()),
                None => None,
            });
        }
        let res = compute(&vals);
        for ((p, n), v) in out_ptrs.iter().zip(res) {
            debug_assert_eq!(*n, v.len());
            let v: Vec<T> = v.into_iter().map(T::from_f64).collect();
            T::store(mem, *p, &v, d)?;
        }
        Ok(())
    }))?;
    Ok(outs.try_into().unwrap_or_else(|_| unreachable!("one output per size")))
}

/// xirang-kernel: _thnn_fused_lstm_cell
pub fn _thnn_fused_lstm_cell(
    input_gates: &Tensor,
    hidden_gates: &Tensor,
    cx: &Tensor,
    input_bias: Option<&Tensor>,
    hidden_bias: Option<&Tensor>,
) -> Result<(Tensor, Tensor, Tensor)> {
    let name = "_thnn_fused_lstm_cell";
    let (b, h) = rnn::cell_dims(
        name,
        4,
        input_gates.sizes(),
        hidden_gates.sizes(),
        cx.sizes(),
        &[input_bias.map(Tensor::sizes), hidden_bias.map(Tensor::sizes)],
    )?;
    let [hy, cy, ws] = cell_kernel(
        name,
        &[Some(input_gates), Some(hidden_gates), Some(cx), input_bias, hidden_bias],
        [vec![b, h], vec![b, h], vec![b, 4 * h]],
        move |v| {
            let (hy, cy, ws) = rnn::lstm_cell(
                b,
                h,
                v[0].as_deref().unwrap_or(&[]),
                v[1].as_deref().unwrap_or(&[]),
                v[2].as_deref().unwrap_or(&[]),
                v[3].as_deref(),
                v[4].as_deref(),
            );
            [hy, cy, ws]
        },
    )?;
    Ok((hy, cy, ws))
}

/// xirang-kernel: _thnn_fused_lstm_cell_backward_impl
pub fn _thnn_fused_lstm_cell_backward_impl(
    grad_hy: Option<&Tensor>,
    grad_cy: Option<&Tensor>,
    cx: &Tensor,
    cy: &Tensor,
    workspace: &Tensor,
    has_bias: bool,
) -> Result<(Tensor, Tensor, Tensor)> {
    let name = "_thnn_fused_lstm_cell_backward_impl";
    let (ghy, gcy) = (grad_hy.filter(|t| !t.is_undefined()), grad_cy.filter(|t| !t.is_undefined()));
    if ghy.is_none() && gcy.is_none() {
        // PyTorch: no incoming gradient, no outgoing gradients
        return Ok((Tensor::undefined(), Tensor::undefined(), Tensor::undefined()));
    }
    let (b, h) = rnn::cell_dims(name, 4, workspace.sizes(), workspace.sizes(), cx.sizes(), &[])?;
    for g in ghy.iter().chain(gcy.iter()).chain([&cy]) {
        if g.sizes() != [b, h] {
            return Err(Error::Shape(format!("{name}: a gradient or state of shape {:?} for [{b}, {h}]", g.sizes())));
        }
    }
    let [gg, gcx, gb] = cell_kernel(
        name,
        &[ghy, gcy, Some(cx), Some(cy), Some(workspace)],
        [vec![b, 4 * h], vec![b, h], vec![if has_bias { 4 * h } else { 0 }]],
        move |v| {
            let empty: &[f64] = &[];
            let (gg, gcx) = rnn::lstm_cell_backward(
                b,
                h,
                v[0].as_deref(),
                v[1].as_deref(),
                v[2].as_deref().unwrap_or(empty),
                v[3].as_deref().unwrap_or(empty),
                v[4].as_deref().unwrap_or(empty),
            );
            let gb = if has_bias { rnn::column_sums(&gg, 4 * h) } else { Vec::new() };
            [gg, gcx, gb]
        },
    )?;
    Ok((gg, gcx, if has_bias { gb } else { Tensor::undefined() }))
}

/// xirang-kernel: _thnn_fused_gru_cell
pub fn _thnn_fused_gru_cell(
    input_gates: &Tensor,
    hidden_gates: &Tensor,
    hx: &Tensor,
    input_bias: Option<&Tensor>,
    hidden_bias: Option<&Tensor>,
) -> Result<(Tensor, Tensor)> {
    let name = "_thnn_fused_gru_cell";
    let (b, h) = rnn::cell_dims(
        name,
        3,
        input_gates.sizes(),
        hidden_gates.sizes(),
        hx.sizes(),
        &[input_bias.map(Tensor::sizes), hidden_bias.map(Tensor::sizes)],
    )?;
    let [hy, ws] = cell_kernel(
        name,
        &[Some(input_gates), Some(hidden_gates), Some(hx), input_bias, hidden_bias],
        [vec![b, h], vec![b, 5 * h]],
        move |v| {
            let (hy, ws) = rnn::gru_cell(
                b,
                h,
                v[0].as_deref().unwrap_or(&[]),
                v[1].as_deref().unwrap_or(&[]),
                v[2].as_deref().unwrap_or(&[]),
                v[3].as_deref(),
                v[4].as_deref(),
            );
            [hy, ws]
        },
    )?;
    Ok((hy, ws))
}

/// xirang-kernel: _thnn_fused_gru_cell_backward
pub fn _thnn_fused_gru_cell_backward(
    grad_hy: &Tensor,
    workspace: &Tensor,
    has_bias: bool,
) -> Result<(Tensor, Tensor, Tensor, Tensor, Tensor)> {
    let name = "_thnn_fused_gru_cell_backward";
    let s = workspace.sizes();
    if s.len() != 2 || !s[1].is_multiple_of(5) || grad_hy.sizes() != [s[0], s[1] / 5] {
        return Err(Error::Shape(format!(
            "{name}: a workspace of shape {s:?} does not fit a gradient of shape {:?} (want [B, 5H] and [B, H])",
            grad_hy.sizes()
        )));
    }
    let (b, h) = (s[0], s[1] / 5);
    let nb = if has_bias { 3 * h } else { 0 };
    let [gi, gh, ghx, gib, ghb] = cell_kernel(
        name,
        &[Some(grad_hy), Some(workspace)],
        [vec![b, 3 * h], vec![b, 3 * h], vec![b, h], vec![nb], vec![nb]],
        move |v| {
            let (gi, gh, ghx) =
                rnn::gru_cell_backward(b, h, v[0].as_deref().unwrap_or(&[]), v[1].as_deref().unwrap_or(&[]));
            let (gib, ghb) = if has_bias {
                (rnn::column_sums(&gi, 3 * h), rnn::column_sums(&gh, 3 * h))
            } else {
                (Vec::new(), Vec::new())
            };
            [gi, gh, ghx, gib, ghb]
        },
    )?;
    if has_bias { Ok((gi, gh, ghx, gib, ghb)) } else { Ok((gi, gh, ghx, Tensor::undefined(), Tensor::undefined())) }
}
