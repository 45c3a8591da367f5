//! The fused recurrent cells PyTorch routes a PrivateUse1 device to (`aten/src/ATen/native/RNN.cpp`
//! takes the fused path for CUDA, XPU and PrivateUse1 inputs): `_thnn_fused_lstm_cell`,
//! `_thnn_fused_gru_cell` and their backwards. PyTorch has no CPU kernel for them (only CUDA and
//! XPU), so the CPU fallback can never serve them; the device kernels
//! ([`crate::kernels::rnn`]) and the host reference tier (`reference/`) both compute with the
//! functions here, in f64, with the layouts of `aten/src/ATen/native/cuda/RNN.cu`:
//!
//! * LSTM: gates `[B, 4H]` in the order input, forget, cell, output; the workspace is the four
//!   activated gates `[B, 4H]`.
//! * GRU: gates `[B, 3H]` in the order reset, input (update), new; the workspace is `[B, 5H]`:
//!   reset, input, new gates, `hx`, and the hidden new-gate pre-activation with its bias.

use crate::error::{Error, Result};

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// Checks the fused-cell shapes: `gates` and `hidden` are `[B, k*H]`, `state` `[B, H]`, biases
/// `[k*H]`. Returns `(B, H)`.
pub fn cell_dims(
    name: &str,
    k: usize,
    gates: &[usize],
    hidden: &[usize],
    state: &[usize],
    biases: &[Option<&[usize]>],
) -> Result<(usize, usize)> {
    let bad = || {
        Error::Shape(format!(
            "{name}: expected input and hidden gates of shape [B, {k}*H] and a state of shape [B, H], got {gates:?}, {hidden:?}, {state:?}"
        ))
    };
    if gates.len() != 2 || hidden != gates || state.len() != 2 || state[0] != gates[0] || gates[1] != k * state[1] {
        return Err(bad());
    }
    for b in biases.iter().flatten() {
        if *b != [gates[1]] {
            return Err(Error::Shape(format!("{name}: expected a bias of shape [{}], got {b:?}", gates[1])));
        }
    }
    Ok((state[0], state[1]))
}

/// LSTM cell forward: `(hy, cy, workspace)`.
pub fn lstm_cell(
    b: usize,
    h: usize,
    ig: &[f64],
    hg: &[f64],
    cx: &[f64],
    b1: Option<&[f64]>,
    b2: Option<&[f64]>,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (mut hy, mut cy, mut ws) = (vec![0.0; b * h], vec![0.0; b * h], vec![0.0; b * 4 * h]);
    for r in 0..b {
        for j in 0..h {
            let pre = |g: usize| {
                let c = g * h + j;
                let i = r * 4 * h + c;
                ig[i] + hg[i] + b1.map_or(0.0, |v| v[c]) + b2.map_or(0.0, |v| v[c])
            };
            let (i_g, f_g, c_g, o_g) = (sigmoid(pre(0)), sigmoid(pre(1)), pre(2).tanh(), sigmoid(pre(3)));
            let c = f_g * cx[r * h + j] + i_g * c_g;
            cy[r * h + j] = c;
            hy[r * h + j] = o_g * c.tanh();
            for (g, v) in [i_g, f_g, c_g, o_g].into_iter().enumerate() {
                ws[r * 4 * h + g * h + j] = v;
            }
        }
    }
    (hy, cy, ws)
}

/// LSTM cell backward (`_thnn_fused_lstm_cell_backward_impl`): `(grad_gates [B,4H], grad_cx [B,H])`
/// from the gradients of `hy` and `cy` (absent: zero).
pub fn lstm_cell_backward(
    b: usize,
    h: usize,
    ghy: Option<&[f64]>,
    gcy: Option<&[f64]>,
    cx: &[f64],
    cy: &[f64],
    ws: &[f64],
) -> (Vec<f64>, Vec<f64>) {
    let (mut gg, mut gcx) = (vec![0.0; b * 4 * h], vec![0.0; b * h]);
    for r in 0..b {
        for j in 0..h {
            let s = r * h + j;
            let w = |g: usize| ws[r * 4 * h + g * h + j];
            let (i_g, f_g, c_g, o_g) = (w(0), w(1), w(2), w(3));
            let go = ghy.map_or(0.0, |v| v[s]);
            let goc = gcy.map_or(0.0, |v| v[s]);
            let t = cy[s].tanh();
            let g_o = go * t * (1.0 - o_g) * o_g;
            let g_c = go * o_g * (1.0 - t * t) + goc;
            let g_i = g_c * c_g * (1.0 - i_g) * i_g;
            let g_f = g_c * cx[s] * (1.0 - f_g) * f_g;
            let g_g = g_c * i_g * (1.0 - c_g * c_g);
            gcx[s] = g_c * f_g;
            for (g, v) in [g_i, g_f, g_g, g_o].into_iter().enumerate() {
                gg[r * 4 * h + g * h + j] = v;
            }
        }
    }
    (gg, gcx)
}

/// GRU cell forward: `(hy, workspace)`.
pub fn gru_cell(
    b: usize,
    h: usize,
    ig: &[f64],
    hg: &[f64],
    hx: &[f64],
    b1: Option<&[f64]>,
    b2: Option<&[f64]>,
) -> (Vec<f64>, Vec<f64>) {
    let (mut hy, mut ws) = (vec![0.0; b * h], vec![0.0; b * 5 * h]);
    for r in 0..b {
        for j in 0..h {
            let at = |v: &[f64], g: usize| v[r * 3 * h + g * h + j];
            let bias = |v: Option<&[f64]>, g: usize| v.map_or(0.0, |v| v[g * h + j]);
            let r_g = sigmoid(at(ig, 0) + at(hg, 0) + bias(b1, 0) + bias(b2, 0));
            let i_g = sigmoid(at(ig, 1) + at(hg, 1) + bias(b1, 1) + bias(b2, 1));
            let hn = at(hg, 2) + bias(b2, 2);
            let n_g = (at(ig, 2) + bias(b1, 2) + r_g * hn).tanh();
            let hxv = hx[r * h + j];
            hy[r * h + j] = n_g + i_g * (hxv - n_g);
            for (g, v) in [r_g, i_g, n_g, hxv, hn].into_iter().enumerate() {
                ws[r * 5 * h + g * h + j] = v;
            }
        }
    }
    (hy, ws)
}

