//! C++ interface snapshots: every `pytorch-cxx` release of the corpus is in the store, current (a
//! rescan gives byte-identical files), and loads back to the same interface.

use xirang_scan::cxx_snapshot::CxxSnapshot;
use xirang_scan::snapshot::Store;
use xirang_scan::version::Version;
use xirang_tests::{corpus, repo_root};

#[test]
fn every_cxx_release_is_stored_current_and_round_trips() {
    let st = Store::new(repo_root().join("schemas"));
    let tmp = std::env::temp_dir().join(format!("xirang-cxx-store-{}", std::process::id()));
    let fresh = Store::new(&tmp);
    let mut releases: Vec<_> = std::fs::read_dir(corpus().join("pytorch-cxx"))
        .expect("corpus")
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| Version::parse(&e.file_name().to_string_lossy()).map(|v| (v, e.path())))
        .collect();
    releases.sort();
    assert_eq!(releases.len(), 25);
    let stored = st.versions("pytorch-cxx");
    for (v, dir) in releases {
        assert!(
            stored.contains(&v),
            "pytorch-cxx {v} missing: run `xirang-scan snapshot sync ../shared/corpus/pytorch-cxx --upstream pytorch-cxx`"
        );
        let snap = CxxSnapshot::scan(&dir, &v).expect("scan");
        let out = fresh.write_cxx(&snap).expect("write");
        for f in [
            "meta.json",
            "files.json",
            "classes.jsonl",
            "members.jsonl",
            "functions.jsonl",
            "macros.jsonl",
            "autocast.jsonl",
        ] {
            let shipped = std::fs::read(st.dir("pytorch-cxx", &v).join(f)).expect("shipped");
            let rebuilt = std::fs::read(out.join(f)).expect("rebuilt");
            assert!(
                shipped == rebuilt,
                "schemas/pytorch-cxx/{v}/{f} is stale: rerun `xirang-scan snapshot sync ../shared/corpus/pytorch-cxx --upstream pytorch-cxx`"
            );
        }
        let loaded = st.load_cxx(&v).expect("load");
        assert_eq!(loaded, snap, "pytorch-cxx {v}: load(write(x)) != x");
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn a_hand_edited_snapshot_is_refused() {
    let st = Store::new(repo_root().join("schemas"));
    let v = st.resolve("pytorch-cxx", "v2.15").expect("2.15");
    let tmp = std::env::temp_dir().join(format!("xirang-cxx-edit-{}", std::process::id()));
    let copy = Store::new(&tmp);
    copy.write_cxx(&st.load_cxx(&v).expect("load")).expect("write");
    let members = copy.dir("pytorch-cxx", &v).join("members.jsonl");
    let text = std::fs::read_to_string(&members).expect("read");
    let first = text.lines().next().expect("a member").to_string();
    std::fs::write(&members, text.replacen(&first, "", 1)).expect("write");
    let err = copy.load_cxx(&v).expect_err("counts no longer match");
    assert!(err.to_string().contains("counts"), "{err}");
    std::fs::write(&members, format!("{text}{{\"class\":\"nope\"}}\n")).expect("write");
    assert!(copy.load_cxx(&v).is_err());
    let _ = std::fs::remove_dir_all(&tmp);
}
