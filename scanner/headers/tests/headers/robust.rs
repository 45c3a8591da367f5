//! `scan_source` never panics: random bytes, random C-ish token soup, and real headers with
//! bytes deleted, duplicated, truncated or replaced.

use crate::common;

use proptest::prelude::*;
use xirang_headers::{Profile, scan_source};

fn corpus_files() -> Vec<String> {
    let mut v = Vec::new();
    for (vendor, rel, file) in [
        ("ascend", "v2.14.0", "acl/acl_base_rt.h"),
        ("ascend", "v2.1.0.post17", "acl/acl_rt.h"),
        ("ascend", "v2.1.0.post17", "acl/dvpp/hi_dvpp_common.h"),
        ("cuda", "v13.5.37", "driver_types.h"),
        ("cuda", "v13.5.37", "vector_types.h"),
    ] {
        let p = common::corpus().join(vendor).join(rel).join(file);
        let bytes = std::fs::read(&p).expect("corpus file");
        // keep the cases fast: a window of the file
        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(40_000)]).into_owned();
        v.push(text);
    }
    v
}

fn profiles() -> impl Strategy<Value = Profile> {
    prop_oneof![Just(Profile::Ascend), Just(Profile::Cuda), Just(Profile::Generic)]
}

fn soup() -> impl Strategy<Value = String> {
    let tok = prop_oneof![
        Just("int"),
        Just("("),
        Just(")"),
        Just("{"),
        Just("}"),
        Just(";"),
        Just(","),
        Just("*"),
        Just("="),
        Just("enum"),
        Just("struct"),
        Just("typedef"),
        Just("#define X"),
        Just("#if"),
        Just("#endif"),
        Just("\n"),
        Just("extern \"C\""),
        Just("__attribute__(("),
        Just("\""),
        Just("'"),
        Just("/*"),
        Just("*/"),
        Just("//"),
        Just("\\\n"),
        Just("API"),
        Just("f"),
        Just("0x1"),
        Just("<<"),
        Just("["),
        Just("]"),
        Just(":"),
        Just("..."),
        Just("::"),
        Just("DEPRECATED(\"m\")"),
        Just("__dv(0)"),
        Just("ACL_FUNC_VISIBILITY"),
        Just("é"),
    ];
    prop::collection::vec(tok, 0..200).prop_map(|v| v.join(" "))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, .. ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..4000), profile in profiles()) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = scan_source(profile, "random.h", &text);
    }

    #[test]
    fn token_soup_never_panics(text in soup(), profile in profiles()) {
        let _ = scan_source(profile, "soup.h", &text);
    }

    #[test]
    fn mutated_real_headers_never_panic(
        which in 0usize..5,
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..4, any::<u8>(), 1usize..200), 1..8),
        profile in profiles(),
    ) {
        let files = corpus_files();
        let mut bytes = files[which].clone().into_bytes();
        for (at, op, byte, len) in edits {
            if bytes.is_empty() {
                break;
            }
            let i = at.index(bytes.len());
            match op {
                0 => { let end = (i + len).min(bytes.len()); bytes.drain(i..end); }
                1 => { let end = (i + len).min(bytes.len()); let chunk = bytes[i..end].to_vec(); bytes.splice(i..i, chunk); }
                2 => bytes.truncate(i),
                _ => bytes[i] = byte,
            }
        }
        let text = String::from_utf8_lossy(&bytes);
        let _ = scan_source(profile, "mutated.h", &text);
    }
}

#[test]
fn pathological_inputs() {
    let deep_parens = "(".repeat(20_000);
    let deep_braces = format!("struct a {}", "{".repeat(5_000));
    let long_enum = format!(
        "enum E {{ {} }};",
        (0..5000).map(|i| format!("A{i} = A{} + 1", i.max(1) - 1)).collect::<Vec<_>>().join(", ")
    );
    let macro_loop = "#define A B\n#define B A\nenum { X = A };\n#define F(x) F(x)\nenum { Y = F(1) };";
    let blowup = "#define M1 int a; M2 M2\n#define M2 int b; M1 M1\nstruct s { M1 };\n#define D(x) D(x); D(x); int x;\nD(q);\nD(r) D(s)\n";
    for text in [
        blowup,
        deep_parens.as_str(),
        deep_braces.as_str(),
        long_enum.as_str(),
        macro_loop,
        "",
        "\0\0\0",
        "#define",
        "enum {",
        "typedef",
    ] {
        for p in [Profile::Ascend, Profile::Cuda, Profile::Generic] {
            let _ = scan_source(p, "x.h", text);
        }
    }
    let f = scan_source(Profile::Generic, "x.h", macro_loop).expect("scan");
    assert!(f.decls.iter().filter(|d| d.name == "X" || d.name == "Y").all(|d| d.value.is_none()));
}
