//! Malformed C++ never panics: positioned warnings and a partial result. Random bytes, token soup,
//! real headers cut, duplicated and spliced, and hostile nesting.

use proptest::prelude::*;

use crate::common;

fn real() -> Vec<String> {
    [
        "c10/core/impl/DeviceGuardImplInterface.h",
        "ATen/detail/PrivateUse1HooksInterface.h",
        "ATen/autocast_mode.h",
        "torch/library.h",
    ]
    .iter()
    .map(|f| std::fs::read_to_string(common::corpus().join("pytorch-cxx/v2.15.0").join(f)).expect("corpus file"))
    .collect()
}

fn soup() -> impl Strategy<Value = String> {
    let tok = prop_oneof![
        Just("struct"),
        Just("class"),
        Just("virtual"),
        Just("override"),
        Just("const"),
        Just("noexcept"),
        Just("= 0"),
        Just("{"),
        Just("}"),
        Just("("),
        Just(")"),
        Just(";"),
        Just(","),
        Just("::"),
        Just("<"),
        Just(">"),
        Just("&"),
        Just("*"),
        Just("namespace"),
        Just("template <typename T>"),
        Just("#define X(a) a"),
        Just("#if A\n"),
        Just("#else\n"),
        Just("#endif\n"),
        Just("TORCH_API"),
        Just("C10_DEPRECATED_MESSAGE("),
        Just("TORCH_CHECK(false, \"x\")"),
        Just("\"str\""),
        Just("'c'"),
        Just("/*"),
        Just("*/"),
        Just("//"),
        Just("\n"),
        Just("\\\n"),
        Just("#define AT_FORALL_FP32(_) _(a) _(b, c)"),
        Just("R\"x(raw)x\""),
        Just("foo"),
        Just("int"),
        Just("~"),
        Just("operator"),
        Just(":"),
        Just("public"),
    ];
    prop::collection::vec(tok, 0..200).prop_map(|v| v.join(" "))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let _ = xirang_cxx::scan_source("x.h", &text);
        let _ = xirang_cxx::index::index_sources(&[("x.cpp".into(), text)]);
    }

    #[test]
    fn token_soup(text in soup()) {
        let f = xirang_cxx::scan_source("ATen/autocast_mode.h", &text).expect("scan");
        for d in &f.diagnostics {
            prop_assert!(d.line >= 1);
        }
        let _ = xirang_cxx::index::index_sources(&[("x.cpp".into(), text)]);
    }

    #[test]
    fn real_headers_mangled(which in 0usize..4, cut in 0.0f64..1.0, len in 0usize..2000, dup in any::<bool>()) {
        let files = real();
        let t = &files[which];
        let at = ((t.len() as f64) * cut) as usize;
        let at = (0..=at).rev().find(|i| t.is_char_boundary(*i)).unwrap_or(0);
        let end = (at + len).min(t.len());
        let end = (end..=t.len()).find(|i| t.is_char_boundary(*i)).unwrap_or(t.len());
        let mangled = if dup { format!("{}{}{}", &t[..end], &t[at..end], &t[at..]) } else { format!("{}{}", &t[..at], &t[end..]) };
        let a = xirang_cxx::scan_source("h.h", &mangled).expect("scan");
        let b = xirang_cxx::scan_source("h.h", &mangled).expect("scan");
        prop_assert_eq!(a, b);
    }
}

#[test]
fn unterminated_blocks_give_positioned_warnings_and_a_partial_result() {
    let src = "namespace c10 {\nstruct TORCH_API Good {\n  virtual void f() const = 0;\n};\nstruct Broken {\n  virtual void g(int x\n";
    let f = xirang_cxx::scan_source("b.h", src).expect("scan");
    // the namespace's brace is never closed: the class is still read (its namespace may be lost)
    assert!(f.classes.iter().any(|c| c.name.ends_with("Good") && c.members.len() == 1), "{:?}", f.classes);
    assert!(!f.diagnostics.is_empty());
    assert!(f.diagnostics.iter().all(|d| d.file == "b.h" && d.line >= 1));
}

#[test]
fn deep_nesting_is_bounded() {
    let depth = 5000;
    let src = format!("{}struct X {{ virtual void f(); }};{}", "namespace a { ".repeat(depth), "}".repeat(depth));
    let f = xirang_cxx::scan_source("d.h", &src).expect("scan");
    assert!(f.diagnostics.iter().any(|d| d.message.contains("nested more than")), "{:?}", f.diagnostics);
    let parens = format!("struct Y {{ virtual int f() {{ return {}1{}; }} }};", "(".repeat(20000), ")".repeat(20000));
    let _ = xirang_cxx::scan_source("p.h", &parens).expect("scan");
    let _ = xirang_cxx::index::index_sources(&[("p.cpp".into(), parens)]).expect("index");
}

#[test]
fn an_oversized_file_is_an_error_not_a_read() {
    let dir = std::env::temp_dir().join(format!("xirang-cxx-big-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("c10/core")).expect("mkdir");
    let f = std::fs::File::create(dir.join("c10/core/Allocator.h")).expect("create");
    f.set_len(xirang_cxx::MAX_FILE_BYTES + 1).expect("len");
    let err = xirang_cxx::scan_dir(&dir).expect_err("too large");
    assert!(err.to_string().contains("at most"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
