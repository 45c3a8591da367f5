//! Tensors on the simulated device (default simulator configuration):
//! transfers, views of device storage, CPU fallback of ops.

use half::{bf16, f16};
use xirang_runtime::reference::{self, Reduction};
use xirang_runtime::{DType, Device, Error, Runtime, Scalar, Tensor};

fn rt() -> Runtime {
    Runtime::simulator().unwrap()
}

#[test]
fn roundtrip_every_dtype() {
    let _serial = crate::serial();
    let rt = rt();
    let d = Device::Npu(0);
    let check = |t: Tensor| {
        let back = t.to_device(&rt, d).unwrap();
        assert_eq!(back.device(), d);
        assert_eq!(back.dtype(), t.dtype());
        assert_eq!(back.to_cpu().unwrap().gather_bytes().unwrap(), t.gather_bytes().unwrap());
    };
    check(Tensor::from_slice(&[1.5f32, -2.0, f32::NAN]));
    check(Tensor::from_slice(&[1.5f64, -2.0]));
    check(Tensor::from_slice(&[f16::from_f32(0.5), f16::from_f32(-3.0)]));
    check(Tensor::from_slice(&[bf16::from_f32(0.5), bf16::from_f32(-3.0)]));
    check(Tensor::from_slice(&[i64::MIN, 5, i64::MAX]));
    check(Tensor::from_slice(&[i32::MIN, 5]));
    check(Tensor::from_slice(&[-3i8, 5]));
    check(Tensor::from_slice(&[250u8, 5]));
    check(Tensor::from_slice(&[true, false]));
    check(Tensor::scalar(3.0f32));
    check(Tensor::zeros(&[0, 3], DType::F32));
}

#[test]
fn device_views_share_storage() {
    let _serial = crate::serial();
    let rt = rt();
    let host = Tensor::from_vec((0..12).map(|v| v as f32).collect(), &[3, 4]).unwrap();
    let t = host.to_device(&rt, Device::Npu(0)).unwrap();
    let tt = t.transpose(0, 1).unwrap();
    assert!(tt.shares_storage(&t));
    assert_eq!(tt.to_cpu().unwrap().to_vec::<f32>().unwrap(), vec![0., 4., 8., 1., 5., 9., 2., 6., 10., 3., 7., 11.]);
    // write through a strided device view
    let col = t.select(1, 2).unwrap();
    col.fill_(Scalar::Float(-1.0)).unwrap();
    assert_eq!(t.to_cpu().unwrap().to_vec::<f32>().unwrap(), vec![0., 1., -1., 3., 4., 5., -1., 7., 8., 9., -1., 11.]);
    let c = tt.contiguous().unwrap();
    assert_eq!(c.device(), Device::Npu(0));
    assert!(!c.shares_storage(&t));
    assert!(t.data_ptr().unwrap() >> 60 == 0xD);
}

#[test]
fn ops_fall_back_to_host_and_return_to_device() {
    let _serial = crate::serial();
    let rt = rt();
    let d = Device::Npu(0);
    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0]).to_device(&rt, d).unwrap();
    let b = Tensor::from_slice(&[10.0f32, 20.0, 30.0]).to_device(&rt, d).unwrap();
    let before = reference::fallback_counts().get("add").copied().unwrap_or(0);
    let c = reference::add(&a, &b, Scalar::Int(2)).unwrap();
    assert_eq!(c.device(), d);
    assert_eq!(c.to_cpu().unwrap().to_vec::<f32>().unwrap(), vec![21.0, 42.0, 63.0]);
    assert_eq!(reference::fallback_counts()["add"], before + 1);
    // zero-dim host tensors mix with device tensors; others do not
    let s = reference::mul(&a, &Tensor::scalar(2.0f32)).unwrap();
    assert_eq!(s.device(), d);
    let err = reference::mul(&a, &Tensor::from_slice(&[1.0f32, 1.0, 1.0])).unwrap_err();
    assert!(matches!(err, Error::DeviceMismatch(_)), "{err:?}");
    // a few more ops end to end on the device
    let m = reference::mm(&a.reshape(&[3, 1]).unwrap(), &b.reshape(&[1, 3]).unwrap()).unwrap();
    assert_eq!(m.sizes(), &[3, 3]);
    let sm = reference::sum(&m, Some(&[1]), false, None).unwrap();
    assert_eq!(sm.to_cpu().unwrap().to_vec::<f32>().unwrap(), vec![60.0, 120.0, 180.0]);
    let tgt = Tensor::from_slice(&[2i64]).to_device(&rt, d).unwrap();
    let loss = reference::cross_entropy(&a.reshape(&[1, 3]).unwrap(), &tgt, None, Reduction::Mean, -100, 0.0).unwrap();
    assert_eq!(loss.device(), d);
    assert!((loss.to_cpu().unwrap().to_f64_vec().unwrap()[0] - 0.407_605_96).abs() < 1e-6);
    // in-place on a device view
    let mask = Tensor::from_slice(&[true, false, true]).to_device(&rt, d).unwrap();
    reference::masked_fill_(&a, &mask, Scalar::Float(0.0)).unwrap();
    assert_eq!(a.to_cpu().unwrap().to_vec::<f32>().unwrap(), vec![0.0, 2.0, 0.0]);
}

