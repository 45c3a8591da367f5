//! The forge's REST API (GitHub, Gitea/Forgejo, GitLab merge requests, Gitee) over `ureq`, with bounded
//! retries and exponential backoff for 5xx, 429 and transport errors. The token travels only in the
//! dialect's header (Gitee: the `access_token` parameter its API documents); messages name requests
//! without their query, and every message built from a response has the token redacted.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::config::{BotConfig, ForgeKind};
use super::{BotError, Log};

/// The longest single backoff, whatever the server's `Retry-After` says.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// Pages of open pull requests read at most when filtering client-side.
const MAX_PAGES: u32 = 20;
/// The largest answer of an API (the forge's, the package index's JSON) read, in bytes.
pub const MAX_API_BODY: u64 = 16 << 20;
/// The largest download (a wheel), in bytes, whatever the index announces.
pub const MAX_DOWNLOAD: u64 = 2 << 30;

/// An HTTP client with the bot's retry policy.
pub struct Http {
    agent: ureq::Agent,
    retries: u32,
    base_ms: u64,
}

/// Where the platform keeps its certificate bundle (Debian/Ubuntu, Fedora/RHEL, openSUSE, Alpine and
/// macOS), as curl and OpenSSL look for it; `SSL_CERT_FILE` first.
const PLATFORM_BUNDLES: [&str; 5] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
];

/// The certificates of a PEM file, or why there are none.
pub fn read_pem_certs(path: &Path) -> Result<Vec<ureq::tls::Certificate<'static>>, String> {
    let bytes = crate::fsio::read_bytes(path, 64 << 20).map_err(|e| format!("{}: {e}", path.display()))?;
    let certs: Vec<ureq::tls::Certificate<'static>> = ureq::tls::parse_pem(&bytes)
        .filter_map(|item| match item {
            Ok(ureq::tls::PemItem::Certificate(c)) => Some(c.to_owned()),
            _ => None,
        })
        .collect();
    if certs.is_empty() {
        return Err(format!("{}: no PEM certificate in it", path.display()));
    }
    Ok(certs)
}

/// The platform's certificate store: `SSL_CERT_FILE`, else the first system bundle that holds
/// certificates. `None` when there is none (the bundled web roots are used).
fn platform_roots() -> Option<Vec<ureq::tls::Certificate<'static>>> {
    let env = std::env::var_os("SSL_CERT_FILE").map(std::path::PathBuf::from);
    env.into_iter().chain(PLATFORM_BUNDLES.iter().map(std::path::PathBuf::from)).find_map(|p| read_pem_certs(&p).ok())
}

/// Why a request got no response: worth a retry (transport) or not (an answer beyond the limits).
enum Failure {
    Transport(String),
    Refused(String),
}

/// A response: status, `Retry-After` seconds, body text.
struct Resp {
    status: u16,
    retry_after: Option<u64>,
    body: String,
}

