//! `xirang-scan bot` as a user runs it: `--dry-run` prints the branch, the commit and the pull request it
//! would open, the token set in the environment never appears in the output, and a run without a token
//! is a clean error.

use std::path::Path;
use std::process::Command;

use xirang_scan::snapshot::{PytorchSnapshot, Store};
use xirang_scan::source::{self, SourceSpec};
use xirang_scan::version::Version;

const TOKEN: &str = "ghp_CLI_SECRET_TOKEN_5550123";

fn release(dir: &Path, v: &str, extra: &str) {
    std::fs::create_dir_all(dir.join(v)).unwrap();
    let nf = format!(
        "- func: add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor\n  variants: function, method\n{extra}"
    );
    std::fs::write(dir.join(v).join("native_functions.yaml"), nf).unwrap();
    std::fs::write(dir.join(v).join("tags.yaml"), "- tag: pointwise\n  desc: elementwise\n").unwrap();
    // every release since 2.1 ships derivatives.yaml (a snapshot without it is refused)
    std::fs::write(
        dir.join(v).join("derivatives.yaml"),
        "- name: add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor\n  self: grad\n  other: grad\n",
    )
    .unwrap();
}

#[test]
fn dry_run_prints_the_plan_and_never_the_token() {
    let dir = std::env::temp_dir().join(format!("xirang-bot-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let up = dir.join("upstream");
    release(&up, "v2.0.0", "");
    release(&up, "v2.1.0", "\n- func: neg(Tensor self) -> Tensor\n  variants: function\n");
    let remote = dir.join("remote.git");
    git2::Repository::init_bare(&remote).unwrap();
    let work = dir.join("work");
    let mut o = git2::RepositoryInitOptions::new();
    o.initial_head("main");
    let repo = git2::Repository::init_opts(&work, &o).unwrap();
    std::fs::write(
        work.join("xirang.toml"),
        "[other]\nx = 1\n[bot]\nowner = \"acme\"\nrepo = \"xirang\"\napi_url = \"http://127.0.0.1:9\"\n",
    )
    .unwrap();
    let files = source::read(&SourceSpec::Folder(up.join("v2.0.0"))).unwrap();
    let snap = PytorchSnapshot::build(&files, &Version::parse("v2.0.0").unwrap()).unwrap();
    Store::new(work.join("schemas")).write_pytorch(&snap).unwrap();
    let mut idx = repo.index().unwrap();
    idx.add_all(["*"], git2::IndexAddOption::DEFAULT, None).unwrap();
    idx.write().unwrap();
    let tree = repo.find_tree(idx.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("a", "a@example.invalid").unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, "initial", &tree, &[]).unwrap();
    repo.remote("origin", remote.to_str().unwrap()).unwrap();
    repo.find_remote("origin").unwrap().push(&["refs/heads/main:refs/heads/main"], None).unwrap();

    let exe = env!("CARGO_BIN_EXE_xirang-scan");
    let out = Command::new(exe)
        .args(["bot", "--dry-run", "--from-folder"])
        .arg(&up)
        .arg("--repo")
        .arg(&work)
        .env("XIRANG_BOT_TOKEN", TOKEN)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(!stdout.contains(TOKEN) && !stderr.contains(TOKEN), "the token was printed");
    assert!(stdout.contains("branch: xirang-bot/pytorch-v2.1.0"), "{stdout}");
    assert!(stdout.contains("commit: "), "{stdout}");
    assert!(stdout.contains("Xirang-Bot-Key: "), "{stdout}");
    assert!(stdout.contains("pull request title: xirang-bot: PyTorch v2.1.0"), "{stdout}");
    assert!(stdout.contains("# Drift report: pytorch v2.0.0 -> v2.1.0"), "{stdout}");

    // without a token a real run is refused before anything happens
    let out = Command::new(exe)
        .args(["bot", "--from-folder"])
        .arg(&up)
        .arg("--repo")
        .arg(&work)
        .env_remove("XIRANG_BOT_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("XIRANG_BOT_TOKEN is not set"));
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------------------
// the bot as a process: what a step can see of it, and what a SIGKILL leaves behind

#[path = "../../../tests/bot_support.rs"]
mod support;

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// The folder `support::fixture(tag, ..)` will use (known before, so that steps can name files in it).
fn fixture_dir(tag: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("xirang-bot-test-{tag}-{}", std::process::id()))
}

/// `xirang-scan bot` on a fixture, with the forge token in its environment.
fn bot(fx: &support::Fixture) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_xirang-scan"));
    c.args(["bot", "--from-folder"])
        .arg(&fx.upstream)
        .arg("--repo")
        .arg(&fx.work)
        .env("XIRANG_BOT_TOKEN", support::TOKEN)
        .env_remove("GITHUB_REPOSITORY")
        .stdin(Stdio::null());
    c
}

/// Runs the bot to the end; returns (exit code, stdout + stderr). The token never shows.
fn bot_run(fx: &support::Fixture) -> (Option<i32>, String) {
    run_to_end(&mut bot(fx))
}

fn run_to_end(cmd: &mut Command) -> (Option<i32>, String) {
    let out = cmd.output().unwrap();
    let text = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!text.contains(support::TOKEN), "the token was printed:\n{text}");
    (out.status.code(), text)
}

/// Waits (bounded) for `what`; fails early when the bot exits first.
fn wait_for(child: &mut Child, what: &str, mut done: impl FnMut() -> bool) {
    let t = Instant::now();
    while !done() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the bot ended ({status}) before {what}");
        }
        assert!(t.elapsed() < Duration::from_secs(90), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGKILLs the bot, and the step it left running (its pid is in `pid_file`, if any).
fn kill_bot(mut child: Child, pid_file: Option<&Path>) {
    child.kill().unwrap();
    child.wait().unwrap();
    if let Some(pid) = pid_file.and_then(|p| std::fs::read_to_string(p).ok()) {
        let _ = Command::new("kill").args(["-9", pid.trim()]).status();
    }
}

/// A step or check that, while `<dir>/hold-<name>` exists, writes its pid to `<dir>/at-<name>` and
/// sleeps (to be killed there); otherwise it does `then`.
fn holdable(dir: &Path, name: &str, then: &str) -> String {
    format!("if [ -e '{d}/hold-{name}' ]; then echo $$ > '{d}/at-{name}'; exec sleep 60; fi; {then}", d = dir.display())
}

/// Row 7 of issue #19: a step (or a build script of the check) that reads the bot's environment through
/// /proc/$PPID/environ does not find the token there.
#[test]
fn a_step_cannot_read_the_token_from_the_bots_environment() {
    let forge = support::FakeForge::start();
    let dir = fixture_dir("cli-environ");
    let steps = format!(
        r#"steps = [["sh", "-c", "cat /proc/$PPID/environ > '{d}/step-saw'; echo regenerated > generated.txt"]]
check = ["sh", "-c", "cat /proc/$PPID/environ > '{d}/check-saw'; env > '{d}/check-env'"]"#,
        d = dir.display()
    );
    let fx = support::fixture("cli-environ", &forge.url, &steps);
    // the same token under another name (a workflow that also sets GH_TOKEN) goes too
    let (code, out) = run_to_end(bot(&fx).env("GH_TOKEN", support::TOKEN));
    assert_eq!(code, Some(0), "{out}");
    for f in ["step-saw", "check-saw", "check-env"] {
        let seen = std::fs::read(dir.join(f)).unwrap();
        assert!(seen.len() > 10, "{f} is empty");
        let text = String::from_utf8_lossy(&seen);
        assert!(!text.contains(support::TOKEN), "{f}: a child found the token in the bot's environment");
        assert!(!text.contains("XIRANG_BOT_TOKEN="), "{f}: the token variable is still there");
        assert!(!text.contains("GH_TOKEN="), "{f}: a copy of the token is still there");
    }
    assert_eq!(forge.pulls().len(), 1);
    fx.assert_user_tree_intact();
    fx.cleanup();
}

/// Row 10 of issue #19: a bot killed (SIGKILL) during a step leaves a worktree behind; the next run
/// cleans it and succeeds (it used to fail "reference ... is already checked out" for ever).
#[test]
fn a_bot_killed_during_a_step_does_not_wedge_the_next_run() {
    let forge = support::FakeForge::start();
    let dir = fixture_dir("cli-wedge");
    let steps = format!(
        "steps = [[\"sh\", \"-c\", \"{}\"]]\ncheck = [\"true\"]",
        holdable(&dir, "step", "echo regenerated > generated.txt")
    );
    let fx = support::fixture("cli-wedge", &forge.url, &steps);
    std::fs::write(dir.join("hold-step"), "").unwrap();
    let mut child = bot(&fx).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    wait_for(&mut child, "the step", || dir.join("at-step").exists());
    kill_bot(child, Some(&dir.join("at-step")));
    std::fs::remove_file(dir.join("hold-step")).unwrap();

    let (code, out) = bot_run(&fx);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(forge.pulls().len(), 1);
    assert_eq!(fx.remote_file("xirang-bot/pytorch-v2.1.0", "generated.txt").as_deref(), Some("regenerated\n"));
    let repo = git2::Repository::open(&fx.work).unwrap();
    assert_eq!(repo.worktrees().unwrap().len(), 0, "a stale worktree was left");
    fx.assert_user_tree_intact();
    fx.cleanup();
}

/// Row 5 of issue #19: killing the bot (SIGKILL) at several points of a run leaves the user's working
/// tree, index, HEAD and branches exactly as they were, and the next run succeeds.
#[test]
fn killing_the_bot_at_any_point_leaves_the_users_repository_as_it_was() {
    let forge = support::FakeForge::start();
    let dir = fixture_dir("cli-kill");
    let steps = format!(
        "steps = [[\"sh\", \"-c\", \"{}\"]]\ncheck = [\"sh\", \"-c\", \"{}\"]",
        holdable(&dir, "step", "echo regenerated > generated.txt"),
        holdable(&dir, "check", "echo checked")
    );
    let fx = support::fixture("cli-kill", &forge.url, &steps);
    let before = fx.user_state();
    let pulls = "/repos/acme/xirang/pulls";

    // 1. waiting for the forge, before any work; 2. in a step (import written, worktree populated);
    // 3. in the check (commits made); 4. waiting for the forge after the push
    for point in ["forge-read", "step", "check", "forge-write"] {
        let seen = forge.requests().len();
        match point {
            "forge-read" => forge.hang("GET", pulls, 3000, 1),
            "forge-write" => forge.hang("POST", pulls, 3000, 1),
            name => std::fs::write(dir.join(format!("hold-{name}")), "").unwrap(),
        }
        let mut child = bot(&fx).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        let pid_file = dir.join(format!("at-{point}"));
        match point {
            "forge-read" => wait_for(&mut child, point, || {
                forge.requests().iter().skip(seen).any(|r| r.method == "GET" && r.path.starts_with(pulls))
            }),
            "forge-write" => wait_for(&mut child, point, || {
                forge.requests().iter().skip(seen).any(|r| r.method == "POST" && r.path.starts_with(pulls))
            }),
            _ => wait_for(&mut child, point, || pid_file.exists()),
        }
        kill_bot(child, Some(&pid_file));
        let _ = std::fs::remove_file(dir.join(format!("hold-{point}")));
        assert_eq!(fx.user_state(), before, "killed at {point}: the user's repository changed");
    }
    assert_eq!(fx.remote_tip("main"), Some(fx.base_commit), "the base branch was pushed");

    let (code, out) = bot_run(&fx);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(fx.user_state(), before, "the user's repository changed");
    assert_eq!(forge.pulls().iter().filter(|p| p.state == "open").count(), 1);
    assert_eq!(fx.remote_file("xirang-bot/pytorch-v2.1.0", "generated.txt").as_deref(), Some("regenerated\n"));
    let repo = git2::Repository::open(&fx.work).unwrap();
    assert_eq!(repo.worktrees().unwrap().len(), 0, "a stale worktree was left");
    fx.assert_user_tree_intact();
    fx.cleanup();
}

/// Row 7 of issue #19, the part the bot cannot fix: a process above the bot that keeps the token in its
/// environment (a shell that did not `exec` the bot) is named in a warning; handing the token over on
/// stdin (as the shipped workflow does) leaves nothing to warn about.
#[test]
fn an_ancestor_holding_the_token_is_reported() {
    let forge = support::FakeForge::start();
    let fx = support::fixture("cli-ancestor", &forge.url, support::DEFAULT_STEPS);
    let mut args = vec!["bot".to_string(), "--dry-run".into(), "--from-folder".into()];
    args.push(fx.upstream.display().to_string());
    args.extend(["--repo".to_string(), fx.work.display().to_string()]);
    let exe = env!("CARGO_BIN_EXE_xirang-scan");
    // `; true`: the shell stays, as the bot's parent, with the token in its environment
    let (code, out) = run_to_end(
        Command::new("sh")
            .arg("-c")
            .arg("\"$0\" \"$@\"; true")
            .arg(exe)
            .args(&args)
            .env("XIRANG_BOT_TOKEN", support::TOKEN)
            .stdin(Stdio::null()),
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("warning: process") && out.contains("(sh)") && out.contains("has the token"), "{out}");
    // the token on stdin: no parent holds it
    let mut child = Command::new(exe)
        .args(&args)
        .env_remove("XIRANG_BOT_TOKEN")
        .env("XIRANG_BOT_TOKEN_VIA_STDIN", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(format!("{}\n", support::TOKEN).as_bytes()).unwrap();
    }
    let o = child.wait_with_output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{text}");
    assert!(!text.contains("warning: process") && !text.contains(support::TOKEN), "{text}");
    assert!(text.contains("branch: xirang-bot/pytorch-v2.1.0"), "{text}");
    fx.assert_user_tree_intact();
    fx.cleanup();
}

/// `--from-pypi` without a URL (as the shipped workflow runs it) reads `[bot] index_url`: a mirror.
#[test]
fn from_pypi_without_a_url_uses_the_configured_index() {
    let forge = support::FakeForge::start();
    let steps = format!("index_url = \"{}/mirror/pypi/torch/json\"\n{}", forge.url, support::DEFAULT_STEPS);
    let fx = support::fixture("cli-index-url", &forge.url, &steps);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xirang-scan"));
    cmd.args(["bot", "--from-pypi", "--dry-run", "--repo"])
        .arg(&fx.work)
        .env_remove("XIRANG_BOT_TOKEN")
        .env_remove("GITHUB_REPOSITORY")
        .stdin(Stdio::null());
    let (_, out) = run_to_end(&mut cmd);
    // the mirror was asked (it has no such document: the run fails, naming it)
    assert!(forge.requests().iter().any(|r| r.method == "GET" && r.path == "/mirror/pypi/torch/json"), "{out}");
    assert!(out.contains("/mirror/pypi/torch/json"), "{out}");
    fx.cleanup();
}

/// Every file of a working tree (`.git` and `target` left out): path -> bytes.
fn tree_files(root: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let name = e.file_name();
            if d == root && (name == ".git" || name == "target") {
                continue;
            }
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.strip_prefix(root).unwrap().display().to_string(), std::fs::read(&p).unwrap_or_default());
            }
        }
    }
    out
}

