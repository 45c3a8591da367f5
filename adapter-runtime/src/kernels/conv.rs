//! Convolution on the device: `convolution_overrideable`, where PyTorch sends every convolution of
//! a PrivateUse1 tensor (`conv1d/2d/3d`, `conv_transpose*`, `nn.Conv*`), and
//! `convolution_backward_overrideable`, its backward. 1-, 2- and 3-d; groups, stride, padding,
//! dilation; transposed with `output_padding`. Padding modes other than zeros (`reflect`,
//! `replicate`, `circular`) and `padding="same"` reach here already padded by PyTorch's `nn` layer
//! and `_convolution_mode`.
//!
//! One kernel launch per call. Inside it, per batch element and group, the convolution is a matrix
//! product over the unfolded image (im2col): `y = W · cols(x)` forward, `dx = col2im(Wᵀ · dy)` and
//! `dW += dy · cols(x)ᵀ` backward, with matrixmultiply's blocked kernels ([`super::matmul::gemm`]).
//! A transposed convolution is the adjoint of a regular one with the roles of its input and output
//! swapped (`y = col2im(Wᵀ · x)`, `dx = W · cols(dy)`, `dW += x · cols(dy)ᵀ`), so both share the
//! same two walks. Compute type: f32 for f32/f16/bf16, f64 for f64 (PyTorch's op-math type).

use super::matmul::gemm;
use super::{Real, contiguous, device_of, launch, unsupported, with_real};
use crate::driver::KernelMemory;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// The geometry both directions share: `img` is the spatial size of the side the kernel window
/// walks (a regular convolution's input, a transposed one's output), `cols` that of the other side.
#[derive(Clone, Debug)]
struct Geo {
    img: Vec<usize>,
    k: Vec<usize>,
    cols: Vec<usize>,
    s: Vec<usize>,
    p: Vec<usize>,
    d: Vec<usize>,
}

impl Geo {
    fn img_n(&self) -> usize {
        self.img.iter().product()
    }
    fn k_n(&self) -> usize {
        self.k.iter().product()
    }
    fn cols_n(&self) -> usize {
        self.cols.iter().product()
    }

    /// For each (kernel offset, column position): the flat image position it reads, or `None` in
    /// the zero padding. Shared by every channel, batch element and group.
    fn taps(&self) -> Vec<Option<u32>> {
        let sp = self.img.len();
        let (kn, cn) = (self.k_n(), self.cols_n());
        let mut out = Vec::with_capacity(kn * cn);
        let mut kk = vec![0usize; sp];
        let mut cc = vec![0usize; sp];
        for kl in 0..kn {
            let mut r = kl;
            for i in (0..sp).rev() {
                kk[i] = r % self.k[i];
                r /= self.k[i];
            }
            for cl in 0..cn {
                let mut r = cl;
                for i in (0..sp).rev() {
                    cc[i] = r % self.cols[i];
                    r /= self.cols[i];
                }
                let mut lin = 0usize;
                let mut inside = true;
                for i in 0..sp {
                    let pos = (cc[i] * self.s[i] + kk[i] * self.d[i]) as i64 - self.p[i] as i64;
                    if pos < 0 || pos >= self.img[i] as i64 {
                        inside = false;
                        break;
                    }
                    lin = lin * self.img[i] + pos as usize;
                }
                out.push(if inside { Some(lin as u32) } else { None });
            }
        }
        out
    }
}

/// `cols[c * kn + kl, cl] = img[c, taps[kl, cl]]` for `ch` channels.
fn im2col<T: Real>(img: &[T], ch: usize, g: &Geo, taps: &[Option<u32>]) -> Vec<T> {
    let (imn, kn, cn) = (g.img_n(), g.k_n(), g.cols_n());
    let mut cols = vec![T::ZERO; ch * kn * cn];
    for c in 0..ch {
        let src = &img[c * imn..(c + 1) * imn];
        let dst = &mut cols[c * kn * cn..(c + 1) * kn * cn];
        for (d, t) in dst.iter_mut().zip(taps) {
            if let Some(i) = t {
                *d = src[*i as usize];
            }
        }
    }
    cols
}