impl Http {
    /// The client of `[bot]`: its proxy (else the environment's), the certificate authorities of
    /// its `ca_file` (else the platform's store, else the bundled web roots), its timeout and
    /// retry policy. A `ca_file` that cannot be read or holds no certificate is an error.
    pub fn new(cfg: &BotConfig) -> Result<Http, BotError> {
        let proxy = match &cfg.proxy {
            Some(p) => Some(ureq::Proxy::new(p).map_err(|e| cfg.error_at("proxy", format!("`{p}`: {e}")))?),
            None => ureq::Proxy::try_from_env(),
        };
        let roots = match &cfg.ca_file {
            Some(f) => {
                let certs = read_pem_certs(Path::new(f)).map_err(|m| cfg.error_at("ca_file", m))?;
                ureq::tls::RootCerts::from(certs)
            }
            None => platform_roots().map(ureq::tls::RootCerts::from).unwrap_or(ureq::tls::RootCerts::WebPki),
        };
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(cfg.timeout_s.max(1))))
            .user_agent("xirang-bot")
            .proxy(proxy)
            .tls_config(ureq::tls::TlsConfig::builder().root_certs(roots).build())
            .build()
            .into();
        Ok(Http { agent, retries: cfg.retry.max, base_ms: cfg.retry.base_ms })
    }

    fn backoff(&self, attempt: u32, retry_after: Option<u64>) -> Duration {
        let exp = self.base_ms.saturating_mul(1u64 << attempt.min(20)).min(30_000);
        let d = Duration::from_millis(exp);
        match retry_after {
            Some(s) => d.max(Duration::from_secs(s)).min(MAX_BACKOFF),
            None => d,
        }
    }

    fn once(&self, method: &str, url: &str, headers: &[(&str, String)], body: Option<&str>) -> Result<Resp, Failure> {
        let resp = match method {
            "GET" => {
                let mut r = self.agent.get(url);
                for (k, v) in headers {
                    r = r.header(*k, v.as_str());
                }
                r.call()
            }
            "POST" | "PATCH" | "PUT" => {
                let mut r = match method {
                    "POST" => self.agent.post(url),
                    "PUT" => self.agent.put(url),
                    _ => self.agent.patch(url),
                };
                for (k, v) in headers {
                    r = r.header(*k, v.as_str());
                }
                r.content_type("application/json").send(body.unwrap_or("{}"))
            }
            "DELETE" => {
                let mut r = self.agent.delete(url);
                for (k, v) in headers {
                    r = r.header(*k, v.as_str());
                }
                r.call()
            }
            _ => return Err(Failure::Refused(format!("unsupported method {method}"))),
        };
        let mut resp = resp.map_err(|e| match e {
            // a certificate the trust store rejects does not get better on a retry
            ureq::Error::Rustls(_) | ureq::Error::Tls(_) => Failure::Refused(format!(
                "{e} (the certificate authorities trusted are `[bot] ca_file`, else SSL_CERT_FILE or the system \
                 bundle, else the bundled web roots)"
            )),
            e => Failure::Transport(e.to_string()),
        })?;
        let status = resp.status().as_u16();
        let retry_after =
            resp.headers().get("retry-after").and_then(|v| v.to_str().ok()).and_then(|s| s.trim().parse().ok());
        if let Some(n) = resp.body().content_length()
            && n > MAX_API_BODY
        {
            return Err(Failure::Refused(format!(
                "the answer announces {n} bytes, more than the {MAX_API_BODY} bytes accepted; not read"
            )));
        }
        // the limit also holds when no length is announced (chunked, or until the connection closes)
        let body = resp.body_mut().with_config().limit(MAX_API_BODY).read_to_string().map_err(|e| match e {
            ureq::Error::BodyExceedsLimit(_) => {
                Failure::Refused(format!("the answer is longer than the {MAX_API_BODY} bytes accepted; not read"))
            }
            e => Failure::Transport(e.to_string()),
        })?;
        Ok(Resp { status, retry_after, body })
    }

    /// One request with retries. `what` names it in messages (`POST /repos/o/r/pulls`); `redact` is
    /// removed from every message.
    fn request(
        &self,
        log: &mut Log<'_>,
        method: &str,
        url: &str,
        what: &str,
        headers: &[(&str, String)],
        body: Option<&str>,
    ) -> Result<Resp, BotError> {
        let mut attempt = 0u32;
        loop {
            let (message, retry_after) = match self.once(method, url, headers, body) {
                Ok(r) if (200..300).contains(&r.status) => return Ok(r),
                Ok(r) if r.status < 500 && r.status != 429 => {
                    return Err(BotError::Api {
                        what: what.to_string(),
                        status: r.status,
                        message: log.redact(&api_message(&r.body)),
                    });
                }
                Ok(r) => (format!("HTTP {}: {}", r.status, api_message(&r.body)), r.retry_after),
                Err(Failure::Refused(m)) => {
                    return Err(BotError::Api { what: what.to_string(), status: 0, message: log.redact(&m) });
                }
                Err(Failure::Transport(e)) => (e, None),
            };
            if attempt >= self.retries {
                return Err(BotError::ApiExhausted {
                    what: what.to_string(),
                    attempts: attempt + 1,
                    last: log.redact(&message),
                });
            }
            let wait = self.backoff(attempt, retry_after);
            let message = log.redact(&message);
            log.line(&format!("{what}: {message}; retry {}/{} in {} ms", attempt + 1, self.retries, wait.as_millis()));
            std::thread::sleep(wait);
            attempt += 1;
        }
    }

    /// Downloads `url` into `dest`, streamed to disk and hashed on the way; returns the sha256 (hex).
    /// `size` is the length the index announced: a server that announces (`Content-Length`) or sends
    /// more is cut off there, never read to its end, and so is anything beyond [`MAX_DOWNLOAD`]; fewer
    /// bytes than announced is an error too. Retries follow the policy (5xx, 429, transport errors
    /// before the body).
    pub fn download(
        &self,
        log: &mut Log<'_>,
        url: &str,
        dest: &std::path::Path,
        size: Option<u64>,
    ) -> Result<String, BotError> {
        let what = format!("GET {url}");
        let upstream = |m: String| BotError::Upstream(format!("{what}: {m}"));
        if let Some(n) = size
            && n > MAX_DOWNLOAD
        {
            return Err(upstream(format!("the index announces {n} bytes, more than the {MAX_DOWNLOAD} accepted")));
        }
        let cap = size.unwrap_or(MAX_DOWNLOAD);
        let mut attempt = 0u32;
        loop {
            let err = match self.agent.get(url).call() {
                Ok(mut resp) if resp.status().is_success() => {
                    if let Some(n) = resp.body().content_length()
                        && n > cap
                    {
                        return Err(upstream(match size {
                            Some(s) => format!("the server announces {n} bytes, the index {s}; not downloaded"),
                            None => format!("the server announces {n} bytes, more than the {cap} accepted"),
                        }));
                    }
                    let reader = resp.body_mut().with_config().limit(u64::MAX).reader();
                    return save_capped(reader, dest, cap, size).map_err(|e| match e {
                        Saved::Io(e) => BotError::io(dest, e),
                        Saved::TooLong => upstream(match size {
                            Some(s) => format!("more than the {s} bytes the index announced; download stopped"),
                            None => format!("more than {cap} bytes; download stopped"),
                        }),
                        Saved::TooShort(n) => {
                            upstream(format!("{n} bytes, the index announced {}", size.unwrap_or_default()))
                        }
                    });
                }
                Ok(resp) if resp.status().as_u16() < 500 && resp.status().as_u16() != 429 => {
                    return Err(BotError::Api { what, status: resp.status().as_u16(), message: String::new() });
                }
                Ok(resp) => format!("HTTP {}", resp.status().as_u16()),
                Err(e) => e.to_string(),
            };
            if attempt >= self.retries {
                return Err(BotError::ApiExhausted { what, attempts: attempt + 1, last: err });
            }
            let wait = self.backoff(attempt, None);
            log.line(&format!("{what}: {err}; retry {}/{} in {} ms", attempt + 1, self.retries, wait.as_millis()));
            std::thread::sleep(wait);
            attempt += 1;
        }
    }

    /// GET a JSON document (the package registry's API); no token.
    pub fn get_json(&self, log: &mut Log<'_>, url: &str) -> Result<Value, BotError> {
        let what = format!("GET {url}");
        let r = self.request(log, "GET", url, &what, &[("Accept", "application/json".into())], None)?;
        serde_json::from_str(&r.body).map_err(|e| BotError::Api { what, status: r.status, message: e.to_string() })
    }
}

