// Developer tool: time each loading phase of one corpus version.
use std::time::Instant;
use xirang_scan::{SourceFile, registry};
fn main() {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).expect("dir"));
    let read = |n: &str| SourceFile::new(n, std::fs::read_to_string(dir.join(n)).unwrap());
    for _ in 0..3 {
        let t = Instant::now();
        let nf = read("native_functions.yaml");
        let y = xirang_scan::yaml::parse(&nf).unwrap();
        let t_yaml = t.elapsed();
        drop(y);
        let t = Instant::now();
        let tags = registry::load_tags(&read("tags.yaml")).unwrap();
        let reg = registry::load_native_functions(&nf, tags).unwrap();
        let t_reg = t.elapsed();
        let t = Instant::now();
        let d = xirang_scan::derivatives::load_derivatives(&read("derivatives.yaml"), &reg).unwrap();
        let t_der = t.elapsed();
        println!(
            "yaml {:?} registry(total) {:?} derivatives {:?} ({} ops, {} derivs)",
            t_yaml,
            t_reg,
            t_der,
            reg.functions.len(),
            d.len()
        );
    }
}
