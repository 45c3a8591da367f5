//! Fuzzes the profile reader (`Profile::parse`, `Baseline::parse`) and everything `xirang-prof`
//! does with what it accepts: never panics, never hangs; a profile that reads writes back to text
//! that reads as the same profile; tables stay narrow and stacks stay within the depth limit.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use xirang_prof::compare::{self, Baseline};
use xirang_runtime::profile::model::MAX_DEPTH;
use xirang_prof::report::{self, Format};
use xirang_prof::advise;
use xirang_runtime::profile::Profile;

fn rules() -> &'static advise::Rules {
    static RULES: OnceLock<advise::Rules> = OnceLock::new();
    RULES.get_or_init(|| advise::Rules::builtin().expect("the shipped rules parse"))
}

fn renders(p: &Profile, base: &Baseline) {
    for format in [Format::Table, Format::Markdown] {
        let summary = report::summary(p, format);
        let c = compare::compare(base, p, 1.2, 0);
        let cmp = compare::render(&c, format);
        for text in [&summary, &cmp] {
            // a cell is at most 80 characters, a warning at most 1000
            assert!(text.lines().all(|l| l.chars().count() <= 2000), "a table line is too long");
        }
    }
    let _ = report::chrome_trace(p);
    let folded = report::folded(p);
    assert!(folded.lines().all(|l| l.matches(';').count() <= MAX_DEPTH as usize), "a stack is too deep");
    let _ = report::flamegraph(p, "fuzz");
    let a = advise::advise(p, rules());
    let _ = advise::render(&a, false);
    let _ = advise::render(&a, true);
}

fuzz_target!(|data: &[u8]| {
    match Baseline::parse(data) {
        Ok(Baseline::Xirang(p)) => {
            let again = Profile::parse(p.to_json().as_bytes()).expect("a profile that was read writes back readable");
            assert_eq!(again, p, "write + read is not the identity");
            renders(&p, &Baseline::Xirang(p.clone()));
        }
        Ok(base @ Baseline::Torch(_)) => renders(&Profile::from_calls(Vec::new(), Vec::new()), &base),
        Err(_) => {
            // the profile reader proper gives an error too
            assert!(Profile::parse(data).is_err());
        }
    }
});