#[test]
fn kernels_run_on_device_memory() {
    let _serial = crate::serial();
    let rt = rt();
    let ctx = rt.device(0).unwrap();
    let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0]).to_device(&rt, Device::Npu(0)).unwrap();
    let ptr = t.data_ptr().unwrap();
    // a "native kernel": scale in place, reading and writing device memory
    ctx.driver()
        .launch_kernel(
            ctx.physical_id(),
            ctx.current_stream(),
            Box::new(move |mem| {
                let mut b = vec![0u8; 16];
                mem.read(ptr, &mut b)?;
                let out: Vec<u8> = b
                    .chunks_exact(4)
                    .flat_map(|c| (f32::from_le_bytes([c[0], c[1], c[2], c[3]]) * 10.0).to_le_bytes())
                    .collect();
                mem.write(ptr, &out)
            }),
        )
        .unwrap();
    assert_eq!(t.to_cpu().unwrap().to_vec::<f32>().unwrap(), vec![10.0, 20.0, 30.0, 40.0]);
}

#[test]
fn current_device_and_stream() {
    let _serial = crate::serial();
    let rt = rt();
    rt.set_current_device(0).unwrap();
    assert_eq!(rt.current_device(), 0);
    assert!(rt.set_current_device(5).is_err());
    let ctx = rt.device(0).unwrap();
    let s = ctx.driver().create_stream(ctx.physical_id()).unwrap();
    ctx.set_current_stream(s);
    assert_eq!(rt.current_stream().unwrap(), s);
    let t = Tensor::from_slice(&[1u8, 2]).to_device(&rt, Device::Npu(0)).unwrap();
    assert_eq!(t.to_vec::<u8>().unwrap(), vec![1, 2]);
    drop(t);
    ctx.set_current_stream(Default::default());
    rt.synchronize(0).unwrap();
}

#[test]
fn handles_are_thread_safe() {
    let _serial = crate::serial();
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Tensor>();
    assert_send_sync::<Runtime>();
    let rt = rt();
    let t = Tensor::from_slice(&[1.0f64, 2.0]).to_device(&rt, Device::Npu(0)).unwrap();
    let handles: Vec<_> = (0..4)
        .map(|k| {
            let t = t.clone();
            std::thread::spawn(move || reference::mul(&t, k as f64).unwrap().to_cpu().unwrap().to_vec::<f64>().unwrap())
        })
        .collect();
    for (k, h) in handles.into_iter().enumerate() {
        assert_eq!(h.join().unwrap(), vec![k as f64, 2.0 * k as f64]);
    }
}

#[test]
fn native_add_kernel_matches_the_reference() {
    let _serial = crate::serial();
    use xirang_runtime::kernels;
    let rt = rt();
    let d = Device::Npu(0);
    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0]).to_device(&rt, d).unwrap();
    let b = Tensor::from_slice(&[0.5f32, -1.0, 4.0]).to_device(&rt, d).unwrap();
    let n = kernels::add_f32(&a, &b, Scalar::Float(2.0)).unwrap();
    assert_eq!(n.device(), d);
    let r = reference::add(&a.to_cpu().unwrap(), &b.to_cpu().unwrap(), Scalar::Float(2.0)).unwrap();
    assert_eq!(n.to_cpu().unwrap().to_vec::<f32>().unwrap(), r.to_vec::<f32>().unwrap());
    // unsupported layouts are refused, so the caller falls back
    assert!(!kernels::add_f32_supported(&a, &b.to_cpu().unwrap()));
    assert!(kernels::add_f32(&a.reshape(&[3, 1]).unwrap().expand(&[3, 2]).unwrap(), &b, Scalar::Int(1)).is_err());
}

