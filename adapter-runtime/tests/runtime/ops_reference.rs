//! Host reference implementations against hand-checked values, and
//! backward ops against central finite differences (in float64).

use xirang_runtime::reference::{self, Generator, Reduction};
use xirang_runtime::{DType, Error, Scalar, Tensor};

fn f32t(v: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}
fn f64t(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}
fn vals(t: &Tensor) -> Vec<f64> {
    t.to_f64_vec().unwrap()
}
fn close(a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        let ok = (x.is_nan() && y.is_nan()) || (x - y).abs() <= tol * (1.0 + y.abs());
        assert!(ok, "{a:?} vs {b:?}");
    }
}

/// Deterministic pseudo-random values in [-1, 1).
fn rand(n: usize, seed: u64) -> Vec<f64> {
    let mut g = Generator::new(seed);
    (0..n).map(|_| g.uniform() * 2.0 - 1.0).collect()
}

/// Numeric gradient of `sum(f(x) * r)` w.r.t. x.
fn numeric_grad(x: &[f64], r: &[f64], f: impl Fn(&[f64]) -> Vec<f64>) -> Vec<f64> {
    let h = 1e-6;
    (0..x.len())
        .map(|i| {
            let (mut a, mut b) = (x.to_vec(), x.to_vec());
            a[i] += h;
            b[i] -= h;
            let fa: f64 = f(&a).iter().zip(r).map(|(u, v)| u * v).sum();
            let fb: f64 = f(&b).iter().zip(r).map(|(u, v)| u * v).sum();
            (fa - fb) / (2.0 * h)
        })
        .collect()
}

#[test]
fn unary_values() {
    let x = f32t(&[0.0, 1.0, -1.0, 4.0], &[4]);
    close(
        &vals(&reference::exp(&x).unwrap()),
        &[1.0, std::f64::consts::E, 1.0 / std::f64::consts::E, 54.598150033144236],
        1e-6,
    );
    close(
        &vals(&reference::sigmoid(&x).unwrap()),
        &[0.5, 0.7310585786300049, 0.2689414213699951, 0.9820137900379085],
        1e-6,
    );
    close(
        &vals(&reference::gelu(&x, "none").unwrap()),
        &[0.0, 0.8413447460685429, -0.15865525393145707, 3.999873],
        1e-6,
    );
    close(&vals(&reference::gelu(&x, "tanh").unwrap())[..2], &[0.0, 0.8411919906082768], 1e-6);
    assert!(reference::gelu(&x, "fast").is_err());
    close(&vals(&reference::silu(&x).unwrap())[..2], &[0.0, 0.7310585786300049], 1e-6);
    close(&vals(&reference::tanh(&x).unwrap())[..2], &[0.0, 0.7615941559557649], 1e-6);
    close(&vals(&reference::rsqrt(&x).unwrap())[3..], &[0.5], 0.0);
    let l = vals(&reference::log(&f32t(&[0.0, -1.0, 1.0], &[3])).unwrap());
    assert!(l[0] == f64::NEG_INFINITY && l[1].is_nan() && l[2] == 0.0);
    let r = vals(&reference::relu(&f32t(&[-1.0, f32::NAN, 2.0], &[3])).unwrap());
    assert!(r[0] == 0.0 && r[1].is_nan() && r[2] == 2.0);
    assert_eq!(reference::neg(&Tensor::from_slice(&[-128i8, 5])).unwrap().to_vec::<i8>().unwrap(), vec![-128, -5]);
    assert_eq!(
        reference::abs(&Tensor::from_slice(&[-3i32, i32::MIN])).unwrap().to_vec::<i32>().unwrap(),
        vec![3, i32::MIN]
    );
    // half precision results are rounded once
    let h = reference::sqrt(&Tensor::from_slice(&[half::f16::from_f32(2.0)])).unwrap();
    assert_eq!(h.dtype(), DType::F16);
    assert_eq!(vals(&h), vec![half::f16::from_f64(std::f64::consts::SQRT_2).to_f64()]);
}

