//! Reading input files and writing output files safely.
//!
//! Reading: [`read_text`] refuses what is not a regular file (a FIFO would block on open, a
//! folder or a symbolic-link loop would give a misleading "not found") and caps the size, so a
//! `/dev/zero` or a 50 GB file is an error, not an out-of-memory kill.
//!
//! Writing: [`WriteGroup`] writes a group of files all or nothing, also across a full disk and a
//! kill at any instant. Every file is first written to a temporary sibling (`.<name>.xirang-tmp`)
//! while a journal in the group's root says "staging"; only when all of them are written and
//! flushed does the journal switch (by an atomic rename) to "commit", and then the temporary files
//! are renamed over their targets. [`recover`] (run before every read or write of a folder the
//! tool owns) rolls a committed group forward and a staging one back, so a reader never sees a
//! half-written group. Paths are confined to the group's root ([`confine`]).

use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

/// The largest input file read whole (upstream yaml files are under 1 MB, snapshots under 4 MB).
pub const MAX_INPUT_BYTES: u64 = 64 << 20;

/// Name of the journal file a [`WriteGroup`] keeps in its root while it runs.
pub const JOURNAL: &str = ".xirang-journal";

/// Suffix of the temporary files of a [`WriteGroup`].
pub const TMP_SUFFIX: &str = ".xirang-tmp";

fn input_error(path: &Path, message: impl Into<String>) -> Error {
    Error::Input { path: path.to_path_buf(), message: message.into() }
}

/// Why `path` cannot be read as a regular file, from an I/O error of `metadata`/`open`.
fn describe_io(path: &Path, e: std::io::Error) -> Error {
    // ELOOP: too many levels of symbolic links
    if e.raw_os_error() == Some(40) {
        return input_error(path, "a symbolic link loop (too many levels of symbolic links)");
    }
    Error::io(path, e)
}

/// The kind of a non-regular file, for messages.
fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "a folder"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    }
}

/// Checks that `path` is a regular file (following symbolic links) of at most `limit` bytes.
pub fn check_regular(path: &Path, limit: u64) -> Result<std::fs::Metadata> {
    let meta = std::fs::metadata(path).map_err(|e| describe_io(path, e))?;
    if !meta.is_file() {
        return Err(input_error(path, format!("is {}, not a regular file", kind_of(&meta))));
    }
    if meta.len() > limit {
        return Err(input_error(
            path,
            format!("is {} bytes, more than the {} bytes this tool reads", meta.len(), limit),
        ));
    }
    Ok(meta)
}

