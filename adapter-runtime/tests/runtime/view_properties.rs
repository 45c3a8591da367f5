//! Property tests: views never change the values they expose, and `view`
//! agrees with a copying `reshape` whenever it succeeds.

use proptest::prelude::*;
use xirang_runtime::shape::{broadcast_shapes, numel};
use xirang_runtime::{DType, Tensor};

fn shape_and_perm() -> impl Strategy<Value = (Vec<usize>, Vec<usize>)> {
    prop::collection::vec(0usize..4, 0..5).prop_flat_map(|shape| {
        let n = shape.len();
        (Just(shape), Just((0..n).collect::<Vec<_>>()).prop_shuffle())
    })
}

/// Reference: element at multi-index `idx` of a row-major `shape`.
fn flat_index(shape: &[usize], idx: &[usize]) -> usize {
    idx.iter().zip(shape).fold(0, |acc, (i, s)| acc * s + i)
}

proptest! {
    #[test]
    fn permute_reads_the_right_elements((shape, perm) in shape_and_perm()) {
        let n = numel(&shape);
        let t = Tensor::arange(n, DType::I64).view(&shape.iter().map(|&s| s as i64).collect::<Vec<_>>()).unwrap();
        let p = t.permute(&perm.iter().map(|&d| d as i64).collect::<Vec<_>>()).unwrap();
        let got = p.to_i64_vec().unwrap();
        // walk the permuted shape in row-major order
        let psizes = p.sizes().to_vec();
        let mut idx = vec![0usize; psizes.len()];
        for g in got {
            let mut orig = vec![0usize; shape.len()];
            for (k, &d) in perm.iter().enumerate() {
                orig[d] = idx[k];
            }
            prop_assert_eq!(g as usize, flat_index(&shape, &orig));
            for d in (0..psizes.len()).rev() {
                idx[d] += 1;
                if idx[d] < psizes[d] { break; }
                idx[d] = 0;
            }
        }
        // contiguous() of the permuted view equals the gathered values
        let c = p.contiguous().unwrap();
        prop_assert!(c.is_contiguous());
        prop_assert_eq!(c.to_i64_vec().unwrap(), p.to_i64_vec().unwrap());
    }

    #[test]
    fn view_agrees_with_reshape((shape, perm) in shape_and_perm(), split in 0usize..3) {
        let n = numel(&shape);
        let t = Tensor::arange(n, DType::I64)
            .view(&shape.iter().map(|&s| s as i64).collect::<Vec<_>>()).unwrap()
            .permute(&perm.iter().map(|&d| d as i64).collect::<Vec<_>>()).unwrap();
        // a target shape: merge everything, or split off a leading factor
        let target: Vec<i64> = match split {
            0 => vec![n as i64],
            1 if n > 0 && n.is_multiple_of(2) => vec![2, -1],
            _ => t.sizes().iter().map(|&s| s as i64).collect(),
        };
        let r = t.reshape(&target).unwrap();
        prop_assert_eq!(r.to_i64_vec().unwrap(), t.to_i64_vec().unwrap());
        if let Ok(v) = t.view(&target) {
            prop_assert!(v.shares_storage(&t));
            prop_assert_eq!(v.sizes(), r.sizes());
            prop_assert_eq!(v.to_i64_vec().unwrap(), r.to_i64_vec().unwrap());
        } else {
            prop_assert!(!t.is_contiguous());
        }
    }

    #[test]
    fn broadcasting_is_commutative(a in prop::collection::vec(0usize..3, 0..4), b in prop::collection::vec(0usize..3, 0..4)) {
        let ab = broadcast_shapes(&a, &b);
        let ba = broadcast_shapes(&b, &a);
        prop_assert_eq!(ab.is_ok(), ba.is_ok());
        if let (Ok(x), Ok(y)) = (ab, ba) {
            prop_assert_eq!(&x, &y);
            // both operands expand to the result
            let ta = Tensor::zeros(&a, DType::F32);
            prop_assert!(ta.broadcast_to(&x).is_ok());
        }
    }
}
