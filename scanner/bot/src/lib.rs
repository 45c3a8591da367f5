//! The regeneration bot (`xirang-scan bot`): finds upstream PyTorch releases that the snapshot store
//! of the base branch lacks, imports them in a separate git worktree, runs the regeneration steps and
//! the check there, commits on a deterministic branch, pushes it and opens (or updates) a pull request
//! whose body is the drift report.
//!
//! Policies (see ARCHITECTURE.md, the `bot/` entry of "The scanner above the IR"):
//! - one branch per newest new version, `<prefix>/pytorch-vX.Y.Z`, built on the base branch's tip, with
//!   one commit per imported version; a newer release opens the next pull request (covering every
//!   version the base still lacks) and closes the older bot pull requests as superseded;
//! - idempotency: every bot commit carries `Xirang-Bot-Key: <sha256 of the source files>`; when the
//!   branch tip and the open pull request already carry the key, the run does nothing;
//! - a commit on the bot branch that is not the bot's (author or footer) stops the bot: it comments on
//!   the pull request once and pushes nothing;
//! - a failing regeneration step is an error (nothing pushed); a failing check still pushes and opens
//!   the pull request, labelled `xirang-bot:check-failed`, with the output in the body.

pub mod cli;
pub mod config;
pub mod detect;
pub mod forge;
pub mod gitops;

pub(crate) use xirang_ir::error::SourceFile;
pub(crate) use xirang_ir::version;
pub(crate) use xirang_store::{cxx_snapshot, fsio, snapshot, source};

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::snapshot::{PytorchSnapshot, Store};
use crate::version::Version;
pub use config::BotConfig;
pub use detect::Upstream;
use forge::{Forge, Http, LabelSpec};
use gitops::{BranchState, Worktree};
use xirang_drift as diff;

/// Marker that opens the hidden machine-readable block of a bot pull request body.
pub const META_MARKER: &str = "<!-- xirang-bot:meta ";
/// Marker of the comment the bot leaves when a human commit stops it.
const STOP_MARKER: &str = "<!-- xirang-bot:stopped ";
/// Bodies longer than this are cut (GitHub's limit is 65536 characters).
const MAX_BODY: usize = 60_000;
/// Lines of command output kept in the body and in errors.
const TAIL_LINES: usize = 40;

/// Everything the bot can fail with.
#[derive(Debug, thiserror::Error)]
pub enum BotError {
    #[error("{0}")]
    Config(String),
    /// A bad value of a `[bot]` key, with its place in xirang.toml when it was read from there.
    #[error("{}[bot] {key}: {message}", config::where_in_file(position))]
    ConfigAt { key: String, position: Option<config::Position>, message: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Reading the store, the sources or a snapshot.
    #[error(transparent)]
    Store(#[from] xirang_store::Error),
    /// Building a drift report (rules, allow list, header or C++ interface reports).
    #[error(transparent)]
    Drift(#[from] xirang_drift::Error),
    /// Building a PyTorch comparison (adapter index, coverage, custom operators).
    #[error(transparent)]
    Compare(#[from] xirang_compare::Error),
    #[error("git: {0}")]
    Git(String),
    #[error("push of `{branch}` to `{remote}` failed: {message}")]
    Push { branch: String, remote: String, message: String },
    #[error("{what}: HTTP {status}: {message}")]
    Api { what: String, status: u16, message: String },
    #[error("{what}: gave up after {attempts} attempt(s): {last}")]
    ApiExhausted { what: String, attempts: u32, last: String },
    #[error("regeneration step `{command}` failed ({status}); nothing was pushed\n{output}")]
    Step { command: String, status: String, output: String },
    #[error("upstream: {0}")]
    Upstream(String),
    #[error("refusing to touch {0}")]
    Refused(String),
    /// The forge token is in what would be pushed (the places name files and commits, never the token).
    #[error(
        "refusing to push `{branch}`: the forge token is in {}; nothing was pushed (the token is not shown)",
        places.join(", ")
    )]
    TokenInCommits { branch: String, places: Vec<String> },
}

impl BotError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        BotError::Io { path: path.into(), source }
    }
}

impl From<git2::Error> for BotError {
    fn from(e: git2::Error) -> Self {
        BotError::Git(e.message().to_string())
    }
}

/// The bot's progress log: one line per event, with every secret replaced by `***`.
pub struct Log<'a> {
    out: &'a mut dyn Write,
    secrets: Vec<String>,
}

