//! The Core ATen operators of `ops/core_aten_more.rs` (embedding_bag, 3-d pooling, col2im,
//! grid_sampler_2d) against values worked out from PyTorch's kernels, and their errors.

use xirang_runtime::dtype::DType;
use xirang_runtime::reference::*;
use xirang_runtime::tensor::Tensor;

fn t(v: &[f64], s: &[usize]) -> Tensor {
    Tensor::from_f64(v, s, DType::F32).unwrap()
}
fn ti(v: &[i64], s: &[usize]) -> Tensor {
    Tensor::from_i64(v, s, DType::I64).unwrap()
}

/// `weight` rows `[2r, 2r + 1]`, r = 0..6.
fn bag_weight() -> Tensor {
    let v: Vec<f64> = (0..12).map(f64::from).collect();
    t(&v, &[6, 2])
}

#[test]
fn embedding_bag_modes() {
    let (w, idx, off) = (bag_weight(), ti(&[1, 2, 4, 5, 4, 3, 2, 0], &[8]), ti(&[0, 2, 2, 5], &[4]));
    let (o, o2b, bs, mi) = embedding_bag(&w, &idx, &off, 0, None, false, -1).unwrap();
    assert_eq!(o.to_f64_vec().unwrap(), [6., 8., 0., 0., 26., 29., 10., 13.]);
    assert_eq!(o2b.to_i64_vec().unwrap(), [0, 0, 2, 2, 2, 3, 3, 3]);
    assert_eq!(bs.to_i64_vec().unwrap(), [0, 0, 0, 0]);
    assert_eq!(mi.to_i64_vec().unwrap(), [0, 0, 0, 0]);
    // mean with padding_idx 2: padded indices leave the bag sizes
    let (o, _, bs, mi) = embedding_bag(&w, &idx, &off, 1, None, false, 2).unwrap();
    assert_eq!(o.to_f64_vec().unwrap(), [2., 3., 0., 0., 26. / 3., 29. / 3., 3., 4.].map(|v: f64| v as f32 as f64));
    assert_eq!(bs.to_i64_vec().unwrap(), [1, 0, 3, 2]);
    assert_eq!(mi.to_i64_vec().unwrap(), [1, 0, 3, 2]);
    // max: the weight row of each maximum, 0 in the empty bag
    let (o, _, bs, mi) = embedding_bag(&w, &idx, &off, 2, None, false, -1).unwrap();
    assert_eq!(o.to_f64_vec().unwrap(), [4., 5., 0., 0., 10., 11., 6., 7.]);
    assert_eq!(bs.to_i64_vec().unwrap(), [2, 0, 3, 3]);
    assert_eq!(mi.sizes(), &[4, 2]);
    assert_eq!(mi.to_i64_vec().unwrap(), [2, 2, 0, 0, 5, 5, 3, 3]);
}

#[test]
fn embedding_bag_weights_last_offset_and_ties() {
    let (w, idx) = (bag_weight(), ti(&[1, 2, 4, 5], &[4]));
    let psw = t(&[1., 2., 3., 4.], &[4]);
    let (o, ..) = embedding_bag(&w, &idx, &ti(&[0, 2, 4], &[3]), 0, Some(&psw), true, -1).unwrap();
    assert_eq!(o.sizes(), &[2, 2]);
    assert_eq!(o.to_f64_vec().unwrap(), [2. + 8., 3. + 10., 24. + 40., 27. + 44.]);
    // ties keep the first row; a NaN only counts when it comes first
    let w = t(&[1., 5., 1., 2., f64::NAN, 0., 3., 5.], &[4, 2]);
    let (o, _, _, mi) =
        embedding_bag(&w, &ti(&[0, 1, 3, 3, 2, 1], &[6]), &ti(&[0, 3], &[2]), 2, None, false, -1).unwrap();
    assert_eq!(o.to_f64_vec().unwrap(), [3., 5., 3., 5.]);
    assert_eq!(mi.to_i64_vec().unwrap(), [3, 0, 3, 3]);
    // int32 indices and offsets give int32 auxiliaries
    let i32t = |v: &[i64]| Tensor::from_i64(v, &[v.len()], DType::I32).unwrap();
    let (_, o2b, ..) = embedding_bag(&bag_weight(), &i32t(&[1, 2]), &i32t(&[0]), 1, None, false, -1).unwrap();
    assert_eq!(o2b.dtype(), DType::I32);
}