/// Why [`save_capped`] stopped.
enum Saved {
    Io(std::io::Error),
    /// More than the cap.
    TooLong,
    /// Fewer bytes than announced.
    TooShort(u64),
}

/// Copies `reader` into a new file `dest` while hashing it; at most `cap` bytes (one more is an error
/// and ends the reading), exactly `expect` when given. Returns the sha256 (hex).
fn save_capped(
    mut reader: impl std::io::Read,
    dest: &std::path::Path,
    cap: u64,
    expect: Option<u64>,
) -> Result<String, Saved> {
    use sha2::Digest;
    use std::io::Write;
    let mut file = std::fs::File::create(dest).map_err(Saved::Io)?;
    let mut hash = sha2::Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Saved::Io(e)),
        };
        total += n as u64;
        if total > cap {
            return Err(Saved::TooLong);
        }
        hash.update(&buf[..n]);
        file.write_all(&buf[..n]).map_err(Saved::Io)?;
    }
    file.flush().map_err(Saved::Io)?;
    if let Some(e) = expect
        && total != e
    {
        return Err(Saved::TooShort(total));
    }
    Ok(crate::source::hex(&hash.finalize()))
}

/// The message of a forge error body: GitHub's, Gitea's and Gitee's `message` (plus GitHub's
/// `errors`), GitLab's `message` (a string, a list, or field -> messages) or `error`.
fn api_message(body: &str) -> String {
    let Ok(v) = serde_json::from_str::<Value>(body) else {
        return body.chars().take(200).collect();
    };
    let mut m = match v.get("message") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => items.iter().map(flat).collect::<Vec<_>>().join("; "),
        Some(Value::Object(fields)) => {
            fields.iter().map(|(k, x)| format!("{k} {}", flat(x))).collect::<Vec<_>>().join("; ")
        }
        _ => String::new(),
    };
    if m.is_empty()
        && let Some(e) = v.get("error")
    {
        m = flat(e);
        if let Some(d) = v.get("error_description").and_then(Value::as_str) {
            m = format!("{m}: {d}");
        }
    }
    if let Some(errs) = v.get("errors").and_then(Value::as_array) {
        let details: Vec<String> = errs
            .iter()
            .map(|e| match e.get("message").and_then(Value::as_str) {
                Some(s) => s.to_string(),
                None => e.to_string(),
            })
            .collect();
        if !details.is_empty() {
            m = format!("{m} ({})", details.join("; "));
        }
    }
    m.chars().take(500).collect()
}

