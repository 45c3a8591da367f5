//! Every torch_npu backend yaml in the corpus loads, and every vendor-written schema in it
//! (`custom` entries and per-entry `func:` schemas) parses and round-trips.

use xirang_scan::SourceFile;
use xirang_scan::backend::load_backend_yaml;
use xirang_scan::schema::FunctionSchema;
use xirang_tests::corpus;

#[test]
fn all_ascend_backend_files_load_and_schemas_round_trip() {
    let root = corpus().join("ascend");
    let mut releases: Vec<_> =
        std::fs::read_dir(&root).expect("ascend corpus").flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
    releases.sort();
    assert_eq!(releases.len(), 13);
    let (mut files, mut schemas, mut custom) = (0, 0, 0);
    for rel in releases {
        let mut ymls: Vec<_> =
            std::fs::read_dir(rel.join("backend")).expect("backend dir").flatten().map(|e| e.path()).collect();
        ymls.sort();
        for y in ymls {
            let text = std::fs::read_to_string(&y).expect("read");
            let src = SourceFile::new(y.display().to_string(), text);
            let b = load_backend_yaml(&src).unwrap_or_else(|e| panic!("{e}"));
            files += 1;
            assert!(b.settings.contains_key("backend"), "{}", y.display());
            for (list, e) in b.entries() {
                if let Some(s) = &e.schema {
                    let p = FunctionSchema::parse(s).unwrap_or_else(|err| panic!("{}: {s}: {err}", y.display()));
                    assert_eq!(&p.to_string(), s);
                    schemas += 1;
                    if list == "custom" {
                        custom += 1;
                    }
                }
            }
            // the raw text of every `func:` holding a schema is canonical: compare against it too
            for line in src.text().lines() {
                let t = line.trim_start().trim_start_matches("- ");
                if let Some(s) = t.strip_prefix("func: ")
                    && s.contains('(')
                {
                    let p = FunctionSchema::parse(s.trim()).unwrap_or_else(|err| panic!("{}: {s}: {err}", y.display()));
                    assert_eq!(p.to_string(), s.trim());
                }
            }
        }
    }
    println!("{files} backend files, {schemas} schemas ({custom} custom) parsed and round-tripped");
    assert!(files >= 26 && custom > 100);
}