#[test]
fn nan_handling() {
    let a = f32t(&[1.0, f32::NAN, 3.0], &[3]);
    let b = f32t(&[f32::NAN, 2.0, 1.0], &[3]);
    let mx = vals(&reference::maximum(&a, &b).unwrap());
    assert!(mx[0].is_nan() && mx[1].is_nan() && mx[2] == 3.0);
    let mn = vals(&reference::minimum(&a, &b).unwrap());
    assert!(mn[0].is_nan() && mn[1].is_nan() && mn[2] == 1.0);
    let c = vals(&reference::clamp(&a, Some(Scalar::Float(1.5)), Some(Scalar::Float(2.5))).unwrap());
    assert!(c[0] == 1.5 && c[1].is_nan() && c[2] == 2.5);
    // min > max: everything becomes max
    assert_eq!(
        vals(&reference::clamp(&f32t(&[0.0, 5.0], &[2]), Some(Scalar::Int(3)), Some(Scalar::Int(1))).unwrap()),
        vec![1.0, 1.0]
    );
    assert!(vals(&reference::clamp(&f32t(&[0.0], &[1]), Some(Scalar::Float(f64::NAN)), None).unwrap())[0].is_nan());
    assert!(reference::clamp(&a, None, None).is_err());
    assert_eq!(
        reference::clamp(&Tensor::from_slice(&[-5i64, 5]), Some(Scalar::Int(-1)), Some(Scalar::Int(1)))
            .unwrap()
            .to_vec::<i64>()
            .unwrap(),
        vec![-1, 1]
    );
    assert!(vals(&reference::amax(&a, None, false).unwrap())[0].is_nan());
    assert!(vals(&reference::amin(&a, None, false).unwrap())[0].is_nan());
    assert_eq!(reference::argmax(&a, None, false).unwrap().to_vec::<i64>().unwrap(), vec![1]);
    assert_eq!(reference::argmin(&a, None, false).unwrap().to_vec::<i64>().unwrap(), vec![1]);
    // ties: the first index wins
    let t = f32t(&[2.0, 5.0, 5.0, 1.0, 1.0], &[5]);
    assert_eq!(reference::argmax(&t, Some(0), false).unwrap().to_vec::<i64>().unwrap(), vec![1]);
    assert_eq!(reference::argmin(&t, Some(0), false).unwrap().to_vec::<i64>().unwrap(), vec![3]);
    assert_eq!(reference::eq(&a, &a).unwrap().to_vec::<bool>().unwrap(), vec![true, false, true]);
    assert_eq!(reference::ne(&a, &a).unwrap().to_vec::<bool>().unwrap(), vec![false, true, false]);
    assert_eq!(reference::ge(&a, 1.0).unwrap().to_vec::<bool>().unwrap(), vec![true, false, true]);
    assert_eq!(reference::le(&a, 1i64).unwrap().to_vec::<bool>().unwrap(), vec![true, false, false]);
}

#[test]
fn reductions_with_dims() {
    let x = Tensor::arange(24, DType::F32).view(&[2, 3, 4]).unwrap();
    let s = reference::sum(&x, Some(&[1]), false, None).unwrap();
    assert_eq!((s.sizes(), vals(&s)), (&[2usize, 4][..], vec![12., 15., 18., 21., 48., 51., 54., 57.]));
    assert_eq!(reference::sum(&x, Some(&[1]), true, None).unwrap().sizes(), &[2, 1, 4]);
    assert_eq!(vals(&reference::sum(&x, Some(&[0, 2]), false, None).unwrap()), vec![60., 92., 124.]);
    assert_eq!(vals(&reference::sum(&x, Some(&[]), false, None).unwrap()), vec![276.0], "dim=[] reduces all");
    assert!(reference::sum(&x, Some(&[0, -3]), false, None).is_err(), "duplicate dims");
    assert_eq!(reference::sum(&x, None, false, Some(DType::F64)).unwrap().dtype(), DType::F64);
    assert_eq!(vals(&reference::mean(&x, Some(&[-1]), false, None).unwrap())[..2], [1.5, 5.5]);
    assert_eq!(
        vals(&reference::prod(&f32t(&[1., 2., 3., 4.], &[2, 2]), Some(&[1]), false, None).unwrap()),
        vec![2., 12.]
    );
    assert_eq!(vals(&reference::amax(&x, Some(&[2]), false).unwrap()), vec![3., 7., 11., 15., 19., 23.]);
    assert_eq!(vals(&reference::amin(&x, Some(&[0, 1]), true).unwrap()), vec![0., 1., 2., 3.]);
    let am = reference::argmax(&x, None, true).unwrap();
    assert_eq!((am.sizes(), am.to_vec::<i64>().unwrap()), (&[1usize, 1, 1][..], vec![23]));
    assert_eq!(reference::argmin(&x, Some(0), false).unwrap().to_vec::<i64>().unwrap(), vec![0; 12]);
    assert_eq!(reference::argmax(&x, Some(-1), true).unwrap().sizes(), &[2, 3, 1]);
    // reductions over a non-contiguous view
    let t = x.transpose(0, 2).unwrap();
    assert_eq!(vals(&reference::sum(&t, Some(&[1, 2]), false, None).unwrap()), vec![60., 66., 72., 78.]);
    // int64 sums wrap like C++
    let big = Tensor::from_slice(&[i64::MAX, 1]);
    assert_eq!(reference::sum(&big, None, false, None).unwrap().to_vec::<i64>().unwrap(), vec![i64::MIN]);
    // large inputs go through rayon
    let ones = Tensor::ones(&[300_000], DType::F32);
    assert_eq!(vals(&reference::sum(&ones, None, false, None).unwrap()), vec![300_000.0]);
    let two = reference::add(&ones, &ones, Scalar::Int(1)).unwrap();
    assert_eq!(vals(&reference::amax(&two, None, false).unwrap()), vec![2.0]);
}

