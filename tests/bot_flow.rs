//! The regeneration bot end to end: real git repositories (a bare remote and a working clone with
//! uncommitted user changes), a fake forge on loopback speaking GitHub's REST API, a tiny upstream.
//!
//! Policy under test: one branch per newest new version; a second run with no upstream change does
//! nothing; a changed upstream for the same version updates the open pull request; a newer version
//! opens the next pull request and closes the older one as superseded; a human commit stops the bot.

use crate::bot_support as support;

use support::*;
use xirang_scan::bot::{Outcome, Upstream};

#[test]
fn first_run_opens_a_pr_second_does_nothing_newer_version_supersedes() {
    let forge = FakeForge::start();
    let fx = fixture("lifecycle", &forge.url, DEFAULT_STEPS);
    let main_before = fx.remote_tip("main");

    // 1. v2.1.0 is new: one PR
    let (res, log) = fx.run();
    let outcome = res.unwrap_or_else(|e| panic!("{e}\n{log}"));
    let Outcome::Published { branch, pull, updated, check_passed, commit, .. } = &outcome else {
        panic!("{outcome:?}\n{log}")
    };
    assert_eq!(branch, "xirang-bot/pytorch-v2.1.0");
    assert_eq!((*pull, *updated, *check_passed), (1, false, Some(true)));
    assert_eq!(outcome.exit_code(), 0);
    assert_eq!(fx.remote_tip(branch).map(|o| o.to_string()).as_deref(), Some(commit.as_str()));
    assert_eq!(fx.remote_tip("main"), main_before, "the default branch was touched");
    // the branch holds the import and the regeneration step's output
    assert!(fx.remote_file(branch, "schemas/pytorch/v2.1.0/meta.json").is_some());
    assert_eq!(fx.remote_file(branch, "generated.txt").as_deref(), Some("regenerated\n"));
    assert!(fx.remote_file(branch, "notes.txt").is_none(), "the user's untracked file was committed");
    let remote = fx.remote_repo();
    let tip = remote.find_commit(fx.remote_tip(branch).unwrap()).unwrap();
    let msg = tip.message().unwrap().to_string();
    assert!(msg.starts_with("xirang-bot: import PyTorch v2.1.0"), "{msg}");
    assert!(msg.contains("Xirang-Bot-Key: "), "{msg}");
    assert_eq!(tip.author().email().ok(), Some("xirang-bot@users.noreply.invalid"));
    assert_eq!(tip.parent_id(0).unwrap(), fx.base_commit);

    let pulls = forge.pulls();
    assert_eq!(pulls.len(), 1);
    let pr = &pulls[0];
    assert_eq!((pr.head.as_str(), pr.base.as_str(), pr.state.as_str()), (branch.as_str(), "main", "open"));
    assert_eq!(pr.title, "xirang-bot: PyTorch v2.1.0");
    assert!(pr.body.contains("# Drift report: pytorch v2.0.0 -> v2.1.0"), "{}", pr.body);
    assert!(pr.body.contains("mul.Tensor"), "{}", pr.body);
    assert!(pr.body.contains("**Check:** passed"), "{}", pr.body);
    let meta = meta_of(&pr.body);
    assert_eq!(meta["versions"], serde_json::json!(["v2.1.0"]));
    assert_eq!(meta["previous"], "v2.0.0");
    assert_eq!(meta["check"], "passed");
    let key = meta["key"].as_str().unwrap().to_string();
    assert!(msg.contains(&key));
    // labels: created when missing, then added
    let sev = format!("drift:{}", meta["severity"].as_str().unwrap());
    assert!(pr.labels.contains(&"xirang-bot".to_string()) && pr.labels.contains(&sev), "{:?}", pr.labels);
    assert_eq!(forge.count("POST", "/repos/acme/xirang/labels"), 2);
    fx.assert_user_tree_intact();

    // 2. nothing changed upstream: nothing happens (no write to the forge, no push)
    let writes = forge.writes();
    let tip_before = fx.remote_tip(branch);
    let (res, log) = fx.run();
    let outcome = res.unwrap_or_else(|e| panic!("{e}\n{log}"));
    assert_eq!(outcome, Outcome::Unchanged { branch: branch.clone(), pull: Some(1) });
    assert_eq!(forge.writes(), writes, "the second run wrote to the forge");
    assert_eq!(fx.remote_tip(branch), tip_before);
    fx.assert_user_tree_intact();

    // 3. a newer release: the next PR (both versions), the older one closed as superseded
    write_release(
        &fx.upstream,
        "v2.2.0",
        &["mul.Tensor(Tensor self, Tensor other) -> Tensor", "neg(Tensor self) -> Tensor"],
    );
    let (res, log) = fx.run();
    let outcome = res.unwrap_or_else(|e| panic!("{e}\n{log}"));
    let Outcome::Published { branch: b2, pull: p2, updated: false, .. } = &outcome else { panic!("{outcome:?}") };
    assert_eq!((b2.as_str(), *p2), ("xirang-bot/pytorch-v2.2.0", 2));
    let pulls = forge.pulls();
    assert_eq!(pulls[0].state, "closed");
    assert_eq!(pulls[1].state, "open");
    assert_eq!(pulls[1].title, "xirang-bot: PyTorch v2.1.0, v2.2.0");
    assert!(pulls[1].body.contains("# Drift report: pytorch v2.0.0 -> v2.2.0"));
    assert!(forge.comments().iter().any(|(n, b)| *n == 1 && b.contains("Superseded by #2")));
    // one commit per version on top of main
    let remote = fx.remote_repo();
    let tip = remote.find_commit(fx.remote_tip(b2).unwrap()).unwrap();
    assert!(tip.message().unwrap().starts_with("xirang-bot: import PyTorch v2.2.0"));
    let parent = tip.parent(0).unwrap();
    assert!(parent.message().unwrap().starts_with("xirang-bot: import PyTorch v2.1.0"));
    assert_eq!(parent.parent_id(0).unwrap(), fx.base_commit);
    assert_eq!(fx.remote_tip("main"), main_before);
    fx.assert_user_tree_intact();
    // no leftover worktrees
    let repo = git2::Repository::open(&fx.work).unwrap();
    assert_eq!(repo.worktrees().unwrap().len(), 0);
    fx.cleanup();
}

