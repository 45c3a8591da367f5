//! The device matrix product (`kernels::matmul::mm`) reads a transposed operand by its strides
//! instead of copying it; every other layout must take a contiguous copy. Each operand here is a
//! view of a larger matrix with the strides PyTorch's own formulas produce (a column taken as a
//! `[1, n]` row, the transpose of a slice, a stepped slice), against the host reference.
//! A `[1, n]` view with column stride 3 was once read as transposed-contiguous (found by
//! OpInfo's `linalg.householder_product` backward, `torch-xirang/OPINFO.md`).

use xirang_runtime::device::Device;
use xirang_runtime::kernels::matmul::mm;
use xirang_runtime::reference;
use xirang_runtime::{DType, Runtime, Tensor};

fn values(n: usize) -> Vec<f64> {
    (0..n).map(|i| ((i * 7919) % 23) as f64 / 11.0 - 1.0).collect()
}

/// (base sizes, view sizes, view strides, view offset)
type View = (Vec<usize>, Vec<usize>, Vec<usize>, usize);

fn views() -> Vec<View> {
    vec![
        (vec![5, 3], vec![1, 5], vec![1, 3], 1),  // a column as a row: x.t()[1:2]
        (vec![5, 3], vec![1, 5], vec![15, 3], 0), // x[:, 0].unsqueeze(0)
        (vec![5, 3], vec![3, 5], vec![1, 3], 0),  // x.t()
        (vec![6, 5], vec![3, 5], vec![10, 1], 0), // x[::2]
        (vec![5, 4], vec![4, 2], vec![1, 5], 1),  // a transposed slice
        (vec![5, 1], vec![1, 5], vec![1, 1], 0),  // x.t() of a column: both layouts at once
        (vec![1, 5], vec![5, 1], vec![1, 5], 0),  // x.t() of a row
    ]
}

#[test]
fn strided_operands_match_the_host_reference() {
    let rt = Runtime::simulator().unwrap();
    for d in [DType::F64, DType::F32] {
        for (base, sizes, strides, offset) in views() {
            let n: usize = base.iter().product();
            let h = Tensor::from_f64(&values(n), &base, d).unwrap();
            let a_host = h.as_strided(&sizes, &strides, offset).unwrap();
            let a_dev = h.to_device(&rt, Device::Npu(0)).unwrap().as_strided(&sizes, &strides, offset).unwrap();
            let k = sizes[1];
            let b_host = Tensor::from_f64(&values(k * 4), &[k, 4], d).unwrap();
            let b_dev = b_host.to_device(&rt, Device::Npu(0)).unwrap();
            let want = reference::mm(&a_host.contiguous().unwrap(), &b_host).unwrap().to_f64_vec().unwrap();
            let got = mm(&a_dev, &b_dev).unwrap().to_f64_vec().unwrap();
            let bt_dev = b_dev.t().unwrap().contiguous().unwrap().t().unwrap();
            let got_t = mm(&a_dev, &bt_dev).unwrap().to_f64_vec().unwrap();
            for got in [got, got_t] {
                assert_eq!(got.len(), want.len());
                for (w, g) in want.iter().zip(&got) {
                    assert!(
                        (w - g).abs() < 1e-5,
                        "{d}: view {sizes:?}/{strides:?}+{offset} of {base:?}: {got:?} vs {want:?}"
                    );
                }
            }
        }
    }
}