#[test]
fn matrix_products() {
    let a = f32t(&[1., 2., 3., 4.], &[2, 2]);
    let b = f32t(&[5., 6., 7., 8.], &[2, 2]);
    assert_eq!(vals(&reference::mm(&a, &b).unwrap()), vec![19., 22., 43., 50.]);
    assert_eq!(vals(&reference::mm(&a, &b.t().unwrap()).unwrap()), vec![17., 23., 39., 53.]);
    assert!(reference::mm(&a, &f32t(&[1., 2., 3.], &[3, 1])).is_err());
    let ab = reference::bmm(
        &reference::cat(&[&a.unsqueeze(0).unwrap(), &b.unsqueeze(0).unwrap()], 0).unwrap(),
        &reference::cat(&[&b.unsqueeze(0).unwrap(), &a.unsqueeze(0).unwrap()], 0).unwrap(),
    )
    .unwrap();
    assert_eq!(vals(&ab), vec![19., 22., 43., 50., 23., 34., 31., 46.]);
    let ones = Tensor::ones(&[2, 2], DType::F32);
    assert_eq!(
        vals(&reference::addmm(&ones, &a, &b, Scalar::Int(2), Scalar::Int(3)).unwrap()),
        vec![59., 68., 131., 152.]
    );
    let nan = Tensor::full(&[2], Scalar::Float(f64::NAN), DType::F32);
    assert_eq!(
        vals(&reference::addmm(&nan, &a, &b, Scalar::Int(0), Scalar::Int(1)).unwrap()),
        vec![19., 22., 43., 50.],
        "beta=0 ignores input"
    );
    let v = f32t(&[1., 2.], &[2]);
    let r = reference::matmul(&v, &a).unwrap();
    assert_eq!((r.sizes(), vals(&r)), (&[2usize][..], vec![7., 10.]));
    let r = reference::matmul(&a, &Tensor::ones(&[2], DType::F32)).unwrap();
    assert_eq!((r.sizes(), vals(&r)), (&[2usize][..], vec![3., 7.]));
    let r = reference::matmul(&Tensor::ones(&[3, 2, 2], DType::F32), &v).unwrap();
    assert_eq!(r.sizes(), &[3, 2]);
    let ai = Tensor::from_slice(&[1i64, 2, 3, 4]).view(&[2, 2]).unwrap();
    assert_eq!(reference::mm(&ai, &ai).unwrap().to_vec::<i64>().unwrap(), vec![7, 10, 15, 22]);
    // a larger product (parallel path): A @ I == A
    let n = 64;
    let m: Vec<f64> = rand(n * n, 3);
    let eye: Vec<f64> = (0..n * n).map(|i| if i / n == i % n { 1.0 } else { 0.0 }).collect();
    let p = reference::mm(&f64t(&m, &[n, n]), &f64t(&eye, &[n, n])).unwrap();
    assert_eq!(vals(&p), m);
}

