//! The shipped snapshot store: every corpus version is there, current (rebuilding it from the corpus
//! gives byte-identical files), and what `ops --format jsonl` prints from it equals torchgen's reference.

use std::collections::BTreeMap;

use serde_json::Value;
use xirang_scan::snapshot::{PytorchSnapshot, Store};
use xirang_scan::source::{self, SourceSpec};
use xirang_scan::version::Version;
use xirang_tests::{corpus, repo_root};

fn store() -> Store {
    Store::new(repo_root().join("schemas"))
}

fn corpus_versions() -> Vec<(Version, std::path::PathBuf)> {
    let mut v: Vec<_> = std::fs::read_dir(corpus().join("pytorch"))
        .expect("corpus")
        .flatten()
        .filter_map(|e| Version::parse(&e.file_name().to_string_lossy()).map(|v| (v, e.path())))
        .collect();
    v.sort();
    v
}

#[test]
fn store_has_every_corpus_version_and_is_current() {
    let st = store();
    let stored = st.versions("pytorch");
    let tmp = std::env::temp_dir().join(format!("xirang-store-{}", std::process::id()));
    let fresh = Store::new(&tmp);
    for (v, dir) in corpus_versions() {
        assert!(
            stored.contains(&v),
            "{v} missing from schemas/pytorch: run `xirang-scan snapshot sync ../shared/corpus/pytorch`"
        );
        let files = source::read(&SourceSpec::Folder(dir)).expect("read corpus");
        let snap = PytorchSnapshot::build(&files, &v).expect("build");
        let out = fresh.write_pytorch(&snap).expect("write");
        for f in ["meta.json", "tags.json", "operators.jsonl", "derivatives.jsonl"] {
            let shipped = std::fs::read(st.dir("pytorch", &v).join(f)).expect("shipped file");
            let rebuilt = std::fs::read(out.join(f)).expect("rebuilt file");
            assert!(
                shipped == rebuilt,
                "schemas/pytorch/{v}/{f} is stale: rerun `xirang-scan snapshot sync ../shared/corpus/pytorch`"
            );
        }
        // round trip through the store
        let loaded = st.load_pytorch(&v).expect("load");
        assert_eq!(loaded, snap, "{v}: load(write(x)) != x");
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn resolve_picks_newest_patch() {
    let st = store();
    assert_eq!(st.resolve("pytorch", "v2.1").unwrap().to_string(), "v2.1.2");
    assert_eq!(st.resolve("pytorch", "v2.1.0").unwrap().to_string(), "v2.1.0");
    assert_eq!(st.resolve("pytorch", "2.3").unwrap().to_string(), "v2.3.1");
    assert!(st.resolve("pytorch", "v9.9").is_err());
    assert!(st.resolve("pytorch", "banana").is_err());
}

#[test]
fn ops_jsonl_from_the_store_equals_torchgen_reference() {
    let st = store();
    for (v, dir) in corpus_versions() {
        let snap = st.load_pytorch(&v).expect("load");
        let mine: BTreeMap<String, Value> = xirang_scan::render::ops_jsonl(&snap)
            .lines()
            .map(|l| {
                let d: Value = serde_json::from_str(l).expect("json");
                (format!("{}.{}", d["name"].as_str().unwrap(), d["overload"].as_str().unwrap()), d)
            })
            .collect();
        let reference: BTreeMap<String, Value> = std::fs::read_to_string(dir.join("torchgen-reference.jsonl"))
            .expect("reference")
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("json"))
            .filter(|d| d["kind"] == "op")
            .map(|d| (format!("{}.{}", d["name"].as_str().unwrap(), d["overload"].as_str().unwrap()), d))
            .collect();
        assert_eq!(mine.len(), reference.len(), "{v}");
        for (k, r) in &reference {
            let m = mine.get(k).unwrap_or_else(|| panic!("{v}: missing {k}"));
            for field in [
                "name",
                "overload",
                "schema",
                "dispatch",
                "tags",
                "autogen",
                "structured",
                "structured_delegate",
                "variants",
            ] {
                assert_eq!(m[field], r[field], "{v} {k} {field}");
            }
        }
    }
}
