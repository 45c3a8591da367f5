//! Property tests for the schema parser: generated schemas round-trip through print and parse, and
//! no input makes the parser or the yaml loaders panic.

use proptest::prelude::*;
use xirang_scan::SourceFile;
use xirang_scan::schema::FunctionSchema;

fn base_type() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "Tensor",
        "int",
        "SymInt",
        "float",
        "bool",
        "str",
        "Scalar",
        "ScalarType",
        "Layout",
        "Device",
        "MemoryFormat",
        "Generator",
        "Dimname",
        "Storage",
        "Stream",
        "DeviceIndex",
        "SymBool",
    ])
}

fn ty() -> impl Strategy<Value = String> {
    (base_type(), prop::option::of(prop::option::of(1u32..7)), any::<bool>()).prop_map(|(b, list, opt)| {
        let mut t = b.to_string();
        match list {
            Some(Some(n)) => t.push_str(&format!("[{n}]")),
            Some(None) => t.push_str("[]"),
            None => {}
        }
        if opt {
            t.push('?');
        }
        t
    })
}

fn ident() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_]{0,8}"
}

fn default_for(t: &str) -> BoxedStrategy<Option<String>> {
    let opt = t.ends_with('?');
    let mut choices: Vec<BoxedStrategy<Option<String>>> = vec![Just(None).boxed()];
    if opt {
        choices.push(Just(Some("None".to_string())).boxed());
    }
    if t.starts_with("int") || t.starts_with("SymInt") {
        choices.push((-5i64..100).prop_map(|n| Some(n.to_string())).boxed());
        if t.contains('[') {
            choices.push(Just(Some("[]".to_string())).boxed());
            choices.push(Just(Some("[0,1]".to_string())).boxed());
        }
    }
    if t.starts_with("float") {
        choices.push(prop::sample::select(vec!["1e-05", "0.5", "-1.0"]).prop_map(|s| Some(s.to_string())).boxed());
    }
    if t.starts_with("bool") {
        choices.push(prop::sample::select(vec!["True", "False"]).prop_map(|s| Some(s.to_string())).boxed());
    }
    if t.starts_with("str") {
        choices.push(prop::sample::select(vec!["'none'", "\"mean\""]).prop_map(|s| Some(s.to_string())).boxed());
    }
    prop::strategy::Union::new(choices).boxed()
}

fn arg() -> impl Strategy<Value = String> {
    (ty(), ident()).prop_flat_map(|(t, n)| {
        let t2 = t.clone();
        default_for(&t).prop_map(move |d| match d {
            Some(d) => format!("{t2} {n}={d}"),
            None => format!("{t2} {n}"),
        })
    })
}

fn schema() -> impl Strategy<Value = String> {
    (
        ident(),
        prop::option::of(ident()),
        prop::collection::vec(arg(), 0..5),
        prop::collection::vec(arg(), 0..3),
        0usize..3,
        prop::sample::select(vec![
            "Tensor",
            "()",
            "(Tensor, Tensor)",
            "(Tensor values, Tensor indices)",
            "int",
            "Tensor[]",
        ]),
    )
        .prop_map(|(name, ov, pos, kw, nout, ret)| {
            let mut names = std::collections::HashSet::new();
            let mut keep = |a: &String| {
                let n = a.split(' ').nth(1).unwrap_or("").split('=').next().unwrap_or("").to_string();
                names.insert(n)
            };
            let mut args: Vec<String> = pos.iter().filter(|a| keep(a)).cloned().collect();
            let kwargs: Vec<String> = kw.iter().filter(|a| keep(a)).cloned().collect();
            let outs: Vec<String> =
                (0..nout).map(|i| format!("Tensor({}!) out{i}", (b'a' + i as u8) as char)).collect();
            if !kwargs.is_empty() || !outs.is_empty() {
                args.push("*".into());
                args.extend(kwargs);
                args.extend(outs);
            }
            let name = match ov {
                Some(o) if o != "default" => format!("{name}.{o}"),
                _ => name,
            };
            format!("{name}({}) -> {ret}", args.join(", "))
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn generated_schemas_round_trip(s in schema()) {
        let p = FunctionSchema::parse(&s).map_err(|e| TestCaseError::fail(format!("{s}: {e}")))?;
        prop_assert_eq!(p.to_string(), s.clone());
        let again = FunctionSchema::parse(&p.to_string()).unwrap();
        prop_assert_eq!(again, p);
    }

    #[test]
    fn parser_never_panics(s in "\\PC{0,120}") {
        let _ = FunctionSchema::parse(&s);
    }

    #[test]
    fn parser_never_panics_on_schema_like_noise(s in "[a-z_.]{0,6}\\((Tensor|int|\\[|\\]|\\?|\\(|\\)|a!| |,|=|\\*|->|'|\"|-?[0-9]){0,40}\\)( -> )?[A-Za-z()\\[\\], ]{0,20}") {
        let _ = FunctionSchema::parse(&s);
    }

    #[test]
    fn yaml_loaders_never_panic(s in "(- |  |func: |dispatch:|\\n|CPU: k|tags: |abs\\(Tensor self\\) -> Tensor|\\[|\\]|\\{|\\}|:|'|\"|#|&a|\\*a|variants: method|autogen: x.out){0,40}") {
        let src = SourceFile::new("fuzz.yaml", s.clone());
        let _ = xirang_scan::registry::load_tags(&src);
        let _ = xirang_scan::registry::load_native_functions(&src, Vec::new());
        let _ = xirang_scan::backend::load_backend_yaml(&src);
    }
}

#[test]
fn malformed_yaml_gets_positioned_errors() {
    let cases = [
        ("- func: abs(Tensor self) -> Tensor\n  varients: method\n", 2, 3, "unknown key `varients`"),
        ("- func: abs(Tensr self) -> Tensor\n", 1, 13, "unknown type 'Tensr'"),
        ("- func: abs(Tensor self) -> Tensor\n  variants: function, methd\n", 2, 13, "unknown variant"),
        ("- func: abs(Tensor self) -> Tensor\n  device_check: Sometimes\n", 2, 17, "invalid device_check"),
        ("- func: abs(Tensor self) -> Tensor\n- func: abs(Tensor self) -> Tensor\n", 2, 9, "already defined"),
        ("- func: abs(Tensor self) -> Tensor\n  dispatch: [CPU]\n", 2, 13, "must be a mapping"),
        ("- func: [abs\n", 1, 1, "YAML syntax error"),
    ];
    for (text, line, col, msg) in cases {
        let src = SourceFile::new("native_functions.yaml", text);
        let e = xirang_scan::registry::load_native_functions(&src, Vec::new()).expect_err(text);
        assert!(e.message.contains(msg), "{text:?}: {}", e.message);
        if msg != "YAML syntax error" {
            assert_eq!((e.line, e.col), (line, col), "{text:?}: {}", e.message);
        }
        assert_eq!(e.file, "native_functions.yaml");
    }
}
