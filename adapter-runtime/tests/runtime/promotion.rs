//! PyTorch type promotion: `promote_types`, `result_type` categories, and
//! the dtypes ops produce.

use xirang_runtime::dtype::can_cast;
use xirang_runtime::reference::{self, RoundingMode};
use xirang_runtime::{DType, Operand, Scalar, Tensor, promote_types, result_type};

use DType::*;

#[test]
fn promote_types_table() {
    let cases = [
        (Bool, Bool, Bool),
        (Bool, U8, U8),
        (Bool, F16, F16),
        (U8, I8, I16),
        (U8, I16, I16),
        (U8, I64, I64),
        (I8, I32, I32),
        (I32, I64, I64),
        (I64, F16, F16),
        (I64, BF16, BF16),
        (F16, BF16, F32),
        (F16, F32, F32),
        (BF16, F64, F64),
        (F32, F64, F64),
        (U8, F32, F32),
    ];
    for (a, b, want) in cases {
        assert_eq!(promote_types(a, b), want, "{a} x {b}");
        assert_eq!(promote_types(b, a), want, "{b} x {a}");
    }
    // symmetric and idempotent over the whole table
    for a in DType::ALL {
        assert_eq!(promote_types(a, a), a);
        for b in DType::ALL {
            assert_eq!(promote_types(a, b), promote_types(b, a));
        }
    }
}

#[test]
fn result_type_categories() {
    use Operand::{Scalar as S, Tensor as T, ZeroDim as Z};
    let f = Scalar::Float(2.5);
    let i = Scalar::Int(1000);
    let b = Scalar::Bool(true);
    let cases: Vec<(Vec<Operand>, DType)> = vec![
        (vec![T(I64), S(f)], F32),
        (vec![T(U8), S(i)], U8),
        (vec![T(Bool), S(i)], I64),
        (vec![T(Bool), S(b)], Bool),
        (vec![T(F16), S(f)], F16),
        (vec![T(I32), Z(I64)], I32),
        (vec![T(I32), Z(F64)], F64),
        (vec![T(F16), Z(F64)], F16),
        (vec![T(U8), Z(I8)], U8),
        (vec![T(Bool), Z(I8)], I8),
        (vec![Z(F64), S(f)], F64),
        (vec![Z(I64), S(f)], F32),
        (vec![Z(I32), S(i)], I32),
        (vec![Z(Bool), S(i)], I64),
        (vec![S(i), S(f)], F32),
        (vec![S(b)], Bool),
        (vec![T(I8), T(U8)], I16),
        (vec![T(I64), Z(F16), S(f)], F16),
    ];
    for (ops, want) in cases {
        assert_eq!(result_type(&ops), Some(want), "{ops:?}");
    }
    assert_eq!(result_type(&[]), None);
}

#[test]
fn can_cast_rules() {
    assert!(can_cast(I64, F32));
    assert!(!can_cast(F32, I64));
    assert!(!can_cast(I64, Bool));
    assert!(can_cast(Bool, U8));
}