/// The adjoint of [`im2col`]: `img[c, taps[kl, cl]] += cols[c * kn + kl, cl]`.
fn col2im<T: Real>(cols: &[T], ch: usize, g: &Geo, taps: &[Option<u32>], img: &mut [T]) {
    let (imn, kn, cn) = (g.img_n(), g.k_n(), g.cols_n());
    for c in 0..ch {
        let src = &cols[c * kn * cn..(c + 1) * kn * cn];
        let dst = &mut img[c * imn..(c + 1) * imn];
        for (v, t) in src.iter().zip(taps) {
            if let Some(i) = t {
                dst[*i as usize] += *v;
            }
        }
    }
}

fn transpose<T: Real>(a: &[T], rows: usize, cols: usize) -> Vec<T> {
    let mut t = vec![T::ZERO; a.len()];
    for i in 0..rows {
        for j in 0..cols {
            t[j * rows + i] = a[i * cols + j];
        }
    }
    t
}

/// The validated arguments of a convolution call.
#[derive(Clone, Debug)]
struct Conv {
    n: usize,
    groups: usize,
    /// Channels per group of the image side (`Geo::img`) and of the column side.
    img_c: usize,
    cols_c: usize,
    transposed: bool,
    geo: Geo,
    /// Input and output sizes of the call.
    in_sizes: Vec<usize>,
    out_sizes: Vec<usize>,
    dtype: DType,
}

#[allow(clippy::too_many_arguments)]
fn conv_args(
    name: &str,
    input: &Tensor,
    weight: &Tensor,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    transposed: bool,
    output_padding: &[i64],
    groups: i64,
) -> Result<Conv> {
    let d = input.dtype();
    if weight.dtype() != d {
        return Err(Error::DType(format!(
            "Input type ({}) and weight type ({}) should be the same",
            d.name(),
            weight.dtype().name()
        )));
    }
    if !super::is_real(d) {
        return unsupported(name, format!("dtype {d} takes the fallback"));
    }
    let sp = weight.dim().saturating_sub(2);
    if !(1..=3).contains(&sp) || input.dim() != sp + 2 {
        return unsupported(name, format!("a {}-d input with a {}-d weight", input.dim(), weight.dim()));
    }
    let expand = |v: &[i64], what: &str, min: i64| -> Result<Vec<usize>> {
        let v = match v.len() {
            1 => vec![v[0]; sp],
            n if n == sp => v.to_vec(),
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "{name}: expected {what} to be a single integer or a list of {sp}, got {v:?}"
                )));
            }
        };
        v.iter()
            .map(|&x| {
                if x < min {
                    Err(Error::InvalidArgument(format!("{name}: {what} {v:?} must be at least {min}")))
                } else {
                    Ok(x as usize)
                }
            })
            .collect()
    };
    let (s, p, dl) = (expand(stride, "stride", 1)?, expand(padding, "padding", 0)?, expand(dilation, "dilation", 1)?);
    let op = if transposed { expand(output_padding, "output_padding", 0)? } else { vec![0; sp] };
    if groups <= 0 {
        return Err(Error::InvalidArgument(format!("{name}: non-positive groups is not supported")));
    }
    let g = groups as usize;
    let (n, c) = (input.sizes()[0], input.sizes()[1]);
    let (w0, w1) = (weight.sizes()[0], weight.sizes()[1]);
    let k: Vec<usize> = weight.sizes()[2..].to_vec();
    let ins: Vec<usize> = input.sizes()[2..].to_vec();
    // regular: weight [O, C/g, k]; transposed: weight [C, O/g, k]
    let (in_c_per_g, out_c) = if transposed { (w0 / g, w1 * g) } else { (w1, w0) };
    if w0 % g != 0 || (transposed && w0 != c) || (!transposed && c != w1 * g) {
        return Err(Error::Shape(format!(
            "Given groups={g}, weight of size {:?}, expected input{:?} to have {} channels, but got {c} channels instead",
            weight.sizes(),
            input.sizes(),
            if transposed { w0 } else { w1 * g }
        )));
    }
    let mut outs = Vec::with_capacity(sp);
    for i in 0..sp {
        let eff = dl[i] * (k[i].max(1) - 1) + 1;
        let len = if transposed {
            ((ins[i] as i64 - 1) * s[i] as i64 - 2 * p[i] as i64 + eff as i64 + op[i] as i64).max(0)
        } else {
            (ins[i] as i64 + 2 * p[i] as i64 - eff as i64) / s[i] as i64 + 1
        };
        if len <= 0 || k[i] == 0 {
            return Err(Error::Shape(format!(
                "Calculated output size is too small: input {:?}, kernel {:?}",
                input.sizes(),
                weight.sizes()
            )));
        }
        if transposed && (op[i] >= s[i] && op[i] >= dl[i]) {
            return Err(Error::InvalidArgument(format!(
                "{name}: output padding must be smaller than either stride or dilation, got {op:?}"
            )));
        }
        outs.push(len as usize);
    }
    let (img, cols) = if transposed { (outs.clone(), ins.clone()) } else { (ins.clone(), outs.clone()) };
    let (img_c, cols_c) = if transposed { (out_c / g, in_c_per_g) } else { (in_c_per_g, out_c / g) };
    let mut in_sizes = vec![n, c];
    in_sizes.extend(&ins);
    let mut out_sizes = vec![n, out_c];
    out_sizes.extend(&outs);
    Ok(Conv {
        n,
        groups: g,
        img_c,
        cols_c,
        transposed,
        geo: Geo { img, k, cols, s, p, d: dl },
        in_sizes,
        out_sizes,
        dtype: d,
    })
}

