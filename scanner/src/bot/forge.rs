//! The forge's REST API (GitHub, and Gitea/Forgejo which share most of it) over `ureq`, with bounded
//! retries and exponential backoff for 5xx, 429 and transport errors. The token travels only in the
//! `Authorization` header; every message built from a response has it redacted.

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
            "POST" | "PATCH" => {
                let mut r = if method == "POST" { self.agent.post(url) } else { self.agent.patch(url) };
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

/// The `message` of a forge error body (GitHub and Gitea both use it), plus GitHub's `errors`.
fn api_message(body: &str) -> String {
    let Ok(v) = serde_json::from_str::<Value>(body) else {
        return body.chars().take(200).collect();
    };
    let mut m = v.get("message").and_then(Value::as_str).unwrap_or("").to_string();
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
    m
}

/// A pull request, as much of it as the bot reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pull {
    pub number: u64,
    pub url: String,
    pub title: String,
    pub body: String,
    pub head_ref: String,
    pub head_sha: String,
    /// Names of the labels on it.
    pub labels: Vec<String>,
    /// Closed by merging (GitHub's `merged_at`, Gitea's `merged`).
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
            merged: p.merged_at.is_some() || p.merged == Some(true),
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
}

/// A label to put on a pull request: name, colour (`rrggbb`), description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelSpec {
    pub name: String,
    pub color: String,
    pub description: String,
}

