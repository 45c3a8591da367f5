//! The regeneration bot's failure paths: push rejected, forge API errors (401, 422, 5xx with bounded
//! retries), a failing check (pull request still opened, marked failing), a failing step (reported,
//! nothing pushed). In every case the user's uncommitted work is intact and the token never shows.

use crate::bot_support as support;

use support::*;
use xirang_scan::bot::{BotError, Outcome};

const BRANCH: &str = "xirang-bot/pytorch-v2.1.0";

#[test]
fn a_rejected_push_is_an_error_and_opens_nothing() {
    let forge = FakeForge::start();
    let fx = fixture("push-rejected", &forge.url, DEFAULT_STEPS);
    // fetch works, pushing goes to a remote that refuses (403 on the smart-http receive-pack)
    let repo = git2::Repository::open(&fx.work).unwrap();
    repo.remote_set_pushurl("origin", Some(&format!("{}/git/denied.git", forge.url))).unwrap();
    let (res, log) = fx.run();
    let err = res.expect_err(&log);
    assert!(matches!(err, BotError::Push { .. }), "{err:?}");
    assert!(err.to_string().contains(BRANCH), "{err}");
    assert_eq!(forge.count("POST", "/repos/acme/xirang/pulls"), 0, "a PR was opened for an unpushed branch");
    assert!(fx.remote_tip(BRANCH).is_none());
    assert_eq!(repo.worktrees().unwrap().len(), 0);
    fx.assert_user_tree_intact();
    fx.cleanup();
}

#[test]
fn unauthorized_is_not_retried_and_the_token_never_shows() {
    let forge = FakeForge::start();
    let fx = fixture("401", &forge.url, DEFAULT_STEPS);
    // the fake forge answers 401 echoing the Authorization header it got
    let wrong = "ghp_WRONG_but_still_secret_987654321";
    let mut opts = fx.options(Some(wrong), false);
    let mut buf = Vec::new();
    let res = {
        let mut log = xirang_scan::bot::Log::new(&mut buf, &[wrong]);
        xirang_scan::bot::run(&opts, &mut log)
    };
    let out = String::from_utf8(buf).unwrap();
    let err = res.unwrap_err();
    assert!(matches!(err, BotError::Api { status: 401, .. }), "{err:?}");
    assert!(err.to_string().contains("Bad credentials"), "{err}");
    assert!(!err.to_string().contains(wrong) && !out.contains(wrong), "{err}\n{out}");
    assert_eq!(forge.requests().len(), 1, "a 401 was retried");
    assert!(fx.remote_tip(BRANCH).is_none(), "pushed without a working token");
    // and with the right token everything works
    opts.token = Some(TOKEN.into());
    let (res, log) = fx.run_with(&opts);
    assert!(matches!(res, Ok(Outcome::Published { .. })), "{res:?}\n{log}");
    fx.assert_user_tree_intact();
    fx.cleanup();
}

#[test]
fn validation_error_is_reported_and_the_next_run_recovers() {
    let forge = FakeForge::start();
    let fx = fixture("422", &forge.url, DEFAULT_STEPS);
    forge.fail("POST", "/repos/acme/xirang/pulls", 422, 1);
    let (res, log) = fx.run();
    let err = res.expect_err(&log);
    assert!(matches!(err, BotError::Api { status: 422, .. }), "{err:?}");
    assert_eq!(forge.count("POST", "/repos/acme/xirang/pulls"), 1, "a 422 was retried");
    // the branch was pushed; the next run sees the key on it but no PR, and opens one
    assert!(fx.remote_tip(BRANCH).is_some());
    let (res, log) = fx.run();
    assert!(matches!(res, Ok(Outcome::Published { pull: 1, updated: false, .. })), "{res:?}\n{log}");
    assert_eq!(forge.pulls().len(), 1);
    fx.assert_user_tree_intact();
    fx.cleanup();
}

#[test]
fn server_errors_are_retried_with_backoff() {
    let forge = FakeForge::start();
    let fx = fixture("5xx-retry", &forge.url, DEFAULT_STEPS);
    forge.fail("POST", "/repos/acme/xirang/pulls", 502, 2);
    let (res, log) = fx.run();
    assert!(matches!(res, Ok(Outcome::Published { pull: 1, .. })), "{res:?}\n{log}");
    assert_eq!(forge.count("POST", "/repos/acme/xirang/pulls"), 3);
    assert!(log.contains("retry 1/2") && log.contains("retry 2/2"), "{log}");
    fx.assert_user_tree_intact();
    fx.cleanup();
}