/// The image side's and the column side's tensors of a call: (input, output) for a regular
/// convolution, (output, input) for a transposed one.
fn sides<A>(c: &Conv, input: A, output: A) -> (A, A) {
    if c.transposed { (output, input) } else { (input, output) }
}

/// `cols_side[n, g] = W_g · cols(img_side[n, g])`: the column side from the image side (`from`
/// is the image side); with `adjoint`, `img_side[n, g] = col2im(W_gᵀ · cols_side[n, g])` (`from`
/// is the column side). `wm` is the weight per group as [`weight_matrix`] gives it.
fn product<T: Real>(c: &Conv, wm: &[Vec<T>], from: &[T], adjoint: bool) -> Result<Vec<T>> {
    let g = &c.geo;
    let taps = g.taps();
    let (imn, kn, cn) = (g.img_n(), g.k_n(), g.cols_n());
    let (ic, cc, groups) = (c.img_c, c.cols_c, c.groups);
    let img_len = groups * ic * imn;
    let col_len = groups * cc * cn;
    if !adjoint {
        let mut out = vec![T::ZERO; c.n * col_len];
        for b in 0..c.n {
            for gi in 0..groups {
                let x = &from[b * img_len + gi * ic * imn..][..ic * imn];
                let cols = im2col(x, ic, g, &taps);
                let y = &mut out[b * col_len + gi * cc * cn..][..cc * cn];
                gemm(&wm[gi], &cols, y, cc, ic * kn, cn, T::ONE)?;
            }
        }
        Ok(out)
    } else {
        let mut out = vec![T::ZERO; c.n * img_len];
        for gi in 0..groups {
            let wt = transpose(&wm[gi], cc, ic * kn);
            for b in 0..c.n {
                let y = &from[b * col_len + gi * cc * cn..][..cc * cn];
                let mut cols = vec![T::ZERO; ic * kn * cn];
                gemm(&wt, y, &mut cols, ic * kn, cc, cn, T::ONE)?;
                col2im(&cols, ic, g, &taps, &mut out[b * img_len + gi * ic * imn..][..ic * imn]);
            }
        }
        Ok(out)
    }
}