/// Whether `path` exists in any form (a dangling or looping symbolic link counts).
pub fn exists_any(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// Reads a regular file of at most `limit` bytes.
pub fn read_bytes(path: &Path, limit: u64) -> Result<Vec<u8>> {
    let meta = check_regular(path, limit)?;
    let f = std::fs::File::open(path).map_err(|e| describe_io(path, e))?;
    // sized for the file as it was when checked (one allocation, no regrowth copies); a file that
    // grows meanwhile still reads, up to the limit
    let mut out = Vec::with_capacity(meta.len() as usize + 1);
    f.take(limit + 1).read_to_end(&mut out).map_err(|e| Error::io(path, e))?;
    if out.len() as u64 > limit {
        return Err(input_error(path, format!("grew past the {limit} bytes this tool reads while it was read")));
    }
    Ok(out)
}

/// Reads a regular UTF-8 text file of at most `limit` bytes.
pub fn read_text(path: &Path, limit: u64) -> Result<String> {
    let bytes = read_bytes(path, limit)?;
    String::from_utf8(bytes).map_err(|_| Error::Utf8 { path: path.to_path_buf() })
}

/// [`read_text`] with the default limit; `Ok(None)` when the file does not exist at all.
pub fn read_text_opt(path: &Path) -> Result<Option<String>> {
    if !exists_any(path) {
        return Ok(None);
    }
    read_text(path, MAX_INPUT_BYTES).map(Some)
}

/// Reads at most `limit` bytes from a reader (an archive entry, a blob), erroring beyond.
pub fn read_limited(mut r: impl Read, limit: u64, what: &str) -> std::result::Result<Vec<u8>, String> {
    let mut out = Vec::new();
    (&mut r).take(limit + 1).read_to_end(&mut out).map_err(|e| e.to_string())?;
    if out.len() as u64 > limit {
        return Err(format!("{what} is larger than the {limit} bytes this tool reads"));
    }
    Ok(out)
}

/// `rel` (a path from a configuration file or the command line) joined to `root`, refused when it
/// is absolute, climbs out with `..`, is the root itself, or leads outside the root through a
/// symbolic link. `what` names the setting in the error.
pub fn confine(root: &Path, rel: &str, what: &str) -> Result<PathBuf> {
    let p = Path::new(rel);
    let refuse = |why: &str| Error::Invalid(format!("{what} = `{rel}`: {why}; give a path inside the repository"));
    if rel.trim().is_empty() {
        return Err(refuse("empty path"));
    }
    if p.is_absolute() {
        return Err(refuse("an absolute path"));
    }
    let mut depth = 0usize;
    for c in p.components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => return Err(refuse("it leads out of the repository with `..`")),
            Component::RootDir | Component::Prefix(_) => return Err(refuse("an absolute path")),
        }
    }
    if depth == 0 {
        return Err(refuse("that is the repository root itself"));
    }
    let joined = root.join(p);
    // symbolic links among the existing ancestors must not lead out of the root
    let root_real = std::fs::canonicalize(root).map_err(|e| Error::io(root, e))?;
    let mut probe = joined.clone();
    while !exists_any(&probe) {
        if !probe.pop() {
            break;
        }
    }
    if let Ok(real) = std::fs::canonicalize(&probe)
        && !real.starts_with(&root_real)
    {
        return Err(refuse(&format!("it resolves to {} through a symbolic link", real.display())));
    }
    Ok(joined)
}

/// Writes the files (paths relative to `root`, all under `folder`) whose content differs, and
/// removes `removes`, as one [`WriteGroup`] with its journal in `root/folder`. Returns the paths
/// written or removed.
pub fn write_changed(
    root: &Path,
    folder: &str,
    files: &[(PathBuf, String)],
    removes: &[PathBuf],
) -> Result<Vec<PathBuf>> {
    let base = root.join(folder);
    std::fs::create_dir_all(&base).map_err(|e| Error::io(&base, e))?;
    recover(&base)?;
    let mut group = WriteGroup::new(&base);
    let mut changed = Vec::new();
    let inner = |rel: &Path| -> Result<PathBuf> {
        rel.strip_prefix(folder)
            .map(Path::to_path_buf)
            .map_err(|_| Error::Internal(format!("{} is not under {folder}/", rel.display())))
    };
    for (rel, text) in files {
        let same = std::fs::read(root.join(rel)).is_ok_and(|b| b == text.as_bytes());
        if !same {
            group.write(inner(rel)?, text.as_bytes())?;
            changed.push(rel.clone());
        }
    }
    for rel in removes {
        group.remove(inner(rel)?)?;
        changed.push(rel.clone());
    }
    group.commit()?;
    Ok(changed)
}

/// One planned change of a [`WriteGroup`].
#[derive(Debug, Clone)]
enum Change {
    Write { rel: PathBuf, bytes: Vec<u8> },
    Remove { rel: PathBuf },
}

/// A group of file writes and removals under one root, applied all or nothing (see the module
/// docs). Paths are relative to the root and may not leave it.
#[derive(Debug)]
pub struct WriteGroup {
    root: PathBuf,
    changes: Vec<Change>,
}

impl WriteGroup {
    pub fn new(root: impl Into<PathBuf>) -> WriteGroup {
        WriteGroup { root: root.into(), changes: Vec::new() }
    }

