//! `cargo run --example drift -- <profile> <old dir> <new dir>`
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let profile: xirang_headers::Profile = args.get(1).map(String::as_str).unwrap_or("generic").parse()?;
    let old = xirang_headers::scan_dir(profile, std::path::Path::new(args.get(2).map(String::as_str).unwrap_or(".")))?;
    let new = xirang_headers::scan_dir(profile, std::path::Path::new(args.get(3).map(String::as_str).unwrap_or(".")))?;
    for c in xirang_headers::diff(&old, &new) {
        println!("{:<40} {:<6} {}:{} {}", c.rule, c.severity.as_str(), c.file, c.line, c.message);
    }
    Ok(())
}