#[test]
fn ops_produce_promoted_dtypes() {
    let i = Tensor::from_slice(&[1i64, 2, 3]);
    let u = Tensor::from_slice(&[200u8, 100, 0]);
    let r = reference::add(&i, 2.5, Scalar::Int(1)).unwrap();
    assert_eq!(r.dtype(), F32);
    assert_eq!(r.to_vec::<f32>().unwrap(), vec![3.5, 4.5, 5.5]);
    // uint8 wraps; the int scalar does not widen it
    let r = reference::add(&u, 100i64, Scalar::Int(1)).unwrap();
    assert_eq!((r.dtype(), r.to_vec::<u8>().unwrap()), (U8, vec![44, 200, 100]));
    // zero-dim int64 does not widen int32
    let r = reference::mul(&Tensor::from_slice(&[3i32]), &Tensor::scalar(2i64)).unwrap();
    assert_eq!(r.dtype(), I32);
    // bool + bool stays bool (logical or); mul is and
    let bt = Tensor::from_slice(&[true, true, false]);
    let bf = Tensor::from_slice(&[true, false, false]);
    assert_eq!(
        reference::add(&bt, &bf, Scalar::Bool(true)).unwrap().to_vec::<bool>().unwrap(),
        vec![true, true, false]
    );
    assert_eq!(reference::mul(&bt, &bf).unwrap().to_vec::<bool>().unwrap(), vec![true, false, false]);
    assert!(reference::sub(&bt, &bf, Scalar::Int(1)).is_err());
    assert!(reference::add(&i, &i, Scalar::Float(0.5)).is_err(), "float alpha with int tensors");
    // comparisons return bool
    assert_eq!(reference::lt(&i, 2.5).unwrap().to_vec::<bool>().unwrap(), vec![true, true, false]);
    // unary float ops promote ints to float32
    assert_eq!(reference::exp(&i).unwrap().dtype(), F32);
    assert_eq!(reference::neg(&i).unwrap().dtype(), I64);
    assert!(reference::neg(&bt).is_err());
    assert!(reference::gelu(&i, "none").is_err());
    // clamp with a float bound promotes an int tensor
    assert_eq!(
        reference::clamp(&i, Some(Scalar::Float(1.5)), None).unwrap().to_vec::<f32>().unwrap(),
        vec![1.5, 2.0, 3.0]
    );
    // reductions
    assert_eq!(reference::sum(&u, None, false, None).unwrap().dtype(), I64);
    assert_eq!(reference::sum(&u, None, false, None).unwrap().to_vec::<i64>().unwrap(), vec![300]);
    assert_eq!(reference::sum(&bt, None, false, None).unwrap().to_vec::<i64>().unwrap(), vec![2]);
    assert_eq!(reference::sum(&u, None, false, Some(U8)).unwrap().to_vec::<u8>().unwrap(), vec![44]);
    assert_eq!(reference::prod(&i, None, false, Some(F64)).unwrap().dtype(), F64);
    assert!(reference::mean(&i, None, false, None).is_err());
    assert_eq!(reference::mean(&i, None, false, Some(F32)).unwrap().to_vec::<f32>().unwrap(), vec![2.0]);
    // true division of ints is float32
    let r = reference::div(&i, 2i64, None).unwrap();
    assert_eq!((r.dtype(), r.to_vec::<f32>().unwrap()), (F32, vec![0.5, 1.0, 1.5]));
    // matmul requires equal dtypes
    assert!(
        reference::mm(&i.view(&[1, 3]).unwrap(), &Tensor::from_slice(&[1.0f32, 2.0, 3.0]).view(&[3, 1]).unwrap())
            .is_err()
    );
    // where promotes its branches
    let c = Tensor::from_slice(&[true, false, true]);
    let w = reference::where_(&c, &i, 0.5).unwrap();
    assert_eq!((w.dtype(), w.to_vec::<f32>().unwrap()), (F32, vec![1.0, 0.5, 3.0]));
    // in-place cannot narrow a float result into an int tensor
    assert!(reference::add_(&i, 1.5, Scalar::Int(1)).is_err());
    reference::add_(&i, 1i64, Scalar::Int(1)).unwrap();
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![2, 3, 4]);
}

#[test]
fn integer_division_rounding() {
    let a = Tensor::from_slice(&[-7i64, 7, -7, 7]);
    let b = Tensor::from_slice(&[2i64, 2, -2, -2]);
    assert_eq!(reference::div(&a, &b, Some(RoundingMode::Floor)).unwrap().to_vec::<i64>().unwrap(), vec![-4, 3, 3, -4]);
    assert_eq!(reference::div(&a, &b, Some(RoundingMode::Trunc)).unwrap().to_vec::<i64>().unwrap(), vec![-3, 3, 3, -3]);
    assert!(reference::div(&a, 0i64, Some(RoundingMode::Floor)).is_err(), "ZeroDivisionError");
    let f = Tensor::from_slice(&[-7.5f32, 7.5, 1.0, -1.0, 0.0]);
    let r = reference::div(&f, 2.0, Some(RoundingMode::Floor)).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(&r[..4], &[-4.0, 3.0, 0.0, -1.0]);
    let z = reference::div(&f, 0.0, None).unwrap().to_vec::<f32>().unwrap();
    assert!(z[0] == f32::NEG_INFINITY && z[1] == f32::INFINITY && z[4].is_nan());
    let fz = reference::div(&f, 0.0, Some(RoundingMode::Floor)).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(fz[0], f32::NEG_INFINITY);
    // floor of -0.0 result keeps the sign
    let n = reference::div(&Tensor::from_slice(&[-0.0f64]), 3.0, Some(RoundingMode::Floor))
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    assert!(n[0] == 0.0 && n[0].is_sign_negative());
    // int8 overflow wraps like C++
    let m = reference::div(&Tensor::from_slice(&[-128i8]), &Tensor::from_slice(&[-1i8]), Some(RoundingMode::Trunc))
        .unwrap();
    assert_eq!(m.to_vec::<i8>().unwrap(), vec![-128]);
}

