//! The `[bot]` table of the repository-root `xirang.toml`. Other tables belong to other tools and
//! are ignored; unknown keys inside `[bot]` are errors (a typo must not silently change behaviour).
//! Errors about a key name its line and column in the file.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde::Deserialize;

use super::BotError;

/// Name of the configuration file at the repository root.
pub const CONFIG_FILE: &str = "xirang.toml";

/// Which REST dialect the forge speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ForgeKind {
    /// GitHub (api base `https://api.github.com`, or GitHub Enterprise `https://HOST/api/v3`).
    Github,
    /// Gitea (api base `https://HOST/api/v1`).
    Gitea,
    /// Forgejo (a Gitea fork; same API).
    Forgejo,
    /// GitLab merge requests (api base `https://gitlab.com/api/v4`, or `https://HOST/api/v4`).
    Gitlab,
    /// Gitee and the forges that copy its API v5 (api base `https://gitee.com/api/v5`).
    Gitee,
}

impl ForgeKind {
    pub fn is_gitea(self) -> bool {
        matches!(self, ForgeKind::Gitea | ForgeKind::Forgejo)
    }

    /// The public service's API base, for the dialects that have one.
    pub fn default_api_url(self) -> Option<&'static str> {
        match self {
            ForgeKind::Github => Some("https://api.github.com"),
            ForgeKind::Gitlab => Some("https://gitlab.com/api/v4"),
            ForgeKind::Gitee => Some("https://gitee.com/api/v5"),
            ForgeKind::Gitea | ForgeKind::Forgejo => None,
        }
    }

    /// How the forge writes a reference to one of its pull requests in a comment (`#12`; GitLab's
    /// merge requests are `!12`).
    pub fn pull_ref(self, number: u64) -> String {
        match self {
            ForgeKind::Gitlab => format!("!{number}"),
            _ => format!("#{number}"),
        }
    }

    /// What the forge calls a pull request.
    pub fn pull_noun(self) -> &'static str {
        match self {
            ForgeKind::Gitlab => "merge request",
            _ => "pull request",
        }
    }
}

/// Retry policy for forge API calls (5xx, 429 and transport errors).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryConfig {
    /// Retries after the first attempt (so `max + 1` requests at most).
    #[serde(default = "default_retry_max")]
    pub max: u32,
    /// First backoff in milliseconds; doubled on each retry, capped at 30 s.
    #[serde(default = "default_retry_base_ms")]
    pub base_ms: u64,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig { max: default_retry_max(), base_ms: default_retry_base_ms() }
    }
}

fn default_retry_max() -> u32 {
    3
}
fn default_retry_base_ms() -> u64 {
    1000
}