impl<'a> Log<'a> {
    pub fn new(out: &'a mut dyn Write, secrets: &[&str]) -> Log<'a> {
        // a secret as sent in a url (Gitee's `access_token` parameter) too, when encoding changes it
        let mut all: Vec<String> = Vec::new();
        for s in secrets.iter().filter(|s| s.len() >= 4) {
            all.push(s.to_string());
            let e = forge::enc(s);
            if e != *s {
                all.push(e);
            }
        }
        Log { out, secrets: all }
    }
    pub fn redact(&self, s: &str) -> String {
        let mut s = s.to_string();
        for secret in &self.secrets {
            s = s.replace(secret.as_str(), "***");
        }
        s
    }
    pub fn line(&mut self, s: &str) {
        let s = self.redact(s);
        let _ = writeln!(self.out, "{s}");
    }
}

/// One run of the bot.
#[derive(Debug, Clone)]
pub struct Options {
    /// A path inside the user's clone (its remote, base branch and object database are used; its
    /// working tree is not).
    pub repo: PathBuf,
    pub config: BotConfig,
    pub upstream: Upstream,
    /// The forge token (`None`: only a dry run works).
    pub token: Option<String>,
    pub dry_run: bool,
    /// The executable that a step named `xirang-scan` runs (normally `std::env::current_exe()`).
    pub self_exe: PathBuf,
}

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandResult {
    pub command: String,
    pub ok: bool,
    /// `exit 0`, `exit 101`, `killed by a signal`, `could not start: ...`.
    pub status: String,
    /// The last lines of stdout + stderr.
    pub tail: String,
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// No upstream release is missing from the base branch's store.
    UpToDate,
    /// The branch and its open pull request already carry this idempotency key.
    Unchanged { branch: String, pull: Option<u64> },
    /// A pull request was opened (or updated, when one was open for the branch).
    Published { branch: String, commit: String, pull: u64, url: String, updated: bool, check_passed: Option<bool> },
    /// A commit that is not the bot's is on the branch: nothing pushed.
    Stopped { branch: String, commit: String, author: String, pull: Option<u64>, commented: bool },
    /// The pull request for these versions was closed without merging: not recreated.
    Declined { branch: String, pull: u64 },
    /// `--dry-run`: what would be pushed and opened.
    DryRun { branch: String, commit: String, message: String, title: String, body: String, labels: Vec<String> },
}

impl Outcome {
    /// Exit status of `xirang-scan bot`: 0 done, 3 stopped by a human commit, 4 pull request published
    /// with a failing check.
    pub fn exit_code(&self) -> u8 {
        match self {
            Outcome::Stopped { .. } => 3,
            Outcome::Published { check_passed: Some(false), .. } => 4,
            _ => 0,
        }
    }
}

/// The idempotency key of a set of releases: sha256 over their versions and source hashes.
pub fn idempotency_key(releases: &[(Version, String)]) -> String {
    let mut h = Sha256::new();
    h.update(b"xirang-bot-key-v1\n");
    for (v, hash) in releases {
        h.update(format!("{v} {hash}\n").as_bytes());
    }
    crate::source::hex(&h.finalize())
}

/// Whether `needle` (not empty) occurs in `haystack`.
pub(crate) fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// Runs one command (argv) in `dir`; the program `xirang-scan` is `self_exe`. The token variable, any
/// other variable whose value holds the token, and the marker of a token handed over on stdin are
/// removed from the child's environment, and its stdin is empty. `store` is the snapshot store's path,
/// handed over as `$XIRANG_STORE`.
fn run_command(argv: &[String], dir: &Path, store: &Path, opts: &Options, log: &Log<'_>) -> CommandResult {
    let command = argv.join(" ");
    let Some((prog, args)) = argv.split_first() else {
        return CommandResult { command, ok: true, status: "no command".into(), tail: String::new() };
    };
    let program = if prog == "xirang-scan" { opts.self_exe.clone() } else { PathBuf::from(prog) };
    let mut cmd = std::process::Command::new(&program);
    cmd.args(args)
        .current_dir(dir)
        .env("XIRANG_STORE", store)
        .env_remove(&opts.config.token_env)
        .env_remove(cli::TOKEN_STDIN_ENV)
        .stdin(std::process::Stdio::null());
    if let Some(t) = opts.token.as_deref().filter(|t| !t.is_empty()) {
        for (k, v) in std::env::vars_os() {
            if contains(v.as_encoded_bytes(), t.as_bytes()) {
                cmd.env_remove(k);
            }
        }
    }
    let out = cmd.output();
    match out {
        Ok(o) => {
            let mut text = String::from_utf8_lossy(&o.stdout).to_string();
            text.push_str(&String::from_utf8_lossy(&o.stderr));
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n");
            let status = match o.status.code() {
                Some(c) => format!("exit {c}"),
                None => "killed by a signal".into(),
            };
            CommandResult { command, ok: o.status.success(), status, tail: log.redact(&tail) }
        }
        Err(e) => CommandResult {
            command,
            ok: false,
            status: format!("could not start `{}`: {e}", program.display()),
            tail: String::new(),
        },
    }
}

/// Severity label suffix of a report: the worst severity present, or `none`.
fn worst(report: &diff::Report) -> &'static str {
    report.counts().iter().find(|(_, n)| *n > 0).map(|(s, _)| s.as_str()).unwrap_or("none")
}

