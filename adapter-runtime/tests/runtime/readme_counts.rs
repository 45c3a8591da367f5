//! adapter-runtime/README.md's counts are the code's (the README is checked, not trusted).

/// The counts the runtime README states are the code's (the README is checked, not trusted).
#[test]
fn readme_counts_are_the_codes() {
    let readme = include_str!("../../README.md");
    let native = xirang_runtime::kernels::operators().len();
    let host = xirang_runtime::generated::ops::fallback::HOST_OPERATORS.len();
    for (needle, n) in
        [("`kernels::is_native(op)` (", native), ("typed host implementations of ", host), ("`reference/` (", host)]
    {
        let at = readme.find(needle).unwrap_or_else(|| panic!("README no longer says `{needle}`"));
        let rest = &readme[at + needle.len()..];
        let stated: usize = rest[..rest.find(' ').unwrap()].parse().unwrap();
        assert_eq!(stated, n, "adapter-runtime/README.md says `{needle}{stated}`, the code has {n}");
    }
    // the golden counts: the precision suite's and the autograd suite's index files
    let count = |json: &str| -> usize {
        let at = json.find("\"count\":").expect("count field") + 8;
        json[at..].trim_start().split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
    };
    let precision = count(include_str!("../../goldens/index.json"));
    let autograd = count(include_str!("../../goldens/autograd_index.json"));
    assert!(readme.contains(&format!("`goldens/index.json`: {precision} cases")), "precision golden count");
    assert!(readme.contains(&format!("dtype): {autograd} cases")), "autograd golden count");
}
