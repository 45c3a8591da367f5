//! Every host implementation and native kernel names a real operator of the
//! PyTorch snapshot the adapter is generated for (`generated::PYTORCH_VERSION`),
//! read from `schemas/pytorch/<version>/operators.jsonl`, and every marker is
//! attached. Their argument types are the schema's by construction: the
//! generated code calls them with the operator method's typed arguments.

use std::collections::BTreeMap;
use std::path::PathBuf;

use xirang_runtime::generated::ops::fallback::HOST_OPERATORS;
use xirang_runtime::kernels;

/// The generated-for snapshot: operator name -> argument count.
fn schemas() -> BTreeMap<String, usize> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../schemas/pytorch");
    let dir = xirang_runtime::generated::PYTORCH_VERSION;
    let text = std::fs::read_to_string(root.join(dir).join("operators.jsonl")).unwrap();
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let func = v["func"].as_str().unwrap();
        let open = func.find('(').unwrap();
        let name = func[..open].to_string();
        out.insert(name, count_args(&func[open + 1..]));
    }
    out
}

/// Counts the top-level arguments of `args...) -> ...` (the `*` marker is not an argument).
fn count_args(rest: &str) -> usize {
    let (mut depth, mut quote, mut n, mut cur) = (0i32, false, 0, String::new());
    for ch in rest.chars() {
        match ch {
            '\'' | '"' => quote = !quote,
            '(' | '[' if !quote => depth += 1,
            ']' if !quote => depth -= 1,
            ')' if !quote && depth == 0 => break,
            ')' if !quote => depth -= 1,
            ',' if !quote && depth == 0 => {
                if cur.trim() != "*" && !cur.trim().is_empty() {
                    n += 1;
                }
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(ch);
    }
    if cur.trim() != "*" && !cur.trim().is_empty() {
        n += 1;
    }
    n
}

#[test]
fn argument_counter_reads_schemas() {
    assert_eq!(count_args("Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"), 3);
    assert_eq!(count_args(") -> Tensor"), 0);
    assert_eq!(count_args("Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor"), 3);
    assert_eq!(count_args("Tensor self, *, str approximate='none') -> Tensor"), 2);
}

#[test]
fn host_implementations_match_the_generated_version_schemas() {
    let s = schemas();
    assert!(s.len() > 1500, "snapshot has {} operators", s.len());
    assert!(HOST_OPERATORS.len() >= 100, "host implementations cover {} operators", HOST_OPERATORS.len());
    assert!(HOST_OPERATORS.windows(2).all(|w| w[0] < w[1]), "HOST_OPERATORS is not sorted");
    for op in HOST_OPERATORS {
        assert!(
            s.contains_key(*op),
            "host implementation `{op}` is not an operator of {}",
            xirang_runtime::generated::PYTORCH_VERSION
        );
    }
}

#[test]
fn every_host_marker_is_attached() {
    // A `/// xirang-fallback:` marker naming an operator the adapter does not select (a typo, an
    // operator gone upstream) is not attached by the generator: it must not go unnoticed.
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/reference");
    let mut text = String::new();
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        if e.path().extension().is_some_and(|x| x == "rs") {
            text.push_str(&std::fs::read_to_string(e.path()).unwrap());
        }
    }
    let mut marked: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("/// xirang-fallback:"))
        .flat_map(|rest| rest.split(',').map(str::trim))
        .collect();
    marked.sort_unstable();
    assert_eq!(marked, HOST_OPERATORS.to_vec(), "src/reference/ markers vs generated HOST_OPERATORS");
}

#[test]
fn native_entries_match_the_generated_version_schemas_and_have_host_fallbacks() {
    let s = schemas();
    let ops = kernels::operators();
    assert!(ops.len() >= 60, "native kernels cover {} operators", ops.len());
    for op in ops {
        let want = s.get(op).unwrap_or_else(|| {
            panic!("native entry `{op}` is not an operator of {}", xirang_runtime::generated::PYTORCH_VERSION)
        });
        // the argument types are the schema's by construction: generated/native.rs calls the
        // kernel with the operator method's typed arguments (the compiler checks them)
        let _ = want;
        assert!(HOST_OPERATORS.binary_search(&op).is_ok(), "`{op}` has a native kernel but no host fallback");
    }
}

#[test]
fn every_native_operator_has_one_kernel_marker() {
    // The drift engine's adapter index finds kernels by `/// xirang-kernel: op` doc lines.
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/kernels");
    let mut marked: BTreeMap<String, usize> = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        for line in text.lines() {
            if let Some(rest) = line.trim().strip_prefix("/// xirang-kernel:") {
                for op in rest.split(',') {
                    *marked.entry(op.trim().to_string()).or_default() += 1;
                }
            }
        }
    }
    for op in kernels::operators() {
        assert_eq!(marked.get(op), Some(&1), "`{op}` needs exactly one `/// xirang-kernel:` marker");
    }
}

#[test]
fn coverage_lists_every_operator_with_its_tier() {
    use xirang_runtime::dispatch::Tier;
    let cov = xirang_runtime::boxed::coverage();
    let native = cov.iter().filter(|(_, t)| *t == Tier::Native).count();
    assert_eq!(native, kernels::operators().len());
    assert_eq!(cov.len(), HOST_OPERATORS.len());
    println!("{} operators: {native} native, {} fallback only", cov.len(), cov.len() - native);
}

#[test]
fn the_boxed_table_is_sorted_for_its_binary_search() {
    use xirang_runtime::generated::ops::{OPERATORS, operator_index};
    assert!(OPERATORS.windows(2).all(|w| w[0] < w[1]), "generated::ops::OPERATORS is not sorted bytewise");
    for (i, op) in OPERATORS.iter().enumerate() {
        assert_eq!(operator_index(op), Some(i), "{op}");
    }
    assert_eq!(operator_index("add.Tensr"), None);
}