/// The device's own copy (`reference::copy_into_view`: a kernel on the stream, no host round trip)
/// gives what the host path gives, for strided and broadcast sources, strided destinations and
/// every dtype pair; `contiguous()` of a device view is made on the device too.
#[test]
fn device_copies_match_the_host_path() {
    let _serial = crate::serial();
    let rt = rt();
    let d = Device::Npu(0);
    let vals: Vec<f64> = (0..24).map(|v| v as f64 * 1.75 - 11.0).collect();
    let base = Tensor::from_vec(vals, &[2, 3, 4]).unwrap();
    for sd in [DType::F64, DType::F32, DType::F16, DType::I32, DType::U8, DType::Bool] {
        for dd in [DType::F32, DType::BF16, DType::I64, DType::I8, DType::Bool] {
            let src_h = base.to_dtype(sd).unwrap();
            // sources: a transposed view, a broadcast row, a scalar
            let sources = [
                src_h.permute(&[2, 0, 1]).unwrap().permute(&[1, 2, 0]).unwrap(),
                src_h.select(1, 1).unwrap().select(0, 0).unwrap().broadcast_to(&[2, 3, 4]).unwrap(),
                src_h.select(0, 1).unwrap().select(0, 2).unwrap().select(0, 3).unwrap(),
            ];
            for src in sources {
                // destinations: contiguous, and a strided view (every other column of a wider tensor)
                let wide_h = Tensor::zeros(&[2, 3, 8], dd);
                let dst_h = wide_h.slice(2, Some(0), Some(8), 2).unwrap();
                let wide_d = wide_h.to_device(&rt, d).unwrap();
                let dst_d = wide_d.slice(2, Some(0), Some(8), 2).unwrap();
                let src_d = src.to_device(&rt, d).unwrap();
                dst_h.copy_(&src).unwrap();
                reference::copy_into_view(&dst_d, &src_d).unwrap();
                assert_eq!(
                    wide_d.to_cpu().unwrap().gather_bytes().unwrap(),
                    wide_h.gather_bytes().unwrap(),
                    "{sd:?} -> {dd:?} from sizes {:?} strides {:?}",
                    src.sizes(),
                    src.strides()
                );
                let plain_h = Tensor::zeros(&[2, 3, 4], dd);
                let plain_d = plain_h.to_device(&rt, d).unwrap();
                plain_h.copy_(&src).unwrap();
                reference::copy_into_view(&plain_d, &src_d).unwrap();
                assert_eq!(plain_d.to_cpu().unwrap().gather_bytes().unwrap(), plain_h.gather_bytes().unwrap());
            }
        }
    }
    let t = base.to_device(&rt, d).unwrap().permute(&[2, 0, 1]).unwrap();
    let c = t.contiguous().unwrap();
    assert!(c.is_contiguous());
    assert_eq!(c.device(), d);
    assert_eq!(
        c.to_cpu().unwrap().gather_bytes().unwrap(),
        base.permute(&[2, 0, 1]).unwrap().contiguous().unwrap().gather_bytes().unwrap()
    );
}

/// The reduction kernels against the host reference, over leading dims of a contiguous input
/// (read as stored, rows summed into the output columns), trailing dims, a middle dim and
/// non-contiguous inputs; small tensors and ones large enough for the parallel bands; a NaN in a
/// column of `amax`.
#[test]
fn device_reductions_match_the_host_over_any_dims() {
    let _serial = crate::serial();
    let rt = rt();
    let d = Device::Npu(0);
    for sizes in [vec![3usize, 5], vec![2, 3, 4], vec![700, 600]] {
        let n: usize = sizes.iter().product();
        let mut vals: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1000) as f32 / 37.0 - 13.0).collect();
        vals[n / 2] = f32::NAN;
        let host = Tensor::from_slice(&vals).reshape(&sizes.iter().map(|&s| s as i64).collect::<Vec<_>>()).unwrap();
        let dev = host.to_device(&rt, d).unwrap();
        let nd = sizes.len() as i64;
        // a non-contiguous view: the last two dims swapped
        let tr = |t: &Tensor| t.transpose(-1, -2).unwrap();
        let mut dim_sets: Vec<Vec<i64>> = vec![vec![0], vec![nd - 1], vec![-1, 0]];
        if nd == 3 {
            dim_sets.extend([vec![0, 1], vec![1]]);
        }
        for dims in &dim_sets {
            for (h, x) in [(host.clone(), dev.clone()), (tr(&host), tr(&dev))] {
                for keep in [false, true] {
                    let pairs = [
                        (reference::sum(&h, Some(dims), keep, None), reference::sum(&x, Some(dims), keep, None)),
                        (reference::mean(&h, Some(dims), keep, None), reference::mean(&x, Some(dims), keep, None)),
                        (reference::amax(&h, Some(dims), keep), reference::amax(&x, Some(dims), keep)),
                    ];
                    for (i, (want, got)) in pairs.into_iter().enumerate() {
                        let (want, got) = (want.unwrap(), got.unwrap());
                        assert_eq!(got.device(), d);
                        assert_eq!(got.sizes(), want.sizes(), "{sizes:?} {dims:?} op {i}");
                        let (w, g) = (want.to_vec::<f32>().unwrap(), got.to_cpu().unwrap().to_vec::<f32>().unwrap());
                        for (a, b) in w.iter().zip(&g) {
                            assert!(
                                (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-4 * a.abs().max(1.0),
                                "{sizes:?} dims {dims:?} keepdim {keep} op {i}: {a} vs {b}"
                            );
                        }
                    }
                }
            }
        }
    }
}
