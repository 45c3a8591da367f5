//! Strides, views and storage sharing (expected strides checked by hand
//! against PyTorch's rules).

use xirang_runtime::{DType, Error, Scalar, Tensor};

fn ar(n: usize) -> Tensor {
    Tensor::arange(n, DType::I64)
}
fn vals(t: &Tensor) -> Vec<i64> {
    t.to_i64_vec().unwrap()
}

#[test]
fn view_and_reshape() {
    let t = ar(24).view(&[2, 3, 4]).unwrap();
    assert_eq!(t.strides(), &[12, 4, 1]);
    assert!(t.is_contiguous());
    let v = t.view(&[4, -1]).unwrap();
    assert_eq!((v.sizes(), v.strides()), (&[4usize, 6][..], &[6usize, 1][..]));
    assert!(v.shares_storage(&t));
    assert!(matches!(t.view(&[5, -1]), Err(Error::Shape(_))));
    assert!(matches!(t.view(&[-1, -1]), Err(Error::Shape(_))));
    // view of a transposed tensor: only splits that keep strides work
    let x = ar(12).view(&[3, 4]).unwrap().t().unwrap();
    assert_eq!(x.strides(), &[1, 4]);
    let s = x.view(&[2, 2, 3]).unwrap();
    assert_eq!(s.strides(), &[2, 1, 4]);
    assert!(x.view(&[12]).is_err());
    let r = x.reshape(&[12]).unwrap();
    assert!(!r.shares_storage(&x));
    assert_eq!(vals(&r), vec![0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]);
    // reshape that can be a view is a view
    assert!(t.reshape(&[6, 4]).unwrap().shares_storage(&t));
    assert_eq!(t.flatten().unwrap().sizes(), &[24]);
}

#[test]
fn transpose_permute_contiguous() {
    let t = ar(24).view(&[2, 3, 4]).unwrap();
    let tr = t.transpose(0, 2).unwrap();
    assert_eq!((tr.sizes(), tr.strides()), (&[4usize, 3, 2][..], &[1usize, 4, 12][..]));
    assert!(!tr.is_contiguous());
    assert_eq!(&vals(&tr)[..4], &[0, 12, 4, 16]);
    let p = t.permute(&[2, 0, 1]).unwrap();
    assert_eq!((p.sizes(), p.strides()), (&[4usize, 2, 3][..], &[1usize, 12, 4][..]));
    assert!(t.permute(&[0, 0, 1]).is_err());
    assert!(t.permute(&[0, 1]).is_err());
    let c = p.contiguous().unwrap();
    assert!(c.is_contiguous() && !c.shares_storage(&t));
    assert_eq!(c.strides(), &[6, 3, 1]);
    assert!(t.contiguous().unwrap().shares_storage(&t));
    assert_eq!(t.transpose(-1, -3).unwrap().sizes(), &[4, 3, 2]);
    assert!(matches!(t.transpose(0, 3), Err(Error::Index(_))));
}

#[test]
fn expand_and_broadcast_views() {
    let x = Tensor::from_slice(&[1i64, 2, 3]).view(&[3, 1]).unwrap();
    let e = x.expand(&[-1, 4]).unwrap();
    assert_eq!((e.sizes(), e.strides()), (&[3usize, 4][..], &[1usize, 0][..]));
    assert_eq!(vals(&e), vec![1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3]);
    let e3 = x.expand(&[2, 3, 4]).unwrap();
    assert_eq!(e3.strides(), &[0, 1, 0]);
    assert!(e3.shares_storage(&x));
    assert!(x.expand(&[4, 4]).is_err());
    assert!(x.expand(&[4]).is_err());
    assert!(x.expand(&[-1, -1, 2]).is_err());
}

#[test]
fn narrow_slice_select() {
    let t = ar(24).view(&[2, 3, 4]).unwrap();
    let n = t.narrow(1, 1, 2).unwrap();
    assert_eq!((n.sizes(), n.storage_offset()), (&[2usize, 2, 4][..], 4));
    assert!(t.narrow(1, 2, 2).is_err());
    assert_eq!(t.narrow(1, -1, 1).unwrap().storage_offset(), 8);
    let s = t.slice(2, Some(1), None, 2).unwrap();
    assert_eq!((s.sizes(), s.strides(), s.storage_offset()), (&[2usize, 3, 2][..], &[12usize, 4, 2][..], 1));
    assert_eq!(&vals(&s)[..4], &[1, 3, 5, 7]);
    let s2 = t.slice(2, Some(-3), Some(100), 1).unwrap();
    assert_eq!(s2.sizes(), &[2, 3, 3]);
    assert_eq!(t.slice(0, Some(5), None, 1).unwrap().sizes(), &[0, 3, 4]);
    assert!(t.slice(0, None, None, 0).is_err());
    let sel = t.select(1, -1).unwrap();
    assert_eq!((sel.sizes(), sel.strides(), sel.storage_offset()), (&[2usize, 4][..], &[12usize, 1][..], 8));
    assert!(matches!(t.select(1, 3), Err(Error::Index(_))));
    assert!(Tensor::scalar(1i64).select(0, 0).is_err());
}

