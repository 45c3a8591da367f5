//! Prints what `xirang-cxx` reads from a folder of PyTorch C++ headers, or the diff of two:
//! `cargo run -p xirang-cxx --example cxx_dump -- ../shared/corpus/pytorch-cxx/v2.15.0 [NEW]`.
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(a) = args.first() else {
        eprintln!("usage: cxx_dump DIR [NEW_DIR]");
        std::process::exit(2);
    };
    let set = match xirang_cxx::scan_dir(std::path::Path::new(a)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    if let Some(b) = args.get(1) {
        match xirang_cxx::scan_dir(std::path::Path::new(b)) {
            Ok(n) => {
                for c in xirang_cxx::diff(&set, &n) {
                    println!("{:?} {} {} {}:{} {}", c.severity, c.rule, c.subject, c.file, c.line, c.message);
                }
            }
            Err(e) => eprintln!("{e}"),
        }
        return;
    }
    for (k, v) in set.counts() {
        println!("{k}: {v}");
    }
    for c in set.classes() {
        println!("{:?} {} : {} ({}:{})", c.role, c.name, c.bases.join(", "), c.file, c.line);
        for m in &c.members {
            println!(
                "    {}{}{}",
                m.signature(),
                if m.default_throws { "  [default throws]" } else { "" },
                if m.has_default && !m.pure { "  [default]" } else { "" }
            );
        }
    }
    for f in set.functions() {
        println!("fn {}", f.signature());
    }
    for m in set.macros() {
        println!("macro {}({:?}) {}:{}", m.name, m.params, m.file, m.line);
    }
    for d in set.diagnostics() {
        println!("warning {}:{}:{} {}", d.file, d.line, d.column, d.message);
    }
}