    fn checked_rel(&self, rel: &Path) -> Result<PathBuf> {
        let ok = !rel.as_os_str().is_empty() && rel.components().all(|c| matches!(c, Component::Normal(_)));
        if !ok {
            return Err(Error::Internal(format!(
                "write path {} is not a plain relative path under {}",
                rel.display(),
                self.root.display()
            )));
        }
        Ok(rel.to_path_buf())
    }

    /// Plans writing `bytes` to `rel`.
    pub fn write(&mut self, rel: impl AsRef<Path>, bytes: impl Into<Vec<u8>>) -> Result<()> {
        let rel = self.checked_rel(rel.as_ref())?;
        self.changes.push(Change::Write { rel, bytes: bytes.into() });
        Ok(())
    }

    /// Plans removing `rel` (nothing happens when it does not exist).
    pub fn remove(&mut self, rel: impl AsRef<Path>) -> Result<()> {
        let rel = self.checked_rel(rel.as_ref())?;
        self.changes.push(Change::Remove { rel });
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// Applies the group: all of it, or (on any error, including a full disk) nothing.
    pub fn commit(self) -> Result<()> {
        if self.changes.is_empty() {
            return Ok(());
        }
        std::fs::create_dir_all(&self.root).map_err(|e| Error::io(&self.root, e))?;
        recover(&self.root)?;
        let tmp_of = |rel: &Path| -> PathBuf {
            let name = rel.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            rel.with_file_name(format!(".{name}{TMP_SUFFIX}"))
        };
        let mut journal = Journal { state: State::Staging, renames: Vec::new(), removes: Vec::new(), dirs: Vec::new() };
        // folders to create, shallowest first (recorded so that a rollback removes them)
        for c in &self.changes {
            if let Change::Write { rel, .. } = c {
                let mut missing = Vec::new();
                let mut d = rel.parent().map(Path::to_path_buf).unwrap_or_default();
                while !d.as_os_str().is_empty() && !self.root.join(&d).exists() {
                    missing.push(d.clone());
                    if !d.pop() {
                        break;
                    }
                }
                for m in missing.into_iter().rev() {
                    if !journal.dirs.contains(&m) {
                        journal.dirs.push(m);
                    }
                }
                journal.renames.push((tmp_of(rel), rel.clone()));
            } else if let Change::Remove { rel } = c {
                journal.removes.push(rel.clone());
            }
        }
        journal.save(&self.root)?;
        let staged = (|| -> Result<()> {
            for d in &journal.dirs {
                let p = self.root.join(d);
                std::fs::create_dir_all(&p).map_err(|e| Error::io(&p, e))?;
            }
            for c in &self.changes {
                if let Change::Write { rel, bytes } = c {
                    let tmp = self.root.join(tmp_of(rel));
                    write_synced(&tmp, bytes).map_err(|e| Error::io(&tmp, e))?;
                    pause();
                }
            }
            Ok(())
        })();
        if let Err(e) = staged {
            rollback(&self.root, &journal);
            return Err(e);
        }
        journal.state = State::Commit;
        if let Err(e) = journal.save(&self.root) {
            rollback(&self.root, &journal);
            return Err(e);
        }
        roll_forward(&self.root, &journal)
    }
}

/// Fault injection for the kill-during-write tests: `XIRANG_FSIO_DELAY_MS=N` sleeps N ms after
/// each staged file and each rename of a [`WriteGroup`], so that a kill lands inside the group.
fn pause() {
    if let Some(ms) = std::env::var("XIRANG_FSIO_DELAY_MS").ok().and_then(|v| v.parse::<u64>().ok()) {
        std::thread::sleep(std::time::Duration::from_millis(ms.min(10_000)));
    }
}

fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = std::fs::File::create(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Staging,
    Commit,
}

/// The journal of a running group: its state, the renames (temporary -> target), the removals and
/// the folders it created; paths relative to the root.
#[derive(Debug)]
struct Journal {
    state: State,
    renames: Vec<(PathBuf, PathBuf)>,
    removes: Vec<PathBuf>,
    dirs: Vec<PathBuf>,
}

impl Journal {
    fn text(&self) -> String {
        let mut s = format!("xirang-journal 1 {}\n", if self.state == State::Commit { "commit" } else { "staging" });
        for d in &self.dirs {
            s.push_str(&format!("dir\t{}\n", d.display()));
        }
        for (t, r) in &self.renames {
            s.push_str(&format!("rename\t{}\t{}\n", t.display(), r.display()));
        }
        for r in &self.removes {
            s.push_str(&format!("remove\t{}\n", r.display()));
        }
        s
    }