#[test]
fn a_changed_upstream_updates_the_open_pr() {
    let forge = FakeForge::start();
    let fx = fixture("update", &forge.url, DEFAULT_STEPS);
    let (res, log) = fx.run();
    assert!(matches!(res, Ok(Outcome::Published { pull: 1, .. })), "{res:?}\n{log}");
    let key1 = meta_of(&forge.pulls()[0].body)["key"].clone();
    // labels from an earlier state of the pull request, and one a human put there
    forge.add_label(1, "drift:breaking");
    forge.add_label(1, "xirang-bot:check-failed");
    forge.add_label(1, "needs-review");
    // v2.1.0 re-released with another operator: same branch, same PR, new key
    write_release(
        &fx.upstream,
        "v2.1.0",
        &["mul.Tensor(Tensor self, Tensor other) -> Tensor", "abs(Tensor self) -> Tensor"],
    );
    let (res, log) = fx.run();
    let outcome = res.unwrap_or_else(|e| panic!("{e}\n{log}"));
    assert!(matches!(&outcome, Outcome::Published { pull: 1, updated: true, .. }), "{outcome:?}");
    let pulls = forge.pulls();
    assert_eq!(pulls.len(), 1);
    assert_ne!(meta_of(&pulls[0].body)["key"], key1);
    // labels kept in step: the update drops the bot's labels that no longer apply, keeps a human's
    let sev = format!("drift:{}", meta_of(&pulls[0].body)["severity"].as_str().unwrap());
    assert!(pulls[0].labels.contains(&sev), "{:?}", pulls[0].labels);
    assert_ne!(sev, "drift:breaking", "the fixture's update is expected not to be breaking");
    for stale in ["drift:breaking", "xirang-bot:check-failed"] {
        assert!(!pulls[0].labels.contains(&stale.to_string()), "{stale} left on: {:?}", pulls[0].labels);
    }
    assert!(pulls[0].labels.contains(&"needs-review".to_string()), "{:?}", pulls[0].labels);
    assert!(pulls[0].body.contains("abs"));
    assert_eq!(forge.count("PATCH", "/repos/acme/xirang/pulls/1"), 1);
    assert!(
        fx.remote_file("xirang-bot/pytorch-v2.1.0", "schemas/pytorch/v2.1.0/operators.jsonl").unwrap().contains("abs")
    );
    fx.assert_user_tree_intact();
    fx.cleanup();
}

