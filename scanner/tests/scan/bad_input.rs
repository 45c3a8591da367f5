//! Issue #19, "Nothing lost, nothing leaked": the scanner rows of the bad-input campaign, each a
//! test against the `xirang-scan` binary (rows 2 and 19 are the profiler's, in the runtime; rows
//! 7, 10 and 17 the bot's, in `tests/bot_*.rs`). Crafted inputs are built here, small, from the
//! corpus and the repository; each test works in its own folder under `target/bad-input/`.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn corpus() -> PathBuf {
    repo().join("../shared/corpus")
}

/// The binary under test; `XIRANG_SCAN_EXE` runs these tests against another build (e.g. the
/// previous release, to see them fail there).
fn exe_path() -> PathBuf {
    std::env::var_os("XIRANG_SCAN_EXE").map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_xirang-scan")), PathBuf::from)
}

fn exe() -> Command {
    Command::new(exe_path())
}

/// A fresh, empty folder `target/bad-input/<name>`.
fn scratch(name: &str) -> PathBuf {
    let d = repo().join("target").join("bad-input").join(name);
    if d.exists() {
        std::fs::remove_dir_all(&d).unwrap();
    }
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `xirang-scan args` in `cwd` with no stdin; fails the test if it runs longer than 120 s (a
/// hang) or dies of a signal (a crash, a stack overflow, an abort).
fn run_in(cwd: &Path, args: &[&str]) -> Output {
    run_cmd(exe().args(args).current_dir(cwd), 120)
}

fn run_cmd(cmd: &mut Command, limit_s: u64) -> Output {
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let t_out = std::thread::spawn(move || {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut out, &mut b).unwrap();
        b
    });
    let t_err = std::thread::spawn(move || {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut err, &mut b).unwrap();
        b
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(limit_s) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("hang: {cmd:?} ran longer than {limit_s} s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let o = Output { status, stdout: t_out.join().unwrap(), stderr: t_err.join().unwrap() };
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.code().is_some(), "{cmd:?} died of a signal: {:?}\n{stderr}", o.status);
    assert!(!stderr.contains("panicked"), "{cmd:?} panicked:\n{stderr}");
    o
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// Standard error with miette's frame and line wrapping undone (one space between words), so
/// that a message can be matched whatever the terminal width.
fn stderr(o: &Output) -> String {
    let text = String::from_utf8_lossy(&o.stderr);
    let mut out = String::new();
    for line in text.lines() {
        let t = line.trim().trim_start_matches(['│', '×', '·', '╭', '╰', '─', '┬', '┴', '|', ' ']);
        if !t.is_empty() {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(t.trim_end());
        }
    }
    out
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// The snapshot the repository's `xirang.toml` targets (`v2.15.0`), and the one before it, as the
/// store names them.
fn target_versions() -> (String, String) {
    let st = xirang_scan::snapshot::Store::new(repo().join("schemas"));
    let toml = std::fs::read_to_string(repo().join("xirang.toml")).unwrap();
    let spec = toml.lines().find_map(|l| l.strip_prefix("version = \"")).unwrap().trim_end_matches('"');
    let target = st.resolve("pytorch", spec).unwrap();
    let all = st.versions("pytorch");
    let before = all.iter().rev().find(|v| **v < target).unwrap().to_string();
    (target.to_string(), before)
}

/// A small copy of the repository that `generate`, `new-op`, `diff` and `coverage` run in: the
/// configuration, templates, generated files, the targeted snapshot and the one before it, the
/// vendor header snapshot and the runtime's sources.
fn mini_repo(at: &Path) -> PathBuf {
    let r = repo();
    std::fs::create_dir_all(at).unwrap();
    for f in ["xirang.toml", "custom_ops.yaml"] {
        std::fs::copy(r.join(f), at.join(f)).unwrap();
    }
    let (target, before) = target_versions();
    for d in ["templates".to_string(), "generated".into(), "adapter-runtime/src".into()]
        .into_iter()
        .chain([format!("schemas/pytorch/{target}"), format!("schemas/pytorch/{before}")])
    {
        copy_dir(&r.join(&d), &at.join(&d));
    }
    let toml = std::fs::read_to_string(r.join("xirang.toml")).unwrap();
    let headers = toml.lines().find_map(|l| l.strip_prefix("headers = \"")).unwrap().trim_end_matches('"');
    copy_dir(&r.join("schemas/ascend").join(headers), &at.join("schemas/ascend").join(headers));
    at.to_path_buf()
}

/// sha256 over every file (path and bytes) under `dir`, sorted; files named in `skip` left out.
fn tree_hash(dir: &Path) -> String {
    fn walk(d: &Path, root: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        let Ok(rd) = std::fs::read_dir(d) else { return };
        for e in rd {
            let e = e.unwrap();
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                walk(&p, root, out);
            } else {
                out.push((p.strip_prefix(root).unwrap().display().to_string(), std::fs::read(&p).unwrap_or_default()));
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, dir, &mut files);
    files.sort();
    let mut h = Sha256::new();
    for (p, b) in files {
        h.update(p.as_bytes());
        h.update([0]);
        h.update(&b);
        h.update([0]);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A folder with the upstream files of a corpus release, to be damaged.
fn upstream_copy(at: &Path, version: &str) -> PathBuf {
    let d = at.join(version);
    copy_dir(&corpus().join("pytorch").join(version), &d);
    for f in ["torchgen-reference.jsonl", "deprecated.yaml"] {
        let _ = std::fs::remove_file(d.join(f));
    }
    d
}

fn mkfifo(p: &Path) -> bool {
    Command::new("mkfifo").arg(p).status().is_ok_and(|s| s.success())
}

/// Row 1: a closed pipe stops the printing, not the work, and no command panics on one; a full
/// stdout (`/dev/full`) is an error, not a panic.
#[test]
fn row01_closed_pipe_and_full_stdout() {
    let dir = scratch("row01");
    let releases = dir.join("releases");
    std::fs::create_dir_all(&releases).unwrap();
    for v in ["v2.1.0", "v2.2.0", "v2.3.0"] {
        std::os::unix::fs::symlink(corpus().join("pytorch").join(v), releases.join(v)).unwrap();
    }
    let store = dir.join("store");
    let rel = releases.display().to_string();
    let st = store.display().to_string();
    let mini = mini_repo(&scratch("row01-mini"));
    let root = repo();
    let cases: Vec<(Vec<&str>, &Path)> = vec![
        (vec!["snapshot", "sync", &rel, "--store", &st], &dir),
        (vec!["snapshot", "sync", &rel, "--store", &st, "--dry-run"], &dir),
        (vec!["snapshot", "list", "--store", &st], &dir),
        (vec!["generate", "--check"], &mini),
        (vec!["new-op", "xirang::pipe_op(Tensor self) -> Tensor", "--grad", "self: grad", "--dry-run"], &mini),
        (vec!["diffs", "--check"], &root),
    ];
    for (args, cwd) in &cases {
        let mut child =
            exe().args(args).current_dir(cwd).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        drop(child.stdout.take()); // `| head -0`
        let o = child.wait_with_output().unwrap();
        assert!(o.status.code().is_some(), "{args:?} died: {:?}", o.status);
        assert!(!stderr(&o).contains("panicked"), "{args:?}: {}", stderr(&o));
        assert!(matches!(code(&o), 0 | 3), "{args:?}: exit {}: {}", code(&o), stderr(&o));
    }
    // the sync imported every release though nobody read its output
    let listed = run_in(&dir, &["snapshot", "list", "--store", &st]);
    assert!(stdout(&listed).contains("pytorch: v2.1.0 v2.2.0 v2.3.0"), "{}", stdout(&listed));
    // /dev/full: reported once the work is done
    let full = std::fs::File::create("/dev/full").unwrap();
    let o = exe().args(["snapshot", "list", "--store", &st]).stdout(full).output().unwrap();
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot write the output"), "{}", stderr(&o));
}

/// Row 3: formulas and kernel files nested 10,000 deep are errors or warnings, not a stack overflow.
#[test]
fn row03_deep_nesting_is_bounded() {
    let mini = mini_repo(&scratch("row03"));
    let terms = vec!["grad"; 10_000].join(" + ");
    let o = run_in(&mini, &["new-op", "xirang::deep_op(Tensor self) -> Tensor", "--grad", &format!("self: {terms}")]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("deeper than") || stderr(&o).contains("longer than"), "{}", stderr(&o));
    // the same formula inside a stored snapshot: generate reports a missing hook, no crash
    let (target, before) = target_versions();
    let der = mini.join(format!("schemas/pytorch/{target}/derivatives.jsonl"));
    let text = std::fs::read_to_string(&der).unwrap();
    let text = text.replacen("\"formula\":\"grad * self.sgn()\"", &format!("\"formula\":\"{terms}\""), 1);
    std::fs::write(&der, text).unwrap();
    let o = run_in(&mini, &["generate", "--check"]);
    assert!(matches!(code(&o), 0 | 3), "{}", stderr(&o));
    // a kernel file of 50,000 nested parentheses: left out of the index with a warning
    let deep =
        format!("/// xirang-kernel: abs\npub fn f() -> i32 {{ {}1{} }}\n", "(".repeat(50_000), ")".repeat(50_000));
    std::fs::write(mini.join("adapter-runtime/src/deep.rs"), deep).unwrap();
    let o = run_in(&mini, &["diff", &before, &target, "--limit", "1", "--color", "never"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("adapter-runtime/src/deep.rs:2:") && stderr(&o).contains("not indexed"),
        "{}",
        stderr(&o)
    );
    let o = run_in(&mini, &["coverage", "--format", "json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

/// Row 4: a second YAML document is an error with its position, not a silent truncation; `new-op`
/// on a custom-operator file ending in a document marker adds the operator where it is read.
#[test]
fn row04_multi_document_files() {
    let dir = scratch("row04");
    let up = upstream_copy(&dir, "v2.3.1");
    let nf = up.join("native_functions.yaml");
    let text = std::fs::read_to_string(&nf).unwrap();
    let at = text.match_indices("\n- func:").nth(14).unwrap().0 + 1;
    let line = text[..at].lines().count() + 1;
    std::fs::write(&nf, format!("{}---\n{}", &text[..at], &text[at..])).unwrap();
    let o = run_in(&dir, &["ops", &up.display().to_string()]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains(&format!("native_functions.yaml:{line}:1")), "{}", stderr(&o));
    assert!(stderr(&o).contains("second YAML document"), "{}", stderr(&o));
    let st = dir.join("store").display().to_string();
    let o = run_in(&dir, &["snapshot", "import", &up.display().to_string(), "--as", "v2.3.9", "--store", &st]);
    assert_eq!(code(&o), 1);
    assert!(!dir.join("store/pytorch/v2.3.9").exists());

    // new-op: a file ending in `...` gets the entry before it
    let mini = mini_repo(&scratch("row04-mini"));
    let custom = mini.join("custom_ops.yaml");
    let orig = std::fs::read_to_string(&custom).unwrap();
    std::fs::write(&custom, format!("{orig}...\n")).unwrap();
    let o = run_in(&mini, &["new-op", "xirang::dots_op(Tensor self) -> Tensor", "--grad", "self: grad"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let after = std::fs::read_to_string(&custom).unwrap();
    let op_at = after.find("xirang::dots_op").expect("the operator is in the file");
    assert!(op_at < after.rfind("...").unwrap(), "{after}");
    assert!(after.contains("self: \"grad\""), "{after}");
    let generated = std::fs::read_to_string(mini.join("generated/custom.rs")).unwrap();
    assert!(generated.contains("dots_op"), "the operator was not generated");
    // a file ending in `---` (a second, empty document): refused, nothing written
    let before = tree_hash(&mini);
    std::fs::write(&custom, format!("{orig}---\n")).unwrap();
    let before_file = tree_hash(&mini);
    let o = run_in(&mini, &["new-op", "xirang::dash_op(Tensor self) -> Tensor", "--grad", "self: grad"]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("second YAML document"), "{}", stderr(&o));
    assert_eq!(tree_hash(&mini), before_file);
    assert_ne!(before, before_file);
}

/// A filesystem of `mb` megabytes at `at` (tmpfs, when this process may mount), unmounted on drop.
struct SmallFs(PathBuf, bool);

impl SmallFs {
    fn new(at: &Path, mb: u32) -> SmallFs {
        std::fs::create_dir_all(at).unwrap();
        // XIRANG_TEST_NO_MOUNT=1 tries the fallback where mounting is allowed
        let ok = std::env::var_os("XIRANG_TEST_NO_MOUNT").is_none()
            && Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={mb}m"), "tmpfs"])
                .arg(at)
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
        SmallFs(at.to_path_buf(), ok)
    }

    /// Fills the filesystem up to `free_kb` free kilobytes (only a tmpfs of the test's own: never
    /// the real disk).
    fn fill(&self, free_kb: u64) {
        if !self.1 {
            return;
        }
        let out = Command::new("df").args(["-k", "--output=avail"]).arg(&self.0).output().unwrap();
        let avail: u64 = String::from_utf8_lossy(&out.stdout).lines().nth(1).unwrap().trim().parse().unwrap();
        let n = std::fs::read_dir(&self.0).unwrap().count();
        let mut f = std::fs::File::create(self.0.join(format!("filler{n}"))).unwrap();
        let chunk = vec![0u8; 1024];
        for _ in 0..avail.saturating_sub(free_kb) {
            if f.write_all(&chunk).is_err() {
                break;
            }
        }
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        if self.1 {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
}

/// Runs `xirang-scan` where writing fails midway: on a nearly full tmpfs when possible, else with
/// a 512 KB file-size limit (`ulimit -f`, SIGXFSZ ignored: writes fail with EFBIG), the same
/// failure for the code under test (a write of the group fails after others succeeded).
fn run_cramped(fs: &SmallFs, cwd: &Path, args: &[&str]) -> Output {
    if fs.1 {
        return run_in(cwd, args);
    }
    let mut sh = Command::new("sh");
    sh.arg("-c").arg("ulimit -f 1024; trap '' XFSZ; exec \"$0\" \"$@\"").arg(exe_path());
    sh.args(args).current_dir(cwd);
    run_cmd(&mut sh, 120)
}

/// Row 5: `generate` and `snapshot import` on a full disk leave the previous state intact.
#[test]
fn row05_full_disk_leaves_the_previous_state() {
    let dir = scratch("row05");
    let fs = SmallFs::new(&dir.join("fs"), 24);
    let mini = mini_repo(&fs.0.join("repo"));
    let before = tree_hash(&mini);
    fs.fill(2048);
    let o = run_cramped(&fs, &mini, &["generate", "--pytorch", &target_versions().1]);
    assert_eq!(code(&o), 1, "mounted: {}; {} {}", fs.1, stdout(&o), stderr(&o));
    assert_eq!(tree_hash(&mini), before, "generate changed the tree on a full disk: {}", stderr(&o));
    let src = corpus().join("pytorch/v2.5.0").display().to_string();
    fs.fill(512);
    let o = run_cramped(&fs, &mini, &["snapshot", "import", &src, "--as", "v2.5.0"]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert_eq!(tree_hash(&mini), before, "import changed the tree on a full disk: {}", stderr(&o));
    let o = run_in(&mini, &["snapshot", "list"]);
    assert!(!stdout(&o).contains("v2.5.0"), "{}", stdout(&o));
    eprintln!("row 5 ran on {}", if fs.1 { "a full tmpfs" } else { "a file-size limit (no mount permission)" });
}

fn hashes(dir: &Path) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let h: String = Sha256::digest(std::fs::read(&p).unwrap()).iter().map(|b| format!("{b:02x}")).collect();
            (p.file_name().unwrap().to_string_lossy().into_owned(), h)
        })
        .collect();
    v.sort();
    v
}

/// Spawns `xirang-scan` with slowed writes, kills it `delay_ms` after its journal appears, and
/// returns whether it was killed inside the write (not before, not after).
fn kill_during_write(cwd: &Path, journal_dir: &Path, args: &[&str], delay_ms: u64) -> bool {
    let mut child = exe()
        .args(args)
        .current_dir(cwd)
        .env("XIRANG_FSIO_DELAY_MS", "25")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let journal = journal_dir.join(".xirang-journal");
    while !journal.exists() {
        if child.try_wait().unwrap().is_some() || start.elapsed() > Duration::from_secs(120) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(delay_ms));
    let inside = journal.exists();
    let _ = child.kill();
    let _ = child.wait();
    inside
}

/// Row 5: a kill at any moment of `generate` or `snapshot import` leaves the old state or the new
/// one (after the next run's recovery), never a mix.
#[test]
fn row05_kill_during_write_leaves_old_or_new() {
    let reference = mini_repo(&scratch("row05-ref"));
    let old = hashes(&reference.join("generated"));
    let o = run_in(&reference, &["generate", "--pytorch", &target_versions().1]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let new = hashes(&reference.join("generated"));
    assert_ne!(old, new);
    let mut inside = 0;
    for (i, delay) in [0u64, 20, 45, 70, 95, 120, 150].into_iter().enumerate() {
        let mini = mini_repo(&scratch(&format!("row05-kill{i}")));
        inside += usize::from(kill_during_write(
            &mini,
            &mini.join("generated"),
            &["generate", "--pytorch", &target_versions().1],
            delay,
        ));
        // the next run (here a check) completes or undoes the interrupted group first
        let _ = run_in(&mini, &["generate", "--check", "--pytorch", &target_versions().1]);
        let now = hashes(&mini.join("generated"));
        assert!(now == old || now == new, "kill after {delay} ms left a mix in generated/: {now:?}");
        // snapshot import, killed likewise: afterwards v2.5.0 is absent or loads whole
        let src = corpus().join("pytorch/v2.5.0").display().to_string();
        inside += usize::from(kill_during_write(
            &mini,
            &mini.join("schemas"),
            &["snapshot", "import", &src, "--as", "v2.5.0"],
            delay,
        ));
        let o = run_in(&mini, &["snapshot", "list"]);
        if stdout(&o).contains("v2.5.0") {
            let o = run_in(&mini, &["ops", "v2.5.0", "--format", "jsonl"]);
            assert_eq!(code(&o), 0, "kill after {delay} ms: a damaged v2.5.0 is listed: {}", stderr(&o));
        }
    }
    assert!(inside >= 4, "only {inside} of 14 kills landed inside a write group");
}

/// Row 6: generated output stays inside the repository and never overwrites hand-written files.
#[test]
fn row06_output_paths_are_confined() {
    let mini = mini_repo(&scratch("row06"));
    let toml = std::fs::read_to_string(mini.join("xirang.toml")).unwrap();
    let before = tree_hash(&mini);
    let abs = std::env::temp_dir().join(format!("xirang-row06-{}", std::process::id()));
    let abs_s = abs.display().to_string();
    for (value, why) in [
        (abs_s.as_str(), "absolute"),
        ("../x", "out of the repository"),
        (".", "repository root"),
        ("adapter-runtime/src", "not written by xirang-scan"),
    ] {
        std::fs::write(
            mini.join("xirang.toml"),
            toml.replace("generated = \"generated\"", &format!("generated = \"{value}\"")),
        )
        .unwrap();
        let o = run_in(&mini, &["generate"]);
        assert_eq!(code(&o), 1, "{value}: {}", stderr(&o));
        assert!(stderr(&o).contains(why), "{value}: {}", stderr(&o));
        std::fs::write(mini.join("xirang.toml"), &toml).unwrap();
        assert_eq!(tree_hash(&mini), before, "{value}: the tree changed");
    }
    assert!(!abs.exists(), "{} was written", abs.display());
}

/// Row 8: a YAML alias bomb is refused at once.
#[test]
fn row08_alias_bomb() {
    let dir = scratch("row08");
    let up = dir.join("v2.3.1");
    std::fs::create_dir_all(&up).unwrap();
    let mut t = String::from("a: &a [\"x\", \"x\", \"x\", \"x\", \"x\", \"x\", \"x\", \"x\", \"x\", \"x\"]\n");
    for i in 0..9 {
        let p = if i == 0 { "a".to_string() } else { format!("l{}", i - 1) };
        let refs = vec![format!("*{p}"); 10].join(", ");
        t.push_str(&format!("l{i}: &l{i} [{refs}]\n"));
    }
    std::fs::write(up.join("native_functions.yaml"), t).unwrap();
    let o = run_cmd(exe().args(["ops", &up.display().to_string()]).current_dir(&dir), 30);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("alias"), "{}", stderr(&o));
}

/// Row 9: a 50 MB line gets a short error; a wheel that unpacks past the read limit is refused.
#[test]
fn row09_huge_lines_and_zip_bombs() {
    let dir = scratch("row09");
    let up = dir.join("v2.3.1");
    std::fs::create_dir_all(&up).unwrap();
    let line = format!("- func: {}(Tensor self) -> Tensor\n  bogus_key: 1\n", "a".repeat(50 << 20));
    std::fs::write(up.join("native_functions.yaml"), line).unwrap();
    let o = run_in(&dir, &["ops", &up.display().to_string()]);
    assert_eq!(code(&o), 1);
    assert!(o.stderr.len() < 16 * 1024, "{} bytes of error output", o.stderr.len());
    // a wheel whose native_functions.yaml unpacks to 100 MB
    let whl = dir.join("torch-2.3.1-cp311-none-any.whl");
    let mut z = zip::ZipWriter::new(std::fs::File::create(&whl).unwrap());
    let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    z.start_file("torchgen/packaged/ATen/native/native_functions.yaml", opts).unwrap();
    let spaces = vec![b' '; 1 << 20];
    for _ in 0..100 {
        z.write_all(&spaces).unwrap();
    }
    z.finish().unwrap();
    assert!(std::fs::metadata(&whl).unwrap().len() < 2 << 20);
    let o = run_in(&dir, &["ops", &whl.display().to_string()]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("more than"), "{}", stderr(&o));
}

/// Row 11: a source of a release that ships derivatives.yaml, without it (or with a link loop in
/// its place), is refused at import; a stored snapshot without derivative entries is refused on load.
#[test]
fn row11_missing_derivatives() {
    let dir = scratch("row11");
    let st = dir.join("store").display().to_string();
    let up = upstream_copy(&dir, "v2.3.1");
    std::fs::remove_file(up.join("derivatives.yaml")).unwrap();
    let o = run_in(&dir, &["snapshot", "import", &up.display().to_string(), "--as", "v2.3.8", "--store", &st]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("no derivatives.yaml"), "{}", stderr(&o));
    std::os::unix::fs::symlink("derivatives.yaml", up.join("derivatives.yaml")).unwrap();
    let o = run_in(&dir, &["snapshot", "import", &up.display().to_string(), "--as", "v2.3.8", "--store", &st]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("symbolic link loop"), "{}", stderr(&o));
    assert!(!dir.join("store/pytorch/v2.3.8").exists());
    // a stored 2.3 snapshot whose derivatives were emptied (counts made to match)
    let store = dir.join("store2");
    copy_dir(&repo().join("schemas/pytorch/v2.3.1"), &store.join("pytorch/v2.3.8"));
    copy_dir(&repo().join("schemas/pytorch/v2.3.1"), &store.join("pytorch/v2.3.1"));
    let v8 = store.join("pytorch/v2.3.8");
    std::fs::write(v8.join("derivatives.jsonl"), "").unwrap();
    let meta = std::fs::read_to_string(v8.join("meta.json")).unwrap();
    let meta = meta.replace("\"derivatives\": 714", "\"derivatives\": 0").replace("v2.3.1", "v2.3.8");
    std::fs::write(v8.join("meta.json"), meta).unwrap();
    // (run beside the store: in `dir`, `v2.3.1` would name the upstream folder there)
    let o = run_in(&store, &["diff", "v2.3.1", "v2.3.8", "--store", &store.display().to_string()]);
    assert_eq!(code(&o), 1, "{}", stdout(&o));
    assert!(stderr(&o).contains("no derivative entries"), "{}", stderr(&o));
}

/// Row 12: a stored snapshot cut at a line boundary, or holding a line twice, is refused on load.
#[test]
fn row12_damaged_snapshots() {
    let dir = scratch("row12");
    let store = dir.join("store");
    for v in ["v2.3.0", "v2.3.1"] {
        copy_dir(&repo().join("schemas/pytorch").join(v), &store.join("pytorch").join(v));
    }
    let ops = store.join("pytorch/v2.3.1/operators.jsonl");
    let text = std::fs::read_to_string(&ops).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let st = store.display().to_string();
    std::fs::write(&ops, lines[..lines.len() - 100].join("\n") + "\n").unwrap();
    for args in [vec!["diff", "v2.3.0", "v2.3.1", "--store", &st], vec!["ops", "v2.3.1", "--store", &st]] {
        let o = run_in(&dir, &args);
        assert_eq!(code(&o), 1, "{args:?}: {}", stdout(&o));
        assert!(stderr(&o).contains("counts 3096 operators, the files hold 2996"), "{}", stderr(&o));
    }
    let mut dup: Vec<&str> = lines.clone();
    dup[1] = lines[0];
    std::fs::write(&ops, dup.join("\n") + "\n").unwrap();
    for args in [vec!["diff", "v2.3.0", "v2.3.1", "--store", &st], vec!["ops", "v2.3.1", "--store", &st]] {
        let o = run_in(&dir, &args);
        assert_eq!(code(&o), 1, "{args:?}");
        assert!(stderr(&o).contains("twice"), "{}", stderr(&o));
    }
}

/// Row 13: width is not depth: 5,000 entries at the top level are read.
#[test]
fn row13_flat_files_are_not_too_deep() {
    let dir = scratch("row13");
    let up = dir.join("v2.3.1");
    std::fs::create_dir_all(&up).unwrap();
    // two collections per entry: 10,001 in all (the old counter never went down and stopped at 10,000)
    let text: String = (0..5000)
        .map(|i| format!("- func: op{i}(Tensor self) -> Tensor\n  variants: function\n  dispatch:\n    CPU: op{i}\n"))
        .collect();
    std::fs::write(up.join("native_functions.yaml"), text).unwrap();
    std::fs::write(up.join("derivatives.yaml"), "- name: op1(Tensor self) -> Tensor\n  self: grad\n").unwrap();
    let o = run_in(&dir, &["ops", &up.display().to_string(), "--format", "jsonl"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o).lines().count(), 5000);
}

/// Rows 14 and 15: `grad * scale` is an expression, and operators named by Rust keywords build.
#[test]
fn row14_15_formulas_and_keyword_names() {
    let mini = mini_repo(&scratch("row14"));
    let o = run_in(
        &mini,
        &[
            "new-op",
            "xirang::tscale(Tensor self, float scale=1.0) -> Tensor",
            "--grad",
            "self: grad * scale",
            "--dry-run",
        ],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    for name in ["fn", "type"] {
        let o = run_in(&mini, &["new-op", &format!("xirang::{name}(Tensor self) -> Tensor"), "--grad", "self: grad"]);
        assert_eq!(code(&o), 0, "{name}: {}", stderr(&o));
        for f in [
            "adapter-runtime/src/custom/mod.rs".to_string(),
            format!("adapter-runtime/src/custom/{name}.rs"),
            format!("adapter-runtime/tests/runtime/custom/{name}.rs"),
            "adapter-runtime/tests/runtime/custom/mod.rs".to_string(),
            "generated/custom.rs".to_string(),
        ] {
            let text = std::fs::read_to_string(mini.join(&f)).unwrap();
            if let Err(e) = syn::parse_file(&text) {
                panic!("{name}: {f} is not valid Rust: {e}");
            }
        }
        let m = std::fs::read_to_string(mini.join("adapter-runtime/src/custom/mod.rs")).unwrap();
        assert!(m.contains(&format!("mod r#{name};")), "{m}");
        let t = std::fs::read_to_string(mini.join("adapter-runtime/tests/runtime/custom/mod.rs")).unwrap();
        assert!(t.contains(&format!("mod r#{name};")), "{t}");
    }
    let o = run_in(&mini, &["new-op", "fn::x(Tensor self) -> Tensor", "--grad", "self: grad", "--dry-run"]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("Rust keyword"), "{}", stderr(&o));
}

/// Row 16: torchgen's strictness: duplicate keys, unknown tags; and names that name nothing.
#[test]
fn row16_duplicates_tags_and_unknown_names() {
    let dir = scratch("row16");
    let up = upstream_copy(&dir, "v2.3.1");
    let nf = up.join("native_functions.yaml");
    let orig = std::fs::read_to_string(&nf).unwrap();
    let target = "- func: _cast_Byte(Tensor self, bool non_blocking=False) -> Tensor\n";
    assert!(orig.contains(target));
    let line = orig[..orig.find(target).unwrap()].lines().count() + 1;
    for (extra, what) in [
        ("  func: _cast_Char(Tensor self, bool non_blocking=False) -> Tensor\n", "duplicate key `func`"),
        ("  dispatch:\n    CPU: a\n    CPU: b\n", "duplicate key `CPU`"),
        ("  tags: pointwse\n", "illegal tag `pointwse`"),
    ] {
        std::fs::write(&nf, orig.replacen(target, &format!("{target}{extra}"), 1)).unwrap();
        let o = run_in(&dir, &["ops", &up.display().to_string()]);
        assert_eq!(code(&o), 1, "{what}");
        let e = stderr(&o);
        assert!(e.contains(what), "{what}: {e}");
        assert!((1..=3).any(|k| e.contains(&format!("native_functions.yaml:{}:", line + k))), "{what}: {e}");
    }
    let o = {
        std::fs::write(&nf, orig.replacen(target, &format!("{target}  tags: pointwse\n"), 1)).unwrap();
        run_in(&dir, &["ops", &up.display().to_string()])
    };
    assert!(stderr(&o).contains("did you mean `pointwise`"), "{}", stderr(&o));
    // backend yaml: a repeated list key, an operator that does not exist
    let by = dir.join("backend.yaml");
    std::fs::write(&by, "backend: NPU\ncpp_namespace: at_npu\nsupported:\n  - abs\nsupported:\n  - add.Tensor\n")
        .unwrap();
    let b = by.display().to_string();
    let o = run_in(&repo(), &["diff", "v2.1", "v2.3", "--backend", &b]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("duplicate key `supported`"), "{}", stderr(&o));
    std::fs::write(&by, "backend: NPU\ncpp_namespace: at_npu\nsupported:\n  - abs\n  - add.Tensr\n").unwrap();
    let o = run_in(&repo(), &["diff", "v2.1", "v2.3", "--backend", &b]);
    assert_eq!(code(&o), 1);
    let e = stderr(&o);
    assert!(e.contains("backend.yaml:5:5") && e.contains("did you mean `add.Tensor`"), "{e}");
    // xirang.toml: operators that do not exist, an empty driver chain
    let mini = mini_repo(&scratch("row16-mini"));
    let toml = std::fs::read_to_string(mini.join("xirang.toml")).unwrap();
    for (from, to, what) in [
        ("include = []", "include = [\"add.Tensr\"]", "did you mean `add.Tensor`"),
        ("exclude = []", "exclude = [\"nonexistent_op\"]", "`nonexistent_op`, which is no operator"),
        ("contiguous = [\"_softmax\"", "contiguous = [\"_sofmax\"", "did you mean `_softmax`"),
        ("free = [\"aclrtFree\"]", "free = []", "lists no driver function"),
    ] {
        assert!(toml.contains(from), "{from}");
        std::fs::write(mini.join("xirang.toml"), toml.replacen(from, to, 1)).unwrap();
        let o = run_in(&mini, &["generate", "--check"]);
        assert_eq!(code(&o), 1, "{to}");
        assert!(stderr(&o).contains(what), "{to}: {}", stderr(&o));
        assert!(stderr(&o).contains("xirang.toml:"), "{to}: not positioned: {}", stderr(&o));
    }
}

/// Row 18 (scanner part): a header that is /dev/zero or a FIFO, an allow list that is a FIFO.
#[test]
fn row18_unbounded_and_blocking_reads() {
    let dir = scratch("row18");
    let h = dir.join("headers");
    std::fs::create_dir_all(&h).unwrap();
    std::fs::write(h.join("a.h"), "int f(void);\n").unwrap();
    std::os::unix::fs::symlink("/dev/zero", h.join("zero.h")).unwrap();
    let o = run_cmd(exe().args(["headers", "generic", &h.display().to_string()]), 30);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("not a regular file"), "{}", stderr(&o));
    std::fs::remove_file(h.join("zero.h")).unwrap();
    if mkfifo(&h.join("fifo.h")) {
        let o = run_cmd(exe().args(["headers", "generic", &h.display().to_string()]), 30);
        assert_eq!(code(&o), 1);
        assert!(stderr(&o).contains("not a regular file"), "{}", stderr(&o));
        let allow = dir.join("allow.json");
        assert!(mkfifo(&allow));
        let o = run_cmd(
            exe().args(["diff", "v2.1", "v2.3", "--allow", &allow.display().to_string()]).current_dir(repo()),
            30,
        );
        assert_eq!(code(&o), 1);
        assert!(stderr(&o).contains("FIFO"), "{}", stderr(&o));
    }
}

/// Row 20: `--store` elsewhere still reports the adapter of the repository the command runs in,
/// and a report that indexed no kernel says so.
#[test]
fn row20_store_elsewhere() {
    let dir = scratch("row20");
    let store = dir.join("store");
    for v in ["v2.1.2", "v2.3.1"] {
        copy_dir(&repo().join("schemas/pytorch").join(v), &store.join("pytorch").join(v));
    }
    let st = store.display().to_string();
    let o = run_in(&repo(), &["diff", "v2.1", "v2.3", "--store", &st, "--format", "json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(j["kernels_indexed"].as_u64().unwrap() > 0, "no kernels indexed with --store elsewhere");
    // outside any repository: nothing to index, and the report says so
    let outside = std::env::temp_dir().join(format!("xirang-row20-{}", std::process::id()));
    std::fs::create_dir_all(&outside).unwrap();
    let o = run_in(&outside, &["diff", "v2.1", "v2.3", "--store", &st, "--format", "json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stderr(&o).contains("no hand-written kernels indexed"), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&outside);
}

/// Row 21: import never overwrites silently, wants a full version, and exact versions are exact.
#[test]
fn row21_import_overwrite_and_versions() {
    let dir = scratch("row21");
    let store = dir.join("store");
    copy_dir(&repo().join("schemas/pytorch/v2.3.1"), &store.join("pytorch/v2.3.1"));
    let st = store.display().to_string();
    let v23 = corpus().join("pytorch/v2.2.0").display().to_string();
    let before = tree_hash(&store);
    let o = run_in(&dir, &["snapshot", "import", &v23, "--as", "v2.3.1", "--store", &st]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("--force"), "{}", stderr(&o));
    assert_eq!(tree_hash(&store), before);
    let o = run_in(&dir, &["snapshot", "import", &v23, "--as", "v2.3", "--store", &st]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("not a full version"), "{}", stderr(&o));
    // the same content again is fine; `.post1` beside it does not capture `v2.3.1`
    let same = corpus().join("pytorch/v2.3.1").display().to_string();
    assert_eq!(code(&run_in(&dir, &["snapshot", "import", &same, "--as", "v2.3.1", "--store", &st])), 0);
    assert_eq!(tree_hash(&store), before);
    let o = run_in(&dir, &["snapshot", "import", &v23, "--as", "v2.3.1.post1", "--store", &st]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let s = xirang_scan::snapshot::Store::new(&store);
    assert_eq!(s.resolve("pytorch", "v2.3.1").unwrap().to_string(), "v2.3.1");
    assert_eq!(s.resolve("pytorch", "v2.3").unwrap().to_string(), "v2.3.1.post1");
    let o = run_in(&dir, &["snapshot", "import", &v23, "--as", "v2.3.1", "--store", &st, "--force"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_ne!(tree_hash(&store), before);
}

/// Row 22: usage errors exit 2.
#[test]
fn row22_usage_errors_exit_2() {
    for args in [
        vec!["diff", "v2.1", "v2.3", "--today", "2025-13-45"],
        vec!["diff", "v2.1", "v2.3", "--today", "2025-02-30"],
        vec!["headers", "bogus", "x"],
        vec!["coverage", "--fail-under-reachable", "200"],
        vec!["snapshot", "import", ".", "--as", "banana"],
    ] {
        let o = run_in(&repo(), &args);
        assert_eq!(code(&o), 2, "{args:?}: {}", stderr(&o));
    }
}

/// Row 23: messages that say what is wrong: a link loop, a FIFO or a folder in place of the yaml;
/// allow-list errors with file:line:col.
#[test]
fn row23_clear_messages() {
    let dir = scratch("row23");
    for (kind, want) in [("loop", "symbolic link loop"), ("fifo", "FIFO"), ("folder", "is a folder")] {
        let up = dir.join(kind).join("v2.3.1");
        std::fs::create_dir_all(&up).unwrap();
        let nf = up.join("native_functions.yaml");
        match kind {
            "loop" => std::os::unix::fs::symlink("native_functions.yaml", &nf).unwrap(),
            "fifo" => {
                if !mkfifo(&nf) {
                    continue;
                }
            }
            _ => std::fs::create_dir(&nf).unwrap(),
        }
        let o = run_cmd(exe().args(["ops", &up.display().to_string()]), 30);
        assert_eq!(code(&o), 1);
        assert!(stderr(&o).contains(want), "{kind}: {}", stderr(&o));
    }
    let allow = dir.join("allow.json");
    let a = allow.display().to_string();
    for (text, want) in [
        (
            "{\"allow\": [\n  {\"rule\": \"arg.inserted\", \"fingerprint\": \"x\", \"reason\": \"r\",\n   \"expires\": \"2025-02-30\"}]}\n",
            "allow.json:3:15",
        ),
        (
            "{\"allow\": [\n  {\"rule\": \"arg.insrted\", \"fingerprint\": \"x\", \"reason\": \"r\", \"expires\": \"2026-01-01\"}]}\n",
            "did you mean `arg.inserted`",
        ),
        (
            "{\"allow\": [\n  {\"rule\": \"arg.inserted\", \"fingerprint\": \"x\", \"expires\": \"2026-01-01\"}]}\n",
            "allow.json:2:",
        ),
    ] {
        std::fs::write(&allow, text).unwrap();
        let o = run_in(&repo(), &["diff", "v2.1", "v2.3", "--allow", &a]);
        assert_eq!(code(&o), 1);
        let e = stderr(&o);
        assert!(e.contains(want), "{want}: {e}");
        assert!(!e.contains("snapshot"), "allow-list error titled snapshot: {e}");
    }
}

/// `generate` into a folder that is not its own (a crate's `src/`, a folder of hand-written files)
/// is refused before anything is written: the tree stays byte-identical.
#[test]
fn generate_refuses_a_folder_of_hand_written_code() {
    let mini = mini_repo(&scratch("foreign-generated"));
    // a crate of hand-written code beside the adapter
    std::fs::create_dir_all(mini.join("tool/src")).unwrap();
    std::fs::write(mini.join("tool/Cargo.toml"), "[package]\nname = \"tool\"\n").unwrap();
    std::fs::write(mini.join("tool/src/main.rs"), "fn main() {}\n").unwrap();
    // a folder whose only file is hand-written, and the generated folder with one hand-written file
    std::fs::create_dir_all(mini.join("notes")).unwrap();
    std::fs::write(mini.join("notes/plan.rs"), "// my plan\n").unwrap();
    std::fs::write(mini.join("generated/helpers.rs"), "pub fn mine() {}\n").unwrap();
    let toml = std::fs::read_to_string(mini.join("xirang.toml")).unwrap();
    for (target, says) in [
        ("tool/src", "inside the `src/` folder of the crate"),
        ("tool/src/gen", "inside the `src/` folder of the crate"),
        ("notes", "plan.rs"),
        ("generated", "helpers.rs"),
    ] {
        std::fs::write(
            mini.join("xirang.toml"),
            toml.replace("generated = \"generated\"", &format!("generated = \"{target}\"")),
        )
        .unwrap();
        let before = tree_hash(&mini);
        let o = run_in(&mini, &["generate"]);
        assert_eq!(code(&o), 1, "{target}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("refusing to generate into") && stderr(&o).contains(says),
            "{target}: {}",
            stderr(&o)
        );
        assert_eq!(tree_hash(&mini), before, "{target}: generate changed the tree");
    }
    // the generator's own folder, once the stray file is gone, is accepted
    std::fs::write(mini.join("xirang.toml"), &toml).unwrap();
    std::fs::remove_file(mini.join("generated/helpers.rs")).unwrap();
    let o = run_in(&mini, &["generate", "--check"]);
    assert!(matches!(code(&o), 0 | 3), "{}", stderr(&o));
}