#[test]
fn server_errors_are_retried_a_bounded_number_of_times() {
    let forge = FakeForge::start();
    let fx = fixture("5xx-bounded", &forge.url, DEFAULT_STEPS);
    forge.fail("GET", "/repos/acme/xirang/pulls", 503, 1000);
    let (res, log) = fx.run();
    let err = res.expect_err(&log);
    assert!(matches!(err, BotError::ApiExhausted { attempts: 3, .. }), "{err:?}");
    assert_eq!(forge.count("GET", "/repos/acme/xirang/pulls"), 3, "retries are bounded by retry.max = 2");
    assert!(fx.remote_tip(BRANCH).is_none());
    fx.assert_user_tree_intact();
    fx.cleanup();
}

#[test]
fn a_failing_check_still_opens_the_pr_marked_failing() {
    let forge = FakeForge::start();
    let steps = r#"steps = [["sh", "-c", "echo regenerated > generated.txt"]]
check = ["sh", "-c", "echo 'error[E0046]: missing trait item boom'; exit 101"]"#;
    let fx = fixture("check-fails", &forge.url, steps);
    let (res, log) = fx.run();
    let outcome = res.unwrap_or_else(|e| panic!("{e}\n{log}"));
    assert!(matches!(outcome, Outcome::Published { pull: 1, check_passed: Some(false), .. }), "{outcome:?}");
    assert_eq!(outcome.exit_code(), 4);
    let pr = &forge.pulls()[0];
    assert!(pr.labels.contains(&"xirang-bot:check-failed".to_string()), "{:?}", pr.labels);
    assert!(pr.body.contains("**Check: FAILED**") && pr.body.contains("exit 101"), "{}", pr.body);
    assert!(pr.body.contains("missing trait item boom"), "{}", pr.body);
    assert_eq!(meta_of(&pr.body)["check"], "failed");
    assert!(fx.remote_tip(BRANCH).is_some());
    fx.assert_user_tree_intact();
    fx.cleanup();
}

#[test]
fn a_failing_step_is_reported_and_nothing_is_pushed() {
    let forge = FakeForge::start();
    let steps = r#"steps = [["sh", "-c", "echo 'generator exploded' >&2; exit 7"]]
check = ["true"]"#;
    let fx = fixture("step-fails", &forge.url, steps);
    let (res, log) = fx.run();
    let err = res.expect_err(&log);
    let BotError::Step { status, output, .. } = &err else { panic!("{err:?}") };
    assert_eq!(status, "exit 7");
    assert!(output.contains("generator exploded"));
    assert!(err.to_string().contains("nothing was pushed"));
    assert!(fx.remote_tip(BRANCH).is_none());
    assert_eq!(forge.writes(), 0);
    fx.assert_user_tree_intact();

    // an executable that does not exist is a failure too, not a silent skip
    let mut opts = fx.options(Some(TOKEN), false);
    opts.config.steps = vec![vec!["/definitely/not/a/generator".into()]];
    let (res, _) = fx.run_with(&opts);
    let err = res.unwrap_err();
    assert!(matches!(&err, BotError::Step { status, .. } if status.contains("could not start")), "{err:?}");
    let repo = git2::Repository::open(&fx.work).unwrap();
    assert_eq!(repo.worktrees().unwrap().len(), 0);
    fx.assert_user_tree_intact();
    fx.cleanup();
}