/// The `[bot]` table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BotConfig {
    #[serde(default = "default_forge")]
    pub forge: ForgeKind,
    /// REST API base url, without a trailing slash. Default: the public service of `forge`
    /// (`https://api.github.com`, `https://gitlab.com/api/v4`, `https://gitee.com/api/v5`); needed for
    /// Gitea and Forgejo.
    #[serde(default)]
    pub api_url: String,
    /// Repository owner and name on the forge.
    #[serde(default)]
    pub owner: String,
    #[serde(default)]
    pub repo: String,
    /// Git remote to fetch from and push to.
    #[serde(default = "default_remote")]
    pub remote: String,
    /// The branch pull requests target. The bot never writes to it.
    #[serde(default = "default_base")]
    pub base: String,
    /// Bot branches are `<branch_prefix>/pytorch-<version>`.
    #[serde(default = "default_branch_prefix")]
    pub branch_prefix: String,
    /// Snapshot store, relative to the repository root.
    #[serde(default = "default_store")]
    pub store: String,
    /// The adapter's vendor backend yamls (`npu_native_functions.yaml`), relative to the repository
    /// root: joined into the pull request's drift report as `diff --backend` does (an entry a change
    /// lands on is named with its line).
    #[serde(default)]
    pub backend_yaml: Vec<String>,
    /// The adapter's allow list (`diff --allow`), relative to the repository root: the changes it
    /// accepts are shown as accepted in the pull request, and they do not raise its severity.
    #[serde(default)]
    pub allow: Option<String>,
    /// Regeneration steps, each an argv run in the bot's worktree after each import. A program named
    /// `xirang-scan` is this executable.
    #[serde(default = "default_steps")]
    pub steps: Vec<Vec<String>>,
    /// The check run once on the final tree (argv). Empty: no check.
    #[serde(default = "default_check")]
    pub check: Vec<String>,
    /// Labels put on every bot pull request (severity labels are added to these).
    #[serde(default = "default_labels")]
    pub labels: Vec<String>,
    /// Severity labels are `<severity_label_prefix><breaking|action|info|none>`.
    #[serde(default = "default_severity_prefix")]
    pub severity_label_prefix: String,
    /// Label added when the check fails.
    #[serde(default = "default_check_failed_label")]
    pub check_failed_label: String,
    /// Environment variable holding the forge token.
    #[serde(default = "default_token_env")]
    pub token_env: String,
    /// Commit author of bot commits; a commit on the bot branch by anyone else stops the bot.
    #[serde(default = "default_author_name")]
    pub author_name: String,
    #[serde(default = "default_author_email")]
    pub author_email: String,
    #[serde(default)]
    pub retry: RetryConfig,
    /// Seconds before an API request times out.
    #[serde(default = "default_timeout")]
    pub timeout_s: u64,
    /// The package index's JSON API for torch, when no `--from-*` is given (a mirror:
    /// `https://mirror.example/pypi/torch/json`).
    #[serde(default = "default_index_url")]
    pub index_url: String,
    /// HTTP(S) proxy for every request (`http://proxy.example:3128`). Unset: `HTTPS_PROXY`,
    /// `ALL_PROXY`, `HTTP_PROXY` (and `NO_PROXY`) from the environment, as curl reads them.
    #[serde(default)]
    pub proxy: Option<String>,
    /// PEM file of the certificate authorities to trust. Unset: the platform's store
    /// (`SSL_CERT_FILE`, else the system bundle curl uses), else the bundled web roots.
    #[serde(default)]
    pub ca_file: Option<String>,
    /// Where each key of `[bot]` is in `xirang.toml` (empty when the table was not read from a file).
    #[serde(skip)]
    pub positions: BTreeMap<String, Position>,
}

/// A place in `xirang.toml`: 1-based line and column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

impl Position {
    fn of_offset(text: &str, offset: usize) -> Position {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &text[..offset];
        let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
        Position { line: before.matches('\n').count() + 1, column: before[line_start..].chars().count() + 1 }
    }
}

/// `file:line:column: ` or `file `, for messages.
pub(crate) fn where_in_file(position: &Option<Position>) -> String {
    match position {
        Some(p) => format!("{CONFIG_FILE}:{}:{}: ", p.line, p.column),
        None => format!("{CONFIG_FILE} "),
    }
}

fn default_forge() -> ForgeKind {
    ForgeKind::Github
}
fn default_api_url() -> String {
    "https://api.github.com".into()
}
fn default_remote() -> String {
    "origin".into()
}
fn default_base() -> String {
    "main".into()
}
fn default_branch_prefix() -> String {
    "xirang-bot".into()
}
fn default_store() -> String {
    "schemas".into()
}
fn default_steps() -> Vec<Vec<String>> {
    vec![
        vec!["xirang-scan".into(), "generate".into()],
        vec!["xirang-scan".into(), "diffs".into()],
        vec!["xirang-scan".into(), "coverage".into(), "--write".into()],
    ]
}
fn default_check() -> Vec<String> {
    vec!["cargo".into(), "check".into(), "--workspace".into()]
}
fn default_labels() -> Vec<String> {
    vec!["xirang-bot".into()]
}
fn default_severity_prefix() -> String {
    "drift:".into()
}
fn default_check_failed_label() -> String {
    "xirang-bot:check-failed".into()
}
fn default_token_env() -> String {
    "XIRANG_BOT_TOKEN".into()
}
fn default_author_name() -> String {
    "xirang-bot".into()
}
fn default_author_email() -> String {
    "xirang-bot@users.noreply.invalid".into()
}
fn default_timeout() -> u64 {
    30
}
fn default_index_url() -> String {
    super::detect::PYPI_TORCH_URL.into()
}

impl Default for BotConfig {
    fn default() -> Self {
        // an empty table gets every default
        BotConfig::parse("").unwrap_or_else(|_| unreachable_defaults())
    }
}