/// A JSON value as words: strings as they are, lists joined.
fn flat(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(flat).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

/// A pull request (a merge request on GitLab), as much of it as the bot reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pull {
    /// The number people write (GitLab: the merge request's `iid`).
    pub number: u64,
    pub url: String,
    pub title: String,
    pub body: String,
    pub head_ref: String,
    pub head_sha: String,
    /// Names of the labels on it.
    pub labels: Vec<String>,
    /// Closed by merging (GitHub's `merged_at`, Gitea's `merged`, Gitee's and GitLab's state `merged`).
    pub merged: bool,
}

#[derive(Deserialize)]
struct PullJson {
    number: u64,
    #[serde(default)]
    html_url: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    body: Option<String>,
    head: HeadJson,
    #[serde(default)]
    labels: Vec<LabelJson>,
    #[serde(default)]
    merged_at: Option<String>,
    #[serde(default)]
    merged: Option<bool>,
    #[serde(default)]
    state: Option<String>,
}

#[derive(Deserialize)]
struct HeadJson {
    #[serde(rename = "ref")]
    reference: String,
    #[serde(default)]
    sha: Option<String>,
}

impl From<PullJson> for Pull {
    fn from(p: PullJson) -> Pull {
        Pull {
            number: p.number,
            url: p.html_url.unwrap_or_default(),
            title: p.title.unwrap_or_default(),
            body: p.body.unwrap_or_default(),
            head_ref: p.head.reference,
            head_sha: p.head.sha.unwrap_or_default(),
            labels: p.labels.into_iter().map(|l| l.name).collect(),
            merged: p.merged_at.is_some() || p.merged == Some(true) || p.state.as_deref() == Some("merged"),
        }
    }
}

/// A GitLab merge request (API v4).
#[derive(Deserialize)]
struct MergeRequestJson {
    iid: u64,
    #[serde(default)]
    web_url: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    description: Option<String>,
    source_branch: String,
    #[serde(default)]
    sha: Option<String>,
    #[serde(default)]
    labels: Vec<String>,
    #[serde(default)]
    state: Option<String>,
}

impl From<MergeRequestJson> for Pull {
    fn from(m: MergeRequestJson) -> Pull {
        Pull {
            number: m.iid,
            url: m.web_url.unwrap_or_default(),
            title: m.title.unwrap_or_default(),
            body: m.description.unwrap_or_default(),
            head_ref: m.source_branch,
            head_sha: m.sha.unwrap_or_default(),
            labels: m.labels,
            merged: m.state.as_deref() == Some("merged"),
        }
    }
}

#[derive(Deserialize)]
struct LabelJson {
    #[serde(default)]
    id: Option<u64>,
    name: String,
}

#[derive(Deserialize)]
struct CommentJson {
    #[serde(default)]
    body: Option<String>,
    /// GitLab: a note the forge wrote itself (label changes, pushes).
    #[serde(default)]
    system: bool,
}

