//! Broadcasting rules.

use xirang_runtime::reference;
use xirang_runtime::shape::{broadcast_all, broadcast_shapes};
use xirang_runtime::{Error, Scalar, Tensor};

#[test]
fn shapes() {
    assert_eq!(broadcast_shapes(&[3, 1], &[4]).unwrap(), vec![3, 4]);
    assert_eq!(broadcast_shapes(&[2, 1, 4], &[3, 1]).unwrap(), vec![2, 3, 4]);
    assert_eq!(broadcast_shapes(&[0], &[1]).unwrap(), vec![0]);
    assert_eq!(broadcast_shapes(&[], &[2, 3]).unwrap(), vec![2, 3]);
    assert_eq!(broadcast_shapes(&[5, 0, 1], &[7]).unwrap(), vec![5, 0, 7]);
    assert!(matches!(broadcast_shapes(&[0], &[2]), Err(Error::Shape(_))));
    assert!(broadcast_shapes(&[2, 3], &[3, 2]).is_err());
    assert_eq!(broadcast_all(&[&[1, 4], &[3, 1], &[]]).unwrap(), vec![3, 4]);
}

#[test]
fn elementwise_ops_broadcast() {
    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0]).view(&[3, 1]).unwrap();
    let b = Tensor::from_slice(&[10.0f32, 20.0, 30.0, 40.0]);
    let c = reference::add(&a, &b, Scalar::Int(1)).unwrap();
    assert_eq!(c.sizes(), &[3, 4]);
    assert_eq!(&c.to_vec::<f32>().unwrap()[..5], &[11., 21., 31., 41., 12.]);
    let g = reference::gt(&a, &b.view(&[1, 4]).unwrap()).unwrap();
    assert_eq!(g.sizes(), &[3, 4]);
    assert!(reference::add(&b, &Tensor::from_slice(&[1.0f32, 2.0]), Scalar::Int(1)).is_err());
    // broadcasting over a strided (transposed) operand
    let m = Tensor::from_vec((0..6).map(|v| v as f32).collect(), &[2, 3]).unwrap().t().unwrap();
    let r = reference::mul(&m, &Tensor::from_slice(&[1.0f32, 10.0])).unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), vec![0., 30., 1., 40., 2., 50.]);
    // where broadcasts all three
    let cond = Tensor::from_slice(&[true, false]).view(&[2, 1]).unwrap();
    let w = reference::where_(&cond, &Tensor::from_slice(&[1i64, 2, 3]), 0i64).unwrap();
    assert_eq!((w.sizes(), w.to_vec::<i64>().unwrap()), (&[2usize, 3][..], vec![1, 2, 3, 0, 0, 0]));
    // masked_fill: the mask broadcasts to self, not the other way round
    let x = Tensor::zeros(&[2, 3], xirang_runtime::DType::F32);
    let mk = Tensor::from_slice(&[true, false, true]);
    let y = reference::masked_fill(&x, &mk, Scalar::Float(5.0)).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![5., 0., 5., 5., 0., 5.]);
    assert!(
        reference::masked_fill(
            &Tensor::zeros(&[3], xirang_runtime::DType::F32),
            &Tensor::from_slice(&[true, false, true]).view(&[3, 1]).unwrap(),
            Scalar::Int(1)
        )
        .is_err()
    );
    // matmul broadcasts batch dims
    let p = Tensor::ones(&[2, 1, 3, 4], xirang_runtime::DType::F32);
    let q = Tensor::ones(&[5, 4, 2], xirang_runtime::DType::F32);
    let r = reference::matmul(&p, &q).unwrap();
    assert_eq!(r.sizes(), &[2, 5, 3, 2]);
    assert!(r.to_vec::<f32>().unwrap().iter().all(|&v| v == 4.0));
}