#[test]
fn a_human_commit_on_the_branch_stops_the_bot() {
    let forge = FakeForge::start();
    let fx = fixture("human", &forge.url, DEFAULT_STEPS);
    let (res, log) = fx.run();
    assert!(matches!(res, Ok(Outcome::Published { pull: 1, .. })), "{res:?}\n{log}");
    // someone pushes a fix to the bot's branch
    let branch = "xirang-bot/pytorch-v2.1.0";
    let remote = fx.remote_repo();
    let tip = remote.find_commit(fx.remote_tip(branch).unwrap()).unwrap();
    let human = git2::Signature::now("Grace Human", "grace@example.invalid").unwrap();
    let fix = remote
        .commit(
            Some(&format!("refs/heads/{branch}")),
            &human,
            &human,
            "fix the kernels by hand",
            &tip.tree().unwrap(),
            &[&tip],
        )
        .unwrap();
    // and the upstream changes, so the bot would otherwise push
    write_release(&fx.upstream, "v2.1.0", &["abs(Tensor self) -> Tensor"]);
    let (res, log) = fx.run();
    let outcome = res.unwrap_or_else(|e| panic!("{e}\n{log}"));
    let Outcome::Stopped { commit, pull, commented, .. } = &outcome else { panic!("{outcome:?}") };
    assert_eq!((commit.as_str(), *pull, *commented), (fix.to_string().as_str(), Some(1), true));
    assert_eq!(outcome.exit_code(), 3);
    assert_eq!(fx.remote_tip(branch), Some(fix), "the bot pushed over a human commit");
    let stops: Vec<_> = forge.comments().into_iter().filter(|(_, b)| b.contains("xirang-bot stopped")).collect();
    assert_eq!(stops.len(), 1);
    assert!(stops[0].1.contains("Grace Human"));
    // the next scheduled run does not comment again
    let (res, _) = fx.run();
    assert!(matches!(res, Ok(Outcome::Stopped { commented: false, .. })), "{res:?}");
    assert_eq!(forge.comments().len(), 1);
    assert_eq!(forge.pulls().len(), 1);
    fx.assert_user_tree_intact();
    fx.cleanup();
}

#[test]
fn dry_run_prints_branch_commit_and_pr_and_changes_nothing() {
    let forge = FakeForge::start();
    let fx = fixture("dry", &forge.url, DEFAULT_STEPS);
    // no token needed for a dry run
    let (res, log) = fx.run_with(&fx.options(None, true));
    let outcome = res.unwrap_or_else(|e| panic!("{e}\n{log}"));
    let Outcome::DryRun { branch, message, title, body, labels, .. } = &outcome else { panic!("{outcome:?}") };
    assert_eq!(branch, "xirang-bot/pytorch-v2.1.0");
    assert!(message.contains("Xirang-Bot-Key: "));
    assert_eq!(title, "xirang-bot: PyTorch v2.1.0");
    assert!(body.contains("# Drift report: pytorch v2.0.0 -> v2.1.0"));
    assert!(labels.contains(&"xirang-bot".to_string()));
    // honest: nothing was regenerated or checked, and the configured check is named as not run
    assert!(body.contains("**Dry run**"), "{body}");
    assert!(
        !body.contains("), regenerated") && !body.contains("checked.") && !body.contains("not configured"),
        "{body}"
    );
    assert!(body.contains("**Check:** not run (dry run): `sh -c echo checked`"), "{body}");
    assert!(forge.requests().is_empty(), "a dry run called the forge");
    assert!(fx.remote_tip(branch).is_none(), "a dry run pushed");
    let repo = git2::Repository::open(&fx.work).unwrap();
    assert!(repo.find_branch(branch, git2::BranchType::Local).is_err(), "a dry run left a local branch");
    assert_eq!(repo.worktrees().unwrap().len(), 0);
    fx.assert_user_tree_intact();
    fx.cleanup();
}