fn label_color(sev: &str) -> &'static str {
    match sev {
        "breaking" => "b60205",
        "action" => "fbca04",
        "info" => "0e8a16",
        _ => "ededed",
    }
}

struct BodyInput<'a> {
    /// What was imported (`PyTorch`, `ascend headers`).
    what: &'a str,
    key: &'a str,
    branch: &'a str,
    versions: &'a [String],
    old: Option<&'a str>,
    severity: &'a str,
    report_md: &'a str,
    steps: &'a [CommandResult],
    check: Option<&'a CommandResult>,
    origins: &'a [String],
    /// A dry run: steps and check were not run (the body says so instead of "regenerated").
    dry_run: bool,
    /// The configured steps and check, as shown (what a dry run would have run).
    planned_steps: &'a [String],
    check_configured: Option<&'a str>,
}

fn fence(text: &str) -> String {
    let text = if text.trim().is_empty() { "(no output)" } else { text };
    format!(
        "<details><summary>output (last {TAIL_LINES} lines)</summary>\n\n````text\n{}\n````\n\n</details>\n",
        text.replace("````", "``\u{200b}``")
    )
}

/// `[bot] backend_yaml`, read from the worktree (the base branch's files) and reported under the
/// path as configured; every operator they name must exist in one of the two versions (a typo
/// otherwise, as `diff --backend` says).
fn backend_yamls(
    cfg: &BotConfig,
    root: &Path,
    old: &PytorchSnapshot,
    new: &PytorchSnapshot,
) -> Result<xirang_compare::BackendFiles, BotError> {
    let mut srcs = Vec::new();
    for rel in &cfg.backend_yaml {
        let p = config::check_inside(root, rel).map_err(|m| cfg.error_at("backend_yaml", m))?;
        if !p.is_file() {
            return Err(
                cfg.error_at("backend_yaml", format!("`{rel}` is not a file of the base branch `{}`", cfg.base))
            );
        }
        let text = crate::fsio::read_text(&p, crate::fsio::MAX_INPUT_BYTES)
            .map_err(|e| cfg.error_at("backend_yaml", format!("`{rel}`: {e}")))?;
        srcs.push(crate::SourceFile::new(rel.clone(), text));
    }
    let names = xirang_compare::inputs::operator_names(old, new);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let versions = xirang_compare::inputs::versions_text(old, new);
    Ok(xirang_compare::BackendFiles::parse(&srcs, &names, &versions)?)
}

/// Imports one PyTorch release (its operators, and its C++ interface when it ships the headers) into
/// the worktree's store; returns the operator files' sha256.
#[allow(clippy::too_many_arguments)]
fn import_pytorch(
    r: &detect::Release,
    http: &Http,
    log: &mut Log<'_>,
    tmp: &Path,
    root: &Path,
    cfg: &BotConfig,
    store: &Store,
    origins: &mut Vec<String>,
) -> Result<String, BotError> {
    std::fs::create_dir_all(tmp).map_err(|e| BotError::io(tmp, e))?;
    let detect::ReleaseFiles { files, cxx } = r.files(http, log, tmp)?;
    let _ = std::fs::remove_dir_all(tmp);
    files.require_complete(&r.version)?;
    let snap = PytorchSnapshot::build(&files, &r.version)?;
    // again before each write: a step may have put a symbolic link in the way
    cfg.store_in(root)?;
    store.write_pytorch(&snap)?;
    origins.push(r.origin());
    log.line(&format!("imported {} ({}): {} operators", r.version, r.origin(), snap.meta.counts.operators));
    // the release's C++ extension interface, when it ships its headers (a wheel does)
    if let Some(sources) = cxx {
        let cs = crate::cxx_snapshot::CxxSnapshot::from_sources(sources, r.origin(), &r.version)?;
        cfg.store_in(root)?;
        store.write_cxx(&cs)?;
        log.line(&format!(
            "imported the C++ interface of {}: {} classes, {} registration macros, {} autocast entries",
            r.version,
            cs.meta.counts.get("classes").copied().unwrap_or(0),
            cs.meta.counts.get("macros").copied().unwrap_or(0),
            cs.meta.counts.get("autocast").copied().unwrap_or(0)
        ));
    }
    Ok(snap.meta.content_sha256)
}

