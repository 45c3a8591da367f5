//! Upstream changes of PyTorch's C++ extension interface, pinned per release pair (found in the
//! headers' history: each is a change a backend maintainer had to act on, or was told of).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use xirang_cxx::{CxxChange, CxxSet, CxxSeverity};

use crate::common;

fn set(v: &str) -> CxxSet {
    static CACHE: OnceLock<Mutex<HashMap<String, CxxSet>>> = OnceLock::new();
    let m = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(s) = m.lock().expect("lock").get(v) {
        return s.clone();
    }
    let s = common::scan(v);
    m.lock().expect("lock").insert(v.to_string(), s.clone());
    s
}

fn diff(a: &str, b: &str) -> Vec<CxxChange> {
    xirang_cxx::diff(&set(a), &set(b))
}

#[track_caller]
fn pinned(changes: &[CxxChange], rule: &str, subject: &str) -> CxxChange {
    changes.iter().find(|c| c.rule == rule && c.subject == subject).cloned().unwrap_or_else(|| {
        let near: Vec<String> = changes
            .iter()
            .filter(|c| c.subject.contains(subject.rsplit("::").next().unwrap_or(subject)))
            .map(|c| format!("{} {}", c.rule, c.subject))
            .collect();
        panic!("no {rule} on {subject}; near: {near:?}")
    })
}

#[test]
fn allocator_2_3_copy_data_and_non_const_allocate() {
    let ch = diff("v2.2.2", "v2.3.0");
    let c = pinned(&ch, "cxx.virtual.pure_added", "c10::Allocator::copy_data");
    assert_eq!(c.severity, CxxSeverity::Breaking);
    assert_eq!(c.new.as_deref(), Some("virtual void copy_data(void*, const void*, std::size_t) const = 0"));
    let c = pinned(&ch, "cxx.virtual.const_changed", "c10::Allocator::allocate");
    assert_eq!(c.old.as_deref(), Some("virtual DataPtr allocate(size_t) const = 0"));
    pinned(&ch, "cxx.class.bases_changed", "at::PrivateUse1HooksInterface");
    pinned(&ch, "cxx.virtual.throwing_added", "at::PrivateUse1HooksInterface::resizePrivateUse1Bytes");
    pinned(&ch, "cxx.virtual.renamed", "c10::SymNodeImpl::singleton_int");
}

#[test]
fn registration_2_2_library_def_takes_tags() {
    let ch = diff("v2.1.2", "v2.2.0");
    let c = pinned(&ch, "cxx.method.param_added_with_default", "torch::Library::def");
    assert_eq!(c.severity, CxxSeverity::Info);
    assert!(c.new.as_deref().is_some_and(|n| n.contains("const std::vector<at::Tag>& = {}")), "{c:?}");
}

#[test]
fn guard_2_4_events_and_autocast_lists() {
    let ch = diff("v2.3.1", "v2.4.0");
    pinned(&ch, "cxx.virtual.throwing_added", "c10::impl::DeviceGuardImplInterface::synchronizeEvent");
    pinned(&ch, "cxx.virtual.throwing_added", "c10::impl::DeviceGuardImplInterface::elapsedTime");
    pinned(&ch, "cxx.autocast.lists_published", "autocast policy lists");
    pinned(&ch, "cxx.class.removed", "at::ORTHooksInterface");
    pinned(&ch, "cxx.virtual.signature_changed", "c10::impl::PyInterpreterVTable::trace_gpu_device_synchronization");
    // c10::optional became std::optional: overrides keep overriding
    let c = pinned(&ch, "cxx.signature.respelled", "c10::SymNodeImpl::constant_int");
    assert_eq!(c.severity, CxxSeverity::Info);
}

#[test]
fn hooks_2_6_per_backend_init_became_init() {
    let ch = diff("v2.5.1", "v2.6.0");
    let c = pinned(&ch, "cxx.virtual.renamed", "at::PrivateUse1HooksInterface::initPrivateUse1");
    assert!(c.message.contains("is now `init`"), "{c:?}");
    pinned(&ch, "cxx.virtual.throwing_added", "at::AcceleratorHooksInterface::getDefaultGenerator");
    pinned(&ch, "cxx.virtual.throwing_added", "c10::impl::DeviceGuardImplInterface::synchronizeDevice");
}

#[test]
fn guard_2_7_get_stream_lost_noexcept() {
    let ch = diff("v2.6.0", "v2.7.0");
    pinned(&ch, "cxx.virtual.noexcept_changed", "c10::impl::DeviceGuardImplInterface::getStream");
    pinned(&ch, "cxx.virtual.noexcept_changed", "c10::impl::DeviceGuardImplInterface::exchangeStream");
}

#[test]
fn guard_2_10_device_capability() {
    let ch = diff("v2.9.1", "v2.10.0");
    pinned(&ch, "cxx.virtual.throwing_added", "c10::impl::DeviceGuardImplInterface::getDeviceCapability");
}

#[test]
fn named_tensors_2_13() {
    let ch = diff("v2.12.1", "v2.13.0");
    pinned(&ch, "cxx.class.removed", "c10::NamedTensorMetaInterface");
    pinned(&ch, "cxx.method.removed", "torch::CppFunction::makeNamedNotSupported");
    let c = pinned(&ch, "cxx.autocast.removed", "softmax.Dimname");
    assert_eq!(c.detail.as_deref(), Some("fp32_set_opt_dtype"));
}

#[test]
fn distributed_2_14_bound_device_id_virtual() {
    let ch = diff("v2.13.0", "v2.14.0");
    pinned(&ch, "cxx.virtual.became_virtual", "c10d::Backend::setBoundDeviceId");
    pinned(&ch, "cxx.virtual.removed", "c10d::ProcessGroup::setSequenceNumberForGroup");
}

#[test]
fn every_consecutive_pair_diffs_and_patch_releases_are_quiet() {
    let rels = common::releases();
    let mut total = 0;
    for w in rels.windows(2) {
        let ch = diff(&w[0], &w[1]);
        // sorted, no duplicates, every change positioned and named by a catalogue rule
        for c in &ch {
            assert!(xirang_cxx::rules().iter().any(|r| r.id == c.rule), "{}", c.rule);
            assert!(c.line >= 1 && !c.file.is_empty(), "{c:?}");
        }
        let major = |v: &str| v.rsplit_once('.').map(|(a, _)| a.to_string()).unwrap_or_default();
        if major(&w[0]) == major(&w[1]) {
            let breaking = ch.iter().filter(|c| c.severity == CxxSeverity::Breaking).count();
            assert_eq!(breaking, 0, "{}..{}: {ch:?}", w[0], w[1]);
        }
        total += ch.len();
    }
    assert!(total > 300, "{total}");
    // a release against itself: nothing
    assert!(diff("v2.15.0", "v2.15.0").is_empty());
}