#[test]
fn softmax_family() {
    let x = f32t(&[1., 2., 3.], &[1, 3]);
    close(
        &vals(&reference::softmax(&x, 1, None).unwrap()),
        &[0.09003057317038043, 0.24472847105479764, 0.6652409557748218],
        1e-6,
    );
    close(
        &vals(&reference::log_softmax(&x, -1, None).unwrap()),
        &[-2.4076059644443806, -1.4076059644443804, -0.4076059644443804],
        1e-6,
    );
    assert_eq!(vals(&reference::softmax(&x, 0, None).unwrap()), vec![1.0; 3]);
    // large logits do not overflow; -inf rows give NaN like PyTorch
    close(&vals(&reference::softmax(&f32t(&[1000., 1000.], &[2]), 0, None).unwrap()), &[0.5, 0.5], 0.0);
    let h = Tensor::from_slice(&[half::f16::from_f32(1.0), half::f16::from_f32(2.0)]);
    assert_eq!(reference::softmax(&h, 0, Some(DType::F32)).unwrap().dtype(), DType::F32);
    assert_eq!(reference::softmax(&h, 0, None).unwrap().dtype(), DType::F16);
    assert!(matches!(reference::softmax(&Tensor::from_slice(&[1i64]), 0, None), Err(Error::DType(_))));
    // a non-contiguous input along a middle dim
    let y = Tensor::arange(24, DType::F64).view(&[2, 3, 4]).unwrap().transpose(0, 2).unwrap();
    let s = reference::softmax(&y, 1, None).unwrap();
    let sums = reference::sum(&s, Some(&[1]), false, None).unwrap();
    close(&vals(&sums), &[1.0; 8], 1e-12);
}

#[test]
fn softmax_backward_matches_finite_differences() {
    let shape = [2, 3, 4];
    let x = rand(24, 1);
    let r = rand(24, 2);
    for dim in [0i64, 1, 2] {
        for log in [false, true] {
            let f = |v: &[f64]| {
                let t = f64t(v, &shape);
                let o = if log { reference::log_softmax(&t, dim, None) } else { reference::softmax(&t, dim, None) };
                vals(&o.unwrap())
            };
            let y = if log {
                reference::log_softmax(&f64t(&x, &shape), dim, None)
            } else {
                reference::softmax(&f64t(&x, &shape), dim, None)
            }
            .unwrap();
            let g = f64t(&r, &shape);
            let an = if log {
                reference::log_softmax_backward(&g, &y, dim)
            } else {
                reference::softmax_backward(&g, &y, dim)
            }
            .unwrap();
            close(&vals(&an), &numeric_grad(&x, &r, f), 1e-6);
        }
    }
}

#[test]
fn layer_norm_forward_and_backward() {
    let x = f32t(&[1., 2., 3., 4.], &[1, 4]);
    let (o, m, r) = reference::layer_norm(&x, &[4], None, None, 1e-5).unwrap();
    close(&vals(&o), &[-1.3416354199689269, -0.447211806656309, 0.447211806656309, 1.3416354199689269], 1e-6);
    assert_eq!((m.sizes(), vals(&m)), (&[1usize, 1][..], vec![2.5]));
    close(&vals(&r), &[0.894423613312618], 1e-6);
    assert!(reference::layer_norm(&x, &[3], None, None, 1e-5).is_err());

    let shape = [2, 3, 4];
    let ns = [3usize, 4];
    let xv = rand(24, 5);
    let wv = rand(12, 6);
    let bv = rand(12, 7);
    let rv = rand(24, 8);
    let (w, b) = (f64t(&wv, &ns), f64t(&bv, &ns));
    let xt = f64t(&xv, &shape);
    let (_, mean, rstd) = reference::layer_norm(&xt, &ns, Some(&w), Some(&b), 1e-5).unwrap();
    let (dx, dw, db) = reference::layer_norm_backward(&f64t(&rv, &shape), &xt, &ns, &mean, &rstd, Some(&w)).unwrap();
    let fx = |v: &[f64]| vals(&reference::layer_norm(&f64t(v, &shape), &ns, Some(&w), Some(&b), 1e-5).unwrap().0);
    close(&vals(&dx), &numeric_grad(&xv, &rv, fx), 1e-5);
    let fw = |v: &[f64]| vals(&reference::layer_norm(&xt, &ns, Some(&f64t(v, &ns)), Some(&b), 1e-5).unwrap().0);
    close(&vals(&dw.unwrap()), &numeric_grad(&wv, &rv, fw), 1e-5);
    let fb = |v: &[f64]| vals(&reference::layer_norm(&xt, &ns, Some(&w), Some(&f64t(v, &ns)), 1e-5).unwrap().0);
    close(&vals(&db.unwrap()), &numeric_grad(&bv, &rv, fb), 1e-5);
    let (_, dw0, _) = reference::layer_norm_backward(&f64t(&rv, &shape), &xt, &ns, &mean, &rstd, None).unwrap();
    assert!(dw0.is_none());
}