/// Points `[vendor] headers` of the worktree's `xirang.toml` at `version` when `[vendor] name` is
/// `vendor`, so that the regeneration steps build the driver bindings from the new headers. Only the
/// value's text changes (comments and layout stay). Returns the old value; `None` when the file has
/// no such table (nothing to change).
fn bump_vendor_headers(root: &Path, vendor: &str, version: &Version) -> Result<Option<String>, BotError> {
    let path = config::check_inside(root, config::CONFIG_FILE).map_err(BotError::Config)?;
    let Ok(text) = std::fs::read_to_string(&path) else { return Ok(None) };
    let Ok(doc) = toml::de::DeTable::parse(&text) else { return Ok(None) };
    let Some(table) = doc.get_ref().get("vendor") else { return Ok(None) };
    let toml::de::DeValue::Table(t) = table.get_ref() else { return Ok(None) };
    let name = t.get("name").and_then(|v| v.get_ref().as_str());
    if name != Some(vendor) {
        return Ok(None);
    }
    let Some(value) = t.get("headers") else { return Ok(None) };
    let Some(old) = value.get_ref().as_str().map(String::from) else { return Ok(None) };
    let span = value.span();
    if old == version.to_string() || text.get(span.clone()).is_none() {
        return Ok(None);
    }
    let new_text = format!("{}\"{version}\"{}", &text[..span.start], &text[span.end..]);
    std::fs::write(&path, new_text).map_err(|e| BotError::io(&path, e))?;
    Ok(Some(old))
}

/// The pull request body: hidden JSON block, summary, check result, steps, drift report.
fn render_body(b: &BodyInput<'_>) -> String {
    let check = match (b.check, b.check_configured) {
        (Some(c), _) if c.ok => "passed",
        (Some(_), _) => "failed",
        (None, Some(_)) => "not run",
        (None, None) => "not configured",
    };
    let meta = serde_json::json!({
        "format": "xirang-bot/1",
        "key": b.key,
        "branch": b.branch,
        "versions": b.versions,
        "previous": b.old,
        "severity": b.severity,
        "check": check,
        "dry_run": b.dry_run,
    });
    // a JSON string cannot contain `-->` after this, so the comment cannot be closed early
    let meta = meta.to_string().replace("--", "-\\u002d");
    let mut o = format!("{META_MARKER}{meta} -->\n");
    // say only what happened: "regenerated" when steps ran, "checked" when the check ran
    let mut did = vec![format!(
        "{} {} imported into the snapshot store by xirang-bot (from {})",
        b.what,
        b.versions.join(", "),
        b.origins.join(", ")
    )];
    if !b.steps.is_empty() {
        did.push("regenerated".into());
    }
    if b.check.is_some() {
        did.push("checked".into());
    }
    let last = did.pop().unwrap_or_default();
    let sentence = if did.is_empty() { last } else { format!("{}, and {last}", did.join(", ")) };
    if b.dry_run {
        o.push_str(&format!(
            "**Dry run**: {sentence}, in a scratch worktree; nothing was run, committed to a branch or pushed.\n\n"
        ));
    } else {
        o.push_str(&format!("{sentence}.\n\n"));
    }
    match (b.check, b.check_configured) {
        (None, Some(cmd)) if b.dry_run => o.push_str(&format!("**Check:** not run (dry run): `{cmd}`.\n\n")),
        (None, Some(cmd)) => o.push_str(&format!("**Check:** not run: `{cmd}`.\n\n")),
        (None, None) => o.push_str("**Check:** not configured.\n\n"),
        (Some(c), _) if c.ok => o.push_str(&format!("**Check:** passed: `{}` ({}).\n\n", c.command, c.status)),
        (Some(c), _) => {
            o.push_str(&format!(
                "**Check: FAILED**: `{}` ({}). The pull request is open so that the failure can be fixed on this \
                 branch; do not merge it as is.\n\n",
                c.command, c.status
            ));
            o.push_str(&fence(&c.tail));
            o.push('\n');
        }
    }
    if b.dry_run && !b.planned_steps.is_empty() {
        o.push_str("**Regeneration steps** (not run: dry run):\n\n");
        for s in b.planned_steps {
            o.push_str(&format!("- `{s}`\n"));
        }
        o.push('\n');
    }
    if !b.steps.is_empty() {
        o.push_str("**Regeneration steps:**\n\n");
        for s in b.steps {
            o.push_str(&format!("- `{}`: {}\n", s.command, s.status));
        }
        o.push('\n');
    }
    match b.old {
        Some(old) => o.push_str(&format!("Drift from {old} (the base branch's newest snapshot):\n\n")),
        None => o.push_str("The store had no earlier snapshot: no drift report.\n\n"),
    }
    o.push_str(b.report_md);
    if o.len() > MAX_BODY {
        let mut cut = MAX_BODY;
        while !o.is_char_boundary(cut) {
            cut -= 1;
        }
        o.truncate(cut);
        o.push_str("\n\n… (report cut to fit; the full report is in `diffs/` on this branch)\n");
    }
    o
}

