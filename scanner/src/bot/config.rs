//! The `[bot]` table of the repository-root `xirang.toml`. Other tables belong to other tools and
//! are ignored; unknown keys inside `[bot]` are errors (a typo must not silently change behaviour).

use std::path::Path;

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
}

impl ForgeKind {
    pub fn is_gitea(self) -> bool {
        matches!(self, ForgeKind::Gitea | ForgeKind::Forgejo)
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
    /// REST API base url, without a trailing slash (`https://api.github.com`).
    #[serde(default = "default_api_url")]
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
    }
}

#[derive(Deserialize)]
struct File {
    #[serde(default)]
    bot: Option<toml::Value>,
}

impl BotConfig {
    /// Parses the `[bot]` table of a whole `xirang.toml` text (other tables are ignored; a missing
    /// table gives the defaults).
    pub fn parse(text: &str) -> Result<BotConfig, BotError> {
        let file: File =
            toml::from_str(text).map_err(|e| BotError::Config(format!("{CONFIG_FILE}: {}", e.message())))?;
        let table = file.bot.unwrap_or_else(|| toml::Value::Table(toml::Table::new()));
        let cfg: BotConfig =
            table.try_into().map_err(|e: toml::de::Error| BotError::Config(format!("{CONFIG_FILE} [bot]: {e}")))?;
        cfg.validate()?;
        Ok(cfg)
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

    fn validate(&self) -> Result<(), BotError> {
        let bad = |m: String| Err(BotError::Config(format!("{CONFIG_FILE} [bot]: {m}")));
        let prefix = self.branch_prefix.trim_matches('/');
        if prefix.is_empty() || prefix != self.branch_prefix || !valid_ref_part(prefix) {
            return bad(format!("branch_prefix `{}` is not a usable branch name prefix", self.branch_prefix));
        }
        if self.base.is_empty() || !valid_ref_part(&self.base) {
            return bad(format!("base `{}` is not a branch name", self.base));
        }
        if self.base == prefix || self.base.starts_with(&format!("{prefix}/")) {
            return bad(format!("base `{}` lies under the bot's branch prefix `{prefix}`", self.base));
        }
        if self.steps.iter().any(Vec::is_empty) {
            return bad("a step is an empty command".into());
        }
        if self.remote.is_empty() {
            return bad("remote is empty".into());
        }
        if !(self.api_url.starts_with("http://") || self.api_url.starts_with("https://")) {
            return bad(format!("api_url `{}` is not an http(s) url", self.api_url));
        }
        Ok(())
    }

    /// The api url without a trailing slash.
    pub fn api_base(&self) -> &str {
        self.api_url.trim_end_matches('/')
    }
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
    fn bad_configs_are_errors() {
        for t in [
            "[bot]\nfrobnicate = 1\n",
            "[bot]\nforge = \"gitlab\"\n",
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
}