#[test]
fn embedding_forward_and_backward() {
    let w = f32t(&[0., 1., 10., 11., 20., 21.], &[3, 2]);
    let idx = Tensor::from_slice(&[2i64, 0, 2, 1]).view(&[2, 2]).unwrap();
    let e = reference::embedding(&w, &idx).unwrap();
    assert_eq!((e.sizes(), vals(&e)), (&[2usize, 2, 2][..], vec![20., 21., 0., 1., 20., 21., 10., 11.]));
    assert!(matches!(reference::embedding(&w, &Tensor::from_slice(&[3i64])), Err(Error::Index(_))));
    assert!(reference::embedding(&w, &Tensor::from_slice(&[1.0f32])).is_err());
    let g = Tensor::ones(&[2, 2, 2], DType::F32);
    let gw = reference::embedding_backward(&g, &idx, 3, None, false).unwrap();
    assert_eq!(vals(&gw), vec![1., 1., 1., 1., 2., 2.]);
    let gw = reference::embedding_backward(&g, &idx, 3, Some(0), true).unwrap();
    assert_eq!(vals(&gw), vec![0., 0., 1., 1., 1., 1.]);
}

#[test]
fn cat_index_gather_scatter() {
    let a = f32t(&[1., 2., 3., 4.], &[2, 2]);
    let b = Tensor::from_slice(&[5i32, 6]).view(&[2, 1]).unwrap();
    let c = reference::cat(&[&a, &b], 1).unwrap();
    assert_eq!((c.dtype(), c.sizes(), vals(&c)), (DType::F32, &[2usize, 3][..], vec![1., 2., 5., 3., 4., 6.]));
    assert!(reference::cat(&[&a, &b], 0).is_err());
    assert!(reference::cat(&[], 0).is_err());
    let x = f32t(&[1., 2., 3., 4., 5., 6.], &[2, 3]);
    let s = reference::index_select(&x, 1, &Tensor::from_slice(&[2i64, 0])).unwrap();
    assert_eq!(vals(&s), vec![3., 1., 6., 4.]);
    assert!(reference::index_select(&x, 1, &Tensor::from_slice(&[3i64])).is_err());
    assert!(reference::index_select(&x, 1, &Tensor::from_slice(&[-1i64])).is_err());
    let g = reference::gather(&a, 1, &Tensor::from_slice(&[0i64, 0, 1, 0]).view(&[2, 2]).unwrap()).unwrap();
    assert_eq!(vals(&g), vec![1., 1., 4., 3.]);
    assert!(reference::gather(&a, 1, &Tensor::from_slice(&[2i64, 0]).view(&[1, 2]).unwrap()).is_err());
    let src = Tensor::ones(&[2, 5], DType::F32);
    let index = Tensor::from_slice(&[0i64, 1, 2, 0, 0, 0, 1, 2, 2, 2]).view(&[2, 5]).unwrap();
    let base = Tensor::zeros(&[3, 5], DType::F32);
    let r = reference::scatter_add(&base, 0, &index, &src).unwrap();
    assert_eq!(vals(&r), vec![2., 0., 0., 1., 1., 0., 2., 0., 0., 0., 0., 0., 2., 1., 1.]);
    // only the first row of the index
    let r1 = reference::scatter_add(&base, 0, &index.narrow(0, 0, 1).unwrap(), &src).unwrap();
    assert_eq!(&vals(&r1)[..5], &[1., 0., 0., 1., 1.]);
    reference::scatter_add_(&base, 0, &index, &src).unwrap();
    assert_eq!(vals(&base), vals(&r));
    assert!(reference::scatter_add(&base, 0, &index, &Tensor::ones(&[2, 5], DType::F64)).is_err());
}

