//! Prints tree-sitter-cpp's S-expression of one masked C++ header (a debugging aid).
fn main() {
    let src = std::fs::read_to_string(std::env::args().nth(1).unwrap()).unwrap();
    let m = xirang_cxx::text::mask(&src);
    let mut p = tree_sitter::Parser::new();
    p.set_language(&tree_sitter_cpp::LANGUAGE.into()).unwrap();
    let t = p.parse(&m, None).unwrap();
    println!("{}", t.root_node().to_sexp());
}