/// The weight as one `[cols_c, img_c * kn]` matrix per group (the column side's channels by the
/// image side's channels and kernel offsets), which is how both weights are stored: a regular
/// weight `[G * cols_c, img_c, k]` (output channels first), a transposed one `[G * cols_c, img_c,
/// k]` too, since the column side of a transposed convolution is its input.
fn weight_matrix<T: Real>(c: &Conv, w: &[T]) -> Vec<Vec<T>> {
    let per = c.cols_c * c.img_c * c.geo.k_n();
    (0..c.groups).map(|gi| w[gi * per..(gi + 1) * per].to_vec()).collect()
}

fn load<T: Real>(mem: &dyn KernelMemory, t: &Option<(u64, usize)>, d: DType) -> Result<Vec<T>> {
    match t {
        Some((p, n)) => T::load(mem, *p, *n, d),
        None => Ok(Vec::new()),
    }
}

/// A contiguous device operand and its (address, element count), `None` when empty.
fn operand(t: &Tensor) -> Result<(Tensor, Option<(u64, usize)>)> {
    let t = contiguous(t)?.into_owned();
    let at = if t.numel() > 0 { Some((t.data_ptr()?, t.numel())) } else { None };
    Ok((t, at))
}

/// `convolution_overrideable(input, weight, bias, stride, padding, dilation, transposed,
/// output_padding, groups)`.
/// xirang-kernel: convolution_overrideable
#[allow(clippy::too_many_arguments)]
pub fn convolution_overrideable(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    transposed: bool,
    output_padding: &[i64],
    groups: i64,
) -> Result<Tensor> {
    const NAME: &str = "convolution_overrideable";
    let mut ins = vec![input, weight];
    ins.extend(bias);
    let ctx = device_of(NAME, &ins)?;
    let c = conv_args(NAME, input, weight, stride, padding, dilation, transposed, output_padding, groups)?;
    if let Some(b) = bias
        && (b.dtype() != c.dtype || b.numel() != c.out_sizes[1])
    {
        return unsupported(NAME, "a bias of another dtype or size takes the fallback");
    }
    let out = Tensor::empty_on(&ctx, &c.out_sizes, c.dtype)?;
    if out.numel() == 0 {
        return Ok(out);
    }
    let (x, px) = operand(input)?;
    let (w, pw) = operand(weight)?;
    let (b, pb) = match bias {
        Some(b) => {
            let (t, p) = operand(b)?;
            (Some(t), p)
        }
        None => (None, None),
    };
    let po = out.data_ptr()?;
    let mut keep = vec![x, w, out.clone()];
    keep.extend(b);
    let d = c.dtype;
    with_real!(NAME, d, T => {
        launch(&ctx, keep, move |mem| {
            let xv = load::<T>(mem, &px, d)?;
            let wv = load::<T>(mem, &pw, d)?;
            let wm = weight_matrix(&c, &wv);
            // regular: y = W · cols(x); transposed: y = col2im(Wᵀ · x)
            let mut y = if xv.is_empty() {
                vec![T::ZERO; c.out_sizes.iter().product()]
            } else {
                product(&c, &wm, &xv, c.transposed)?
            };
            if pb.is_some() {
                let bv = load::<T>(mem, &pb, d)?;
                let (oc, osp) = (c.out_sizes[1], c.out_sizes[2..].iter().product::<usize>());
                for (i, v) in y.iter_mut().enumerate() {
                    *v += bv[(i / osp) % oc];
                }
            }
            T::store(mem, po, &y, d)
        })
    })?;
    Ok(out)
}