#[test]
fn dropout_is_seeded_and_scaled() {
    let x = Tensor::ones(&[10_000], DType::F32);
    let (o1, m1) = reference::dropout(&x, 0.25, true, &mut Generator::new(42)).unwrap();
    let (o2, m2) = reference::dropout(&x, 0.25, true, &mut Generator::new(42)).unwrap();
    assert_eq!(vals(&o1), vals(&o2));
    assert_eq!(m1.to_vec::<bool>().unwrap(), m2.to_vec::<bool>().unwrap());
    let (o3, _) = reference::dropout(&x, 0.25, true, &mut Generator::new(7)).unwrap();
    assert_ne!(vals(&o1), vals(&o3));
    let kept = m1.to_vec::<bool>().unwrap().iter().filter(|k| **k).count();
    assert!((7_300..7_700).contains(&kept), "kept {kept}");
    assert!(vals(&o1).iter().all(|&v| v == 0.0 || (v - 4.0 / 3.0).abs() < 1e-6));
    let (e, em) = reference::dropout(&x, 0.5, false, &mut Generator::new(1)).unwrap();
    assert_eq!(vals(&e), vals(&x));
    assert!(em.to_vec::<bool>().unwrap().iter().all(|k| *k));
    let (z, _) = reference::dropout(&x, 1.0, true, &mut Generator::new(1)).unwrap();
    assert!(vals(&z).iter().all(|&v| v == 0.0));
    assert!(reference::dropout(&x, 1.5, true, &mut Generator::new(1)).is_err());
    let gb = reference::dropout_backward(&x, &m1, 4.0 / 3.0).unwrap();
    assert_eq!(vals(&gb), vals(&o1));
}

#[test]
fn nll_and_cross_entropy_values() {
    let lp = f32t(&[-1., -2., -3., -0.5, -1.5, -2.5], &[2, 3]);
    let t = Tensor::from_slice(&[0i64, 2]);
    let w = f32t(&[1., 2., 3.], &[3]);
    let (l, tw) = reference::nll_loss(&lp, &t, Some(&w), Reduction::None, -100).unwrap();
    // PyTorch reports total_weight 0 when nothing is reduced (checked against torch 2.15 goldens).
    assert_eq!((vals(&l), vals(&tw)), (vec![1.0, 7.5], vec![0.0]));
    let (_, tw) = reference::nll_loss(&lp, &t, Some(&w), Reduction::Sum, -100).unwrap();
    assert_eq!(vals(&tw), vec![4.0]);
    assert_eq!(vals(&reference::nll_loss(&lp, &t, Some(&w), Reduction::Sum, -100).unwrap().0), vec![8.5]);
    assert_eq!(vals(&reference::nll_loss(&lp, &t, Some(&w), Reduction::Mean, -100).unwrap().0), vec![2.125]);
    assert_eq!(vals(&reference::nll_loss(&lp, &t, Some(&w), Reduction::Mean, 2).unwrap().0), vec![1.0]);
    assert!(vals(&reference::nll_loss(&lp, &t, None, Reduction::Mean, 0).unwrap().0)[0] == 2.5);
    let all_ignored = reference::nll_loss(&lp, &Tensor::from_slice(&[1i64, 1]), None, Reduction::Mean, 1).unwrap().0;
    assert!(vals(&all_ignored)[0].is_nan());
    assert!(matches!(
        reference::nll_loss(&lp, &Tensor::from_slice(&[0i64, 3]), None, Reduction::Sum, -100),
        Err(Error::Index(_))
    ));
    assert!(reference::nll_loss(&lp, &Tensor::from_slice(&[0i64]), None, Reduction::Sum, -100).is_err());

    let logits = f32t(&[1., 2., 3.], &[1, 3]);
    let tt = Tensor::from_slice(&[2i64]);
    close(
        &vals(&reference::cross_entropy(&logits, &tt, None, Reduction::Mean, -100, 0.0).unwrap()),
        &[0.4076059644443804],
        1e-6,
    );
    close(
        &vals(&reference::cross_entropy(&logits, &tt, None, Reduction::Mean, -100, 0.1).unwrap()),
        &[0.5076059644443804],
        1e-6,
    );
    // 1-D input with a zero-dim target
    let one =
        reference::cross_entropy(&f32t(&[1., 2., 3.], &[3]), &Tensor::scalar(2i64), None, Reduction::Mean, -100, 0.0)
            .unwrap();
    close(&vals(&one), &[0.4076059644443804], 1e-6);
    assert!(
        reference::cross_entropy(&logits, &f32t(&[0., 0., 1.], &[1, 3]), None, Reduction::Mean, -100, 0.0).is_err()
    );
    // (N, C, d) input equals the flattened (N*d, C) computation
    let x = rand(2 * 3 * 4, 11);
    let xt = f64t(&x, &[2, 3, 4]);
    let tgt = Tensor::from_slice(&[0i64, 1, 2, 1, 2, 2, 0, 0]).view(&[2, 4]).unwrap();
    let nd = reference::cross_entropy(&xt, &tgt, None, Reduction::None, -100, 0.0).unwrap();
    let flat = reference::cross_entropy(
        &xt.permute(&[0, 2, 1]).unwrap().reshape(&[8, 3]).unwrap(),
        &tgt.reshape(&[8]).unwrap(),
        None,
        Reduction::None,
        -100,
        0.0,
    )
    .unwrap();
    assert_eq!(nd.sizes(), &[2, 4]);
    close(&vals(&nd), &vals(&flat), 1e-12);
}