    /// Writes the journal atomically (temporary file, flush, rename).
    fn save(&self, root: &Path) -> Result<()> {
        let tmp = root.join(format!("{JOURNAL}{TMP_SUFFIX}"));
        write_synced(&tmp, self.text().as_bytes()).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            Error::io(&tmp, e)
        })?;
        let path = root.join(JOURNAL);
        std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))
    }

    fn parse(text: &str) -> Option<Journal> {
        let mut lines = text.lines();
        let state = match lines.next()? {
            "xirang-journal 1 commit" => State::Commit,
            "xirang-journal 1 staging" => State::Staging,
            _ => return None,
        };
        let mut j = Journal { state, renames: Vec::new(), removes: Vec::new(), dirs: Vec::new() };
        let plain = |s: &str| -> Option<PathBuf> {
            let p = PathBuf::from(s);
            (!s.is_empty() && p.components().all(|c| matches!(c, Component::Normal(_)))).then_some(p)
        };
        for l in lines {
            let f: Vec<&str> = l.split('\t').collect();
            match f.as_slice() {
                ["dir", d] => j.dirs.push(plain(d)?),
                ["rename", t, r] => j.renames.push((plain(t)?, plain(r)?)),
                ["remove", r] => j.removes.push(plain(r)?),
                _ => return None,
            }
        }
        Some(j)
    }
}

/// Undoes a staging group: removes its temporary files and the folders it created.
fn rollback(root: &Path, j: &Journal) {
    for (tmp, _) in &j.renames {
        let _ = std::fs::remove_file(root.join(tmp));
    }
    for d in j.dirs.iter().rev() {
        let _ = std::fs::remove_dir(root.join(d));
    }
    let _ = std::fs::remove_file(root.join(JOURNAL));
}

/// Completes a committed group: renames what is still staged, removes what is to be removed.
fn roll_forward(root: &Path, j: &Journal) -> Result<()> {
    for (tmp, target) in &j.renames {
        let (from, to) = (root.join(tmp), root.join(target));
        match std::fs::rename(&from, &to) {
            Ok(()) => pause(),
            // renamed before the interruption
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && to.exists() => {}
            Err(e) => return Err(Error::io(&to, e)),
        }
    }
    for r in &j.removes {
        let p = root.join(r);
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(&p, e)),
        }
    }
    let path = root.join(JOURNAL);
    std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))
}