#[test]
fn embedding_bag_errors() {
    let (w, idx) = (bag_weight(), ti(&[1, 2, 4], &[3]));
    assert!(embedding_bag(&w, &ti(&[1, 6], &[2]), &ti(&[0], &[1]), 0, None, false, -1).is_err());
    assert!(embedding_bag(&w, &ti(&[1, -1], &[2]), &ti(&[0], &[1]), 0, None, false, -1).is_err());
    assert!(embedding_bag(&w, &idx, &ti(&[1], &[1]), 0, None, false, -1).is_err());
    assert!(embedding_bag(&w, &idx, &ti(&[0, 4], &[2]), 0, None, false, -1).is_err());
    assert!(embedding_bag(&w, &idx, &ti(&[0, 2, 1], &[3]), 1, None, false, -1).is_err());
    assert!(embedding_bag(&w, &idx, &ti(&[0], &[1]), 3, None, false, -1).is_err());
    assert!(embedding_bag(&w, &idx, &ti(&[], &[0]), 0, None, true, -1).is_err());
    assert!(embedding_bag(&w, &idx, &ti(&[0], &[1]), 1, Some(&t(&[1., 1., 1.], &[3])), false, -1).is_err());
    assert!(embedding_bag(&w, &idx, &ti(&[0], &[1]), 0, Some(&t(&[1., 1.], &[2])), false, -1).is_err());
    assert!(embedding_bag(&w, &ti(&[1, 2, 3, 4], &[2, 2]), &ti(&[0], &[1]), 0, None, false, -1).is_err());
    assert!(embedding_bag(&ti(&[1, 2], &[1, 2]), &idx, &ti(&[0], &[1]), 0, None, false, -1).is_err());
    assert!(embedding_bag(&w, &t(&[1.], &[1]), &ti(&[0], &[1]), 0, None, false, -1).is_err());
}

#[test]
fn max_pool3d_picks_first_max_and_last_nan() {
    let x = t(&[1., 3., 3., 2., 0., 1., 3., 1.], &[1, 1, 2, 2, 2]);
    let (v, i) = max_pool3d_with_indices(&x, &[2], &[], &[0], &[1], false).unwrap();
    assert_eq!(v.sizes(), &[1, 1, 1, 1, 1]);
    assert_eq!((v.to_f64_vec().unwrap(), i.to_i64_vec().unwrap()), (vec![3.], vec![1]));
    let x = t(&[1., f64::NAN, 2., f64::NAN], &[1, 1, 1, 4]);
    let (v, i) = max_pool3d_with_indices(&x, &[1, 1, 4], &[], &[0], &[1], false).unwrap();
    assert!(v.to_f64_vec().unwrap()[0].is_nan());
    assert_eq!(i.to_i64_vec().unwrap(), [3]);
    // a window with no tap inside the input: -inf and its first tap past the padding
    let x = t(&[1.], &[1, 1, 1, 1, 1]);
    let (v, i) = max_pool3d_with_indices(&x, &[2], &[1], &[1], &[2], false).unwrap();
    assert_eq!((v.to_f64_vec().unwrap(), i.to_i64_vec().unwrap()), (vec![f64::NEG_INFINITY], vec![3]));
    let x = ti(&[5, -7, 2, 9], &[1, 1, 1, 4]);
    let (v, i) = max_pool3d_with_indices(&x, &[1, 1, 2], &[], &[0, 0, 1], &[1], true).unwrap();
    assert_eq!((v.to_i64_vec().unwrap(), i.to_i64_vec().unwrap()), (vec![5, 2, 9], vec![0, 2, 3]));
}

#[test]
fn max_pool3d_errors() {
    let x = t(&[0.; 8], &[1, 1, 2, 2, 2]);
    assert!(max_pool3d_with_indices(&x, &[2, 2], &[], &[0], &[1], false).is_err());
    assert!(max_pool3d_with_indices(&x, &[2], &[0], &[0], &[1], false).is_err());
    assert!(max_pool3d_with_indices(&x, &[2], &[], &[2], &[1], false).is_err());
    assert!(max_pool3d_with_indices(&x, &[2], &[], &[-1], &[1], false).is_err());
    assert!(max_pool3d_with_indices(&x, &[2], &[], &[0], &[0], false).is_err());
    assert!(max_pool3d_with_indices(&x, &[3], &[], &[0], &[1], false).is_err());
    assert!(max_pool3d_with_indices(&t(&[0.; 4], &[2, 2]), &[1], &[], &[0], &[1], false).is_err());
    assert!(max_pool3d_with_indices(&t(&[], &[1, 0, 2, 2, 2]), &[1], &[], &[0], &[1], false).is_err());
    let b = Tensor::from_i64(&[1; 8], &[1, 1, 2, 2, 2], DType::Bool).unwrap();
    assert!(max_pool3d_with_indices(&b, &[2], &[], &[0], &[1], false).is_err());
    // an empty batch is fine
    let (v, _) = max_pool3d_with_indices(&t(&[], &[0, 1, 2, 2, 2]), &[2], &[], &[0], &[1], false).unwrap();
    assert_eq!(v.sizes(), &[0, 1, 1, 1, 1]);
}

