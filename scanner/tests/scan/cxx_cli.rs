//! `xirang-scan diff --upstream pytorch-cxx`: the C++ side of drift from the command line, on store
//! versions and on folders, with the adapter's C++ (the shim by default, any tree with --adapter).

use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn scan(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_xirang-scan")).current_dir(repo()).args(args).output().expect("run");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn an_upgrade_names_the_shim_overrides_to_change() {
    let (code, out, err) =
        scan(&["diff", "--upstream", "pytorch-cxx", "v2.2.2", "v2.3.0", "--format", "json", "--fail-on", "breaking"]);
    assert_eq!(code, 4, "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).expect("json");
    let impacts = j["impact"].as_array().expect("impact");
    // Allocator::allocate lost `const` in 2.3: the shim's override in its direct c10::Allocator
    // subclass (the pinned host allocator; the device allocator derives from c10::DeviceAllocator,
    // which 2.3 does not have) is named, at its line
    let shim = std::fs::read_to_string(repo().join("adapter-runtime/torch-xirang/csrc/hooks.cpp")).expect("shim");
    let line = shim.lines().position(|l| l.contains("c10::DataPtr allocate(")).expect("allocate") + 1;
    let want = format!("adapter-runtime/torch-xirang/csrc/hooks.cpp:{line}");
    assert!(
        impacts.iter().any(|i| i["rule"] == "cxx.virtual.const_changed"
            && format!("{}:{}", i["location"]["file"].as_str().unwrap_or(""), i["location"]["line"]) == want),
        "{impacts:#?}"
    );
    assert!(j["adapter_summary"].as_str().is_some_and(|s| s.contains("classes deriving from PyTorch's")), "{j}");
}

#[test]
fn folders_and_a_cxx_adapter_tree() {
    let tmp = std::env::temp_dir().join(format!("xirang-cxx-cli-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("mkdir");
    std::fs::write(
        tmp.join("alloc.cpp"),
        "#include <c10/core/Allocator.h>\nnamespace my {\nstruct A final : c10::Allocator {\n  c10::DataPtr allocate(size_t n) const override { return {}; }\n  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }\n};\nREGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g);\n}\n",
    )
    .expect("write");
    let corpus = repo().join("../shared/corpus/pytorch-cxx");
    let (code, out, err) = scan(&[
        "diff",
        "--upstream",
        "pytorch-cxx",
        corpus.join("v2.2.2").to_str().unwrap(),
        corpus.join("v2.3.0").to_str().unwrap(),
        "--adapter",
        tmp.to_str().unwrap(),
        "--format",
        "markdown",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("`alloc.cpp:4` `my::A::allocate`"), "{out}");
    assert!(out.contains("add an override of `copy_data` to `my::A`"), "{out}");
    let _ = std::fs::remove_dir_all(&tmp);
    // unknown version: a usage error naming what the store has
    let (code, _, err) = scan(&["diff", "--upstream", "pytorch-cxx", "v1.9", "v2.15"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no pytorch-cxx snapshot matches v1.9"), "{err}");
}

#[test]
fn rules_list_the_cxx_catalogue() {
    let (code, out, _) = scan(&["explain", "cxx.virtual.pure_added"]);
    assert_eq!(code, 0);
    assert!(out.contains("Override the new method"), "{out}");
}