/// A label to put on a pull request: name, colour (`rrggbb`), description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelSpec {
    pub name: String,
    pub color: String,
    pub description: String,
}

/// The forge API of one repository, in the dialect of `[bot] forge`:
///
/// | | GitHub | Gitea, Forgejo | GitLab (v4) | Gitee (v5) |
/// |---|---|---|---|---|
/// | token | `Authorization: Bearer` | `Authorization: token` | `PRIVATE-TOKEN` | `access_token` parameter |
/// | repository | `/repos/O/R` | `/repos/O/R` | `/projects/O%2FR` | `/repos/O/R` |
/// | pull requests | `/pulls` | `/pulls` | `/merge_requests` (by `iid`) | `/pulls` |
/// | update, close | `PATCH` | `PATCH` | `PUT`, `state_event=close` | `PATCH` |
/// | comments | `/issues/N/comments` | `/issues/N/comments` | `/merge_requests/N/notes` | `/pulls/N/comments` |
/// | labels on it | `/issues/N/labels` by name | by id | `add_labels` / `remove_labels` | `/pulls/N/labels` by name |
/// | pages | `per_page` 100 | `limit` 50 | `per_page` 100 | `per_page` 100 |
pub struct Forge<'a> {
    http: &'a Http,
    kind: ForgeKind,
    base: String,
    owner: String,
    repo: String,
    token: String,
}

/// Pages read of a listing: the dialect's page size and how many full pages at most.
fn page_size(kind: ForgeKind) -> usize {
    if kind.is_gitea() { 50 } else { 100 }
}

impl<'a> Forge<'a> {
    pub fn new(http: &'a Http, cfg: &BotConfig, token: String) -> Result<Forge<'a>, BotError> {
        if cfg.owner.is_empty() || cfg.repo.is_empty() {
            return Err(BotError::Config("xirang.toml [bot]: owner and repo are needed to open pull requests".into()));
        }
        if token.is_empty() {
            return Err(BotError::Config(format!("${} is empty", cfg.token_env)));
        }
        Ok(Forge {
            http,
            kind: cfg.forge,
            base: cfg.api_base().to_string(),
            owner: cfg.owner.clone(),
            repo: cfg.repo.clone(),
            token,
        })
    }

    /// How this forge writes a reference to pull request `n` (`#n`, GitLab `!n`).
    pub fn pull_ref(&self, n: u64) -> String {
        self.kind.pull_ref(n)
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        match self.kind {
            ForgeKind::Github => vec![
                ("Authorization", format!("Bearer {}", self.token)),
                ("Accept", "application/vnd.github+json".into()),
                ("X-GitHub-Api-Version", "2022-11-28".into()),
            ],
            ForgeKind::Gitea | ForgeKind::Forgejo => {
                vec![("Authorization", format!("token {}", self.token)), ("Accept", "application/json".into())]
            }
            ForgeKind::Gitlab => vec![("PRIVATE-TOKEN", self.token.clone()), ("Accept", "application/json".into())],
            // Gitee reads the token from the `access_token` parameter (see `call`)
            ForgeKind::Gitee => vec![("Accept", "application/json".into())],
        }
    }

    /// The repository's API root: `/repos/O/R`, GitLab's `/projects/O%2FR`.
    fn root(&self) -> String {
        match self.kind {
            ForgeKind::Gitlab => format!("/projects/{}", enc(&format!("{}/{}", self.owner, self.repo))),
            _ => format!("/repos/{}/{}", enc(&self.owner), enc(&self.repo)),
        }
    }

    fn call(&self, log: &mut Log<'_>, method: &str, path: &str, body: Option<Value>) -> Result<Value, BotError> {
        let mut url = format!("{}{}{path}", self.base, self.root());
        if self.kind == ForgeKind::Gitee {
            url.push(if path.contains('?') { '&' } else { '?' });
            url.push_str(&format!("access_token={}", enc(&self.token)));
        }
        let shown_root = match self.kind {
            ForgeKind::Gitlab => format!("/projects/{}/{}", self.owner, self.repo),
            _ => format!("/repos/{}/{}", self.owner, self.repo),
        };
        let what = format!("{method} {shown_root}{}", path.split('?').next().unwrap_or(path));
        let text = body.map(|b| b.to_string());
        let r = self.http.request(log, method, &url, &what, &self.headers(), text.as_deref())?;
        if r.body.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&r.body).map_err(|e| BotError::Api {
            what,
            status: r.status,
            message: format!("response is not JSON: {e}"),
        })
    }

