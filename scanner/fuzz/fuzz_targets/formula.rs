//! Fuzzes the formula translator (derivatives.yaml backward and forward formulas, new-op gradient
//! rules): never panics, never overflows the stack, whatever the text; a translation is Rust code
//! that mentions no name the environment did not give it (checked loosely: it is not empty).
#![no_main]

use std::collections::{BTreeSet, HashMap};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use xirang_scan::generate::autograd::{Env, OpIndex, Ty};
use xirang_scan::snapshot::{PytorchSnapshot, Store};

fn snapshot() -> &'static PytorchSnapshot {
    static S: OnceLock<PytorchSnapshot> = OnceLock::new();
    S.get_or_init(|| {
        let store = Store::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../schemas"));
        let v = store.resolve("pytorch", "v2.3").expect("the shipped v2.3 snapshot");
        store.load_pytorch(&v).expect("load")
    })
}

fn index() -> &'static OpIndex<'static> {
    static I: OnceLock<OpIndex<'static>> = OnceLock::new();
    static SEL: OnceLock<BTreeSet<String>> = OnceLock::new();
    I.get_or_init(|| {
        let fs = &snapshot().registry.functions;
        let sel = SEL.get_or_init(|| fs.iter().map(|f| f.func.name.to_string()).collect());
        OpIndex::new(fs, sel)
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(formula) = std::str::from_utf8(data) else { return };
    let mut vars = HashMap::new();
    for (name, code, ty) in [
        ("grad", "grad", Ty::Tensor),
        ("self", "self.self_", Ty::Tensor),
        ("other", "self.other", Ty::Tensor),
        ("result", "self.result", Ty::Tensor),
        ("alpha", "self.alpha", Ty::Scalar),
        ("self_sym_sizes", "self.self_sym_sizes", Ty::IntList),
    ] {
        vars.insert(name.to_string(), (code.to_string(), ty));
    }
    let env = Env { vars, ops: index() };
    if let Ok(code) = env.translate(formula) {
        assert!(!code.is_empty());
    }
    let _ = env.translate_as(formula, Ty::Grads);
});
