//! Header snapshots: every Ascend and CUDA release of the corpus is in the store, current (a rescan
//! gives byte-identical files), and loads back to the same declarations.

use xirang_scan::snapshot::{HeaderSnapshot, Store};
use xirang_scan::version::Version;
use xirang_tests::{corpus, repo_root};

#[test]
fn every_vendor_release_is_stored_current_and_round_trips() {
    let st = Store::new(repo_root().join("schemas"));
    let tmp = std::env::temp_dir().join(format!("xirang-headers-{}", std::process::id()));
    let fresh = Store::new(&tmp);
    let mut n = 0;
    for vendor in ["ascend", "cuda"] {
        let mut releases: Vec<_> = std::fs::read_dir(corpus().join(vendor))
            .expect("corpus")
            .flatten()
            .filter(|e| e.path().is_dir())
            .filter_map(|e| Version::parse(&e.file_name().to_string_lossy()).map(|v| (v, e.path())))
            .collect();
        releases.sort();
        assert!(releases.len() >= 7, "{vendor}: {} releases", releases.len());
        let stored = st.versions(vendor);
        for (v, dir) in releases {
            assert!(
                stored.contains(&v),
                "{vendor} {v} missing: run `xirang-scan snapshot sync ../shared/corpus/{vendor} --upstream {vendor}`"
            );
            let snap = HeaderSnapshot::scan(vendor, &dir, &v).expect("scan");
            let out = fresh.write_headers(&snap).expect("write");
            for f in ["meta.json", "files.json", "decls.jsonl"] {
                let shipped = std::fs::read(st.dir(vendor, &v).join(f)).expect("shipped");
                let rebuilt = std::fs::read(out.join(f)).expect("rebuilt");
                assert!(
                    shipped == rebuilt,
                    "schemas/{vendor}/{v}/{f} is stale: rerun `xirang-scan snapshot sync ../shared/corpus/{vendor} --upstream {vendor}`"
                );
            }
            let loaded = st.load_headers(vendor, &v).expect("load");
            assert_eq!(loaded, snap, "{vendor} {v}: load(write(x)) != x");
            n += 1;
        }
    }
    assert_eq!(n, 20);
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn known_declarations_survive_the_store() {
    let st = Store::new(repo_root().join("schemas"));
    let cuda = st.load_headers("cuda", &st.resolve("cuda", "v12.1").unwrap()).unwrap();
    let e = cuda.set.decls().find(|d| d.name == "cudaErrorMemoryAllocation").expect("enumerator");
    assert_eq!(e.value, Some(2));
    let acl = st.load_headers("ascend", &st.resolve("ascend", "v2.14.0").unwrap()).unwrap();
    let m = acl.set.decls().find(|d| d.name == "aclrtMalloc" && d.file == "acl_rt.h").expect("aclrtMalloc");
    let params: Vec<(&str, &str)> =
        m.params.as_ref().unwrap().iter().map(|p| (p.name.as_str(), p.ty.as_str())).collect();
    assert_eq!(params, [("devPtr", "void **"), ("size", "size_t"), ("policy", "aclrtMemMallocPolicy")]);
}