    fn pulls_from(&self, v: Value, what: &str) -> Result<Vec<Pull>, BotError> {
        let bad = |e: serde_json::Error| BotError::Api {
            what: what.to_string(),
            status: 200,
            message: format!("unexpected pull request list: {e}"),
        };
        if self.kind == ForgeKind::Gitlab {
            let list: Vec<MergeRequestJson> = serde_json::from_value(v).map_err(bad)?;
            return Ok(list.into_iter().map(Pull::from).collect());
        }
        let list: Vec<PullJson> = serde_json::from_value(v).map_err(bad)?;
        Ok(list.into_iter().map(Pull::from).collect())
    }

    fn pull_from(&self, v: Value, what: &str, status: u16) -> Result<Pull, BotError> {
        let bad = |e: serde_json::Error| BotError::Api {
            what: what.to_string(),
            status,
            message: format!("unexpected pull request: {e}"),
        };
        if self.kind == ForgeKind::Gitlab {
            return serde_json::from_value::<MergeRequestJson>(v).map(Pull::from).map_err(bad);
        }
        serde_json::from_value::<PullJson>(v).map(Pull::from).map_err(bad)
    }

    /// The listing of pull requests in `state` (`open` or `closed`), page `page`, for `branch` when
    /// the dialect can filter by it on the server (the answer is filtered again here).
    fn list_path(&self, state: &str, branch: Option<&str>, page: u32) -> String {
        let n = page_size(self.kind);
        match self.kind {
            ForgeKind::Gitlab => {
                let state = if state == "open" { "opened" } else { state };
                let mut p = format!("/merge_requests?state={state}&per_page={n}&page={page}");
                if let Some(b) = branch {
                    p.push_str(&format!("&source_branch={}", enc(b)));
                }
                p
            }
            ForgeKind::Gitea | ForgeKind::Forgejo => format!("/pulls?state={state}&limit={n}&page={page}"),
            ForgeKind::Github | ForgeKind::Gitee => {
                let mut p = format!("/pulls?state={state}&per_page={n}&page={page}");
                if let Some(b) = branch {
                    p.push_str(&format!("&head={}:{}", enc(&self.owner), enc(b)));
                }
                p
            }
        }
    }

    /// Pull requests in `state`, every page (up to [`MAX_PAGES`]), until `stop` finds one.
    fn scan_pulls(
        &self,
        log: &mut Log<'_>,
        state: &str,
        branch: Option<&str>,
        mut stop: impl FnMut(&Pull) -> bool,
    ) -> Result<(Vec<Pull>, Option<Pull>), BotError> {
        let mut seen = Vec::new();
        for page in 1..=MAX_PAGES {
            let path = self.list_path(state, branch, page);
            let got = self.pulls_from(self.call(log, "GET", &path, None)?, "GET pulls")?;
            let n = got.len();
            for p in got {
                if stop(&p) {
                    return Ok((seen, Some(p)));
                }
                seen.push(p);
            }
            if n < page_size(self.kind) {
                break;
            }
        }
        Ok((seen, None))
    }

    /// The open pull request whose head is `branch` of this repository.
    pub fn find_open_pull(&self, log: &mut Log<'_>, branch: &str) -> Result<Option<Pull>, BotError> {
        // filtered again here: a server that ignores the filter must not make us update someone
        // else's pull request
        Ok(self.scan_pulls(log, "open", Some(branch), |p| p.head_ref == branch)?.1)
    }

    /// A pull request for `branch` that was closed without being merged: a person declined it.
    pub fn find_declined_pull(&self, log: &mut Log<'_>, branch: &str) -> Result<Option<Pull>, BotError> {
        Ok(self.scan_pulls(log, "closed", Some(branch), |p| p.head_ref == branch && !p.merged)?.1)
    }

    /// Every open pull request (paged).
    pub fn open_pulls(&self, log: &mut Log<'_>) -> Result<Vec<Pull>, BotError> {
        Ok(self.scan_pulls(log, "open", None, |_| false)?.0)
    }

