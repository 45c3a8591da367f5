//! The bot end to end against each forge dialect's fake server (on 127.0.0.1, answering as the
//! forge's documented API does: its paths, token, paging, states and error bodies): open, nothing
//! to do, update, labels kept in step, supersede, a human commit stops the bot, a declined pull
//! request is not recreated. The same flow for every dialect.

use crate::bot_support as support;

use support::*;
use xirang_scan::bot::Outcome;

fn flow(dialect: Dialect) {
    let tag = format!("dialect-{}", dialect.forge());
    let forge = FakeForge::start_as(dialect);
    let fx = fixture_for(dialect, &tag, &forge.api_url(), DEFAULT_STEPS);
    let repo = dialect.repo_path();
    let r = |n: u64| if dialect == Dialect::Gitlab { format!("!{n}") } else { format!("#{n}") };

    // 1. open: the pull request, its labels created with their colours and put on it
    let (res, log) = fx.run();
    let outcome = res.unwrap_or_else(|e| panic!("{e}\n{log}"));
    let Outcome::Published { branch, pull: 1, updated: false, url, .. } = &outcome else {
        panic!("{outcome:?}\n{log}")
    };
    assert_eq!(branch, "xirang-bot/pytorch-v2.1.0");
    assert!(url.contains(".invalid/acme/xirang/"), "{url}");
    let pulls = forge.pulls();
    assert_eq!(pulls.len(), 1);
    assert_eq!(
        (pulls[0].head.as_str(), pulls[0].base.as_str(), pulls[0].state.as_str()),
        (branch.as_str(), "main", "open")
    );
    assert!(pulls[0].body.contains("# Drift report: pytorch v2.0.0 -> v2.1.0"), "{}", pulls[0].body);
    let sev = format!("drift:{}", meta_of(&pulls[0].body)["severity"].as_str().unwrap());
    assert!(
        pulls[0].labels.contains(&"xirang-bot".to_string()) && pulls[0].labels.contains(&sev),
        "{:?}",
        pulls[0].labels
    );
    assert_eq!(forge.count("POST", &format!("{repo}/labels")), 2, "{log}");
    assert!(
        log.contains(&format!(
            "opened {} {}",
            if dialect == Dialect::Gitlab { "merge request" } else { "pull request" },
            r(1)
        )),
        "{log}"
    );
    fx.assert_user_tree_intact();

    // 2. nothing changed upstream: no write to the forge
    let writes = forge.writes();
    let (res, log) = fx.run();
    assert_eq!(
        res.unwrap_or_else(|e| panic!("{e}\n{log}")),
        Outcome::Unchanged { branch: branch.clone(), pull: Some(1) }
    );
    assert_eq!(forge.writes(), writes, "a run with nothing to do wrote to the forge");

    // 3. the release re-published with another operator: the same pull request updated, the bot's
    //    stale labels removed, a human's kept
    forge.add_label(1, "drift:breaking");
    forge.add_label(1, "needs-review");
    write_release(
        &fx.upstream,
        "v2.1.0",
        &["mul.Tensor(Tensor self, Tensor other) -> Tensor", "abs(Tensor self) -> Tensor"],
    );
    let (res, log) = fx.run();
    let outcome = res.unwrap_or_else(|e| panic!("{e}\n{log}"));
    assert!(matches!(&outcome, Outcome::Published { pull: 1, updated: true, .. }), "{outcome:?}\n{log}");
    let pulls = forge.pulls();
    assert_eq!(pulls.len(), 1);
    assert!(pulls[0].body.contains("abs"), "{}", pulls[0].body);
    assert!(!pulls[0].labels.contains(&"drift:breaking".to_string()), "{:?}", pulls[0].labels);
    assert!(pulls[0].labels.contains(&"needs-review".to_string()), "{:?}", pulls[0].labels);

    // 4. a newer release: the next pull request, the older one closed as superseded
    write_release(
        &fx.upstream,
        "v2.2.0",
        &["mul.Tensor(Tensor self, Tensor other) -> Tensor", "neg(Tensor self) -> Tensor"],
    );
    let (res, log) = fx.run();
    let outcome = res.unwrap_or_else(|e| panic!("{e}\n{log}"));
    let Outcome::Published { branch: b2, pull: 2, updated: false, .. } = &outcome else { panic!("{outcome:?}\n{log}") };
    assert_eq!(b2, "xirang-bot/pytorch-v2.2.0");
    let pulls = forge.pulls();
    assert_eq!((pulls[0].state.as_str(), pulls[1].state.as_str()), ("closed", "open"));
    assert!(
        forge.comments().iter().any(|(n, b)| *n == 1 && b.contains(&format!("Superseded by {}", r(2)))),
        "{:?}",
        forge.comments()
    );

    // 5. a human commit on the bot's branch, and the upstream changes: the bot stops, says so once
    let remote = fx.remote_repo();
    let tip = remote.find_commit(fx.remote_tip(b2).unwrap()).unwrap();
    let human = git2::Signature::now("Grace Human", "grace@example.invalid").unwrap();
    let fix = remote
        .commit(Some(&format!("refs/heads/{b2}")), &human, &human, "fix by hand", &tip.tree().unwrap(), &[&tip])
        .unwrap();
    write_release(&fx.upstream, "v2.2.0", &["neg(Tensor self) -> Tensor"]);
    for round in 0..2 {
        let (res, log) = fx.run();
        let outcome = res.unwrap_or_else(|e| panic!("{e}\n{log}"));
        let Outcome::Stopped { pull, commented, .. } = &outcome else { panic!("{outcome:?}\n{log}") };
        assert_eq!((*pull, *commented), (Some(2), round == 0), "{log}");
        assert_eq!(fx.remote_tip(b2), Some(fix), "the bot pushed over a human commit");
    }
    let stops = forge.comments().into_iter().filter(|(_, b)| b.contains("xirang-bot stopped")).count();
    assert_eq!(stops, 1);

    // 6. a newer release again (its own branch), declined by a person: not recreated
    write_release(&fx.upstream, "v2.3.0", &["neg(Tensor self) -> Tensor", "exp(Tensor self) -> Tensor"]);
    let (res, log) = fx.run();
    let outcome = res.unwrap_or_else(|e| panic!("{e}\n{log}"));
    assert!(matches!(&outcome, Outcome::Published { pull: 3, updated: false, .. }), "{outcome:?}\n{log}");
    forge.close_by_hand(3, false);
    let writes = forge.writes();
    let (res, log) = fx.run();
    let outcome = res.unwrap_or_else(|e| panic!("{e}\n{log}"));
    assert_eq!(outcome, Outcome::Declined { branch: "xirang-bot/pytorch-v2.3.0".into(), pull: 3 }, "{log}");
    assert_eq!(forge.writes(), writes, "a declined run wrote to the forge");
    assert_eq!(forge.pulls().len(), 3);
    fx.assert_user_tree_intact();
    fx.cleanup();
}