/// GRU cell backward (`_thnn_fused_gru_cell_backward`): `(grad_input_gates [B,3H],
/// grad_hidden_gates [B,3H], grad_hx [B,H])`.
pub fn gru_cell_backward(b: usize, h: usize, ghy: &[f64], ws: &[f64]) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (mut gi, mut gh, mut ghx) = (vec![0.0; b * 3 * h], vec![0.0; b * 3 * h], vec![0.0; b * h]);
    for r in 0..b {
        for j in 0..h {
            let w = |g: usize| ws[r * 5 * h + g * h + j];
            let (r_g, i_g, n_g, hxv, hn) = (w(0), w(1), w(2), w(3), w(4));
            let go = ghy[r * h + j];
            let g_i = go * (hxv - n_g) * (1.0 - i_g) * i_g;
            let g_n = go * (1.0 - i_g) * (1.0 - n_g * n_g);
            let g_hn = g_n * r_g;
            let g_r = g_n * hn * (1.0 - r_g) * r_g;
            ghx[r * h + j] = go * i_g;
            for (g, (a, c)) in [(g_r, g_r), (g_i, g_i), (g_n, g_hn)].into_iter().enumerate() {
                gi[r * 3 * h + g * h + j] = a;
                gh[r * 3 * h + g * h + j] = c;
            }
        }
    }
    (gi, gh, ghx)
}

/// Column sums of a row-major `[rows, cols]` matrix: the bias gradients.
pub fn column_sums(v: &[f64], cols: usize) -> Vec<f64> {
    let mut s = vec![0.0; cols];
    for row in v.chunks(cols.max(1)) {
        for (a, x) in s.iter_mut().zip(row) {
            *a += x;
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The analytic backward of each cell against central differences of its forward.
    #[test]
    fn backwards_match_finite_differences() {
        let (b, h) = (2, 3);
        let val = |n: usize, s: f64| (0..n).map(|i| ((i as f64 * 0.37 + s).sin()) * 0.9).collect::<Vec<_>>();
        let (ig, hg, cx) = (val(b * 4 * h, 0.1), val(b * 4 * h, 1.3), val(b * h, 2.2));
        let (ghy, gcy) = (val(b * h, 0.7), val(b * h, 1.9));
        let loss = |ig: &[f64], cx: &[f64]| {
            let (hy, cy, _) = lstm_cell(b, h, ig, &hg, cx, None, None);
            hy.iter().zip(&ghy).map(|(a, g)| a * g).sum::<f64>() + cy.iter().zip(&gcy).map(|(a, g)| a * g).sum::<f64>()
        };
        let (_, cy, ws) = lstm_cell(b, h, &ig, &hg, &cx, None, None);
        let (gg, gcx) = lstm_cell_backward(b, h, Some(&ghy), Some(&gcy), &cx, &cy, &ws);
        let eps = 1e-6;
        for i in 0..ig.len() {
            let (mut p, mut m) = (ig.clone(), ig.clone());
            p[i] += eps;
            m[i] -= eps;
            assert!(((loss(&p, &cx) - loss(&m, &cx)) / (2.0 * eps) - gg[i]).abs() < 1e-6, "lstm gate {i}");
        }
        for i in 0..cx.len() {
            let (mut p, mut m) = (cx.clone(), cx.clone());
            p[i] += eps;
            m[i] -= eps;
            assert!(((loss(&ig, &p) - loss(&ig, &m)) / (2.0 * eps) - gcx[i]).abs() < 1e-6, "lstm cx {i}");
        }
        let (gi3, gh3, hx) = (val(b * 3 * h, 0.4), val(b * 3 * h, 2.9), val(b * h, 1.1));
        let gloss = |gi: &[f64], gh: &[f64], hx: &[f64]| {
            let (hy, _) = gru_cell(b, h, gi, gh, hx, None, None);
            hy.iter().zip(&ghy).map(|(a, g)| a * g).sum::<f64>()
        };
        let (_, ws) = gru_cell(b, h, &gi3, &gh3, &hx, None, None);
        let (dgi, dgh, dhx) = gru_cell_backward(b, h, &ghy, &ws);
        for i in 0..gi3.len() {
            let (mut p, mut m) = (gi3.clone(), gi3.clone());
            p[i] += eps;
            m[i] -= eps;
            assert!(((gloss(&p, &gh3, &hx) - gloss(&m, &gh3, &hx)) / (2.0 * eps) - dgi[i]).abs() < 1e-6, "gru gi {i}");
            let (mut p, mut m) = (gh3.clone(), gh3.clone());
            p[i] += eps;
            m[i] -= eps;
            assert!(((gloss(&gi3, &p, &hx) - gloss(&gi3, &m, &hx)) / (2.0 * eps) - dgh[i]).abs() < 1e-6, "gru gh {i}");
        }
        for i in 0..hx.len() {
            let (mut p, mut m) = (hx.clone(), hx.clone());
            p[i] += eps;
            m[i] -= eps;
            assert!(
                ((gloss(&gi3, &gh3, &p) - gloss(&gi3, &gh3, &m)) / (2.0 * eps) - dhx[i]).abs() < 1e-6,
                "gru hx {i}"
            );
        }
    }
}
