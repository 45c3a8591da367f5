//! Times the phases of a scan (read, mask, parse, walk) on one release folder.
fn main() {
    let dir = std::path::PathBuf::from(
        std::env::args().nth(1).unwrap_or_else(|| "../shared/corpus/pytorch-cxx/v2.15.0".into()),
    );
    let layout = xirang_cxx::Layout::find(&dir).expect("layout");
    let t0 = std::time::Instant::now();
    let files = layout.files().expect("files");
    let srcs: Vec<(String, String)> =
        files.iter().map(|f| (f.clone(), xirang_cxx::read_source(&layout.path(f)).expect("read"))).collect();
    let t1 = std::time::Instant::now();
    let masked: Vec<String> = srcs.iter().map(|(_, t)| xirang_cxx::text::mask(t)).collect();
    let t2 = std::time::Instant::now();
    let mut p = tree_sitter::Parser::new();
    p.set_language(&tree_sitter_cpp::LANGUAGE.into()).expect("lang");
    let mut per: Vec<(std::time::Duration, usize, String)> = Vec::new();
    let trees: Vec<_> = masked
        .iter()
        .zip(&files)
        .map(|(m, f)| {
            let b = xirang_cxx::text::blank_plain_bodies(m);
            let t = std::time::Instant::now();
            let r = p.parse(&b, None);
            per.push((t.elapsed(), m.len(), f.clone()));
            r
        })
        .collect();
    per.sort();
    for (d, n, f) in per.iter().rev().take(8) {
        println!("{d:?} {n} {f}");
    }
    let t3 = std::time::Instant::now();
    for _ in 0..3 {
        let _ = xirang_cxx::scan_sources(&srcs).expect("scan");
    }
    let t4 = std::time::Instant::now();
    println!(
        "read {:?} mask {:?} parse(1 thread) {:?} full scan_sources {:?} ({} trees)",
        t1 - t0,
        t2 - t1,
        t3 - t2,
        (t4 - t3) / 3,
        trees.len()
    );
}
