//! The generated Rust files, formatted as the repository's own code is: `rustfmt` (with the
//! repository's `rustfmt.toml`, edition 2024), then comment lines over [`MAX_WIDTH`] columns
//! wrapped at word boundaries (`rustfmt` leaves comments alone; the long ones quote upstream
//! schemas, formulas and C declarations). After this, a line over [`MAX_WIDTH`] is one a string
//! literal or a single unbreakable word makes long.
//!
//! `rustfmt` takes seconds over the ~200k generated lines, so each file records what it was
//! formatted from: its second line is `// formatted by rustfmt from rendering <hash>; text <hash>`
//! (SHA-256 prefixes of the unformatted rendering and of the lines after that one). When the
//! rendering is unchanged and the file on disk still hashes to its recorded text, the file on disk
//! is the formatted output and `rustfmt` is not run: `generate --check` needs no `rustfmt`, and a
//! regeneration that changes one file formats one file. A file edited by hand (or reformatted by
//! another `rustfmt`) no longer matches its text hash and is formatted again.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};

use crate::GeneratedFile;
use crate::error::{Error, Result};

/// The repository's `max_width` (rustfmt.toml).
pub const MAX_WIDTH: usize = 120;

const MARK: &str = "// formatted by rustfmt from rendering ";

fn hash(text: &str) -> String {
    let d = Sha256::digest(text.as_bytes());
    d.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// The rendering hash a formatted file records and whether the rest of the file still hashes to
/// its recorded text hash.
fn recorded(text: &str) -> Option<(&str, bool)> {
    let (_header, rest) = text.split_once('\n')?;
    let (second, body) = rest.split_once('\n')?;
    let tail = second.strip_prefix(MARK)?;
    let (rendering, text_hash) = tail.split_once("; text ")?;
    Some((rendering, text_hash == hash(body)))
}

/// Formats every `.rs` file of `files` in place, reusing what `folder` holds where it is the
/// formatted output of the same rendering.
pub fn format_files(root: &Path, folder: &Path, files: &mut [GeneratedFile]) -> Result<()> {
    let mut todo: Vec<(usize, String)> = Vec::new();
    for (i, f) in files.iter_mut().enumerate() {
        if !f.path.ends_with(".rs") {
            continue;
        }
        let key = hash(&f.text);
        let on_disk = std::fs::read_to_string(folder.join(&f.path)).ok();
        match on_disk.as_deref().and_then(|t| recorded(t).map(|r| (t, r))) {
            Some((t, (rendering, true))) if rendering == key => f.text = t.to_string(),
            _ => todo.push((i, key)),
        }
    }
    if todo.is_empty() {
        return Ok(());
    }
    let results: Vec<Result<String>> = std::thread::scope(|s| {
        let handles: Vec<_> = todo
            .iter()
            .map(|(i, _)| {
                let text = files[*i].text.as_str();
                let path = files[*i].path.as_str();
                s.spawn(move || rustfmt(root, path, text))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(Error::Internal("a rustfmt thread panicked".into()))))
            .collect()
    });
    for ((i, key), formatted) in todo.into_iter().zip(results) {
        files[i].text = with_mark(&wrap_comments(&formatted?), &key);
    }
    Ok(())
}

/// Inserts the formatting mark as the second line (the first is the `@generated` header).
fn with_mark(text: &str, key: &str) -> String {
    let (first, body) = text.split_once('\n').unwrap_or((text, ""));
    format!("{first}\n{MARK}{key}; text {}\n{body}", hash(body))
}

/// Runs `rustfmt` over one file's text (standard input to standard output), from `root` so that
/// the repository's `rustfmt.toml` applies.
fn rustfmt(root: &Path, path: &str, text: &str) -> Result<String> {
    let fail = |why: String| Error::Invalid(format!("formatting generated {path}: {why}"));
    let mut child = Command::new("rustfmt")
        .args(["--edition", "2024", "--emit", "stdout", "--quiet"])
        .current_dir(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            fail(format!(
                "cannot run rustfmt ({e}); generate formats the Rust it writes: `rustup component add rustfmt`"
            ))
        })?;
    let mut stdin = child.stdin.take().ok_or_else(|| fail("rustfmt has no standard input".into()))?;
    // written on its own thread: rustfmt may fill its output pipe before it has read all input
    let out = std::thread::scope(|s| {
        let writer = s.spawn(move || stdin.write_all(text.as_bytes()));
        let out = child.wait_with_output();
        (writer.join(), out)
    });
    let output = match out {
        (Ok(Ok(())), Ok(o)) => o,
        (_, Err(e)) | (Ok(Err(e)), _) => return Err(fail(format!("rustfmt: {e}"))),
        (Err(_), _) => return Err(Error::Internal("the rustfmt writer thread panicked".into())),
    };
    if !output.status.success() {
        let err = String::from_utf8_lossy(&output.stderr);
        let first: Vec<&str> = err.lines().take(6).collect();
        return Err(fail(format!("rustfmt failed ({}): {}", output.status, first.join(" | "))));
    }
    String::from_utf8(output.stdout).map_err(|_| fail("rustfmt wrote invalid UTF-8".into()))
}