#[test]
fn avg_pool3d_divisors() {
    let x = t(&[0., 1., 2., 3., 4.], &[1, 1, 1, 5]);
    let ap = |cip, div| avg_pool3d(&x, &[1, 1, 3], &[1, 1, 2], &[0, 0, 1], true, cip, div).unwrap().to_f64_vec();
    let f = |v: f64| v as f32 as f64;
    assert_eq!(ap(true, None).unwrap(), [f(1. / 3.), 2., f(7. / 3.)]);
    assert_eq!(ap(false, None).unwrap(), [0.5, 2., 3.5]);
    assert_eq!(ap(false, Some(-2)).unwrap(), [-0.5, -3., -3.5]);
    // int64 divides with truncation toward zero
    let xi = ti(&[-3, -4, 0, 0, 0, 0, 0, 0], &[1, 2, 2, 2]);
    let r = |div| avg_pool3d(&xi, &[2], &[], &[0], false, true, div).unwrap().to_i64_vec().unwrap();
    assert_eq!(r(None), [0]);
    assert_eq!(r(Some(3)), [-2]);
}

#[test]
fn avg_pool3d_errors() {
    let x = t(&[0.; 8], &[1, 1, 2, 2, 2]);
    assert!(avg_pool3d(&x, &[2], &[], &[0], false, true, Some(0)).is_err());
    assert!(avg_pool3d(&x, &[3], &[], &[1], false, true, None).is_err());
    let xi = Tensor::from_i64(&[0; 8], &[1, 1, 2, 2, 2], DType::I32).unwrap();
    assert!(avg_pool3d(&xi, &[2], &[], &[0], false, true, None).is_err());
    assert!(avg_pool3d(&t(&[0.; 8], &[2, 2, 2]), &[2], &[], &[0], false, true, None).is_err());
}

#[test]
fn col2im_sums_overlaps() {
    // one channel, 2x2 kernel, stride 1 over a 2x3 image: 2 blocks
    let cols = t(&[1., 2., 3., 4., 5., 6., 7., 8.], &[4, 2]);
    let img = col2im(&cols, &[2, 3], &[2, 2], &[1, 1], &[0, 0], &[1, 1]).unwrap();
    assert_eq!(img.sizes(), &[1, 2, 3]);
    assert_eq!(img.to_f64_vec().unwrap(), [1., 2. + 3., 4., 5., 6. + 7., 8.]);
    // the block count must match; batched input
    let cols = t(&[1., 2., 3., 4.], &[1, 4, 1]);
    let img = col2im(&cols, &[1, 1], &[2, 2], &[1, 1], &[1, 1], &[1, 1]);
    assert!(img.is_err(), "2 x 2 blocks expected, not 1");
    let img = col2im(&cols, &[1, 1], &[2, 2], &[1, 1], &[0, 0], &[1, 1]);
    assert!(img.is_err(), "a 2 x 2 kernel has no block in a 1 x 1 image");
    let cols = t(&[1., 2., 3., 4.], &[1, 4, 1]);
    let img = col2im(&cols, &[2, 2], &[2, 2], &[1, 1], &[0, 0], &[2, 2]).unwrap();
    assert_eq!(img.sizes(), &[1, 1, 2, 2]);
    assert_eq!(img.to_f64_vec().unwrap(), [1., 2., 3., 4.]);
    // bool ORs; only kernel offset (1, 1) of the single block lands inside
    let b = Tensor::from_i64(&[0, 1, 0, 1], &[4, 1], DType::Bool).unwrap();
    let img = col2im(&b, &[1, 1], &[2, 2], &[1, 1], &[1, 1], &[2, 2]).unwrap();
    assert_eq!((img.dtype(), img.to_i64_vec().unwrap()), (DType::Bool, vec![1]));
}