/// Commits release files in PyTorch's source layout and tags each `vX.Y.Z`.
fn make_pytorch_clone(dir: &std::path::Path, releases: &[(&str, &[&str])]) {
    let mut opts = git2::RepositoryInitOptions::new();
    opts.initial_head("main");
    let repo = git2::Repository::init_opts(dir, &opts).unwrap();
    let sig = git2::Signature::now("upstream", "u@example.invalid").unwrap();
    for (tag, extra) in releases {
        let native = dir.join("aten/src/ATen/native");
        std::fs::create_dir_all(&native).unwrap();
        std::fs::write(native.join("native_functions.yaml"), native_functions(extra)).unwrap();
        std::fs::write(native.join("tags.yaml"), "- tag: pointwise\n  desc: elementwise\n").unwrap();
        std::fs::create_dir_all(dir.join("tools/autograd")).unwrap();
        std::fs::write(dir.join("tools/autograd/derivatives.yaml"), DERIVATIVES).unwrap();
        let mut idx = repo.index().unwrap();
        idx.add_all(["*"], git2::IndexAddOption::DEFAULT, None).unwrap();
        idx.write().unwrap();
        let tree = repo.find_tree(idx.write_tree().unwrap()).unwrap();
        let parents: Vec<git2::Commit> = repo.head().ok().and_then(|h| h.peel_to_commit().ok()).into_iter().collect();
        let refs: Vec<&git2::Commit> = parents.iter().collect();
        let c = repo.commit(Some("HEAD"), &sig, &sig, tag, &tree, &refs).unwrap();
        repo.tag_lightweight(tag, &repo.find_object(c, None).unwrap(), false).unwrap();
    }
    // a pre-release tag is not a release
    let head = repo.head().unwrap().peel_to_commit().unwrap();
    repo.tag_lightweight("v2.3.0-rc1", head.as_object(), false).unwrap();
}

#[test]
fn new_versions_from_a_pytorch_clones_tags() {
    let forge = FakeForge::start();
    let fx = fixture("gittags", &forge.url, DEFAULT_STEPS);
    let clone = fx.dir.join("pytorch");
    make_pytorch_clone(&clone, &[("v2.0.0", &[]), ("v2.1.0", &["neg(Tensor self) -> Tensor"])]);
    let mut opts = fx.options(Some(TOKEN), false);
    opts.upstream = Upstream::Git(clone.clone());
    let (res, log) = fx.run_with(&opts);
    let outcome = res.unwrap_or_else(|e| panic!("{e}\n{log}"));
    assert!(matches!(&outcome, Outcome::Published { pull: 1, .. }), "{outcome:?}");
    assert!(forge.pulls()[0].body.contains("neg"));
    assert!(log.contains("git:v2.1.0"), "{log}");
    let (res, _) = fx.run_with(&opts);
    assert!(matches!(res, Ok(Outcome::Unchanged { .. })), "{res:?}");
    fx.assert_user_tree_intact();
    fx.cleanup();
}

