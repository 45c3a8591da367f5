//! The runtime's random numbers: the seeded [`Generator`] and the process's default generator,
//! which `torch.manual_seed` (through the bridge) and [`manual_seed`] seed, and which the
//! operators whose schemas take no generator argument (`native_dropout`, `rand`, `randn`,
//! `randperm`, the dropout kernel) draw from.

use std::sync::Mutex;

/// A seeded random generator (SplitMix64). Deterministic across runs and
/// platforms; it does not reproduce PyTorch's Philox/MT19937 streams.
#[derive(Debug, Clone)]
pub struct Generator {
    state: u64,
}

impl Generator {
    pub fn new(seed: u64) -> Generator {
        Generator { state: seed }
    }
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `[0, 1)` with 53 random bits.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// The default generator (seed 0 until [`manual_seed`]).
static DEFAULT_GENERATOR: Mutex<Option<Generator>> = Mutex::new(None);

/// Seeds the default generator (`torch.manual_seed`).
pub fn manual_seed(seed: u64) {
    let mut g = DEFAULT_GENERATOR.lock().unwrap_or_else(|p| p.into_inner());
    *g = Some(Generator::new(seed));
}

/// Runs `f` with the default generator (seed 0 unless [`manual_seed`] was called).
pub fn with_default_generator<R>(f: impl FnOnce(&mut Generator) -> R) -> R {
    let mut g = DEFAULT_GENERATOR.lock().unwrap_or_else(|p| p.into_inner());
    f(g.get_or_insert_with(|| Generator::new(0)))
}
