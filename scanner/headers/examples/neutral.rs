fn main() {
    let args: Vec<String> = std::env::args().collect();
    let profile: xirang_headers::Profile = args[1].parse().unwrap();
    let text = std::fs::read_to_string(&args[2]).unwrap();
    print!("{}", xirang_headers::debug_neutralized(profile, &text));
}