    pub fn create_pull(
        &self,
        log: &mut Log<'_>,
        title: &str,
        body: &str,
        head: &str,
        base: &str,
    ) -> Result<Pull, BotError> {
        let (path, input) = match self.kind {
            ForgeKind::Gitlab => (
                "/merge_requests",
                json!({"source_branch": head, "target_branch": base, "title": title, "description": body}),
            ),
            ForgeKind::Gitee => ("/pulls", json!({"title": title, "body": body, "head": head, "base": base})),
            _ => (
                "/pulls",
                json!({"title": title, "body": body, "head": head, "base": base, "maintainer_can_modify": true}),
            ),
        };
        let v = self.call(log, "POST", path, Some(input))?;
        self.pull_from(v, &format!("POST {}", path.trim_start_matches('/')), 201)
    }

    pub fn update_pull(&self, log: &mut Log<'_>, number: u64, title: &str, body: &str) -> Result<(), BotError> {
        match self.kind {
            ForgeKind::Gitlab => self.call(
                log,
                "PUT",
                &format!("/merge_requests/{number}"),
                Some(json!({"title": title, "description": body})),
            )?,
            _ => self.call(log, "PATCH", &format!("/pulls/{number}"), Some(json!({"title": title, "body": body})))?,
        };
        Ok(())
    }

    pub fn close_pull(&self, log: &mut Log<'_>, number: u64) -> Result<(), BotError> {
        match self.kind {
            ForgeKind::Gitlab => {
                self.call(log, "PUT", &format!("/merge_requests/{number}"), Some(json!({"state_event": "close"})))?
            }
            _ => self.call(log, "PATCH", &format!("/pulls/{number}"), Some(json!({"state": "closed"})))?,
        };
        Ok(())
    }

    /// Where the comments of pull request `number` live.
    fn comments_path(&self, number: u64) -> String {
        match self.kind {
            ForgeKind::Gitlab => format!("/merge_requests/{number}/notes"),
            ForgeKind::Gitee => format!("/pulls/{number}/comments"),
            _ => format!("/issues/{number}/comments"),
        }
    }

    pub fn comment(&self, log: &mut Log<'_>, number: u64, body: &str) -> Result<(), BotError> {
        self.call(log, "POST", &self.comments_path(number), Some(json!({ "body": body })))?;
        Ok(())
    }

    /// Bodies of the comments of a pull request (first 100; GitLab's system notes left out).
    pub fn comments(&self, log: &mut Log<'_>, number: u64) -> Result<Vec<String>, BotError> {
        let path = match self.kind {
            ForgeKind::Gitea | ForgeKind::Forgejo => self.comments_path(number),
            ForgeKind::Gitlab => format!("{}?per_page=100&sort=asc", self.comments_path(number)),
            _ => format!("{}?per_page=100", self.comments_path(number)),
        };
        let v = self.call(log, "GET", &path, None)?;
        let list: Vec<CommentJson> = serde_json::from_value(v).map_err(|e| BotError::Api {
            what: "GET comments".into(),
            status: 200,
            message: format!("unexpected comment list: {e}"),
        })?;
        Ok(list.into_iter().filter(|c| !c.system).filter_map(|c| c.body).collect())
    }

    /// The repository's labels: name -> id (GitLab and Gitee address labels by name).
    fn repo_labels(&self, log: &mut Log<'_>) -> Result<BTreeMap<String, Option<u64>>, BotError> {
        let path = match self.kind {
            ForgeKind::Gitea | ForgeKind::Forgejo => "/labels?limit=50",
            ForgeKind::Gitee => "/labels",
            _ => "/labels?per_page=100",
        };
        let v = self.call(log, "GET", path, None)?;
        let existing: Vec<LabelJson> = serde_json::from_value(v).map_err(|e| BotError::Api {
            what: "GET labels".into(),
            status: 200,
            message: format!("unexpected label list: {e}"),
        })?;
        Ok(existing.into_iter().map(|l| (l.name, l.id)).collect())
    }