#[test]
fn new_versions_from_the_package_index_json_api() {
    use std::io::Write;
    let forge = FakeForge::start();
    let fx = fixture("pypi", &forge.url, DEFAULT_STEPS);
    // a tiny torch wheel with the operator files under torchgen/packaged/
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut z = zip::ZipWriter::new(&mut buf);
        let o = zip::write::SimpleFileOptions::default();
        z.start_file("torchgen/packaged/ATen/native/native_functions.yaml", o).unwrap();
        z.write_all(native_functions(&["sub.Tensor(Tensor self, Tensor other) -> Tensor"]).as_bytes()).unwrap();
        z.start_file("torchgen/packaged/ATen/native/tags.yaml", o).unwrap();
        z.write_all(b"- tag: pointwise\n  desc: elementwise\n").unwrap();
        z.start_file("torchgen/packaged/autograd/derivatives.yaml", o).unwrap();
        z.write_all(DERIVATIVES.as_bytes()).unwrap();
        // the C++ extension headers a wheel ships: the bot imports the C++ interface too
        z.start_file("torch/include/c10/core/Allocator.h", o).unwrap();
        z.write_all(b"namespace c10 {\nstruct C10_API Allocator {\n  virtual DataPtr allocate(size_t n) = 0;\n};\n}\n")
            .unwrap();
        z.start_file("torch/include/c10/util/Other.h", o).unwrap();
        z.write_all(b"struct NotInterface { virtual void f(); };\n").unwrap();
        z.finish().unwrap();
    }
    let wheel = buf.into_inner();
    let sha = {
        use sha2::Digest;
        sha2::Sha256::digest(&wheel).iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    forge.serve_file("/files/torch-2.1.0-cp311-none-any.whl", wheel.clone());
    let doc = serde_json::json!({"info": {"name": "torch"}, "releases": {
        "2.0.0": [],
        "2.1.0": [
            {"filename": "torch-2.1.0-cp311-none-any.whl", "url": format!("{}/files/torch-2.1.0-cp311-none-any.whl", forge.url),
             "digests": {"sha256": sha}, "size": wheel.len(), "yanked": false},
            {"filename": "torch-2.1.0-cp311-cp311-manylinux1_x86_64.whl", "url": format!("{}/files/big.whl", forge.url),
             "digests": {"sha256": "00"}, "size": 900_000_000u64, "yanked": false}],
        "2.2.0rc1": [{"filename": "torch-2.2.0rc1-x.whl", "url": "http://127.0.0.1:1/x", "digests": {"sha256": "00"}, "size": 1}]}});
    forge.serve_file("/pypi/torch/json", doc.to_string().into_bytes());
    let mut opts = fx.options(None, true);
    opts.upstream = Upstream::Pypi(format!("{}/pypi/torch/json", forge.url));
    let (res, log) = fx.run_with(&opts);
    let outcome = res.unwrap_or_else(|e| panic!("{e}\n{log}"));
    let Outcome::DryRun { branch, body, .. } = &outcome else { panic!("{outcome:?}") };
    assert_eq!(branch, "xirang-bot/pytorch-v2.1.0");
    assert!(body.contains("sub.Tensor"), "{body}");
    assert!(body.contains("wheel:torch-2.1.0-cp311-none-any.whl"), "{body}");
    // only the interface headers are read (c10/util is not one)
    assert!(log.contains("imported the C++ interface of v2.1.0: 1 classes"), "{log}");
    assert_eq!(forge.count("GET", "/files/big.whl"), 0, "downloaded a larger wheel than needed");
    fx.assert_user_tree_intact();
    fx.cleanup();
}

#[test]
fn the_shipped_config_and_workflow_are_usable() {
    let root = xirang_tests::repo_root();
    let c = xirang_scan::bot::BotConfig::load(&root).unwrap();
    assert_eq!(
        (c.base.as_str(), c.branch_prefix.as_str(), c.token_env.as_str()),
        ("main", "xirang-bot", "XIRANG_BOT_TOKEN")
    );
    let wf = std::fs::read_to_string(root.join(".github/workflows/xirang-bot.yml")).unwrap();
    for needle in [
        "schedule:",
        "cron:",
        "xirang-scan bot",
        "XIRANG_BOT_TOKEN",
        "--features https",
        "pull-requests: write",
        // the shell that starts the bot does not keep the token in its environment either
        "exec env -u XIRANG_BOT_TOKEN XIRANG_BOT_TOKEN_VIA_STDIN=1",
    ] {
        assert!(wf.contains(needle), "workflow lacks {needle}");
    }
    // no silent fallback to the workflow's own token (its pull requests trigger no CI)
    let token = wf.lines().find(|l| l.trim_start().starts_with("XIRANG_BOT_TOKEN:")).expect("the token's env line");
    assert!(!token.contains("||"), "the workflow falls back to another token: {token}");
    assert!(wf.contains("the secret XIRANG_BOT_TOKEN is not set"), "a run without the secret must say which to set");
}