#[test]
fn gitlab_merge_requests_end_to_end() {
    flow(Dialect::Gitlab);
}

#[test]
fn gitee_pull_requests_end_to_end() {
    flow(Dialect::Gitee);
}

#[test]
fn gitea_pull_requests_end_to_end() {
    flow(Dialect::Gitea);
}

#[test]
fn github_pull_requests_end_to_end() {
    flow(Dialect::Github);
}

/// The dialects' error bodies reach the user: GitLab's 401, a Gitee 401 that echoes the token from
/// its url parameter and a Gitea 401 that echoes the header (both redacted), each naming the request.
#[test]
fn a_rejected_token_is_a_clear_error_without_the_token() {
    for dialect in [Dialect::Gitlab, Dialect::Gitee, Dialect::Gitea] {
        let tag = format!("dialect-badtoken-{}", dialect.forge());
        let forge = FakeForge::start_as(dialect);
        let fx = fixture_for(dialect, &tag, &forge.api_url(), DEFAULT_STEPS);
        let (res, log) = fx.run_with(&fx.options(Some("expired-token-1234"), false));
        let err = res.expect_err(&log).to_string();
        assert!(err.contains("401") && (err.contains("Unauthorized") || err.contains("Bad credentials")), "{err}");
        assert!(err.contains("GET /") && (err.contains("/pulls") || err.contains("/merge_requests")), "{err}");
        assert!(!err.contains("expired-token-1234") && !log.contains("expired-token-1234"), "{err}\n{log}");
        fx.assert_user_tree_intact();
        fx.cleanup();
    }
}