/// HEAD, every branch, the index file, `git status` and every file of the working tree.
type RepoState = (
    Option<(String, Option<git2::Oid>)>,
    Vec<(String, Option<git2::Oid>)>,
    Vec<u8>,
    Vec<(String, u32)>,
    std::collections::BTreeMap<String, Vec<u8>>,
);

fn repo_state(work: &Path) -> RepoState {
    let repo = git2::Repository::open(work).unwrap();
    let head = repo.head().ok().map(|h| (h.name().unwrap_or("?").to_string(), h.target()));
    let branches = repo
        .references()
        .unwrap()
        .flatten()
        .map(|r| (r.name().unwrap_or("?").to_string(), r.target()))
        .filter(|(n, _)| !n.starts_with("refs/remotes/"))
        .collect();
    let index = std::fs::read(repo.path().join("index")).unwrap();
    let mut so = git2::StatusOptions::new();
    so.include_untracked(true);
    let status = repo
        .statuses(Some(&mut so))
        .unwrap()
        .iter()
        .map(|s| (s.path().unwrap_or("?").to_string(), s.status().bits()))
        .collect();
    (head, branches, index, status, tree_files(work))
}

/// Issue #24's measure of an honest dry run: on a copy of this repository (its committed tree, with a
/// user's work in progress on top) and a folder holding a new PyTorch release, `bot --dry-run` shows
/// the plan, and afterwards `git status`, HEAD, every branch, the index and every file are as they were;
/// a dry run that fails half-way leaves them as they were too.
#[test]
fn a_dry_run_on_a_copy_of_this_repository_changes_nothing() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let dir = fixture_dir("self-copy");
    let _ = std::fs::remove_dir_all(&dir);
    let work = dir.join("work");
    let mut o = git2::RepositoryInitOptions::new();
    o.initial_head("main");
    let repo = git2::Repository::init_opts(&work, &o).unwrap();
    // the committed tree of this repository, file by file
    let src = git2::Repository::open(&root).unwrap();
    let tree = src.head().unwrap().peel_to_tree().unwrap();
    tree.walk(git2::TreeWalkMode::PreOrder, |base, e| {
        if e.kind() == Some(git2::ObjectType::Blob)
            && e.filemode() != 0o120000
            && let Ok(blob) = src.find_blob(e.id())
        {
            let p = work.join(base).join(e.name().unwrap_or("_"));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, blob.content()).unwrap();
        }
        git2::TreeWalkResult::Ok
    })
    .unwrap();
    let mut idx = repo.index().unwrap();
    idx.add_all(["*"], git2::IndexAddOption::FORCE, None).unwrap();
    idx.write().unwrap();
    let t = repo.find_tree(idx.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("a", "a@example.invalid").unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, "this repository", &t, &[]).unwrap();
    let remote = dir.join("remote.git");
    git2::Repository::init_bare(&remote).unwrap();
    repo.remote("origin", remote.to_str().unwrap()).unwrap();
    repo.find_remote("origin").unwrap().push(&["refs/heads/main:refs/heads/main"], None).unwrap();
    // a user's work in progress: a modified file, an untracked one, a staged one
    std::fs::write(work.join("README.md"), std::fs::read_to_string(work.join("README.md")).unwrap() + "\nwip\n")
        .unwrap();
    std::fs::write(work.join("notes.txt"), "mine\n").unwrap();
    std::fs::write(work.join("staged.txt"), "staged\n").unwrap();
    let mut idx = repo.index().unwrap();
    idx.add_path(Path::new("staged.txt")).unwrap();
    idx.write().unwrap();

    // the new release: 2.15.0's files with one more operator
    let corpus = root.join("../shared/corpus/pytorch/v2.15.0");
    let up = dir.join("upstream");
    let rel = up.join("v2.16.0");
    std::fs::create_dir_all(&rel).unwrap();
    for f in ["tags.yaml", "derivatives.yaml"] {
        std::fs::copy(corpus.join(f), rel.join(f)).unwrap();
    }
    let nf = std::fs::read_to_string(corpus.join("native_functions.yaml")).unwrap();
    std::fs::write(
        rel.join("native_functions.yaml"),
        nf + "\n- func: xirang_probe(Tensor self) -> Tensor\n  variants: function\n",
    )
    .unwrap();

    let before = repo_state(&work);
    let dry = |up: &Path| {
        run_to_end(
            Command::new(env!("CARGO_BIN_EXE_xirang-scan"))
                .args(["bot", "--dry-run", "--from-folder"])
                .arg(up)
                .arg("--repo")
                .arg(&work)
                .env_remove("XIRANG_BOT_TOKEN")
                .env_remove("GITHUB_REPOSITORY")
                .stdin(Stdio::null()),
        )
    };
    let (code, out) = dry(&up);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("branch: xirang-bot/pytorch-v2.16.0"), "{out}");
    assert!(out.contains("# Drift report: pytorch v2.15.0 -> v2.16.0"), "{out}");
    assert!(out.contains("xirang_probe"), "{out}");
    assert_eq!(repo_state(&work), before, "the dry run changed the repository");
    assert_eq!(repo.worktrees().unwrap().len(), 0);

    // a dry run that fails half-way (the second new release does not parse)
    let bad = up.join("v2.16.1");
    std::fs::create_dir_all(&bad).unwrap();
    for f in ["tags.yaml", "derivatives.yaml"] {
        std::fs::copy(corpus.join(f), bad.join(f)).unwrap();
    }
    std::fs::write(bad.join("native_functions.yaml"), "- func: broken(Tensor self -> Tensor\n").unwrap();
    let (code, out) = dry(&up);
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(repo_state(&work), before, "a failing dry run changed the repository");
    assert_eq!(repo.worktrees().unwrap().len(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}
