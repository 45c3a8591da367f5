//! Zero-dim and empty tensors.

use xirang_runtime::reference::{self, Reduction};
use xirang_runtime::{DType, Scalar, Tensor};

#[test]
fn zero_dim() {
    let s = Tensor::scalar(3.0f32);
    assert_eq!((s.dim(), s.numel()), (0, 1));
    assert_eq!(s.item().unwrap(), Scalar::Float(3.0));
    let v = Tensor::from_slice(&[1.0f32, 2.0]);
    assert_eq!(reference::add(&s, &v, Scalar::Int(1)).unwrap().sizes(), &[2]);
    let ss = reference::mul(&s, &s).unwrap();
    assert_eq!(ss.sizes(), &[] as &[usize]);
    assert_eq!(reference::sum(&s, None, false, None).unwrap().sizes(), &[] as &[usize]);
    assert_eq!(reference::sum(&s, Some(&[0]), true, None).unwrap().sizes(), &[] as &[usize]);
    assert_eq!(reference::sum(&s, Some(&[-1]), false, None).unwrap().item().unwrap(), Scalar::Float(3.0));
    assert!(reference::sum(&s, Some(&[1]), false, None).is_err());
    assert_eq!(s.transpose(0, -1).unwrap().sizes(), &[] as &[usize]);
    assert_eq!(s.view(&[1, 1]).unwrap().sizes(), &[1, 1]);
    assert_eq!(reference::argmax(&s, None, false).unwrap().item().unwrap(), Scalar::Int(0));
    assert_eq!(reference::softmax(&s, 0, None).unwrap().item().unwrap(), Scalar::Float(1.0));
    assert!(reference::matmul(&s, &v).is_err());
    assert!(v.item().is_err());
    // dot product gives a zero-dim result
    let d = reference::matmul(&v, &v).unwrap();
    assert_eq!((d.dim(), d.item().unwrap()), (0, Scalar::Float(5.0)));
    // cat rejects zero-dim inputs
    assert!(reference::cat(&[&s, &s], 0).is_err());
    // index_select on a scalar
    let r = reference::index_select(&s, 0, &Tensor::from_slice(&[0i64])).unwrap();
    assert_eq!(r.sizes(), &[] as &[usize]);
}

#[test]
fn empty() {
    let e = Tensor::zeros(&[0, 3], DType::F32);
    assert_eq!(e.numel(), 0);
    assert!(e.is_contiguous());
    let r = reference::add(&e, &Tensor::from_slice(&[1.0f32, 2.0, 3.0]), Scalar::Int(1)).unwrap();
    assert_eq!(r.sizes(), &[0, 3]);
    assert_eq!(reference::sum(&e, Some(&[0]), false, None).unwrap().to_vec::<f32>().unwrap(), vec![0.0; 3]);
    assert_eq!(reference::prod(&e, Some(&[0]), false, None).unwrap().to_vec::<f32>().unwrap(), vec![1.0; 3]);
    assert!(reference::mean(&e, None, false, None).unwrap().to_vec::<f32>().unwrap()[0].is_nan());
    assert_eq!(reference::sum(&e, Some(&[1]), true, None).unwrap().sizes(), &[0, 1]);
    assert!(reference::amax(&e, None, false).is_err());
    assert!(reference::amax(&e, Some(&[0]), false).is_err());
    assert_eq!(reference::amax(&e, Some(&[1]), false).unwrap().sizes(), &[0]);
    assert!(reference::argmax(&e, None, false).is_err());
    assert_eq!(reference::matmul(&e, &Tensor::ones(&[3, 2], DType::F32)).unwrap().sizes(), &[0, 2]);
    let z = reference::mm(&Tensor::ones(&[2, 0], DType::F32), &Tensor::ones(&[0, 3], DType::F32)).unwrap();
    assert_eq!(z.to_vec::<f32>().unwrap(), vec![0.0; 6]);
    assert_eq!(reference::softmax(&e, 1, None).unwrap().sizes(), &[0, 3]);
    assert_eq!(reference::softmax(&e, 0, None).unwrap().sizes(), &[0, 3]);
    assert!(e.reshape(&[-1, 0]).is_err());
    assert_eq!(e.reshape(&[3, 0]).unwrap().sizes(), &[3, 0]);
    // legacy 1-D empty tensors are skipped by cat
    let a = Tensor::ones(&[2, 3], DType::F32);
    let legacy = Tensor::zeros(&[0], DType::F64);
    let c = reference::cat(&[&a, &legacy, &a], 0).unwrap();
    assert_eq!((c.sizes(), c.dtype()), (&[4usize, 3][..], DType::F64));
    assert_eq!(reference::cat(&[&a, &e], 0).unwrap().sizes(), &[2, 3]);
    // losses and gathers on empty batches
    let l = reference::mse_loss(&e, &e, Reduction::Sum).unwrap();
    assert_eq!(l.item().unwrap(), Scalar::Float(0.0));
    let g = reference::gather(&e, 1, &Tensor::zeros(&[0, 2], DType::I64)).unwrap();
    assert_eq!(g.sizes(), &[0, 2]);
    assert_eq!(reference::index_select(&a, 0, &Tensor::zeros(&[0], DType::I64)).unwrap().sizes(), &[0, 3]);
}
