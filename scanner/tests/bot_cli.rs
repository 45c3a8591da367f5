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