/// Wraps comment lines (`//`, `///`, `//!`) longer than [`MAX_WIDTH`] at spaces; code blocks in
/// doc comments (```` ``` ```` fences) are left as they are.
pub fn wrap_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 50);
    let mut fenced = false;
    for line in text.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        let indent = body.len() - body.trim_start().len();
        let rest = &body[indent..];
        let marker = ["//!", "///", "//"].into_iter().find(|m| rest.starts_with(m));
        let Some(marker) = marker else {
            out.push_str(line);
            continue;
        };
        let content = rest[marker.len()..].strip_prefix(' ').unwrap_or(&rest[marker.len()..]);
        if marker != "//" && content.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced || body.chars().count() <= MAX_WIDTH || content.is_empty() {
            out.push_str(line);
            continue;
        }
        let lead = &body[..indent];
        let item = ["* ", "- "].iter().any(|p| content.starts_with(p));
        let first_prefix = format!("{lead}{marker} ");
        let next_prefix = format!("{lead}{marker} {}", if item { "  " } else { "" });
        let mut cur = first_prefix.clone();
        let mut cur_len = cur.chars().count();
        let mut empty = true;
        for word in content.split(' ') {
            let w = word.chars().count();
            if !empty && cur_len + 1 + w > MAX_WIDTH {
                out.push_str(cur.trim_end());
                out.push('\n');
                cur = next_prefix.clone();
                cur_len = cur.chars().count();
                empty = true;
            }
            if !empty {
                cur.push(' ');
                cur_len += 1;
            }
            cur.push_str(word);
            cur_len += w;
            empty = false;
        }
        out.push_str(cur.trim_end());
        out.push_str(nl);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_comments_wrap_at_words_and_short_ones_stay() {
        let long = format!("    // {}\nfn f() {{}}\n", "word ".repeat(40).trim_end());
        let w = wrap_comments(&long);
        assert!(w.lines().all(|l| l.chars().count() <= MAX_WIDTH), "{w}");
        assert!(w.lines().filter(|l| l.starts_with("    // word")).count() >= 2);
        assert_eq!(w.replace("\n    // ", " "), long.replace("\n    // ", " "));
        let short = "/// short\n//! also short\nlet x = 1; // trailing\n";
        assert_eq!(wrap_comments(short), short);
    }

    #[test]
    fn list_items_continue_indented_and_code_blocks_stay() {
        let item = format!("//! * {}\n", "item ".repeat(40).trim_end());
        let w = wrap_comments(&item);
        assert!(w.lines().skip(1).all(|l| l.starts_with("//!   item")), "{w}");
        let code = format!("/// ```\n/// {}\n/// ```\n", "x".repeat(200));
        assert_eq!(wrap_comments(&code), code);
        // one word longer than the width stays whole
        let word = format!("// {}\n", "y".repeat(200));
        assert_eq!(wrap_comments(&word), word);
    }

    #[test]
    fn the_mark_records_the_rendering_and_the_text() {
        let t = with_mark("// @generated by xirang-scan\nfn f() {}\n", "abc");
        assert_eq!(recorded(&t), Some(("abc", true)));
        let edited = t.replace("fn f", "fn g");
        assert_eq!(recorded(&edited), Some(("abc", false)));
        assert_eq!(recorded("// @generated\nfn f() {}\n"), None);
    }
}

#[cfg(test)]
mod repository {
    use super::*;

    /// Length of a line with the contents of its string literals left out.
    fn outside_strings(line: &str) -> usize {
        let (mut n, mut in_str, mut esc) = (0, false, false);
        for c in line.chars() {
            match (in_str, esc, c) {
                (true, true, _) => esc = false,
                (true, false, '\\') => esc = true,
                (true, false, '"') => in_str = false,
                (true, false, _) => {}
                (false, _, '"') => {
                    in_str = true;
                    n += 2;
                }
                (false, _, _) => n += 1,
            }
        }
        n
    }

    /// Every committed generated Rust file is formatted (its mark matches its text) and no line
    /// is over the width outside string literals, unless one word (a path, a quoted signature
    /// without spaces) cannot be broken.
    #[test]
    fn the_committed_generated_files_are_formatted_within_the_width() {
        let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../generated"));
        let mut files = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            assert!(matches!(recorded(&text), Some((_, true))), "{} is not the formatted output", p.display());
            for (i, line) in text.lines().enumerate() {
                let breakable = line.trim_start().trim_start_matches('/').trim_start_matches('!').trim().contains(' ');
                assert!(
                    outside_strings(line) <= MAX_WIDTH || !breakable,
                    "{}:{}: {} columns outside string literals",
                    p.display(),
                    i + 1,
                    outside_strings(line)
                );
            }
            files += 1;
        }
        assert!(files >= 10, "{files} generated Rust files");
    }
}