/// Row 17 of issue #19: a package index that answers 200 with something that is not the PyPI JSON API
/// document (a rate-limit message, an empty list) must not read as "no new release".
#[test]
fn an_index_answer_that_is_not_a_release_list_is_an_error() {
    let forge = FakeForge::start();
    let fx = fixture("pypi-shape", &forge.url, DEFAULT_STEPS);
    let mut opts = fx.options(Some(TOKEN), false);
    opts.upstream = xirang_scan::bot::Upstream::Pypi(format!("{}/pypi/torch/json", forge.url));
    for (answer, expect) in [
        (r#"{"message":"rate limited"}"#, "releases"),
        (r#"[]"#, "releases"),
        (r#"{"info": {"name": "torch"}, "releases": []}"#, "releases"),
        (r#"{"releases": {}}"#, "info"),
        (r#"{"info": {"name": "torch"}, "releases": {}}"#, "no release"),
        (
            r#"{"info": {"name": "torch"}, "releases": {"2.1.0": [{"filename": "torch-2.1.0.tar.gz",
                "url": "http://127.0.0.1:1/x", "digests": {"sha256": "00"}, "size": 1}]}}"#,
            "no release",
        ),
    ] {
        forge.serve_file("/pypi/torch/json", answer.as_bytes().to_vec());
        let (res, log) = fx.run_with(&opts);
        let err = match res {
            Err(e) => e.to_string(),
            Ok(o) => panic!("{answer}: {o:?}\n{log}"),
        };
        assert!(err.contains(expect), "{answer}: {err}");
        assert!(!log.contains("up to date"), "{answer}: {log}");
    }
    assert_eq!(forge.writes(), 0);
    assert!(fx.remote_tip(BRANCH).is_none());
    fx.assert_user_tree_intact();
    fx.cleanup();
}

/// Waits (bounded) until the fake forge has finished writing a streamed answer.
fn streamed(forge: &FakeForge, path: &str) -> u64 {
    let t = std::time::Instant::now();
    loop {
        let n = forge.streamed(path);
        if n > 0 || t.elapsed() > std::time::Duration::from_secs(30) {
            return n;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Row 18 of issue #19: a download larger than the index announced is cut off at the announced size
/// (not read to the end, not held in memory), and so is a JSON answer beyond the cap.
#[test]
fn http_bodies_are_cut_off_at_the_announced_size() {
    let forge = FakeForge::start();
    let fx = fixture("pypi-big", &forge.url, DEFAULT_STEPS);
    let mut opts = fx.options(None, true);
    opts.upstream = xirang_scan::bot::Upstream::Pypi(format!("{}/pypi/torch/json", forge.url));
    let doc = |path: &str| {
        serde_json::json!({"info": {"name": "torch"}, "releases": {
            "2.0.0": [],
            "2.1.0": [{"filename": "torch-2.1.0-cp311-none-any.whl", "url": format!("{}{path}", forge.url),
                       "digests": {"sha256": "00".repeat(32)}, "size": 102_400, "yanked": false}]}})
        .to_string()
        .into_bytes()
    };
    // no Content-Length, 96 MiB served for an announced 100 KiB
    let big = "/files/big/torch-2.1.0-cp311-none-any.whl";
    forge.serve_stream(big, 96 << 20, None, b'A');
    forge.serve_file("/pypi/torch/json", doc(big));
    let (res, log) = fx.run_with(&opts);
    let err = res.expect_err(&log).to_string();
    assert!(err.contains("102400"), "{err}");
    let n = streamed(&forge, big);
    assert!(n < 32 << 20, "{n} bytes of a 100 KiB wheel were taken before giving up");
    // a Content-Length beyond the announced size: refused before reading
    let long = "/files/long/torch-2.1.0-cp311-none-any.whl";
    forge.serve_stream(long, 8 << 20, Some(8 << 20), b'B');
    forge.serve_file("/pypi/torch/json", doc(long));
    let (res, log) = fx.run_with(&opts);
    let err = res.expect_err(&log).to_string();
    assert!(err.contains("102400") && err.contains(&(8u64 << 20).to_string()), "{err}");
    // the JSON answer itself is capped
    let mut opts2 = opts.clone();
    opts2.upstream = xirang_scan::bot::Upstream::Pypi(format!("{}/huge/json", forge.url));
    forge.serve_stream("/huge/json", 96 << 20, None, b' ');
    let (res, log) = fx.run_with(&opts2);
    res.expect_err(&log);
    let n = streamed(&forge, "/huge/json");
    assert!(n < 48 << 20, "{n} bytes of JSON read");
    fx.assert_user_tree_intact();
    fx.cleanup();
}

/// A commit of the remote's `main` that adds a symbolic link `name -> target` to the base tree.
fn push_symlink_to_main(fx: &Fixture, name: &str, target: &std::path::Path) {
    let remote = fx.remote_repo();
    let tip = remote.find_commit(fx.remote_tip("main").unwrap()).unwrap();
    let blob = remote.blob(target.to_str().unwrap().as_bytes()).unwrap();
    let mut tb = remote.treebuilder(Some(&tip.tree().unwrap())).unwrap();
    tb.insert(name, blob, 0o120000).unwrap();
    let tree = remote.find_tree(tb.write().unwrap()).unwrap();
    let sig = git2::Signature::now("Ada Maintainer", "ada@example.invalid").unwrap();
    remote.commit(Some("refs/heads/main"), &sig, &sig, "a link", &tree, &[&tip]).unwrap();
}

/// Row 6 of issue #19: the `[bot] store` path must stay inside the repository: `..`, absolute paths
/// and `.git` are refused with the position in xirang.toml, and so is a path that leaves the
/// repository through a symbolic link; nothing is written outside.
#[test]
fn a_store_outside_the_repository_is_refused() {
    let forge = FakeForge::start();
    let fx = fixture("store-escape", &forge.url, DEFAULT_STEPS);
    let toml = std::fs::read_to_string(fx.work.join("xirang.toml")).unwrap();
    let line = toml.lines().count() + 1;
    for bad in ["../../x", "/tmp/x", "schemas/../../x", ".git/x", ""] {
        std::fs::write(fx.work.join("xirang.toml"), format!("{toml}store = \"{bad}\"\n")).unwrap();
        let err = xirang_scan::bot::BotConfig::load(&fx.work).expect_err(bad).to_string();
        assert!(err.contains(&format!("xirang.toml:{line}:1:")) && err.contains("store"), "{bad}: {err}");
    }
    std::fs::write(fx.work.join("xirang.toml"), &toml).unwrap();

    // set by a program rather than the file: refused at run time all the same
    let outside = std::env::temp_dir().join(format!("xirang-escape-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&outside);
    let mut opts = fx.options(Some(TOKEN), false);
    opts.config.store = format!("{}{}", "../".repeat(16), outside.strip_prefix("/").unwrap().display());
    let (res, log) = fx.run_with(&opts);
    let err = res.expect_err(&log).to_string();
    assert!(err.contains("store"), "{err}");
    assert!(!outside.exists(), "the bot wrote outside the repository: {}", outside.display());

    // a symbolic link in the repository that leads outside (to a folder that exists)
    std::fs::create_dir_all(&outside).unwrap();
    push_symlink_to_main(&fx, "linked", &outside);
    std::fs::write(fx.work.join("xirang.toml"), format!("{toml}store = \"linked/store\"\n")).unwrap();
    let opts = fx.options(Some(TOKEN), false);
    std::fs::write(fx.work.join("xirang.toml"), &toml).unwrap();
    let (res, log) = fx.run_with(&opts);
    let err = res.expect_err(&log).to_string();
    assert!(err.contains(&format!("xirang.toml:{line}:1:")) && err.contains("symbolic link"), "{err}");
    assert!(!outside.join("store").exists(), "the bot wrote outside the repository: {}", outside.display());
    assert!(fx.remote_tip(BRANCH).is_none());
    fx.assert_user_tree_intact();
    let _ = std::fs::remove_dir_all(&outside);
    fx.cleanup();
}

/// Row 7 of issue #19 (second half): whatever a step writes, a bot commit that carries the token (in a
/// file, in a file name, even in a commit that a later one undoes) is never pushed.
#[test]
fn a_token_in_a_bot_commit_is_never_pushed() {
    let forge = FakeForge::start();
    let dir = std::env::temp_dir().join(format!("xirang-bot-test-token-in-commit-{}", std::process::id()));
    let secret = dir.join("stolen");
    // the first import's step writes the stolen token into the tree, the second's removes it again
    let steps = format!(
        r#"steps = [["sh", "-c", "if [ -e leak.txt ]; then rm leak.txt; else cat '{}' > leak.txt; fi"]]
check = ["true"]"#,
        secret.display()
    );
    let fx = fixture("token-in-commit", &forge.url, &steps);
    std::fs::write(&secret, format!("found it: {TOKEN}\n")).unwrap();
    write_release(&fx.upstream, "v2.2.0", &["neg(Tensor self) -> Tensor"]);
    let (res, log) = fx.run();
    let err = res.expect_err(&log).to_string();
    assert!(err.contains("leak.txt") && err.contains("token") && err.contains("nothing was pushed"), "{err}");
    assert!(fx.remote_tip("xirang-bot/pytorch-v2.2.0").is_none(), "a commit with the token was pushed");
    assert_eq!(forge.writes(), 0);

    // the token as a file name
    let mut opts = fx.options(Some(TOKEN), false);
    opts.config.steps = vec![vec!["sh".into(), "-c".into(), format!("touch \"$(cut -c11- '{}')\"", secret.display())]];
    let (res, log) = fx.run_with(&opts);
    let err = res.expect_err(&log).to_string();
    assert!(err.contains("token") && err.contains("***"), "{err}");
    assert!(fx.remote_tip("xirang-bot/pytorch-v2.2.0").is_none(), "a commit with the token was pushed");
    assert_eq!(forge.writes(), 0);
    let repo = git2::Repository::open(&fx.work).unwrap();
    assert_eq!(repo.worktrees().unwrap().len(), 0);
    fx.assert_user_tree_intact();
    fx.cleanup();
}

#[test]
fn a_branch_protected_against_force_push_is_a_clear_error_and_changes_nothing() {
    let forge = FakeForge::start();
    let fx = fixture("protected", &forge.url, DEFAULT_STEPS);
    let (res, log) = fx.run();
    assert!(matches!(res, Ok(Outcome::Published { pull: 1, .. })), "{res:?}\n{log}");
    let tip = fx.remote_tip(BRANCH);
    // the release is re-published, and the host now protects the bot's branch: the rebuilt branch's
    // force-push is refused in the push's report (`ng ... protected branch hook declined`)
    write_release(
        &fx.upstream,
        "v2.1.0",
        &["mul.Tensor(Tensor self, Tensor other) -> Tensor", "abs(Tensor self) -> Tensor"],
    );
    let repo = git2::Repository::open(&fx.work).unwrap();
    repo.remote_set_pushurl("origin", Some(&format!("{}/git/protected.git", forge.url))).unwrap();
    let patches = forge.count("PATCH", "/repos/acme/xirang/pulls");
    let (res, log) = fx.run();
    let err = res.expect_err(&log);
    let text = err.to_string();
    assert!(matches!(err, BotError::Push { .. }), "{err:?}");
    assert!(text.contains("protected branch hook declined") && text.contains("force-push"), "{text}");
    assert!(text.contains(BRANCH), "{text}");
    assert_eq!(forge.count("PATCH", "/repos/acme/xirang/pulls"), patches, "the PR was updated for an unpushed branch");
    assert_eq!(fx.remote_tip(BRANCH), tip);
    assert_eq!(repo.worktrees().unwrap().len(), 0);
    fx.assert_user_tree_intact();
    // protection lifted: the next run updates the pull request
    repo.remote_set_pushurl("origin", None).unwrap();
    let (res, log) = fx.run();
    assert!(matches!(res, Ok(Outcome::Published { pull: 1, updated: true, .. })), "{res:?}\n{log}");
    fx.cleanup();
}

#[test]
fn a_push_cut_off_midway_loses_nothing_and_the_next_run_recovers() {
    let forge = FakeForge::start();
    let fx = fixture("push-cut", &forge.url, DEFAULT_STEPS);
    let repo = git2::Repository::open(&fx.work).unwrap();
    repo.remote_set_pushurl("origin", Some(&format!("{}/git/cut.git", forge.url))).unwrap();
    let (res, log) = fx.run();
    let err = res.expect_err(&log);
    assert!(matches!(err, BotError::Push { .. }), "{err:?}");
    assert!(forge.count("POST", "/git/cut.git") >= 1, "the pack was never sent: {:?}", forge.requests());
    assert_eq!(forge.count("POST", "/repos/acme/xirang/pulls"), 0, "a PR was opened for an unpushed branch");
    assert!(fx.remote_tip(BRANCH).is_none());
    assert_eq!(repo.worktrees().unwrap().len(), 0);
    fx.assert_user_tree_intact();
    repo.remote_set_pushurl("origin", None).unwrap();
    let (res, log) = fx.run();
    assert!(matches!(res, Ok(Outcome::Published { pull: 1, updated: false, .. })), "{res:?}\n{log}");
    fx.assert_user_tree_intact();
    fx.cleanup();
}

#[test]
fn an_unreachable_forge_is_a_clear_error_after_bounded_retries() {
    // a port nothing listens on
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let fx = fixture("unreachable", &url, DEFAULT_STEPS);
    let (res, log) = fx.run();
    let err = res.expect_err(&log);
    let text = err.to_string();
    assert!(matches!(err, BotError::ApiExhausted { attempts: 3, .. }), "{err:?}");
    assert!(text.contains("GET /repos/acme/xirang/pulls"), "{text}");
    assert!(fx.remote_tip(BRANCH).is_none(), "pushed although the forge cannot be reached");
    fx.assert_user_tree_intact();
    fx.cleanup();
}