#[test]
fn integer_pow() {
    let base = Tensor::from_slice(&[2i64, 1, -1, -1, 3]);
    let e = Tensor::from_slice(&[-1i64, -5, -1, -2, 4]);
    assert_eq!(reference::pow(&base, &e).unwrap().to_vec::<i64>().unwrap(), vec![0, 1, -1, 1, 81]);
    assert!(reference::pow(&base, -1i64).is_err());
    assert_eq!(reference::pow(&base, 0.5).unwrap().dtype(), F32);
    assert_eq!(reference::pow(&Tensor::from_slice(&[4.0f64]), 0.5).unwrap().to_vec::<f64>().unwrap(), vec![2.0]);
}

#[test]
fn operands_are_cast_to_the_common_dtype_first() {
    let u = Tensor::from_slice(&[5u8]);
    // a zero-dim int64 of 260 becomes uint8 4 before the comparison
    let m = reference::maximum(&u, &Tensor::scalar(260i64)).unwrap();
    assert_eq!((m.dtype(), m.to_vec::<u8>().unwrap()), (U8, vec![5]));
    // clamp bounds are cast to the result dtype: min=-1 is 255 in uint8
    assert_eq!(reference::clamp(&u, Some(Scalar::Int(-1)), None).unwrap().to_vec::<u8>().unwrap(), vec![255]);
    // float Python scalars become float32 (op-math) for float32 tensors
    let f = Tensor::from_slice(&[1.0f32]);
    let r = reference::add(&f, 1e-8, Scalar::Int(1)).unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), vec![1.0]);
    // no overflow panic on int64 floor division edge cases
    let r = reference::div(&Tensor::from_slice(&[i64::MIN]), -1i64, Some(RoundingMode::Floor)).unwrap();
    assert_eq!(r.to_vec::<i64>().unwrap(), vec![i64::MIN]);
}

#[test]
fn writes_to_expanded_views_are_rejected() {
    let base = Tensor::zeros(&[1, 3], F32);
    let e = base.expand(&[4, 3]).unwrap();
    assert!(e.fill_(Scalar::Int(1)).is_err());
    assert!(reference::add_(&e, 1i64, Scalar::Int(1)).is_err());
}

#[test]
fn in_place_and_out_variants() {
    let i = Tensor::from_slice(&[7i64, -7]);
    assert!(reference::div_(&i, 2i64, None).is_err(), "float result into int64");
    reference::div_(&i, 2i64, Some(RoundingMode::Floor)).unwrap();
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![3, -4]);
    reference::mul_(&i, 3i64).unwrap();
    reference::sub_(&i, 1i64, Scalar::Int(2)).unwrap();
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![7, -14]);
    // in-place ops do not broadcast self
    assert!(reference::add_(&Tensor::zeros(&[3], F32), &Tensor::zeros(&[2, 3], F32), Scalar::Int(1)).is_err());
    // out=: castable dtype, resized when the shape differs
    let r = reference::add(&Tensor::from_slice(&[1i64, 2]), 1i64, Scalar::Int(1)).unwrap();
    let mut out = Tensor::zeros(&[5], F64);
    reference::write_out(&r, &mut out).unwrap();
    assert_eq!((out.sizes(), out.dtype(), out.to_vec::<f64>().unwrap()), (&[2usize][..], F64, vec![2.0, 3.0]));
    let mut bad = Tensor::zeros(&[2], I64);
    assert!(reference::write_out(&reference::exp(&r).unwrap(), &mut bad).is_err());
    let same = Tensor::zeros(&[2], I32);
    let mut o = same.clone();
    reference::write_out(&r, &mut o).unwrap();
    assert!(o.shares_storage(&same), "same shape: written in place");
}

#[test]
fn bool_subtraction_and_reduction_dtype_casts() {
    let i = Tensor::from_slice(&[1i64, 2]);
    let b = Tensor::from_slice(&[true, false]);
    assert!(reference::sub(&i, &b, Scalar::Int(1)).is_err());
    assert!(reference::sub(&i, true, Scalar::Int(1)).is_err());
    // sum(dtype=float32) casts the float64 input first (1 + 2^-30 rounds to 1)
    let x = Tensor::from_slice(&[1.0 + 2f64.powi(-30), -1.0]);
    assert_eq!(reference::sum(&x, None, false, Some(F32)).unwrap().to_vec::<f32>().unwrap(), vec![0.0]);
    assert_eq!(reference::sum(&x, None, false, None).unwrap().to_vec::<f64>().unwrap(), vec![2f64.powi(-30)]);
}