#[test]
fn loss_backwards_match_finite_differences() {
    let (n, c) = (4usize, 5usize);
    let x = rand(n * c, 21);
    let w = f64t(&[0.5, 1.0, 2.0, 1.5, 0.25], &[c]);
    let tgt = Tensor::from_slice(&[1i64, 4, -100, 0]);
    for reduction in [Reduction::Mean, Reduction::Sum, Reduction::None] {
        for smoothing in [0.0, 0.2] {
            for weight in [None, Some(&w)] {
                let r = if reduction == Reduction::None { rand(n, 22) } else { vec![0.7] };
                let g = if reduction == Reduction::None { f64t(&r, &[n]) } else { f64t(&r, &[]) };
                let f = |v: &[f64]| {
                    vals(
                        &reference::cross_entropy(&f64t(v, &[n, c]), &tgt, weight, reduction, -100, smoothing).unwrap(),
                    )
                };
                let an =
                    reference::cross_entropy_backward(&g, &f64t(&x, &[n, c]), &tgt, weight, reduction, -100, smoothing)
                        .unwrap();
                close(&vals(&an), &numeric_grad(&x, &r, f), 1e-5);
            }
        }
    }
    // nll_loss backward on (N, C, d) input
    let x3 = rand(2 * 3 * 2, 23);
    let t3 = Tensor::from_slice(&[0i64, 2, 1, 1]).view(&[2, 2]).unwrap();
    let (_, tw) = reference::nll_loss(&f64t(&x3, &[2, 3, 2]), &t3, None, Reduction::Mean, -100).unwrap();
    let an =
        reference::nll_loss_backward(&f64t(&[1.3], &[]), &f64t(&x3, &[2, 3, 2]), &t3, None, Reduction::Mean, -100, &tw)
            .unwrap();
    let f = |v: &[f64]| vals(&reference::nll_loss(&f64t(v, &[2, 3, 2]), &t3, None, Reduction::Mean, -100).unwrap().0);
    close(&vals(&an), &numeric_grad(&x3, &[1.3], f), 1e-6);
    // mse
    let a = f32t(&[1., 2., 3.], &[3]);
    let b = f32t(&[1., 0., 5.], &[3]);
    close(&vals(&reference::mse_loss(&a, &b, Reduction::Mean).unwrap()), &[8.0 / 3.0], 1e-6);
    assert_eq!(vals(&reference::mse_loss(&a, &b, Reduction::Sum).unwrap()), vec![8.0]);
    assert_eq!(vals(&reference::mse_loss(&a, &b, Reduction::None).unwrap()), vec![0.0, 4.0, 4.0]);
    let gm = reference::mse_loss_backward(&Tensor::scalar(1.0f32), &a, &b, Reduction::Mean).unwrap();
    close(&vals(&gm), &[0.0, 4.0 / 3.0, -4.0 / 3.0], 1e-6);
}

#[test]
fn where_and_masked_fill() {
    let c = Tensor::from_slice(&[true, false]);
    assert!(reference::where_(&Tensor::from_slice(&[1u8, 0]), 1i64, 0i64).is_err());
    assert_eq!(reference::where_(&c, 1i64, 0i64).unwrap().to_vec::<i64>().unwrap(), vec![1, 0]);
    let x = Tensor::from_slice(&[1i32, 2]);
    let m = reference::masked_fill(&x, &c, Scalar::Float(7.9)).unwrap();
    assert_eq!((m.dtype(), m.to_vec::<i32>().unwrap()), (DType::I32, vec![7, 2]));
    assert!(reference::masked_fill(&x, &Tensor::from_slice(&[1i64, 0]), Scalar::Int(0)).is_err());
}
