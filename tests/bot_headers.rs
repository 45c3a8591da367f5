//! The bot's second source of updates: a vendor's driver header releases in a folder (real Ascend
//! releases of the corpus). A new release becomes a header snapshot, `[vendor] headers` of
//! xirang.toml points at it so that the steps regenerate the driver bindings from it, and the pull
//! request carries the header drift report.

use crate::bot_support as support;

use support::*;
use xirang_scan::bot::{Outcome, Upstream};
use xirang_scan::snapshot::{HeaderSnapshot, Store};
use xirang_scan::version::Version;
use xirang_tests::corpus;

const VENDOR_TABLE: &str = "\n[vendor]\nname = \"ascend\"\n# the header snapshot the bindings are generated from\nheaders = \"v2.11.0.post3\"   # kept in step by the bot\nlibrary = \"libascendcl.so\"\n";

#[test]
fn a_new_ascend_header_release_opens_a_pull_request_with_the_header_drift() {
    let forge = FakeForge::start();
    let fx = fixture("headers", &forge.url, DEFAULT_STEPS);
    // the adapter: its store holds ascend v2.11.0.post3, its xirang.toml targets it
    let repo = git2::Repository::open(&fx.work).unwrap();
    let ascend = corpus().join("ascend");
    let v11 = Version::parse("v2.11.0.post3").unwrap();
    let snap = HeaderSnapshot::scan("ascend", &ascend.join("v2.11.0.post3"), &v11).unwrap();
    Store::new(fx.work.join("schemas")).write_headers(&snap).unwrap();
    let toml = std::fs::read_to_string(fx.work.join("xirang.toml")).unwrap() + VENDOR_TABLE;
    std::fs::write(fx.work.join("xirang.toml"), &toml).unwrap();
    let mut idx = repo.index().unwrap();
    idx.add_all(["schemas/*", "xirang.toml"], git2::IndexAddOption::DEFAULT, None).unwrap();
    idx.write().unwrap();
    let tree = repo.find_tree(idx.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("Ada Maintainer", "ada@example.invalid").unwrap();
    let head = repo.head().unwrap().peel_to_commit().unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, "ascend v2.11.0.post3", &tree, &[&head]).unwrap();
    repo.find_remote("origin").unwrap().push(&["refs/heads/main:refs/heads/main"], None).unwrap();

    // the vendor's release folder: v2.11.0.post3 and the new v2.12.0.post3
    let up = fx.dir.join("ascend-releases");
    std::fs::create_dir_all(&up).unwrap();
    for v in ["v2.11.0.post3", "v2.12.0.post3"] {
        std::os::unix::fs::symlink(ascend.join(v), up.join(v)).unwrap();
    }
    let mut opts = fx.options(Some(TOKEN), false);
    opts.upstream = Upstream::Headers { vendor: "ascend".into(), dir: up.clone() };

    let (res, log) = fx.run_with(&opts);
    let outcome = res.unwrap_or_else(|e| panic!("{e}\n{log}"));
    let Outcome::Published { branch, pull: 1, updated: false, .. } = &outcome else { panic!("{outcome:?}\n{log}") };
    assert_eq!(branch, "xirang-bot/ascend-headers-v2.12.0.post3");
    assert!(log.contains("xirang.toml [vendor] headers: v2.11.0.post3 -> v2.12.0.post3"), "{log}");
    // the branch: the snapshot, the target moved (comments and layout kept), the steps' output
    assert!(fx.remote_file(branch, "schemas/ascend/v2.12.0.post3/meta.json").is_some());
    let branch_toml = fx.remote_file(branch, "xirang.toml").unwrap();
    assert_eq!(branch_toml, toml.replace("headers = \"v2.11.0.post3\"", "headers = \"v2.12.0.post3\""));
    assert_eq!(fx.remote_file(branch, "generated.txt").as_deref(), Some("regenerated\n"));
    assert!(fx.remote_file(branch, "schemas/pytorch/v2.1.0/meta.json").is_none(), "a PyTorch import in a header PR");
    let remote = fx.remote_repo();
    let tip = remote.find_commit(fx.remote_tip(branch).unwrap()).unwrap();
    assert!(
        tip.message().unwrap().starts_with("xirang-bot: import ascend headers v2.12.0.post3"),
        "{:?}",
        tip.message()
    );
    // the pull request: title, the header drift report, its severity label
    let pr = &forge.pulls()[0];
    assert_eq!(pr.title, "xirang-bot: ascend headers v2.12.0.post3");
    assert!(pr.body.contains("ascend headers v2.12.0.post3 imported into the snapshot store"), "{}", pr.body);
    assert!(pr.body.contains("# Drift report: ascend headers v2.11.0.post3 -> v2.12.0.post3"), "{}", pr.body);
    assert!(pr.body.contains("`header."), "no header rule in the report:\n{}", pr.body);
    let meta = meta_of(&pr.body);
    assert_eq!(meta["versions"], serde_json::json!(["v2.12.0.post3"]));
    assert_eq!(meta["previous"], "v2.11.0.post3");
    assert_eq!(meta["severity"], "breaking", "v2.11.0.post3 -> v2.12.0.post3 removes declarations");
    let sev = format!("drift:{}", meta["severity"].as_str().unwrap());
    assert!(pr.labels.contains(&sev), "{:?}", pr.labels);

    // nothing new: nothing done; the PyTorch track is a separate question with its own branch
    let writes = forge.writes();
    let (res, log) = fx.run_with(&opts);
    assert!(matches!(res, Ok(Outcome::Unchanged { pull: Some(1), .. })), "{res:?}\n{log}");
    assert_eq!(forge.writes(), writes);
    let (res, log) = fx.run();
    let outcome = res.unwrap_or_else(|e| panic!("{e}\n{log}"));
    assert!(matches!(&outcome, Outcome::Published { pull: 2, .. }), "{outcome:?}\n{log}");
    assert_eq!(forge.pulls()[0].state, "open", "a PyTorch pull request superseded the header one");
    fx.cleanup();
}