/// `convolution_backward_overrideable(grad_output, input, weight, stride, padding, dilation,
/// transposed, output_padding, groups, output_mask)`: (grad_input, grad_weight, grad_bias), each
/// undefined when its `output_mask` entry is false.
/// xirang-kernel: convolution_backward_overrideable
#[allow(clippy::too_many_arguments)]
pub fn convolution_backward_overrideable(
    grad_output: &Tensor,
    input: &Tensor,
    weight: &Tensor,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    transposed: bool,
    output_padding: &[i64],
    groups: i64,
    output_mask: &[bool],
) -> Result<(Tensor, Tensor, Tensor)> {
    const NAME: &str = "convolution_backward_overrideable";
    let ctx = device_of(NAME, &[grad_output, input, weight])?;
    let c = conv_args(NAME, input, weight, stride, padding, dilation, transposed, output_padding, groups)?;
    if grad_output.dtype() != c.dtype || grad_output.sizes() != c.out_sizes.as_slice() {
        return unsupported(NAME, "a grad_output of another dtype or shape takes the fallback");
    }
    let want = |i: usize| output_mask.get(i).copied().unwrap_or(true);
    let gi = if want(0) { Some(Tensor::empty_on(&ctx, &c.in_sizes, c.dtype)?) } else { None };
    let gw = if want(1) { Some(Tensor::empty_on(&ctx, weight.sizes(), c.dtype)?) } else { None };
    let gb = if want(2) { Some(Tensor::empty_on(&ctx, &c.out_sizes[1..2], c.dtype)?) } else { None };
    let at = |t: &Option<Tensor>| -> Result<Option<(u64, usize)>> {
        match t {
            Some(t) if t.numel() > 0 => Ok(Some((t.data_ptr()?, t.numel()))),
            _ => Ok(None),
        }
    };
    let (pgi, pgw, pgb) = (at(&gi)?, at(&gw)?, at(&gb)?);
    if pgi.is_none() && pgw.is_none() && pgb.is_none() {
        let u = |t: Option<Tensor>| t.unwrap_or_else(Tensor::undefined);
        return Ok((u(gi), u(gw), u(gb)));
    }
    let (dy, pdy) = operand(grad_output)?;
    let (x, px) = operand(input)?;
    let (w, pw) = operand(weight)?;
    let mut keep = vec![dy, x, w];
    keep.extend(gi.iter().chain(&gw).chain(&gb).cloned());
    let d = c.dtype;
    with_real!(NAME, d, T => {
        launch(&ctx, keep, move |mem| {
            let dyv = load::<T>(mem, &pdy, d)?;
            let (oc, osp) = (c.out_sizes[1], c.out_sizes[2..].iter().product::<usize>());
            if let Some((p, n)) = pgb {
                let mut s = vec![T::ZERO; n];
                for (i, v) in dyv.iter().enumerate() {
                    let k = (i / osp) % oc;
                    s[k] += *v;
                }
                T::store(mem, p, &s, d)?;
            }
            if pgi.is_none() && pgw.is_none() {
                return Ok(());
            }
            let wv = load::<T>(mem, &pw, d)?;
            let wm = weight_matrix(&c, &wv);
            if let Some((p, n)) = pgi {
                // regular: dx = col2im(Wᵀ · dy); transposed: dx = W · cols(dy)
                let g = if dyv.is_empty() { vec![T::ZERO; n] } else { product(&c, &wm, &dyv, !c.transposed)? };
                T::store(mem, p, &g, d)?;
            }
            if let Some((p, n)) = pgw {
                let xv = load::<T>(mem, &px, d)?;
                // dW_g += cols_side[b, g] · cols(img_side[b, g])ᵀ
                let (img_t, col_t) = sides(&c, &xv, &dyv);
                let geo = &c.geo;
                let taps = geo.taps();
                let (imn, kn, cn) = (geo.img_n(), geo.k_n(), geo.cols_n());
                let (ic, cc) = (c.img_c, c.cols_c);
                let (img_len, col_len) = (c.groups * ic * imn, c.groups * cc * cn);
                let mut gwv = vec![T::ZERO; n];
                let per = cc * ic * kn;
                for b in 0..c.n {
                    for gi in 0..c.groups {
                        let im = &img_t[b * img_len + gi * ic * imn..][..ic * imn];
                        let cols = im2col(im, ic, geo, &taps);
                        let colst = transpose(&cols, ic * kn, cn);
                        let y = &col_t[b * col_len + gi * cc * cn..][..cc * cn];
                        gemm(y, &colst, &mut gwv[gi * per..(gi + 1) * per], cc, cn, ic * kn, T::ONE)?;
                    }
                }
                T::store(mem, p, &gwv, d)?;
            }
            Ok(())
        })
    })?;
    let u = |t: Option<Tensor>| t.unwrap_or_else(Tensor::undefined);
    Ok((u(gi), u(gw), u(gb)))
}
