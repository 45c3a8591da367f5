//! A real C++ adapter, op-plugin (torch_npu's kernels): its kernel definitions matched to operators
//! by name and C++ signature, and what PyTorch upgrades ask of it.

use std::collections::BTreeSet;

use xirang_scan::diff::cxx_kernels;
use xirang_scan::snapshot::Store;
use xirang_tests::{corpus, repo_root};

#[test]
fn op_plugin_kernels_match_their_operators() {
    let st = Store::new(repo_root().join("schemas"));
    let root = corpus().join("adapters/op-plugin");
    let idx = xirang_scan::diff::pipeline::index_cxx(&root.join("op_plugin/ops"), &root).expect("index");
    let names: BTreeSet<String> = idx.kernels.iter().flat_map(|k| cxx_kernels::candidate_names(&k.name)).collect();
    // op-plugin serves PyTorch 2.1 ... 2.15 (op_plugin_functions.yaml: all_version) and declares its own operators
    let mut ops = cxx_kernels::adapter_schemas(&root);
    assert!(ops.len() > 1000, "{}", ops.len());
    for v in st.versions("pytorch").iter().filter(|v| v.parts.get(1).copied().unwrap_or(0) >= 1) {
        ops.extend(st.load_pytorch_operators(v, |n| names.contains(n)).expect("load").into_iter().map(|f| f.func));
    }
    let m = cxx_kernels::match_kernels(&idx.kernels, &ops);
    let total = idx.kernels.len();
    let matched = m.matched.len();
    // a function named after no operator (of PyTorch 2.1 ... 2.15 or op-plugin's own yaml) is a helper
    // with external linkage (`exec_npu_cmd`, `upsample_nearest2d_old`), not a kernel definition
    let helpers = m.unmatched.iter().filter(|(_, why)| why.starts_with("no operator whose C++ name")).count();
    let kernels = total - helpers;
    eprintln!(
        "op-plugin: {total} external functions in kernel namespaces, {helpers} helpers (named after no operator), \
         {kernels} kernel definitions, {matched} matched to their operator by name and C++ signature"
    );
    for (i, why) in m.unmatched.iter().filter(|(_, why)| !why.starts_with("no operator whose C++ name")) {
        let k = &idx.kernels[*i];
        eprintln!("  unmatched {}:{} {}::{}: {why}", k.file, k.line, k.scope, k.name);
    }
    assert!(kernels > 1800, "{kernels}");
    assert!(matched * 100 >= kernels * 95, "{matched} of {kernels}");
    // each matched kernel has the operator's C++ name
    for x in &m.matched {
        let k = &idx.kernels[x.kernel];
        assert!(
            cxx_kernels::candidate_names(&k.name).iter().any(|n| x.op.split('.').next() == Some(n.as_str())),
            "{} -> {}",
            k.name,
            x.op
        );
    }
}

#[test]
fn op_plugin_upgrade_2_12_to_2_13_names_the_cpp_kernels() {
    // the named-tensor overloads left in 2.13; op-plugin gates most of its kernels for them out of
    // 2.13 with `#if !VERSION_BETWEEN(V2R13, VERSION_NEWEST)`: only the ungated ones are left to edit
    let st = Store::new(repo_root().join("schemas"));
    let root = corpus().join("adapters/op-plugin");
    let (vo, vn) = (st.resolve("pytorch", "v2.12.1").unwrap(), st.resolve("pytorch", "v2.13.0").unwrap());
    let mut kernels = xirang_scan::diff::adapter_index::AdapterIndex::default();
    let ck = cxx_kernels::join(&mut kernels, &root, root.parent().unwrap(), &st, &[vo.clone(), vn.clone()])
        .expect("join")
        .expect("C++ kernels");
    let ones: Vec<_> = kernels.of("ones.names").collect();
    assert_eq!(ones.len(), 2, "{ones:?}"); // acl_op::ones and op_api::ones with `names`
    let gated: Vec<_> = kernels.of("cat.names").collect();
    assert!(!gated.is_empty());
    let g = ck.index.kernels.iter().find(|k| k.file == gated[0].file && k.line == gated[0].line).unwrap();
    assert!(g.gates.iter().any(|x| x.contains("VERSION_BETWEEN(V2R13")), "{g:?}");
    assert!(!cxx_kernels::gate_holds(&g.gates[0], 2, 13));
}
