//! Standard output of a command that works while it prints. A closed pipe (`| head -1`) stops the
//! printing but not the work (`snapshot sync ... | head -1` still imports every release); any other
//! write error (`> /dev/full`) is reported once the work is done. Never a panic.

use std::io::Write;
use std::sync::Mutex;

#[derive(Default)]
struct State {
    closed: bool,
    error: Option<std::io::Error>,
}

static STATE: Mutex<State> = Mutex::new(State { closed: false, error: None });

/// Writes `text` to standard output, unless an earlier write failed.
pub fn write(text: &str) {
    let mut st = STATE.lock().unwrap_or_else(|p| p.into_inner());
    if st.closed || st.error.is_some() {
        return;
    }
    let stdout = std::io::stdout();
    let mut lock = stdout.lock();
    match lock.write_all(text.as_bytes()).and_then(|_| lock.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => st.closed = true,
        Err(e) => st.error = Some(e),
    }
}

/// Writes a line to standard error; a failure there has nowhere to be reported.
pub fn warn(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

/// The first write error other than a closed pipe.
pub fn take_error() -> Option<std::io::Error> {
    STATE.lock().unwrap_or_else(|p| p.into_inner()).error.take()
}

/// `println!` through [`write`].
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::cmd::out::write(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` through [`warn`].
macro_rules! warn {
    ($($arg:tt)*) => {
        $crate::cmd::out::warn(&format!($($arg)*))
    };
}