#[test]
fn a_declined_pr_is_not_recreated_for_that_version() {
    let forge = FakeForge::start();
    let fx = fixture("declined", &forge.url, DEFAULT_STEPS);
    let (res, log) = fx.run();
    assert!(matches!(res, Ok(Outcome::Published { pull: 1, .. })), "{res:?}\n{log}");
    // a person closes it without merging: the next scheduled run leaves it closed
    forge.close_by_hand(1, false);
    let writes = forge.writes();
    let (res, log) = fx.run();
    let outcome = res.unwrap_or_else(|e| panic!("{e}\n{log}"));
    assert_eq!(outcome, Outcome::Declined { branch: "xirang-bot/pytorch-v2.1.0".into(), pull: 1 });
    assert_eq!(outcome.exit_code(), 0);
    assert!(log.contains("closed without merging"), "{log}");
    assert_eq!(forge.count("POST", "/repos/acme/xirang/pulls"), 1);
    assert_eq!(forge.writes(), writes, "a declined run wrote to the forge");
    fx.assert_user_tree_intact();
    // a newer release is a new question: its own pull request
    write_release(
        &fx.upstream,
        "v2.2.0",
        &["mul.Tensor(Tensor self, Tensor other) -> Tensor", "neg(Tensor self) -> Tensor"],
    );
    let (res, log) = fx.run();
    let outcome = res.unwrap_or_else(|e| panic!("{e}\n{log}"));
    assert!(matches!(&outcome, Outcome::Published { pull: 2, updated: false, .. }), "{outcome:?}\n{log}");
    fx.cleanup();
}

#[test]
fn a_merged_pr_is_not_taken_for_a_declined_one() {
    let forge = FakeForge::start();
    let fx = fixture("merged", &forge.url, DEFAULT_STEPS);
    let (res, log) = fx.run();
    assert!(matches!(res, Ok(Outcome::Published { pull: 1, .. })), "{res:?}\n{log}");
    forge.close_by_hand(1, true);
    let (res, log) = fx.run();
    let outcome = res.unwrap_or_else(|e| panic!("{e}\n{log}"));
    assert!(!matches!(outcome, Outcome::Declined { .. }), "{outcome:?}\n{log}");
    fx.cleanup();
}

#[test]
fn requests_go_through_the_configured_proxy() {
    // the forge's host does not resolve: only the proxy (the fake server) can answer
    let forge = FakeForge::start();
    let steps = format!("proxy = \"{}\"\n{DEFAULT_STEPS}", forge.url);
    let fx = fixture("proxy", "http://forge.invalid", &steps);
    let (res, log) = fx.run();
    assert!(matches!(res, Ok(Outcome::Published { pull: 1, .. })), "{res:?}\n{log}");
    let proxied = forge.proxied();
    assert!(!proxied.is_empty() && proxied.iter().all(|h| h == "forge.invalid"), "{proxied:?}");
    assert_eq!(forge.pulls().len(), 1);
    fx.cleanup();
}

/// Commits `files` (path, text) to the fixture's main, pushes it, and returns the new tip (the
/// user's uncommitted work stays as it was).
fn commit_to_main(fx: &Fixture, files: &[(&str, &str)]) -> git2::Oid {
    let repo = git2::Repository::open(&fx.work).unwrap();
    let head = repo.head().unwrap().peel_to_commit().unwrap();
    let mut tb = repo.treebuilder(Some(&head.tree().unwrap())).unwrap();
    for (path, text) in files {
        assert!(!path.contains('/'), "top-level files only");
        // the bot reads its configuration from the working tree, the adapter's files from the base
        std::fs::write(fx.work.join(path), text).unwrap();
        let blob = repo.blob(text.as_bytes()).unwrap();
        tb.insert(path, blob, 0o100644).unwrap();
    }
    let tree = repo.find_tree(tb.write().unwrap()).unwrap();
    let sig = git2::Signature::now("Ada Maintainer", "ada@example.invalid").unwrap();
    let c = repo.commit(Some("refs/heads/main"), &sig, &sig, "adapter files", &tree, &[&head]).unwrap();
    repo.find_remote("origin").unwrap().push(&["refs/heads/main:refs/heads/main"], None).unwrap();
    c
}