    /// Creates the labels that are missing, then adds them all to the pull request.
    pub fn label_pull(&self, log: &mut Log<'_>, number: u64, labels: &[LabelSpec]) -> Result<(), BotError> {
        if labels.is_empty() {
            return Ok(());
        }
        let mut ids = self.repo_labels(log)?;
        for l in labels {
            if ids.contains_key(&l.name) {
                continue;
            }
            let color = match self.kind {
                ForgeKind::Github | ForgeKind::Gitee => l.color.clone(),
                _ => format!("#{}", l.color),
            };
            let created = self.call(
                log,
                "POST",
                "/labels",
                Some(json!({"name": l.name, "color": color, "description": l.description})),
            )?;
            let id = created.get("id").and_then(Value::as_u64);
            log.line(&format!("created label `{}`", l.name));
            ids.insert(l.name.clone(), id);
        }
        let names: Vec<&str> = labels.iter().map(|l| l.name.as_str()).collect();
        match self.kind {
            ForgeKind::Gitlab => {
                let body = json!({ "add_labels": names.join(",") });
                self.call(log, "PUT", &format!("/merge_requests/{number}"), Some(body))?
            }
            // Gitee: the body is the list of names itself
            ForgeKind::Gitee => self.call(log, "POST", &format!("/pulls/{number}/labels"), Some(json!(names)))?,
            ForgeKind::Gitea | ForgeKind::Forgejo => {
                let list: Vec<u64> = labels.iter().filter_map(|l| ids.get(&l.name).copied().flatten()).collect();
                self.call(log, "POST", &format!("/issues/{number}/labels"), Some(json!({ "labels": list })))?
            }
            ForgeKind::Github => {
                self.call(log, "POST", &format!("/issues/{number}/labels"), Some(json!({ "labels": names })))?
            }
        };
        Ok(())
    }

    /// Removes labels from a pull request (by name on GitHub and Gitee, by id on Gitea, all at once on
    /// GitLab); a label already gone (404) is not an error.
    pub fn unlabel_pull(&self, log: &mut Log<'_>, number: u64, names: &[String]) -> Result<(), BotError> {
        if names.is_empty() {
            return Ok(());
        }
        if self.kind == ForgeKind::Gitlab {
            let body = json!({ "remove_labels": names.join(",") });
            self.call(log, "PUT", &format!("/merge_requests/{number}"), Some(body))?;
            for name in names {
                log.line(&format!("removed label `{name}`"));
            }
            return Ok(());
        }
        let ids = if self.kind.is_gitea() { self.repo_labels(log)? } else { BTreeMap::new() };
        for name in names {
            let path = match self.kind {
                ForgeKind::Gitea | ForgeKind::Forgejo => match ids.get(name).copied().flatten() {
                    Some(id) => format!("/issues/{number}/labels/{id}"),
                    None => continue,
                },
                ForgeKind::Gitee => format!("/pulls/{number}/labels/{}", enc(name)),
                _ => format!("/issues/{number}/labels/{}", enc(name)),
            };
            match self.call(log, "DELETE", &path, None) {
                Ok(_) | Err(BotError::Api { status: 404, .. }) => log.line(&format!("removed label `{name}`")),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Percent-encodes a path or query component (RFC 3986 unreserved characters pass).
pub(crate) fn enc(s: &str) -> String {
    let mut o = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            o.push(b as char);
        } else {
            o.push_str(&format!("%{b:02X}"));
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_and_encoding() {
        assert_eq!(
            api_message(r#"{"message":"Validation Failed","errors":[{"message":"A pull request already exists"}]}"#),
            "Validation Failed (A pull request already exists)"
        );
        assert_eq!(api_message("<html>"), "<html>");
        // GitLab's shapes
        assert_eq!(api_message(r#"{"message":"401 Unauthorized"}"#), "401 Unauthorized");
        assert_eq!(
            api_message(r#"{"message":["Another open merge request already exists for this source branch: !1"]}"#),
            "Another open merge request already exists for this source branch: !1"
        );
        assert_eq!(
            api_message(r#"{"message":{"color":["must be a valid color code"]}}"#),
            "color must be a valid color code"
        );
        assert_eq!(api_message(r#"{"error":"title is missing"}"#), "title is missing");
        assert_eq!(enc("xirang-bot/pytorch-v2.4.0"), "xirang-bot%2Fpytorch-v2.4.0");
    }
}
