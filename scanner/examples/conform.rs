// Developer tool: compare the registry of one corpus folder against torchgen-reference.jsonl.
use std::collections::BTreeMap;
use xirang_scan::{SourceFile, registry};

fn main() {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).expect("dir"));
    let read = |n: &str| SourceFile::new(n, std::fs::read_to_string(dir.join(n)).unwrap());
    let tags = registry::load_tags(&read("tags.yaml")).unwrap();
    let t = std::time::Instant::now();
    let vname = dir.file_name().unwrap().to_str().unwrap().trim_start_matches('v').to_string();
    let mut it = vname.split('.').map(|x| x.parse::<u32>().unwrap());
    let tg = registry::TorchgenVersion::new(it.next().unwrap(), it.next().unwrap());
    let reg = match registry::load_native_functions_as(&read("native_functions.yaml"), tags, tg) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1)
        }
    };
    eprintln!("loaded in {:?}", t.elapsed());
    let mut mine = BTreeMap::new();
    for f in &reg.functions {
        let v = serde_json::json!({
            "schema": f.func.to_string(), "dispatch": f.dispatch_keys(), "tags": f.tags,
            "autogen": f.generated, "structured": f.structured,
            "structured_delegate": f.structured_delegate.as_ref().map(|d| d.to_string()),
            "variants": f.variants.iter().map(|v| format!("{v:?}").to_lowercase()).collect::<Vec<_>>(),
        });
        mine.insert(f.func.name.to_string(), v);
    }
    let mut refs = BTreeMap::new();
    for line in std::fs::read_to_string(dir.join("torchgen-reference.jsonl")).unwrap().lines() {
        let d: serde_json::Value = serde_json::from_str(line).unwrap();
        if d["kind"] != "op" {
            continue;
        }
        let n = if d["overload"] == "" {
            d["name"].as_str().unwrap().to_string()
        } else {
            format!("{}.{}", d["name"].as_str().unwrap(), d["overload"].as_str().unwrap())
        };
        refs.insert(n, d);
    }
    let (mut ok, mut bad) = (0, 0);
    for (n, r) in &refs {
        match mine.get(n) {
            None => {
                bad += 1;
                println!("MISSING {n} autogen={}", r["autogen"]);
            }
            Some(m) => {
                let mut diffs = vec![];
                for k in ["schema", "dispatch", "tags", "autogen", "structured", "structured_delegate", "variants"] {
                    if m[k] != r[k] {
                        diffs.push(format!("{k}: mine={} ref={}", m[k], r[k]));
                    }
                }
                if diffs.is_empty() {
                    ok += 1
                } else {
                    bad += 1;
                    println!("DIFF {n}: {}", diffs.join("; "));
                }
            }
        }
    }
    for n in mine.keys() {
        if !refs.contains_key(n) {
            bad += 1;
            println!("EXTRA {n} {}", mine[n]["schema"]);
        }
    }
    println!("ok={ok} bad={bad} ref={} mine={}", refs.len(), mine.len());
}