/// Finishes what an interrupted [`WriteGroup`] left in `root`: a committed group is completed, a
/// staging one undone. Returns whether there was anything to do.
pub fn recover(root: &Path) -> Result<bool> {
    let path = root.join(JOURNAL);
    let _ = std::fs::remove_file(root.join(format!("{JOURNAL}{TMP_SUFFIX}")));
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Error::io(&path, e)),
    };
    let Some(j) = Journal::parse(&text) else {
        return Err(input_error(
            &path,
            "the journal of an interrupted write is unreadable; compare the folder with git and delete the journal",
        ));
    };
    match j.state {
        State::Staging => rollback(root, &j),
        State::Commit => roll_forward(root, &j)?,
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("xirang-fsio-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn listing(root: &Path) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p.clone());
                }
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                let body = if p.is_file() { std::fs::read_to_string(&p).unwrap() } else { "/".into() };
                out.push(format!("{rel}={body}"));
            }
        }
        out.sort();
        out
    }

    #[test]
    fn a_group_is_written_whole() {
        let root = temp("whole");
        std::fs::write(root.join("a"), "old a").unwrap();
        std::fs::write(root.join("gone"), "x").unwrap();
        let mut g = WriteGroup::new(&root);
        g.write("a", "new a").unwrap();
        g.write("sub/b", "b").unwrap();
        g.remove("gone").unwrap();
        g.commit().unwrap();
        assert_eq!(listing(&root), ["a=new a", "sub/b=b", "sub=/"]);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_failing_stage_leaves_the_folder_as_it_was() {
        let root = temp("fail");
        std::fs::write(root.join("a"), "old").unwrap();
        std::fs::write(root.join("blocker"), "x").unwrap();
        let before = listing(&root);
        let mut g = WriteGroup::new(&root);
        g.write("a", "new").unwrap();
        g.write("sub/b", "b").unwrap();
        g.write("blocker/c", "c").unwrap();
        assert!(g.commit().is_err());
        assert_eq!(listing(&root), before);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn recovery_rolls_a_committed_group_forward_and_a_staging_one_back() {
        let root = temp("recover");
        std::fs::write(root.join("a"), "old a").unwrap();
        std::fs::write(root.join("b"), "old b").unwrap();
        // committed, one rename done: forward
        std::fs::write(root.join(".a.xirang-tmp"), "new a").unwrap();
        std::fs::write(root.join("b"), "new b").unwrap();
        std::fs::write(
            root.join(JOURNAL),
            "xirang-journal 1 commit\nrename\t.b.xirang-tmp\tb\nrename\t.a.xirang-tmp\ta\n",
        )
        .unwrap();
        assert!(recover(&root).unwrap());
        assert_eq!(listing(&root), ["a=new a", "b=new b"]);
        // staging: back
        std::fs::write(root.join(".a.xirang-tmp"), "half").unwrap();
        std::fs::create_dir(root.join("d")).unwrap();
        std::fs::write(root.join(JOURNAL), "xirang-journal 1 staging\ndir\td\nrename\t.a.xirang-tmp\ta\n").unwrap();
        assert!(recover(&root).unwrap());
        assert_eq!(listing(&root), ["a=new a", "b=new b"]);
        assert!(!recover(&root).unwrap());
        // a journal naming paths outside the root is refused, not followed
        std::fs::write(root.join(JOURNAL), "xirang-journal 1 commit\nremove\t../x\n").unwrap();
        assert!(recover(&root).is_err());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn confinement() {
        let root = temp("confine");
        std::fs::create_dir(root.join("in")).unwrap();
        std::os::unix::fs::symlink("/tmp", root.join("out")).unwrap();
        assert!(confine(&root, "in/gen", "x").is_ok());
        assert!(confine(&root, "generated", "x").is_ok());
        for bad in ["/tmp/x", "../x", ".", "", "in/../..", "out/gen"] {
            assert!(confine(&root, bad, "x").is_err(), "{bad} accepted");
        }
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn reads_refuse_what_is_not_a_bounded_regular_file() {
        let root = temp("read");
        std::fs::write(root.join("f"), "hello").unwrap();
        assert_eq!(read_text(&root.join("f"), 10).unwrap(), "hello");
        assert!(read_text(&root.join("f"), 3).unwrap_err().to_string().contains("more than"));
        assert!(read_text(&root, 10).unwrap_err().to_string().contains("a folder"));
        std::os::unix::fs::symlink(root.join("loop"), root.join("loop")).unwrap();
        assert!(read_text(&root.join("loop"), 10).unwrap_err().to_string().contains("symbolic link loop"));
        let fifo = root.join("fifo");
        if std::process::Command::new("mkfifo").arg(&fifo).status().is_ok_and(|s| s.success()) {
            assert!(read_text(&fifo, 10).unwrap_err().to_string().contains("FIFO"));
        }
        assert!(read_bytes(Path::new("/dev/zero"), 10).unwrap_err().to_string().contains("character device"));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