#[test]
fn squeeze_unsqueeze() {
    let t = ar(6).view(&[1, 3, 1, 2]).unwrap();
    assert_eq!(t.squeeze().sizes(), &[3, 2]);
    assert_eq!(t.squeeze_dim(0).unwrap().sizes(), &[3, 1, 2]);
    assert_eq!(t.squeeze_dim(1).unwrap().sizes(), &[1, 3, 1, 2]);
    let u = ar(24).view(&[2, 3, 4]).unwrap();
    let a = u.unsqueeze(1).unwrap();
    assert_eq!((a.sizes(), a.strides()), (&[2usize, 1, 3, 4][..], &[12usize, 12, 4, 1][..]));
    let b = u.unsqueeze(-1).unwrap();
    assert_eq!((b.sizes(), b.strides()), (&[2usize, 3, 4, 1][..], &[12usize, 4, 1, 1][..]));
    assert!(u.unsqueeze(4).is_err());
    let z = Tensor::scalar(5i64);
    assert_eq!(z.unsqueeze(0).unwrap().sizes(), &[1]);
    assert_eq!(z.unsqueeze(0).unwrap().squeeze().sizes(), &[] as &[usize]);
}

#[test]
fn as_strided_and_bounds() {
    let t = ar(6);
    let a = t.as_strided(&[2, 2], &[1, 2], 1).unwrap();
    assert_eq!(vals(&a), vec![1, 3, 2, 4]);
    assert!(a.shares_storage(&t));
    assert!(t.as_strided(&[2, 3], &[3, 1], 1).is_err(), "needs 7 elements");
    assert!(t.as_strided(&[2], &[1, 1], 0).is_err());
    // size-1 dims do not affect contiguity
    let c = t.as_strided(&[1, 3], &[100, 1], 0).unwrap();
    assert!(c.is_contiguous());
    // overlapping view
    let o = t.as_strided(&[3, 2], &[1, 1], 0).unwrap();
    assert_eq!(vals(&o), vec![0, 1, 1, 2, 2, 3]);
}

#[test]
fn writes_through_views_reach_the_base() {
    let t = Tensor::zeros(&[3, 4], DType::F32);
    t.select(0, 1).unwrap().fill_(Scalar::Float(2.0)).unwrap();
    t.slice(1, Some(0), None, 3).unwrap().fill_(Scalar::Int(7)).unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![7., 0., 0., 7., 7., 2., 2., 7., 7., 0., 0., 7.]);
    // copy_ broadcasts and casts
    let col = t.transpose(0, 1).unwrap().select(0, 1).unwrap();
    col.copy_(&Tensor::from_slice(&[1i64, 2, 3])).unwrap();
    assert_eq!(&t.to_vec::<f32>().unwrap()[..6], &[7., 1., 0., 7., 7., 2.]);
    assert!(col.copy_(&Tensor::from_slice(&[1i64, 2])).is_err());
}

#[test]
fn dtype_conversion_follows_static_cast() {
    let f = Tensor::from_slice(&[-1.7f32, 2.5, 300.0, f32::NAN]);
    assert_eq!(f.to_dtype(DType::I64).unwrap().to_vec::<i64>().unwrap()[..3], [-1, 2, 300]);
    assert_eq!(f.to_dtype(DType::U8).unwrap().to_vec::<u8>().unwrap()[..3], [255, 2, 44]);
    assert_eq!(f.to_dtype(DType::Bool).unwrap().to_vec::<bool>().unwrap(), vec![true, true, true, true]);
    let i = Tensor::from_slice(&[300i64, -1]);
    assert_eq!(i.to_dtype(DType::I8).unwrap().to_vec::<i8>().unwrap(), vec![44, -1]);
    let h = Tensor::from_slice(&[65520.0f32, 1.0 / 3.0]).to_dtype(DType::F16).unwrap();
    let hv = h.to_f64_vec().unwrap();
    assert!(hv[0].is_infinite(), "65520 rounds to inf in float16");
    assert_eq!(hv[1], 0.333251953125);
    assert!(Tensor::from_slice(&[1i64]).to_vec::<f32>().is_err());
}