#[test]
fn the_backend_yaml_and_allow_list_of_bot_config_join_the_report() {
    let forge = FakeForge::start();
    let fx = fixture("joined", &forge.url, DEFAULT_STEPS);
    // the new release changes add.Tensor, which the adapter's backend yaml lists
    let nf = native_functions(&["mul.Tensor(Tensor self, Tensor other) -> Tensor"])
        .replace("Scalar alpha=1) -> Tensor", "Scalar alpha=1, bool fast=False) -> Tensor");
    std::fs::write(fx.upstream.join("v2.1.0/native_functions.yaml"), nf).unwrap();
    let der = DERIVATIVES.replace("Scalar alpha=1) -> Tensor", "Scalar alpha=1, bool fast=False) -> Tensor");
    std::fs::write(fx.upstream.join("v2.1.0/derivatives.yaml"), der).unwrap();
    let toml = std::fs::read_to_string(fx.work.join("xirang.toml")).unwrap();
    let toml = toml.replace("[bot]\n", "[bot]\nbackend_yaml = [\"npu_native_functions.yaml\"]\n");
    let backend = "backend: NPU\ncpp_namespace: at_npu::native\nsupported:\n  - add.Tensor\n";
    commit_to_main(&fx, &[("xirang.toml", &toml), ("npu_native_functions.yaml", backend)]);

    let dry = |fx: &Fixture| -> String {
        let opts = fx.options(None, true);
        let (res, log) = fx.run_with(&opts);
        match res.unwrap_or_else(|e| panic!("{e}\n{log}")) {
            Outcome::DryRun { body, .. } => body,
            o => panic!("{o:?}\n{log}"),
        }
    };
    let body = dry(&fx);
    assert!(body.contains("npu_native_functions.yaml:4"), "the backend yaml's entry is not named:\n{body}");
    // the change's rule and fingerprint, as the report lists them
    let line = body.lines().find(|l| l.contains("npu_native_functions.yaml:4")).unwrap().to_string();
    let rule = line.split('`').find(|w| w.starts_with("arg.")).unwrap_or_else(|| panic!("{line}")).to_string();
    let fp = body
        .split('`')
        .find(|w| w.len() == 32 && w.chars().all(|c| c.is_ascii_hexdigit()))
        .unwrap_or_else(|| panic!("no fingerprint:\n{body}"))
        .to_string();

    // the adapter accepts it in its allow list: the pull request says so
    let allow = format!(
        "{{\"allow\": [{{\"rule\": \"{rule}\", \"fingerprint\": \"{fp}\", \"subject\": \"add.Tensor\", \
         \"reason\": \"our kernel ignores fast\", \"expires\": \"2999-12-31\"}}]}}"
    );
    let toml = toml.replace("[bot]\n", "[bot]\nallow = \"drift-allow.json\"\n");
    commit_to_main(&fx, &[("xirang.toml", &toml), ("drift-allow.json", &allow)]);
    let body = dry(&fx);
    assert!(body.contains("## Allow list"), "{body}");
    assert!(body.contains("our kernel ignores fast") || body.contains(&fp), "{body}");
    assert!(!body.contains("npu_native_functions.yaml:4"), "an accepted change is still listed to edit:\n{body}");

    // a path that leaves the repository, or a file the base branch lacks: positioned errors
    let bad = toml.replace("allow = \"drift-allow.json\"", "allow = \"missing.json\"");
    commit_to_main(&fx, &[("xirang.toml", &bad)]);
    let (res, log) = fx.run_with(&fx.options(None, true));
    let e = res.expect_err(&log).to_string();
    assert!(e.contains("xirang.toml:") && e.contains("missing.json") && e.contains("base branch"), "{e}");
    let repo = git2::Repository::open(&fx.work).unwrap();
    assert_eq!(repo.head().unwrap().shorthand().ok(), Some("main"));
    fx.cleanup();
}

#[test]
fn the_setup_guide_configurations_parse() {
    let guide = std::fs::read_to_string(xirang_tests::repo_root().join("docs/bot.md")).unwrap();
    let mut blocks = 0;
    for block in guide.split("```toml\n").skip(1) {
        let toml = block.split("```").next().unwrap();
        xirang_scan::bot::BotConfig::parse(toml).unwrap_or_else(|e| panic!("docs/bot.md:\n{toml}\n{e}"));
        blocks += 1;
    }
    assert!(blocks >= 4, "{blocks} toml blocks");
    // the commands it gives exist with the options it names
    for needle in
        ["bot --dry-run", "bot --headers ascend --from-folder", "--features https", "XIRANG_BOT_TOKEN_VIA_STDIN=1"]
    {
        assert!(guide.contains(needle), "{needle}");
    }
    assert!(xirang_tests::repo_root().join(".github/workflows/ci.yml").is_file());
}
