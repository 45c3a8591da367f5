//! Upgrade rehearsal, the adapter's own upgrade: in a copy of the adapter, generate for PyTorch 2.3
//! with a hand-written kernel for `_scaled_mm` (whose arguments are reordered and retyped by 2.15; a
//! function marked `xirang-kernel:`, attached by the generator), check that it builds, regenerate for
//! 2.15 (the version the adapter targets), and check that the build fails exactly where
//! `generated/native.rs` calls that kernel, with the compiler pointing at the kernel's definition,
//! and that the drift report's impact names the same file and line.
//!
//! Cost: two `cargo check`s of xirang-runtime in `target/upgrade-rehearsal` (under 3 minutes on two
//! cores from an empty folder, dependencies included).

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        if name == "target" || name == "build" {
            continue;
        }
        let (src, dst) = (e.path(), to.join(&name));
        if e.file_type().unwrap().is_dir() {
            copy_dir(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

fn scan(root: &Path, args: &[&str]) -> std::process::Output {
    let store = repo().join("schemas");
    Command::new(env!("CARGO_BIN_EXE_xirang-scan"))
        .current_dir(root)
        .args(args)
        .arg("--store")
        .arg(&store)
        .output()
        .unwrap()
}

fn set_version(root: &Path, v: &str) {
    let p = root.join("xirang.toml");
    let text = std::fs::read_to_string(&p).unwrap();
    let mut out = String::new();
    let mut in_pytorch = false;
    for line in text.lines() {
        if line.starts_with('[') {
            in_pytorch = line.trim() == "[pytorch]";
        }
        if in_pytorch && line.starts_with("version") {
            out.push_str(&format!("version = \"{v}\"\n"));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    std::fs::write(p, out).unwrap();
}

fn check(root: &Path) -> std::process::Output {
    Command::new(env!("CARGO"))
        .current_dir(root)
        .args(["check", "--offline", "-p", "xirang-runtime", "--lib", "--message-format", "short"])
        .env("CARGO_TARGET_DIR", repo().join("target/upgrade-rehearsal"))
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap()
}

#[test]
fn regeneration_breaks_the_build_exactly_at_the_stale_kernel_and_the_report_names_it() {
    let root = std::env::temp_dir().join(format!("xirang-rehearsal-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let r = repo();
    // a workspace with just the runtime (and its simulator)
    let manifest = std::fs::read_to_string(r.join("Cargo.toml")).unwrap();
    let manifest: String = manifest
        .lines()
        .map(|l| {
            if l.starts_with("members") || l.starts_with("default-members") {
                let key = l.split('=').next().unwrap().trim();
                format!("{key} = [\"adapter-runtime\", \"adapter-runtime/simulator\"]")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(root.join("Cargo.toml"), manifest).unwrap();
    std::fs::copy(r.join("Cargo.lock"), root.join("Cargo.lock")).unwrap();
    std::fs::copy(r.join("xirang.toml"), root.join("xirang.toml")).unwrap();
    std::fs::copy(r.join("rustfmt.toml"), root.join("rustfmt.toml")).unwrap();
    // the custom-operator file xirang.toml names (`[operators] custom`)
    std::fs::copy(r.join("custom_ops.yaml"), root.join("custom_ops.yaml")).unwrap();
    copy_dir(&r.join("adapter-runtime"), &root.join("adapter-runtime"));
    copy_dir(&r.join("templates"), &root.join("templates"));
    copy_dir(&r.join("generated"), &root.join("generated"));

    // 1. generate for 2.3, write a kernel with 2.3's signature of _scaled_mm (a marked function, as
    // every kernel of the adapter), regenerate so generated/native.rs attaches it
    set_version(&root, "v2.3");
    let g = scan(&root, &["generate"]);
    assert!(g.status.success(), "{}", String::from_utf8_lossy(&g.stderr));
    let ops = std::fs::read_to_string(root.join("generated/ops.rs")).unwrap();
    // the trait method's signature, as rustfmt lays it out over several lines, joined into one
    let start = ops.lines().position(|l| l.trim_start().starts_with("fn _scaled_mm(")).expect("trait method");
    let mut sig = String::new();
    for l in ops.lines().skip(start) {
        sig.push_str(l.trim());
        sig.push(' ');
        if l.trim_end().ends_with('{') {
            break;
        }
    }
    let sig = sig.trim().trim_end_matches('{').trim().replace("( ", "(").replace(", )", ")");
    let sig = sig.replacen("fn _scaled_mm(&self, ", "pub fn scaled_mm(", 1);
    let kernel = format!(
        "//! A hand-written kernel (upgrade rehearsal).\n\
         #![allow(non_snake_case, unused_variables)]\n\
         use crate::{{DType, Error, Result, Scalar, Tensor}};\n\n\
         /// xirang-kernel: _scaled_mm\n\
         {sig} {{\n    Err(Error::Unsupported(\"rehearsal\".into()))\n}}\n"
    );
    let kernel_path = root.join("adapter-runtime/src/rehearsal.rs");
    std::fs::write(&kernel_path, &kernel).unwrap();
    let kernel_line = kernel.lines().position(|l| l.contains("fn scaled_mm(")).unwrap() + 1;
    let lib = root.join("adapter-runtime/src/lib.rs");
    let mut lib_text = std::fs::read_to_string(&lib).unwrap();
    lib_text.push_str("\npub mod rehearsal;\n");
    std::fs::write(&lib, lib_text).unwrap();
    let g = scan(&root, &["generate"]);
    assert!(g.status.success(), "{}", String::from_utf8_lossy(&g.stderr));
    let native = std::fs::read_to_string(root.join("generated/native.rs")).unwrap();
    assert!(native.contains("crate::rehearsal::scaled_mm("), "the kernel is not attached");
    let c = check(&root);
    assert!(c.status.success(), "2.3 build fails: {}", String::from_utf8_lossy(&c.stderr));

    // 2. regenerate for 2.15: the build fails, only where generated/native.rs calls the kernel
    set_version(&root, "v2.15");
    let g = scan(&root, &["generate"]);
    assert!(g.status.success(), "{}", String::from_utf8_lossy(&g.stderr));
    let c = check(&root);
    assert!(!c.status.success(), "2.15 build unexpectedly passes");
    let stderr = String::from_utf8_lossy(&c.stderr);
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains(": error")).collect();
    assert!(!errors.is_empty(), "{stderr}");
    let native = std::fs::read_to_string(root.join("generated/native.rs")).unwrap();
    let native_lines: Vec<&str> = native.lines().collect();
    // the lines of the kernel's call expression (rustfmt may spread its arguments over several)
    let call_start = native_lines.iter().position(|l| l.contains("crate::rehearsal::scaled_mm(")).unwrap();
    let mut depth = 0i32;
    let mut call_end = call_start;
    for (i, l) in native_lines.iter().enumerate().skip(call_start) {
        let from = if i == call_start { l.find("crate::rehearsal::scaled_mm(").unwrap() } else { 0 };
        for ch in l[from..].chars() {
            match ch {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
        }
        call_end = i;
        if depth <= 0 {
            break;
        }
    }
    for e in &errors {
        let (file, rest) = e.split_once(".rs:").unwrap_or_else(|| panic!("{e}"));
        assert!(file.ends_with("generated/native"), "error outside the kernel's call: {e}");
        let line: usize = rest.split(':').next().unwrap().parse().unwrap();
        assert!((call_start + 1..=call_end + 1).contains(&line), "error outside the kernel's call: {e}");
    }
    // the error names the kernel: the compiler's note points at its definition
    let long = Command::new(env!("CARGO"))
        .current_dir(&root)
        .args(["check", "--offline", "-p", "xirang-runtime", "--lib"])
        .env("CARGO_TARGET_DIR", repo().join("target/upgrade-rehearsal"))
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap();
    let long = String::from_utf8_lossy(&long.stderr);
    let compile_line = kernel_line;
    assert!(long.contains(&format!("adapter-runtime/src/rehearsal.rs:{compile_line}:")), "{long}");

    // 3. the drift report names the same file and line
    let adapter = root.join("adapter-runtime");
    let d = scan(&root, &["diff", "v2.3", "v2.15", "--format", "json", "--adapter", adapter.to_str().unwrap()]);
    let report: serde_json::Value = serde_json::from_slice(&d.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&d.stderr));
    });
    let impact = report["impact"].as_array().expect("impact list");
    let hit = impact
        .iter()
        .find(|i| i["source"] == "kernel" && i["subject"] == "_scaled_mm")
        .unwrap_or_else(|| panic!("no kernel impact for _scaled_mm: {impact:?}"));
    let loc = &hit["location"];
    assert!(loc["file"].as_str().unwrap().ends_with("adapter-runtime/src/rehearsal.rs"), "{hit}");
    assert_eq!(loc["line"].as_u64().unwrap() as usize, compile_line, "{hit}");
    let _ = std::fs::remove_dir_all(&root);
}