/// The forge API of one repository.
pub struct Forge<'a> {
    http: &'a Http,
    kind: ForgeKind,
    base: String,
    owner: String,
    repo: String,
    token: String,
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

    fn headers(&self) -> Vec<(&'static str, String)> {
        let auth =
            if self.kind.is_gitea() { format!("token {}", self.token) } else { format!("Bearer {}", self.token) };
        vec![
            ("Authorization", auth),
            ("Accept", "application/vnd.github+json".into()),
            ("X-GitHub-Api-Version", "2022-11-28".into()),
        ]
    }

    fn call(&self, log: &mut Log<'_>, method: &str, path: &str, body: Option<Value>) -> Result<Value, BotError> {
        let url = format!("{}/repos/{}/{}{path}", self.base, enc(&self.owner), enc(&self.repo));
        let what = format!("{method} /repos/{}/{}{}", self.owner, self.repo, path.split('?').next().unwrap_or(path));
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

    fn pulls_from(v: Value, what: &str) -> Result<Vec<Pull>, BotError> {
        let list: Vec<PullJson> = serde_json::from_value(v).map_err(|e| BotError::Api {
            what: what.to_string(),
            status: 200,
            message: format!("unexpected pull request list: {e}"),
        })?;
        Ok(list.into_iter().map(Pull::from).collect())
    }

    /// Open pull requests whose head is `branch` of this repository.
    pub fn find_open_pull(&self, log: &mut Log<'_>, branch: &str) -> Result<Option<Pull>, BotError> {
        if self.kind.is_gitea() {
            return Ok(self.open_pulls(log)?.into_iter().find(|p| p.head_ref == branch));
        }
        let path = format!("/pulls?head={}:{}&state=open&per_page=100", enc(&self.owner), enc(branch));
        let v = self.call(log, "GET", &path, None)?;
        // filter again: a server that ignores `head` must not make us update someone else's PR
        Ok(Self::pulls_from(v, "GET pulls")?.into_iter().find(|p| p.head_ref == branch))
    }

    /// A pull request for `branch` that was closed without being merged: a person declined it.
    pub fn find_declined_pull(&self, log: &mut Log<'_>, branch: &str) -> Result<Option<Pull>, BotError> {
        let per_page = if self.kind.is_gitea() { 50 } else { 100 };
        for page in 1..=MAX_PAGES {
            let path = if self.kind.is_gitea() {
                format!("/pulls?state=closed&limit={per_page}&page={page}")
            } else {
                format!("/pulls?head={}:{}&state=closed&per_page={per_page}&page={page}", enc(&self.owner), enc(branch))
            };
            let got = Self::pulls_from(self.call(log, "GET", &path, None)?, "GET pulls")?;
            let n = got.len();
            if let Some(p) = got.into_iter().find(|p| p.head_ref == branch && !p.merged) {
                return Ok(Some(p));
            }
            if n < per_page {
                break;
            }
        }
        Ok(None)
    }

    /// Every open pull request (paged).
    pub fn open_pulls(&self, log: &mut Log<'_>) -> Result<Vec<Pull>, BotError> {
        let mut out = Vec::new();
        for page in 1..=MAX_PAGES {
            let path = if self.kind.is_gitea() {
                format!("/pulls?state=open&limit=50&page={page}")
            } else {
                format!("/pulls?state=open&per_page=100&page={page}")
            };
            let got = Self::pulls_from(self.call(log, "GET", &path, None)?, "GET pulls")?;
            let n = got.len();
            out.extend(got);
            if n == 0 || n < if self.kind.is_gitea() { 50 } else { 100 } {
                break;
            }
        }
        Ok(out)
    }

    pub fn create_pull(
        &self,
        log: &mut Log<'_>,
        title: &str,
        body: &str,
        head: &str,
        base: &str,
    ) -> Result<Pull, BotError> {
        let v = self.call(
            log,
            "POST",
            "/pulls",
            Some(json!({"title": title, "body": body, "head": head, "base": base, "maintainer_can_modify": true})),
        )?;
        serde_json::from_value::<PullJson>(v).map(Pull::from).map_err(|e| BotError::Api {
            what: "POST pulls".into(),
            status: 201,
            message: format!("unexpected pull request: {e}"),
        })
    }

    pub fn update_pull(&self, log: &mut Log<'_>, number: u64, title: &str, body: &str) -> Result<(), BotError> {
        self.call(log, "PATCH", &format!("/pulls/{number}"), Some(json!({"title": title, "body": body})))?;
        Ok(())
    }

    pub fn close_pull(&self, log: &mut Log<'_>, number: u64) -> Result<(), BotError> {
        self.call(log, "PATCH", &format!("/pulls/{number}"), Some(json!({"state": "closed"})))?;
        Ok(())
    }

    pub fn comment(&self, log: &mut Log<'_>, number: u64, body: &str) -> Result<(), BotError> {
        self.call(log, "POST", &format!("/issues/{number}/comments"), Some(json!({ "body": body })))?;
        Ok(())
    }

    /// Bodies of the comments of an issue or pull request (first 100).
    pub fn comments(&self, log: &mut Log<'_>, number: u64) -> Result<Vec<String>, BotError> {
        let path = if self.kind.is_gitea() {
            format!("/issues/{number}/comments")
        } else {
            format!("/issues/{number}/comments?per_page=100")
        };
        let v = self.call(log, "GET", &path, None)?;
        let list: Vec<CommentJson> = serde_json::from_value(v).map_err(|e| BotError::Api {
            what: "GET comments".into(),
            status: 200,
            message: format!("unexpected comment list: {e}"),
        })?;
        Ok(list.into_iter().filter_map(|c| c.body).collect())
    }

    /// Creates the labels that are missing, then adds them all to the pull request.
    pub fn label_pull(&self, log: &mut Log<'_>, number: u64, labels: &[LabelSpec]) -> Result<(), BotError> {
        if labels.is_empty() {
            return Ok(());
        }
        let path = if self.kind.is_gitea() { "/labels?limit=50".to_string() } else { "/labels?per_page=100".into() };
        let v = self.call(log, "GET", &path, None)?;
        let existing: Vec<LabelJson> = serde_json::from_value(v).map_err(|e| BotError::Api {
            what: "GET labels".into(),
            status: 200,
            message: format!("unexpected label list: {e}"),
        })?;
        let mut ids: BTreeMap<String, Option<u64>> = existing.into_iter().map(|l| (l.name, l.id)).collect();
        for l in labels {
            if ids.contains_key(&l.name) {
                continue;
            }
            let color = if self.kind.is_gitea() { format!("#{}", l.color) } else { l.color.clone() };
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
        let body = if self.kind.is_gitea() {
            let list: Vec<u64> = labels.iter().filter_map(|l| ids.get(&l.name).copied().flatten()).collect();
            json!({ "labels": list })
        } else {
            let list: Vec<&str> = labels.iter().map(|l| l.name.as_str()).collect();
            json!({ "labels": list })
        };
        self.call(log, "POST", &format!("/issues/{number}/labels"), Some(body))?;
        Ok(())
    }

    /// Removes labels from a pull request (by name on GitHub, by id on Gitea); a label already
    /// gone (404) is not an error.
    pub fn unlabel_pull(&self, log: &mut Log<'_>, number: u64, names: &[String]) -> Result<(), BotError> {
        if names.is_empty() {
            return Ok(());
        }
        let ids: BTreeMap<String, Option<u64>> = if self.kind.is_gitea() {
            let v = self.call(log, "GET", "/labels?limit=50", None)?;
            let existing: Vec<LabelJson> = serde_json::from_value(v).map_err(|e| BotError::Api {
                what: "GET labels".into(),
                status: 200,
                message: format!("unexpected label list: {e}"),
            })?;
            existing.into_iter().map(|l| (l.name, l.id)).collect()
        } else {
            BTreeMap::new()
        };
        for name in names {
            let key = if self.kind.is_gitea() {
                match ids.get(name).copied().flatten() {
                    Some(id) => id.to_string(),
                    None => continue,
                }
            } else {
                enc(name)
            };
            match self.call(log, "DELETE", &format!("/issues/{number}/labels/{key}"), None) {
                Ok(_) | Err(BotError::Api { status: 404, .. }) => log.line(&format!("removed label `{name}`")),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Percent-encodes a path or query component (RFC 3986 unreserved characters pass).
fn enc(s: &str) -> String {
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
        assert_eq!(enc("xirang-bot/pytorch-v2.4.0"), "xirang-bot%2Fpytorch-v2.4.0");
    }
}