/// Runs the bot once. Progress goes to `log` (secrets redacted).
pub fn run(opts: &Options, log: &mut Log<'_>) -> Result<Outcome, BotError> {
    let cfg = &opts.config;
    // also when the configuration was made by a program rather than read from xirang.toml
    cfg.validate()?;
    let repo = git2::Repository::discover(&opts.repo)
        .map_err(|e| BotError::Git(format!("{}: {}", opts.repo.display(), e.message())))?;
    if repo.workdir().is_none() {
        return Err(BotError::Git("the repository is bare".into()));
    }
    // what a killed run left behind goes first
    gitops::remove_stale_worktrees(&repo);
    let token = opts.token.as_deref().filter(|t| !t.is_empty());
    if !opts.dry_run && token.is_none() {
        return Err(BotError::Config(format!("${} is not set (needed to open pull requests)", cfg.token_env)));
    }
    let http = Http::new(cfg)?;

    let releases = detect::releases(&opts.upstream, &http, log)?;
    let remote = gitops::fetch(&repo, cfg, token)?;
    let track = opts.upstream.track();
    let known = gitops::store_versions(&repo, remote.base_tip, &cfg.store, track.upstream())?;
    let new: Vec<&detect::Release> = releases.iter().filter(|r| !known.contains(&r.version)).collect();
    let Some(newest) = new.last() else {
        log.line(&format!("up to date: every release of {} is in `{}` of {}", opts.upstream, cfg.store, cfg.base));
        return Ok(Outcome::UpToDate);
    };
    let versions: Vec<String> = new.iter().map(|r| r.version.to_string()).collect();
    log.line(&format!("new upstream version(s): {}", versions.join(", ")));
    let branch = format!("{}/{}-{}", cfg.branch_prefix, track.slug(), newest.version);
    if branch == cfg.base {
        return Err(BotError::Refused(format!("the base branch `{branch}`")));
    }
    let mut hashed = Vec::new();
    for r in &new {
        hashed.push((r.version.clone(), r.source_hash()?));
    }
    let key = idempotency_key(&hashed);
    log.line(&format!("branch {branch}, idempotency key {key}"));

    let forge = match token {
        Some(t) if !opts.dry_run => Some(Forge::new(&http, cfg, t.to_string())?),
        _ => None,
    };
    let pull = match &forge {
        Some(f) => f.find_open_pull(log, &branch)?,
        None => None,
    };

    // a pull request for this branch that a person closed without merging: declined, remembered
    // for these versions (a newer release gets a branch, and a pull request, of its own)
    if pull.is_none()
        && let Some(f) = &forge
        && let Some(d) = f.find_declined_pull(log, &branch)?
    {
        log.line(&format!(
            "declined: {} {} for {branch} was closed without merging; not recreated (reopen it to let the bot \
             update it)",
            cfg.forge.pull_noun(),
            f.pull_ref(d.number)
        ));
        return Ok(Outcome::Declined { branch, pull: d.number });
    }

    if let Some(&tip) = remote.heads.get(&branch) {
        match gitops::inspect(&repo, tip, remote.base_tip, cfg)? {
            BranchState::Foreign { commit, author } => {
                log.line(&format!("stopped: commit {commit} by {author} on {branch} is not the bot's; nothing pushed"));
                let mut commented = false;
                if let (Some(f), Some(p)) = (&forge, &pull) {
                    let marker = format!("{STOP_MARKER}{commit} -->");
                    if !f.comments(log, p.number)?.iter().any(|c| c.contains(&marker)) {
                        let body = format!(
                            "{marker}\nxirang-bot stopped: commit {commit} by {author} on `{branch}` was not made by the \
                             bot, so the bot will not push to this branch. Finish the {} by hand, or delete the \
                             branch to let the bot start over.",
                            cfg.forge.pull_noun()
                        );
                        f.comment(log, p.number, &body)?;
                        commented = true;
                    }
                }
                return Ok(Outcome::Stopped {
                    branch,
                    commit,
                    author,
                    pull: pull.as_ref().map(|p| p.number),
                    commented,
                });
            }
            BranchState::Bot { key: Some(k) } if k == key => {
                let pr_current = pull.as_ref().is_some_and(|p| p.body.contains(&key));
                if pr_current || forge.is_none() {
                    log.line(&format!("nothing changed: {branch} already carries key {key}"));
                    return Ok(Outcome::Unchanged { branch, pull: pull.map(|p| p.number) });
                }
            }
            BranchState::Bot { .. } => {}
        }
    }

    // the work, in a worktree of its own (detached: no branch of the user's repository moves)
    let wt = Worktree::create(&repo, remote.base_tip)?;
    log.line(&format!("worktree {}", wt.path.display()));
    let tmp = wt.scratch.clone();
    let store_path = cfg.store_in(&wt.path)?;
    let store = Store::new(store_path.clone());
    let mut steps_done: Vec<CommandResult> = Vec::new();
    let mut origins = Vec::new();
    let mut last_message = String::new();
    for r in &new {
        let content_sha = match &r.fetch {
            detect::Fetch::Headers { vendor, dir } => {
                let snap = crate::snapshot::HeaderSnapshot::scan(vendor, dir, &r.version)?;
                cfg.store_in(&wt.path)?;
                store.write_headers(&snap)?;
                origins.push(r.origin());
                let decls: usize = snap.meta.counts.iter().filter(|(k, _)| *k != "files").map(|(_, n)| n).sum();
                log.line(&format!(
                    "imported {vendor} headers {} ({}): {} files, {decls} declarations",
                    r.version,
                    r.origin(),
                    snap.meta.counts.get("files").copied().unwrap_or(0)
                ));
                // the adapter targets the new driver headers: its bindings are regenerated from them
                if let Some(old) = bump_vendor_headers(&wt.path, vendor, &r.version)? {
                    log.line(&format!("xirang.toml [vendor] headers: {old} -> {}", r.version));
                }
                snap.meta.content_sha256
            }
            _ => import_pytorch(r, &http, log, &tmp, &wt.path, cfg, &store, &mut origins)?,
        };
        let mut step_lines = Vec::new();
        for argv in &cfg.steps {
            if opts.dry_run {
                step_lines.push(format!("- {} (not run: dry run)", argv.join(" ")));
                continue;
            }
            let res = run_command(argv, &wt.path, &store_path, opts, log);
            log.line(&format!("step `{}`: {}", res.command, res.status));
            if !res.ok {
                return Err(BotError::Step { command: res.command, status: res.status, output: res.tail });
            }
            step_lines.push(format!("- {}", res.command));
            steps_done.push(res);
        }
        let message = format!(
            "xirang-bot: import {what} {v}\n\nSnapshot of {what} {v} from {origin} (files sha256 {sha}).\n{steps}\n\n\
             {VERSION_FOOTER} {v}\n{KEY_FOOTER} {key}\n",
            what = track.what(),
            v = r.version,
            origin = r.origin(),
            sha = content_sha,
            steps = if step_lines.is_empty() {
                "No regeneration steps.".to_string()
            } else {
                format!("Regenerated with:\n{}", step_lines.join("\n"))
            },
            VERSION_FOOTER = gitops::VERSION_FOOTER,
            KEY_FOOTER = gitops::KEY_FOOTER,
        );
        match wt.commit_all(&message, cfg)? {
            Some(c) => log.line(&format!("committed {c}: xirang-bot: import {} {}", track.what(), r.version)),
            None => log.line(&format!("{}: no change to commit", r.version)),
        }
        last_message = message;
    }
    let head = wt.head()?;

    // the drift report: the base's newest snapshot below the newest new one -> the newest new one
    let old_v = known.iter().filter(|v| **v < newest.version).max().cloned();
    let rules = diff::RuleSet::builtin();
    let allow = match &cfg.allow {
        Some(a) => {
            let p = config::check_inside(&wt.path, a).map_err(|m| cfg.error_at("allow", m))?;
            if !p.is_file() {
                return Err(cfg.error_at("allow", format!("`{a}` is not a file of the base branch `{}`", cfg.base)));
            }
            let text = crate::fsio::read_text(&p, crate::fsio::MAX_INPUT_BYTES)
                .map_err(|e| cfg.error_at("allow", format!("`{a}`: {e}")))?;
            Some(diff::allow::AllowList::parse_with_rules(a, &text, Some(&rules))?)
        }
        None => None,
    };
    // an allow list's entries expire: judged on today's date (without one, the report does not
    // depend on the date)
    let today = if allow.is_some() { diff::allow::today_utc() } else { "1970-01-01".to_string() };
    let (report_md, severity) = match (&old_v, &track) {
        (Some(ov), detect::Track::Headers(vendor)) => {
            let old = store.load_headers(vendor, ov)?;
            let new_h = store.load_headers(vendor, &newest.version)?;
            let uses = diff::header::SymbolUses::index_dir(&wt.path.join(diff::pipeline::ADAPTER_DIR), &wt.path)?;
            let report = diff::pipeline::header_report(vendor, &old, &new_h, &uses, allow.as_ref(), &today, &rules);
            (diff::report_markdown::render(&report, &rules), worst(&report))
        }
        (Some(ov), detect::Track::Pytorch) => {
            let old = store.load_pytorch(ov)?;
            let new_snap = store.load_pytorch(&newest.version)?;
            let kernels = diff::pipeline::index_adapter(&wt.path, &[&old, &new_snap])?;
            // the adapter as the base branch has it: configuration, generated files, custom operators
            let adapter = xirang_compare::AdapterInputs::load_lenient(&wt.path, &mut |_| {})?;
            // the adapter's coverage of both versions, when its configuration builds one
            let states =
                xirang_compare::adapter_states(adapter.config.as_ref(), &old, &new_snap, &kernels, true).ok().flatten();
            // the adapter's backend yamls, as the base branch has them
            let backends = backend_yamls(cfg, &wt.path, &old, &new_snap)?;
            let report = xirang_compare::whole_report(
                xirang_compare::WholeDiff {
                    old: &old,
                    new: &new_snap,
                    adapter: &adapter,
                    kernels: &kernels,
                    backends: &backends,
                    allow: allow.as_ref(),
                    today: &today,
                    states: states.as_ref(),
                },
                &rules,
            );
            (diff::report_markdown::render(&report, &rules), worst(&report))
        }
        (None, _) => (String::new(), "none"),
    };
    // the C++ side, when the store has the C++ interface of both versions: the report's impacts are
    // the adapter's C++ (its shim's overrides and registrations)
    let cxx_versions = store.versions(crate::cxx_snapshot::CXX_UPSTREAM);
    let report_md = match &old_v {
        Some(ov)
            if track == detect::Track::Pytorch
                && cxx_versions.contains(ov)
                && cxx_versions.contains(&newest.version) =>
        {
            let (old, new_c) = (store.load_cxx(ov)?, store.load_cxx(&newest.version)?);
            let index = diff::pipeline::index_cxx(&wt.path.join(diff::pipeline::ADAPTER_DIR), &wt.path)?;
            let autocast = wt.path.join(diff::pipeline::cxx_autocast_file()).is_file();
            let r = diff::pipeline::cxx_report(&old, &new_c, &index, autocast, None, "1970-01-01", &rules);
            format!("{report_md}\n{}", diff::report_markdown::render(&r, &rules))
        }
        _ => report_md,
    };

    let check = if opts.dry_run || cfg.check.is_empty() {
        None
    } else {
        let c = run_command(&cfg.check, &wt.path, &store_path, opts, log);
        log.line(&format!("check `{}`: {} ({})", c.command, if c.ok { "passed" } else { "FAILED" }, c.status));
        Some(c)
    };

    let old_s = old_v.as_ref().map(|v| v.to_string());
    let planned_steps: Vec<String> = cfg.steps.iter().map(|a| a.join(" ")).collect();
    let check_configured = (!cfg.check.is_empty()).then(|| cfg.check.join(" "));
    let what = track.what();
    let body = render_body(&BodyInput {
        what: &what,
        key: &key,
        branch: &branch,
        versions: &versions,
        old: old_s.as_deref(),
        severity,
        report_md: &report_md,
        steps: &steps_done,
        check: check.as_ref(),
        origins: &origins,
        dry_run: opts.dry_run,
        planned_steps: &planned_steps,
        check_configured: check_configured.as_deref(),
    });
    // nothing in them comes from the token, but nothing that reaches the forge may carry it
    let body = log.redact(&body);
    let title = format!("xirang-bot: {} {}", track.what(), versions.join(", "));
    let mut labels: Vec<LabelSpec> = cfg
        .labels
        .iter()
        .map(|l| LabelSpec { name: l.clone(), color: "1d76db".into(), description: "opened by xirang-bot".into() })
        .collect();
    labels.push(LabelSpec {
        name: format!("{}{severity}", cfg.severity_label_prefix),
        color: label_color(severity).into(),
        description: format!("worst upstream drift: {severity}"),
    });
    if check.as_ref().is_some_and(|c| !c.ok) {
        labels.push(LabelSpec {
            name: cfg.check_failed_label.clone(),
            color: "b60205".into(),
            description: "the check failed on the regenerated tree".into(),
        });
    }

    let forge = match forge {
        Some(f) if !opts.dry_run => f,
        _ => {
            let files = wt.changed_paths(remote.base_tip, head)?;
            log.line(&format!("dry run: would push {branch} at {head} ({} file(s) changed)", files.len()));
            return Ok(Outcome::DryRun {
                branch,
                commit: head.to_string(),
                message: last_message,
                title,
                body,
                labels: labels.into_iter().map(|l| l.name).collect(),
            });
        }
    };

    // whatever a step did, the token does not leave in a commit
    if let Some(t) = token {
        let places = gitops::secret_places(&wt.wrepo, remote.base_tip, head, t.as_bytes())?;
        if !places.is_empty() {
            return Err(BotError::TokenInCommits { branch, places });
        }
    }
    gitops::push(&wt.wrepo, cfg, &branch, token)?;
    log.line(&format!("pushed {branch} -> {}", cfg.remote));
    drop(wt);

    let (pr, updated) = match pull {
        Some(p) => {
            forge.update_pull(log, p.number, &title, &body)?;
            log.line(&format!("updated {} {}", cfg.forge.pull_noun(), forge.pull_ref(p.number)));
            (p, true)
        }
        None => {
            let p = forge.create_pull(log, &title, &body, &branch, &cfg.base)?;
            log.line(&format!("opened {} {} {}", cfg.forge.pull_noun(), forge.pull_ref(p.number), p.url));
            (p, false)
        }
    };
    forge.label_pull(log, pr.number, &labels)?;
    // labels kept in step: the bot's own severity / check-failed labels that no longer apply go
    // (a human's labels stay)
    let stale: Vec<String> = pr
        .labels
        .iter()
        .filter(|l| {
            (l.starts_with(&cfg.severity_label_prefix) || **l == cfg.check_failed_label)
                && !labels.iter().any(|n| n.name == **l)
        })
        .cloned()
        .collect();
    forge.unlabel_pull(log, pr.number, &stale)?;

    // older bot pull requests are superseded by this one
    let own_prefix = format!("{}/{}-", cfg.branch_prefix, track.slug());
    for other in forge.open_pulls(log)? {
        if other.number != pr.number && other.head_ref.starts_with(&own_prefix) && other.body.contains(META_MARKER) {
            forge.comment(
                log,
                other.number,
                &format!(
                    "Superseded by {}, which imports {} (every version the base lacks).",
                    forge.pull_ref(pr.number),
                    versions.join(", ")
                ),
            )?;
            forge.close_pull(log, other.number)?;
            log.line(&format!(
                "closed {} {} (superseded by {})",
                cfg.forge.pull_noun(),
                forge.pull_ref(other.number),
                forge.pull_ref(pr.number)
            ));
        }
    }

    Ok(Outcome::Published {
        branch,
        commit: head.to_string(),
        pull: pr.number,
        url: pr.url,
        updated,
        check_passed: check.map(|c| c.ok),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_and_keys() {
        let mut buf = Vec::new();
        let mut log = Log::new(&mut buf, &["s3cr3t-token", "ab"]);
        log.line("Bearer s3cr3t-token failed");
        assert_eq!(String::from_utf8(buf).unwrap(), "Bearer *** failed\n");
        let v = Version::parse("v2.4.0").unwrap();
        let a = idempotency_key(&[(v.clone(), "x".into())]);
        assert_eq!(a, idempotency_key(&[(v.clone(), "x".into())]));
        assert_ne!(a, idempotency_key(&[(v, "y".into())]));
    }

    #[test]
    fn body_has_meta_and_is_bounded() {
        let report = "x".repeat(100_000);
        let c = CommandResult {
            command: "cargo check".into(),
            ok: false,
            status: "exit 101".into(),
            tail: "boom --> x".into(),
        };
        let b = render_body(&BodyInput {
            what: "PyTorch",
            key: "k",
            branch: "xirang-bot/pytorch-v2.4.0",
            versions: &["v2.4.0".into()],
            old: Some("v2.3.0"),
            severity: "breaking",
            report_md: &report,
            steps: &[],
            check: Some(&c),
            origins: &["folder:v2.4.0".into()],
            dry_run: false,
            planned_steps: &[],
            check_configured: Some("cargo check"),
        });
        assert!(b.starts_with(META_MARKER));
        let meta_end = b.find(" -->").unwrap();
        let json: serde_json::Value = serde_json::from_str(&b[META_MARKER.len()..meta_end]).unwrap();
        assert_eq!(json["check"], "failed");
        assert_eq!(json["versions"][0], "v2.4.0");
        assert!(b.len() < MAX_BODY + 200);
        assert!(b.contains("FAILED"));
    }

    /// A dry run's body says nothing ran; a run says "regenerated" / "checked" only for what did.
    #[test]
    fn bodies_say_only_what_ran() {
        let base = |dry_run, steps: &[CommandResult], check: Option<&CommandResult>| {
            render_body(&BodyInput {
                what: "PyTorch",
                key: "k",
                branch: "b",
                versions: &["v2.4.0".into()],
                old: None,
                severity: "none",
                report_md: "",
                steps,
                check,
                origins: &["folder:v2.4.0".into()],
                dry_run,
                planned_steps: &["xirang-scan generate".into()],
                check_configured: Some("cargo check"),
            })
        };
        let dry = base(true, &[], None);
        assert!(!dry.contains("regenerated") && !dry.contains("checked"), "{dry}");
        assert!(dry.contains("**Dry run**") && dry.contains("not run (dry run): `cargo check`"), "{dry}");
        assert!(dry.contains("- `xirang-scan generate`") && !dry.contains("not configured"), "{dry}");
        assert!(dry.contains(r#""check":"not run""#) && dry.contains(r#""dry_run":true"#), "{dry}");
        let ok =
            CommandResult { command: "cargo check".into(), ok: true, status: "exit 0".into(), tail: String::new() };
        let step = CommandResult {
            command: "xirang-scan generate".into(),
            ok: true,
            status: "exit 0".into(),
            tail: String::new(),
        };
        let full = base(false, std::slice::from_ref(&step), Some(&ok));
        assert!(full.contains("(from folder:v2.4.0), regenerated, and checked."), "{full}");
        let unchecked = base(false, std::slice::from_ref(&step), None);
        assert!(
            unchecked.contains("(from folder:v2.4.0), and regenerated.")
                && unchecked.contains("not run: `cargo check`")
        );
    }
}
