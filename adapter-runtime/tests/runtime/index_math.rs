//! The runtime's index arithmetic: strided walks and gathers (`shape.rs`), pooling windows and
//! grid-sampling coordinates as ATen computes them, and the elementwise kernels' work-sharing loop.

use proptest::prelude::*;
use xirang_runtime::kernels::par_items;
use xirang_runtime::shape::*;

/// The tiled walk of transposed views writes what the element walk writes: every element
/// size, batch dims, sizes that are not multiples of the tile, an offset base.
#[test]
fn gather_of_transposed_views_matches_the_element_walk() {
    for es in [1usize, 2, 4, 8] {
        for (sizes, strides, offset) in [
            (vec![40, 37], vec![1, 40], 0usize),
            (vec![16, 16], vec![1, 20], 3),
            (vec![3, 33, 17], vec![33 * 17 + 5, 1, 33], 2),
            (vec![17, 100], vec![1, 17], 0),
        ] {
            let n: usize = sizes.iter().product();
            let span = storage_extent(&sizes, &strides, offset);
            let src: Vec<u8> = (0..span * es).map(|i| (i * 7 % 251) as u8).collect();
            let mut want = vec![0u8; n * es];
            for (k, off) in element_offsets(&sizes, &strides, offset).into_iter().enumerate() {
                want[k * es..(k + 1) * es].copy_from_slice(&src[off * es..(off + 1) * es]);
            }
            let mut got = vec![0u8; n * es];
            gather_strided(&src[offset * es..], es, &sizes, &strides, &mut got);
            assert_eq!(got, want, "es {es}, sizes {sizes:?}, strides {strides:?}");
        }
    }
}

proptest! {
    /// The run walker visits exactly the elements `element_offsets` lists, in order, and the
    /// gather copies them, for any sizes and strides (zero strides and element sizes of 1 to
    /// 8 bytes and an odd 3 included).
    #[test]
    fn runs_and_gather_follow_element_offsets(
        dims in proptest::collection::vec((0usize..4, 0usize..7), 0..4),
        offset in 0usize..5,
        es in prop::sample::select(vec![1usize, 2, 3, 4, 8]),
    ) {
        let sizes: Vec<usize> = dims.iter().map(|d| d.0).collect();
        let strides: Vec<usize> = dims.iter().map(|d| d.1).collect();
        let want = element_offsets(&sizes, &strides, offset);
        let mut got = Vec::new();
        for_each_run(&sizes, &strides, offset, |start, len, st| got.extend((0..len).map(|j| start + j * st)));
        prop_assert_eq!(&got, &want);
        let extent = storage_extent(&sizes, &strides, offset);
        let src: Vec<u8> = (0..extent * es).map(|b| (b * 7 + 3) as u8).collect();
        let mut dst = vec![0u8; want.len() * es];
        let base = &src[(offset * es).min(src.len())..];
        gather_strided(base, es, &sizes, &strides, &mut dst);
        let expect: Vec<u8> = want.iter().flat_map(|o| src[o * es..o * es + es].to_vec()).collect();
        prop_assert_eq!(dst, expect);
    }
}

#[test]
fn window_lengths_follow_pytorch() {
    let w = |k, s, p, d| Window { k, s, p, d };
    assert_eq!(w(2, 2, 0, 1).out_len(5, false), 2);
    assert_eq!(w(2, 2, 0, 1).out_len(5, true), 3);
    // ceil mode: the last window must start inside the input or the left padding
    assert_eq!(w(3, 2, 1, 1).out_len(5, true), 3);
    assert_eq!(w(2, 2, 1, 1).out_len(4, true), 3);
    // a kernel larger than the input with ceil mode still gives one window
    assert_eq!(w(3, 3, 0, 1).out_len(2, true), 1);
    assert_eq!(w(3, 1, 0, 1).out_len(2, false), 0);
    assert_eq!(w(2, 1, 1, 2).taps(0, 1), (Vec::<usize>::new(), 1));
    assert_eq!(w(3, 1, 1, 2).taps(1, 5), (vec![0, 2, 4], 0));
}

#[test]
fn grid_sampler_coordinate_helpers() {
    assert_eq!(reflect_coordinates(-1.0, 0, 6), 1.0);
    assert_eq!(reflect_coordinates(4.0, 0, 6), 2.0);
    assert_eq!(reflect_coordinates(7.5, 0, 6), 1.5);
    assert_eq!(reflect_coordinates(-2.0, -1, 7), 1.0);
    assert_eq!(reflect_coordinates(5.0, 0, 0), 0.0);
    assert_eq!(clip_coordinates(f64::NAN, 4), 3.0);
    assert_eq!(pixel(f64::NAN, 4), None);
    assert_eq!(cubic_coefficients(0.0), [0.0, 1.0, 0.0, 0.0]);
    let c = cubic_coefficients(0.5);
    assert_eq!(c, [-0.09375, 0.59375, 0.59375, -0.09375]);
}

use std::sync::atomic::{AtomicUsize, Ordering};

/// Every item runs exactly once, from a thread outside rayon's pool (a stream worker's case)
/// and from inside it.
#[test]
fn par_items_runs_each_item_once() {
    for n in [0usize, 1, 2, 3, 64, 1000] {
        let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
        par_items((0..n).collect(), |i| {
            hits[i].fetch_add(1, Ordering::Relaxed);
        });
        assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1), "outside the pool, n = {n}");
        rayon::scope(|_| {
            par_items((0..n).collect(), |i| {
                hits[i].fetch_add(1, Ordering::Relaxed);
            })
        });
        assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 2), "inside the pool, n = {n}");
    }
}

/// The in-place loops write every chunk.
#[test]
fn par_items_writes_disjoint_chunks() {
    let mut out = vec![0u32; 100_000];
    let x: Vec<u32> = (0..100_000).collect();
    par_items(out.chunks_mut(1000).zip(x.chunks(1000)).collect(), |(o, a): (&mut [u32], &[u32])| {
        for (o, a) in o.iter_mut().zip(a) {
            *o = a * 2;
        }
    });
    assert!(out.iter().enumerate().all(|(i, &v)| v == 2 * i as u32));
}