#[test]
fn col2im_errors() {
    let cols = t(&[0.; 8], &[4, 2]);
    assert!(col2im(&cols, &[2, 3], &[2, 2], &[1, 1], &[0, 0], &[0, 1]).is_err());
    assert!(col2im(&cols, &[2, 3], &[2], &[1, 1], &[0, 0], &[1, 1]).is_err());
    assert!(col2im(&cols, &[2, 3], &[3, 1], &[1, 1], &[0, 0], &[1, 1]).is_err());
    assert!(col2im(&cols, &[2, 4], &[2, 2], &[1, 1], &[0, 0], &[1, 1]).is_err());
    assert!(col2im(&cols, &[-2, 3], &[2, 2], &[1, 1], &[0, 0], &[1, 1]).is_err());
    assert!(col2im(&cols, &[2, 3], &[2, 2], &[1, 1], &[-1, 0], &[1, 1]).is_err());
    assert!(col2im(&t(&[0.; 8], &[8]), &[2, 3], &[2, 2], &[1, 1], &[0, 0], &[1, 1]).is_err());
    let ints = ti(&[0; 8], &[4, 2]);
    assert!(col2im(&ints, &[2, 3], &[2, 2], &[1, 1], &[0, 0], &[1, 1]).is_err());
}

#[test]
fn grid_sampler_modes() {
    // a 1 x 1 x 2 x 4 image, sampled along its first row
    let img = t(&[0., 10., 20., 30., 40., 50., 60., 70.], &[1, 1, 2, 4]);
    let xs = [-1.0, -0.5, 0.0, 0.5, 1.0];
    let grid: Vec<f64> = xs.iter().flat_map(|&x| [x, -0.5]).collect();
    let grid = t(&grid, &[1, 1, 5, 2]);
    let run = |mode, pad, ac| grid_sampler_2d(&img, &grid, mode, pad, ac).unwrap().to_f64_vec().unwrap();
    // align_corners=False: x -> 2x + 1.5 (pixels -0.5, 0.5, 1.5, 2.5, 3.5), row 0
    assert_eq!(run(0, 0, false), [0., 5., 15., 25., 15.]);
    assert_eq!(run(0, 1, false), [0., 5., 15., 25., 30.]);
    // nearest rounds half to even: -0.5 -> 0, 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, 3.5 -> 4 (outside)
    assert_eq!(run(1, 0, false), [0., 0., 20., 20., 0.]);
    assert_eq!(run(1, 1, false), [0., 0., 20., 20., 30.]);
    // align_corners=True: x -> 1.5 (x + 1), y = -0.5 -> 0.25
    // (pixels 0, 0.75, 1.5, 2.25, 3; a quarter of the way to row 1: 10 x + 10)
    assert_eq!(run(0, 0, true), [10., 17.5, 25., 32.5, 40.]);
    // reflection about the edges -0.5 and 3.5 (align_corners=False): 3.5 stays, then clips to 3
    assert_eq!(run(1, 2, false), [0., 0., 20., 20., 30.]);
    // bicubic at pixel centres reproduces the image
    let centres = t(&[-0.75, -0.5, 0.75, -0.5], &[1, 1, 2, 2]);
    let v = grid_sampler_2d(&img, &centres, 2, 0, false).unwrap().to_f64_vec().unwrap();
    assert_eq!(v, [0., 30.]);
}

#[test]
fn grid_sampler_errors() {
    let img = t(&[0.; 8], &[1, 1, 2, 4]);
    let grid = t(&[0.; 4], &[1, 1, 2, 2]);
    assert!(grid_sampler_2d(&img, &grid, 3, 0, false).is_err());
    assert!(grid_sampler_2d(&img, &grid, 0, 3, false).is_err());
    assert!(grid_sampler_2d(&img, &t(&[0.; 6], &[1, 1, 2, 3]), 0, 0, false).is_err());
    assert!(grid_sampler_2d(&img, &t(&[0.; 8], &[2, 1, 2, 2]), 0, 0, false).is_err());
    assert!(grid_sampler_2d(&t(&[], &[1, 1, 0, 4]), &grid, 0, 0, false).is_err());
    let g64 = Tensor::from_f64(&[0.; 4], &[1, 1, 2, 2], DType::F64).unwrap();
    assert!(grid_sampler_2d(&img, &g64, 0, 0, false).is_err());
    let ints = ti(&[0; 8], &[1, 1, 2, 4]);
    assert!(grid_sampler_2d(&ints, &ti(&[0; 4], &[1, 1, 2, 2]), 0, 0, false).is_err());
}
