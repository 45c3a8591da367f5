//! `cargo run --example dump -- <profile> <dir|file> [table|jsonl]`
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let profile: xirang_headers::Profile = args.get(1).map(String::as_str).unwrap_or("generic").parse()?;
    let path = std::path::PathBuf::from(args.get(2).cloned().unwrap_or_else(|| ".".into()));
    let set = if path.is_dir() {
        xirang_headers::scan_dir(profile, &path)?
    } else {
        let text = std::fs::read_to_string(&path)?;
        let f = xirang_headers::scan_source(profile, &path.display().to_string(), &text)?;
        xirang_headers::HeaderSet { profile, files: vec![f], include_graph: vec![] }
    };
    match args.get(3).map(String::as_str) {
        Some("jsonl") => print!("{}", xirang_headers::to_jsonl(&set)),
        Some("diag") => {
            for f in &set.files {
                for d in &f.diagnostics {
                    println!("{}:{}:{}: {}", f.path, d.line, d.column, d.message);
                }
            }
        }
        _ => print!("{}", xirang_headers::to_table(&set)),
    }
    Ok(())
}