/// Never used: the empty table always parses. Kept total so that `Default` cannot panic.
fn unreachable_defaults() -> BotConfig {
    BotConfig {
        forge: default_forge(),
        api_url: default_api_url(),
        owner: String::new(),
        repo: String::new(),
        remote: default_remote(),
        base: default_base(),
        branch_prefix: default_branch_prefix(),
        store: default_store(),
        backend_yaml: Vec::new(),
        allow: None,
        steps: default_steps(),
        check: default_check(),
        labels: default_labels(),
        severity_label_prefix: default_severity_prefix(),
        check_failed_label: default_check_failed_label(),
        token_env: default_token_env(),
        author_name: default_author_name(),
        author_email: default_author_email(),
        retry: RetryConfig::default(),
        timeout_s: default_timeout(),
        index_url: default_index_url(),
        proxy: None,
        ca_file: None,
        positions: BTreeMap::new(),
    }
}

#[derive(Deserialize)]
struct File {
    #[serde(default)]
    bot: Option<BotConfig>,
}

impl BotConfig {
    /// Parses the `[bot]` table of a whole `xirang.toml` text (other tables are ignored; a missing
    /// table gives the defaults).
    pub fn parse(text: &str) -> Result<BotConfig, BotError> {
        // read straight from the text, so that every error (syntax, an unknown key, a value of the
        // wrong type) says where it is
        let file: File = toml::from_str(text).map_err(|e| {
            let at = match e.span().map(|s| Position::of_offset(text, s.start)) {
                Some(p) => format!("{CONFIG_FILE}:{}:{}: ", p.line, p.column),
                None => format!("{CONFIG_FILE}: "),
            };
            BotError::Config(format!("{at}{}", e.message().trim_end()))
        })?;
        // no [bot] table: an empty one (every key's default)
        let mut cfg = match file.bot {
            Some(c) => c,
            None => toml::from_str::<BotConfig>("").unwrap_or_else(|_| unreachable_defaults()),
        };
        cfg.positions = key_positions(text);
        if cfg.api_url.is_empty() {
            match cfg.forge.default_api_url() {
                Some(u) => cfg.api_url = u.to_string(),
                None => {
                    return Err(cfg.error_at(
                        "forge",
                        format!(
                            "`{}` has no public service: set api_url (`https://HOST/api/v1`)",
                            format!("{:?}", cfg.forge).to_lowercase()
                        ),
                    ));
                }
            }
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// A positioned error about `key` of `[bot]`.
    pub fn error_at(&self, key: &str, message: impl Into<String>) -> BotError {
        BotError::ConfigAt { key: key.to_string(), position: self.positions.get(key).copied(), message: message.into() }
    }

    /// The snapshot store inside the checkout at `root`: `root/<store>`, refused when it leaves `root`
    /// (see [`check_inside`]), also through a symbolic link of a folder that already exists.
    pub fn store_in(&self, root: &Path) -> Result<PathBuf, BotError> {
        check_inside(root, &self.store).map_err(|m| self.error_at("store", m))
    }

    /// Reads `<root>/xirang.toml`; a missing file gives the defaults.
    pub fn load(root: &Path) -> Result<BotConfig, BotError> {
        let path = root.join(CONFIG_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => BotConfig::parse(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BotConfig::parse(""),
            Err(e) => Err(BotError::Config(format!("{}: {e}", path.display()))),
        }
    }

    /// Checks the values (also those set by a program rather than read from the file).
    pub fn validate(&self) -> Result<(), BotError> {
        let prefix = self.branch_prefix.trim_matches('/');
        if prefix.is_empty() || prefix != self.branch_prefix || !valid_ref_part(prefix) {
            return Err(
                self.error_at("branch_prefix", format!("`{}` is not a usable branch name prefix", self.branch_prefix))
            );
        }
        if self.base.is_empty() || !valid_ref_part(&self.base) {
            return Err(self.error_at("base", format!("`{}` is not a branch name", self.base)));
        }
        if self.base == prefix || self.base.starts_with(&format!("{prefix}/")) {
            return Err(self.error_at("base", format!("`{}` lies under the bot's branch prefix `{prefix}`", self.base)));
        }
        if self.steps.iter().any(Vec::is_empty) {
            return Err(self.error_at("steps", "a step is an empty command"));
        }
        if self.remote.is_empty() {
            return Err(self.error_at("remote", "the remote is empty"));
        }
        if !(self.api_url.starts_with("http://") || self.api_url.starts_with("https://")) {
            return Err(self.error_at("api_url", format!("`{}` is not an http(s) url", self.api_url)));
        }
        check_relative(&self.store).map_err(|m| self.error_at("store", m))?;
        for b in &self.backend_yaml {
            check_relative(b).map_err(|m| self.error_at("backend_yaml", format!("`{b}`: {m}")))?;
        }
        if let Some(a) = &self.allow {
            check_relative(a).map_err(|m| self.error_at("allow", format!("`{a}`: {m}")))?;
        }
        if !(self.index_url.starts_with("http://") || self.index_url.starts_with("https://")) {
            return Err(self.error_at("index_url", format!("`{}` is not an http(s) url", self.index_url)));
        }
        if let Some(p) = &self.proxy
            && ureq::Proxy::new(p).is_err()
        {
            return Err(self.error_at("proxy", format!("`{p}` is not a proxy url (`http://host:port`)")));
        }
        Ok(())
    }

    /// The api url without a trailing slash.
    pub fn api_base(&self) -> &str {
        self.api_url.trim_end_matches('/')
    }
}

/// Where the keys of the `[bot]` table are in the text (the start of each key).
fn key_positions(text: &str) -> BTreeMap<String, Position> {
    let mut out = BTreeMap::new();
    let Ok(doc) = toml::de::DeTable::parse(text) else { return out };
    let Some(bot) = doc.get_ref().get("bot") else { return out };
    if let toml::de::DeValue::Table(t) = bot.get_ref() {
        for (k, _) in t.iter() {
            out.insert(k.get_ref().to_string(), Position::of_offset(text, k.span().start));
        }
    }
    out
}

/// A path the bot writes to, relative to the repository root: not empty, not absolute, no `..`, and
/// not in git's own folder.
fn check_relative(rel: &str) -> Result<(), String> {
    if rel.trim().is_empty() {
        return Err("the path is empty; it must name a place inside the repository".into());
    }
    for c in Path::new(rel).components() {
        match c {
            Component::Prefix(_) | Component::RootDir => {
                return Err(format!("`{rel}` is absolute; it must be relative to the repository root"));
            }
            Component::ParentDir => return Err(format!("`{rel}` leads outside the repository (`..`)")),
            Component::Normal(n) if n.eq_ignore_ascii_case(".git") => {
                return Err(format!("`{rel}` lies in git's own folder"));
            }
            Component::Normal(_) | Component::CurDir => {}
        }
    }
    Ok(())
}

/// `root/<rel>` after [`check_relative`], refused when a part of it that exists already (a symbolic
/// link, say) resolves to a place outside `root`. Parts that do not exist yet are created as plain
/// folders under the last existing one, so they stay inside.
pub fn check_inside(root: &Path, rel: &str) -> Result<PathBuf, String> {
    check_relative(rel)?;
    let real_root = root.canonicalize().map_err(|e| format!("{}: {e}", root.display()))?;
    let mut at = root.to_path_buf();
    for c in Path::new(rel).components() {
        let Component::Normal(n) = c else { continue };
        at.push(n);
        match std::fs::symlink_metadata(&at) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
            Err(e) => return Err(format!("`{rel}`: {}: {e}", at.display())),
        }
        let shown = at.strip_prefix(root).unwrap_or(&at).display().to_string();
        match at.canonicalize() {
            Ok(real) if real.starts_with(&real_root) => {}
            Ok(real) => {
                return Err(format!(
                    "`{rel}` leads outside the repository through a symbolic link (`{shown}` is `{}`)",
                    real.display()
                ));
            }
            Err(_) => {
                return Err(format!("`{rel}` goes through a symbolic link that leads nowhere (`{shown}`)"));
            }
        }
    }
    Ok(root.join(rel))
}

/// A conservative check of a branch name (or part of one).
fn valid_ref_part(s: &str) -> bool {
    !s.is_empty()
        && !s.contains("..")
        && !s.contains("//")
        && !s.ends_with(".lock")
        && !s.starts_with('-')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_unknown_tables() {
        let c = BotConfig::parse("[generate]\nout = \"generated\"\n[generate.x]\ny = 1\n").unwrap();
        assert_eq!(c, BotConfig::default());
        assert_eq!(c.base, "main");
        assert_eq!(c.steps[0], ["xirang-scan", "generate"]);
        let c = BotConfig::parse(
            "[bot]\nforge = \"gitea\"\napi_url = \"http://127.0.0.1:1/api/v1/\"\nowner = \"o\"\nrepo = \"r\"\n\
             steps = [[\"true\"]]\ncheck = []\nretry = { max = 1, base_ms = 1 }\n",
        )
        .unwrap();
        assert!(c.forge.is_gitea());
        assert_eq!(c.api_base(), "http://127.0.0.1:1/api/v1");
        assert_eq!(c.retry, RetryConfig { max: 1, base_ms: 1 });
    }

    #[test]
    fn each_dialect_has_its_public_api_by_default() {
        for (forge, api) in [
            ("github", "https://api.github.com"),
            ("gitlab", "https://gitlab.com/api/v4"),
            ("gitee", "https://gitee.com/api/v5"),
        ] {
            let c = BotConfig::parse(&format!("[bot]\nforge = \"{forge}\"\n")).unwrap();
            assert_eq!(c.api_base(), api);
        }
        let c = BotConfig::parse("[bot]\nforge = \"gitlab\"\napi_url = \"https://git.example.com/api/v4\"\n").unwrap();
        assert_eq!((c.forge, c.api_base()), (ForgeKind::Gitlab, "https://git.example.com/api/v4"));
        let e = BotConfig::parse("[bot]\n\nforge = \"forgejo\"\n").unwrap_err().to_string();
        assert!(e.contains("xirang.toml:3:1") && e.contains("set api_url"), "{e}");
        assert_eq!(ForgeKind::Gitlab.pull_ref(7), "!7");
        assert_eq!(ForgeKind::Gitee.pull_ref(7), "#7");
    }

    #[test]
    fn a_malformed_bot_table_says_where() {
        for (t, at) in [
            ("[generate]\nout = 1\n[bot]\nowner = \"o\"\nretry = 3\n", "xirang.toml:5:9: "),
            ("[bot]\nowner = \"o\"\nfrobnicate = 1\n", "xirang.toml:3:1: "),
            ("[bot]\nsteps = [\"cargo\"]\n", "xirang.toml:2:10: "),
            ("[bot\nowner = 1\n", "xirang.toml:1:"),
            ("[bot]\nowner = \"o\n", "xirang.toml:2:"),
            ("bot = 3\n", "xirang.toml:1:7: "),
        ] {
            let e = BotConfig::parse(t).unwrap_err().to_string();
            assert!(e.starts_with(at), "{t:?}: {e}");
        }
    }

    #[test]
    fn bad_configs_are_errors() {
        for t in [
            "[bot]\nfrobnicate = 1\n",
            "[bot]\nforge = \"gitlab2\"\n",
            "[bot]\nforge = \"gitea\"\n",
            "[bot]\nbase = \"xirang-bot/x\"\n",
            "[bot]\nbranch_prefix = \"\"\n",
            "[bot]\nsteps = [[]]\n",
            "[bot]\napi_url = \"ftp://x\"\n",
            "[bot\n",
            "bot = 3\n",
        ] {
            assert!(BotConfig::parse(t).is_err(), "{t}");
        }
    }

    #[test]
    fn index_url_proxy_and_ca_file() {
        let c = BotConfig::parse("").unwrap();
        assert_eq!(c.index_url, super::super::detect::PYPI_TORCH_URL);
        assert_eq!((c.proxy.as_deref(), c.ca_file.as_deref()), (None, None));
        let c = BotConfig::parse(
            "[bot]\nindex_url = \"https://mirror.example/pypi/torch/json\"\nproxy = \"http://proxy.example:3128\"\n\
             ca_file = \"certs/corp.pem\"\n",
        )
        .unwrap();
        assert_eq!(c.index_url, "https://mirror.example/pypi/torch/json");
        assert_eq!(c.proxy.as_deref(), Some("http://proxy.example:3128"));
        for (text, at) in [
            ("[bot]\nowner = \"o\"\nindex_url = \"file:///x\"\n", "xirang.toml:3:1: [bot] index_url: "),
            ("[bot]\nproxy = \"ftp://proxy\"\n", "xirang.toml:2:1: [bot] proxy: "),
        ] {
            let err = BotConfig::parse(text).unwrap_err().to_string();
            assert!(err.starts_with(at), "{err}");
        }
        // a ca_file without a certificate: a positioned error when the client is made
        let dir = std::env::temp_dir().join(format!("xirang-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bad = dir.join("bad.pem");
        std::fs::write(&bad, "not a certificate\n").unwrap();
        let c = BotConfig::parse(&format!("[bot]\nca_file = \"{}\"\n", bad.display())).unwrap();
        let err = super::super::forge::Http::new(&c).err().expect("an error").to_string();
        assert!(err.starts_with("xirang.toml:2:1: [bot] ca_file: ") && err.contains("no PEM certificate"), "{err}");
        let missing = BotConfig::parse("[bot]\nca_file = \"/nonexistent/ca.pem\"\n").unwrap();
        assert!(super::super::forge::Http::new(&missing).is_err());
        // the platform's bundle, where this machine has one, reads as certificates
        let system = std::path::Path::new("/etc/ssl/certs/ca-certificates.crt");
        if system.is_file() {
            assert!(!super::super::forge::read_pem_certs(system).unwrap().is_empty());
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn paths_that_leave_the_repository_are_refused_with_their_position() {
        for (store, why) in [
            ("../../x", "outside"),
            ("/tmp/x", "absolute"),
            ("schemas/../../x", "outside"),
            (".git/hooks", "git's own folder"),
            ("a/.GIT", "git's own folder"),
            ("", "empty"),
        ] {
            let text = format!("[other]\nx = 1\n\n[bot]\nowner = \"o\"\n  store = \"{store}\"\n");
            let err = BotConfig::parse(&text).unwrap_err().to_string();
            assert!(err.starts_with("xirang.toml:6:3: [bot] store: "), "{store}: {err}");
            assert!(err.contains(why), "{store}: {err}");
        }
        // an inline table and dotted keys have positions too
        let err = BotConfig::parse("bot = { store = \"../x\" }\n").unwrap_err().to_string();
        assert!(err.starts_with("xirang.toml:1:9: "), "{err}");
        let err = BotConfig::parse("x = 1\nbot.base = \"\"\n").unwrap_err().to_string();
        assert!(err.starts_with("xirang.toml:2:5: [bot] base: "), "{err}");
        // set by a program: no position
        let c = BotConfig { store: "../x".into(), ..BotConfig::default() };
        assert!(c.validate().unwrap_err().to_string().starts_with("xirang.toml [bot] store: "));
        for ok in ["schemas", "./schemas", "a/b/c", "."] {
            let c = BotConfig::parse(&format!("[bot]\nstore = \"{ok}\"\n")).unwrap();
            assert_eq!(c.store, ok);
        }
    }

    #[cfg(unix)]
    #[test]
    fn symbolic_links_out_of_the_repository_are_refused() {
        let dir = std::env::temp_dir().join(format!("xirang-bot-config-links-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (root, outside) = (dir.join("repo"), dir.join("outside"));
        std::fs::create_dir_all(root.join("inner/deep")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("out")).unwrap();
        std::os::unix::fs::symlink(root.join("inner"), root.join("in")).unwrap();
        std::os::unix::fs::symlink(dir.join("missing"), root.join("dangling")).unwrap();
        assert_eq!(check_inside(&root, "schemas").unwrap(), root.join("schemas"));
        assert_eq!(check_inside(&root, "in/deep/new/x").unwrap(), root.join("in/deep/new/x"));
        assert!(check_inside(&root, "out").unwrap_err().contains("symbolic link"));
        assert!(check_inside(&root, "out/x/y").unwrap_err().contains("symbolic link"));
        assert!(check_inside(&root, "dangling/x").unwrap_err().contains("symbolic link"));
        assert!(check_inside(&root, "in/../../x").is_err());
        let c = BotConfig::parse("[bot]\nstore = \"out/s\"\n").unwrap();
        let err = c.store_in(&root).unwrap_err().to_string();
        assert!(err.starts_with("xirang.toml:2:1: [bot] store: "), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
