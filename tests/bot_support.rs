//! Shared by the bot tests (`#[path]`-included): a fake forge (GitHub's REST endpoints the bot uses,
//! on loopback, in a thread) and a fixture of real git repositories (a bare remote and a working
//! clone with uncommitted user changes) plus a tiny fake PyTorch release folder.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use xirang_scan::bot::{self, BotConfig, BotError, Log, Options, Outcome, Upstream};
use xirang_scan::snapshot::{PytorchSnapshot, Store};
use xirang_scan::source::{self, SourceSpec};
use xirang_scan::version::Version;

pub const TOKEN: &str = "ghp_TESTTOKEN_do_not_print_0123456789";
pub const OWNER: &str = "acme";
pub const REPO: &str = "xirang";

/// One request the fake forge saw.
#[derive(Debug, Clone)]
pub struct Req {
    pub method: String,
    pub path: String,
    pub body: String,
}

/// An injected delay: the next `times` requests matching method and path prefix are answered only after
/// `ms` milliseconds (the forge serves one connection at a time, so later requests wait too).
#[derive(Debug, Clone)]
pub struct Hang {
    pub method: &'static str,
    pub path: String,
    pub ms: u64,
    pub times: u32,
}

/// A streamed answer: `total` bytes of `fill`, with `Content-Length: announce` when given (and the
/// connection closed after the body otherwise); `written` counts what the client actually took.
#[derive(Debug, Clone)]
pub struct Stream {
    pub path: String,
    pub total: u64,
    pub announce: Option<u64>,
    pub fill: u8,
    pub written: u64,
}

/// An injected failure: the next `times` requests matching method and path prefix get `status`.
#[derive(Debug, Clone)]
pub struct Fail {
    pub method: &'static str,
    pub path: String,
    pub status: u16,
    pub times: u32,
}

#[derive(Debug, Clone)]
pub struct Pr {
    pub number: u64,
    pub title: String,
    pub body: String,
    pub head: String,
    pub base: String,
    pub state: String,
    pub labels: Vec<String>,
    pub merged: bool,
}

/// The REST dialect the fake forge answers in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Dialect {
    #[default]
    Github,
    /// GitLab API v4 under `/api/v4`: merge requests by `iid`, `PRIVATE-TOKEN`, `X-Next-Page` paging.
    Gitlab,
    /// Gitee API v5 under `/api/v5`: `access_token` parameter, `total_page` paging.
    Gitee,
    /// Gitea API v1 under `/api/v1`: GitHub's paths, `Authorization: token`, `limit` paging (no `head`
    /// filter), `merged` flags, labels added and removed by id.
    Gitea,
}

impl Dialect {
    /// `[bot] forge`.
    pub fn forge(self) -> &'static str {
        match self {
            Dialect::Github => "github",
            Dialect::Gitlab => "gitlab",
            Dialect::Gitee => "gitee",
            Dialect::Gitea => "gitea",
        }
    }
    /// The api base under the server's url.
    pub fn api_path(self) -> &'static str {
        match self {
            Dialect::Github => "",
            Dialect::Gitlab => "/api/v4",
            Dialect::Gitee => "/api/v5",
            Dialect::Gitea => "/api/v1",
        }
    }
    /// The path prefix of the fixture's repository, as requests spell it.
    pub fn repo_path(self) -> String {
        match self {
            Dialect::Github => format!("/repos/{OWNER}/{REPO}"),
            Dialect::Gitlab => format!("/api/v4/projects/{OWNER}%2F{REPO}"),
            Dialect::Gitee => format!("/api/v5/repos/{OWNER}/{REPO}"),
            Dialect::Gitea => format!("/api/v1/repos/{OWNER}/{REPO}"),
        }
    }
}

#[derive(Debug, Default)]
pub struct State {
    pub dialect: Dialect,
    pub pulls: Vec<Pr>,
    pub labels: Vec<(u64, String, String)>,
    pub comments: Vec<(u64, String)>,
    pub requests: Vec<Req>,
    pub fails: Vec<Fail>,
    pub hangs: Vec<Hang>,
    pub streams: Vec<Stream>,
    /// Routes under `/pypi/` and `/files/`: path -> (content type, bytes).
    pub files: Vec<(String, Vec<u8>)>,
    /// Hosts of the requests that came as to an HTTP proxy (a `CONNECT` tunnel or an absolute-form
    /// target).
    pub proxied: Vec<String>,
    next: u64,
}

pub struct FakeForge {
    pub url: String,
    pub state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
}

impl Drop for FakeForge {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

impl FakeForge {
    pub fn start() -> FakeForge {
        FakeForge::start_as(Dialect::Github)
    }

    /// A fake forge speaking `dialect`.
    pub fn start_as(dialect: Dialect) -> FakeForge {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State { next: 1, dialect, ..State::default() }));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (state.clone(), stop.clone());
        std::thread::spawn(move || {
            // bounded: stops when the test drops the forge, or after five minutes
            let deadline = Instant::now() + Duration::from_secs(300);
            while !sp.load(Ordering::SeqCst) && Instant::now() < deadline {
                match listener.accept() {
                    Ok((s, _)) => {
                        let _ = s.set_nonblocking(false);
                        let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
                        handle(s, &st);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        FakeForge { url, state, stop }
    }

    pub fn fail(&self, method: &'static str, path: &str, status: u16, times: u32) {
        self.state.lock().unwrap().fails.push(Fail { method, path: path.to_string(), status, times });
    }

    pub fn requests(&self) -> Vec<Req> {
        self.state.lock().unwrap().requests.clone()
    }

    /// The hosts of the requests sent to this server as to an HTTP proxy (`GET http://host/path`).
    pub fn proxied(&self) -> Vec<String> {
        self.state.lock().unwrap().proxied.clone()
    }

    pub fn count(&self, method: &str, path_prefix: &str) -> usize {
        self.requests().iter().filter(|r| r.method == method && r.path.starts_with(path_prefix)).count()
    }

    pub fn writes(&self) -> usize {
        self.requests().iter().filter(|r| r.method != "GET").count()
    }

    /// The api base url of this forge (`[bot] api_url`).
    pub fn api_url(&self) -> String {
        format!("{}{}", self.url, self.state.lock().unwrap().dialect.api_path())
    }

    /// Pull request `n` closed by a person, merged or not.
    pub fn close_by_hand(&self, n: u64, merged: bool) {
        let mut s = self.state.lock().unwrap();
        if let Some(p) = s.pulls.iter_mut().find(|p| p.number == n) {
            p.state = "closed".into();
            p.merged = merged;
        }
    }

    /// Pull request `n` opened again by a person.
    pub fn reopen_by_hand(&self, n: u64) {
        let mut s = self.state.lock().unwrap();
        if let Some(p) = s.pulls.iter_mut().find(|p| p.number == n) {
            p.state = "open".into();
        }
    }

    /// A label put on pull request `n` by hand (as a human, or an earlier run, would).
    pub fn add_label(&self, n: u64, name: &str) {
        let mut s = self.state.lock().unwrap();
        if !s.labels.iter().any(|(_, l, _)| l == name) {
            let id = s.labels.len() as u64 + 100;
            s.labels.push((id, name.to_string(), "ededed".into()));
        }
        if let Some(p) = s.pulls.iter_mut().find(|p| p.number == n) {
            p.labels.push(name.to_string());
        }
    }

    pub fn pulls(&self) -> Vec<Pr> {
        self.state.lock().unwrap().pulls.clone()
    }

    pub fn comments(&self) -> Vec<(u64, String)> {
        self.state.lock().unwrap().comments.clone()
    }

    pub fn hang(&self, method: &'static str, path: &str, ms: u64, times: u32) {
        self.state.lock().unwrap().hangs.push(Hang { method, path: path.to_string(), ms, times });
    }

    /// Serves `total` bytes of `fill` at `path` (no `Content-Length` unless `announce`).
    pub fn serve_stream(&self, path: &str, total: u64, announce: Option<u64>, fill: u8) {
        self.state.lock().unwrap().streams.push(Stream { path: path.to_string(), total, announce, fill, written: 0 });
    }

    /// Bytes of a streamed answer the client read (or the kernel buffered) before it hung up.
    pub fn streamed(&self, path: &str) -> u64 {
        self.state.lock().unwrap().streams.iter().find(|s| s.path == path).map(|s| s.written).unwrap_or(0)
    }

    /// Serves `bytes` at `path` (replacing what was served there).
    pub fn serve_file(&self, path: &str, bytes: Vec<u8>) {
        let mut s = self.state.lock().unwrap();
        s.files.retain(|(p, _)| p != path);
        s.files.push((path.to_string(), bytes));
    }
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Some(v) = std::str::from_utf8(&b[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).to_string()
}

fn query(path: &str, key: &str) -> Option<String> {
    let q = path.split_once('?')?.1;
    q.split('&').find_map(|kv| kv.strip_prefix(&format!("{key}="))).map(decode)
}

fn handle(stream: TcpStream, st: &Arc<Mutex<State>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    // a tunnel: the client takes this server for its HTTP proxy (`CONNECT host:port`); the request
    // then comes through the same connection, and is served as the forge
    if let Some(target) = line.strip_prefix("CONNECT ") {
        let host = target.split_whitespace().next().unwrap_or("").rsplit_once(':').map_or("", |h| h.0).to_string();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).is_err() || h == "\r\n" || h.is_empty() {
                break;
            }
        }
        st.lock().unwrap().proxied.push(host);
        if (&stream).write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").is_err() {
            return;
        }
        line.clear();
        if reader.read_line(&mut line).is_err() {
            return;
        }
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let mut path = parts.next().unwrap_or("").to_string();
    // an absolute-form target: the client takes this server for its HTTP proxy; serve it as the forge
    if let Some(rest) = path.strip_prefix("http://") {
        let (host, p) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        st.lock().unwrap().proxied.push(host.to_string());
        path = if p.is_empty() { "/".to_string() } else { p.to_string() };
    }
    let mut len = 0usize;
    let mut auth = String::new();
    let mut chunked = false;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).is_err() || h == "\r\n" || h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            match k.to_ascii_lowercase().as_str() {
                "content-length" => len = v.trim().parse().unwrap_or(0),
                "transfer-encoding" => chunked = v.trim().eq_ignore_ascii_case("chunked"),
                "authorization" => auth = v.trim().to_string(),
                "private-token" => auth = format!("PRIVATE-TOKEN {}", v.trim()),
                _ => {}
            }
        }
    }
    // git's smart HTTP receive-pack (a push): answered by the fake git server
    if let Some(rest) = path.strip_prefix("/git/") {
        git_receive(st, &method, rest, &mut reader, stream, len, chunked);
        return;
    }
    let mut body = vec![0u8; len];
    let _ = reader.read_exact(&mut body);
    let body = String::from_utf8_lossy(&body).to_string();
    let streamed = {
        let s = st.lock().unwrap();
        s.streams.iter().find(|x| x.path == path).cloned()
    };
    if let Some(x) = streamed {
        st.lock().unwrap().requests.push(Req { method, path: path.clone(), body });
        let written = write_stream(stream.try_clone().unwrap(), &x);
        if let Some(y) = st.lock().unwrap().streams.iter_mut().find(|y| y.path == path) {
            y.written = written;
        }
        return;
    }
    let dialect = st.lock().unwrap().dialect;
    let (status, out, ctype, extra) = match dialect {
        Dialect::Github | Dialect::Gitea => {
            let (status, out, ctype) = route(st, &method, &path, &auth, &body);
            (status, out, ctype, Vec::new())
        }
        Dialect::Gitlab => route_gitlab(st, &method, &path, &auth, &body),
        Dialect::Gitee => route_gitee(st, &method, &path, &body),
    };
    let delay = {
        let mut s = st.lock().unwrap();
        let p = path.split('?').next().unwrap_or(&path).to_string();
        match s.hangs.iter_mut().find(|h| h.times > 0 && h.method == method && p.starts_with(&h.path)) {
            Some(h) => {
                h.times -= 1;
                h.ms
            }
            None => 0,
        }
    };
    std::thread::sleep(Duration::from_millis(delay));
    let reason = match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        409 => "Conflict",
        422 => "Unprocessable Entity",
        _ => "Error",
    };
    let mut s = stream;
    let extra: String = extra.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        out.len()
    );
    let _ = s.write_all(head.as_bytes());
    let _ = s.write_all(&out);
    let _ = s.flush();
}

/// How the fake git server answers a push (`/git/<name>.git`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GitPush {
    /// Every ref update refused as a host refuses a force-push to a protected branch (GitHub:
    /// `ng <ref> protected branch hook declined` in the report-status).
    Protected,
    /// The connection dropped in the middle of the pack.
    CutMidway,
}

fn pkt(line: &str) -> String {
    format!("{:04x}{line}", line.len() + 4)
}

/// Reads a request body: `Content-Length` bytes, or chunks.
fn read_body(reader: &mut BufReader<TcpStream>, len: usize, chunked: bool, cap: usize) -> Vec<u8> {
    let mut out = Vec::new();
    if !chunked {
        let mut b = vec![0u8; len.min(cap)];
        let _ = reader.read_exact(&mut b);
        return b;
    }
    loop {
        let mut size = String::new();
        if reader.read_line(&mut size).is_err() {
            break;
        }
        let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or(""), 16).unwrap_or(0);
        if n == 0 {
            let mut end = String::new();
            let _ = reader.read_line(&mut end);
            break;
        }
        let mut b = vec![0u8; n];
        if reader.read_exact(&mut b).is_err() {
            break;
        }
        let mut crlf = [0u8; 2];
        let _ = reader.read_exact(&mut crlf);
        out.extend_from_slice(&b);
        if out.len() >= cap {
            break;
        }
    }
    out
}

/// git's smart HTTP protocol for a push, as a host that refuses it answers: the receive-pack
/// advertisement of an empty repository, then (by the repository's name) a report-status that
/// refuses every update, or a connection dropped mid-pack.
fn git_receive(
    st: &Arc<Mutex<State>>,
    method: &str,
    rest: &str,
    reader: &mut BufReader<TcpStream>,
    mut stream: TcpStream,
    len: usize,
    chunked: bool,
) {
    let full = format!("/git/{rest}");
    let name = rest.split('/').next().unwrap_or("");
    let mode = match name {
        "protected.git" => GitPush::Protected,
        "cut.git" => GitPush::CutMidway,
        _ => {
            st.lock().unwrap().requests.push(Req { method: method.into(), path: full, body: String::new() });
            let _ = stream.write_all(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            return;
        }
    };
    let respond = |mut s: &TcpStream, ctype: &str, body: &[u8]| {
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let _ = s.write_all(head.as_bytes());
        let _ = s.write_all(body);
        let _ = s.flush();
    };
    if method == "GET" && rest.contains("info/refs") {
        st.lock().unwrap().requests.push(Req { method: method.into(), path: full, body: String::new() });
        let mut adv = pkt("# service=git-receive-pack\n");
        adv.push_str("0000");
        adv.push_str(&pkt(&format!("{} capabilities^{{}}\0report-status delete-refs ofs-delta\n", "0".repeat(40))));
        adv.push_str("0000");
        respond(&stream, "application/x-git-receive-pack-advertisement", adv.as_bytes());
        return;
    }
    if mode == GitPush::CutMidway {
        // take the commands and a little of the pack, then hang up
        let got = read_body(reader, len.min(64), false, 64);
        st.lock().unwrap().requests.push(Req {
            method: method.into(),
            path: full,
            body: format!("{} bytes", got.len()),
        });
        let _ = stream.shutdown(std::net::Shutdown::Both);
        return;
    }
    let body = read_body(reader, len, chunked, 64 << 20);
    // the commands: pkt-lines `old new ref[\0caps]` up to a flush
    let mut refs = Vec::new();
    let mut at = 0;
    while at + 4 <= body.len() {
        let Some(n) = std::str::from_utf8(&body[at..at + 4]).ok().and_then(|h| usize::from_str_radix(h, 16).ok())
        else {
            break;
        };
        if n == 0 || at + n > body.len() {
            break;
        }
        let line = String::from_utf8_lossy(&body[at + 4..at + n]).to_string();
        let line = line.split('\0').next().unwrap_or("").trim_end().to_string();
        if let Some(r) = line.split_whitespace().nth(2) {
            refs.push(r.to_string());
        }
        at += n;
    }
    st.lock().unwrap().requests.push(Req { method: method.into(), path: full, body: refs.join(",") });
    let mut out = pkt("unpack ok\n");
    for r in &refs {
        out.push_str(&pkt(&format!("ng {r} protected branch hook declined\n")));
    }
    out.push_str("0000");
    respond(&stream, "application/x-git-receive-pack-result", out.as_bytes());
}

/// Writes a streamed answer until done or until the client hangs up; returns the bytes written.
fn write_stream(mut s: TcpStream, x: &Stream) -> u64 {
    let mut head = String::from("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n");
    match x.announce {
        Some(n) => head.push_str(&format!("Content-Length: {n}\r\n")),
        None => head.push_str("Connection: close\r\n"),
    }
    head.push_str("\r\n");
    if s.write_all(head.as_bytes()).is_err() {
        return 0;
    }
    let _ = s.set_write_timeout(Some(Duration::from_secs(10)));
    let chunk = vec![x.fill; 64 * 1024];
    let mut written = 0u64;
    while written < x.total {
        let n = chunk.len().min((x.total - written) as usize);
        if s.write_all(&chunk[..n]).is_err() {
            break;
        }
        written += n as u64;
    }
    let _ = s.flush();
    let _ = s.shutdown(std::net::Shutdown::Both);
    written
}

fn pr_json(p: &Pr) -> Value {
    json!({"number": p.number, "html_url": format!("https://forge.invalid/{OWNER}/{REPO}/pull/{}", p.number),
           "title": p.title, "body": p.body, "state": p.state,
           "head": {"ref": p.head, "sha": "0000000000000000000000000000000000000000", "label": format!("{OWNER}:{}", p.head)},
           "base": {"ref": p.base},
           "labels": p.labels.iter().map(|l| json!({"name": l})).collect::<Vec<_>>(),
           "merged_at": if p.merged { json!("2026-01-01T00:00:00Z") } else { Value::Null }})
}

fn route(st: &Arc<Mutex<State>>, method: &str, full: &str, auth: &str, body: &str) -> (u16, Vec<u8>, &'static str) {
    let mut s = st.lock().unwrap();
    if let Some((status, bytes, ctype, _)) = pre(&mut s, method, full, body) {
        return (status, bytes, ctype);
    }
    let j = |status: u16, v: Value| (status, v.to_string().into_bytes(), "application/json");
    let path = full.split('?').next().unwrap_or(full).to_string();
    let gitea = s.dialect == Dialect::Gitea;
    let expected = if gitea { format!("token {TOKEN}") } else { format!("Bearer {TOKEN}") };
    if auth != expected {
        // echo what was sent: the bot must redact it
        return j(401, json!({"message": format!("Bad credentials: {auth}")}));
    }
    let prefix = if gitea { format!("/api/v1/repos/{OWNER}/{REPO}") } else { format!("/repos/{OWNER}/{REPO}") };
    let Some(rest) = path.strip_prefix(&prefix) else {
        return j(404, json!({"message": "Not Found"}));
    };
    let input: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let segs: Vec<&str> = rest.trim_start_matches('/').split('/').collect();
    match (method, segs.as_slice()) {
        ("GET", ["pulls"]) => {
            // Gitea has no `head` filter, and pages by `limit` (default 30, at most 50)
            let head = if gitea { None } else { query(full, "head") };
            let state = query(full, "state").unwrap_or_else(|| "open".into());
            let list: Vec<Value> = s
                .pulls
                .iter()
                .filter(|p| state == "all" || p.state == state)
                .filter(|p| head.as_ref().is_none_or(|h| *h == format!("{OWNER}:{}", p.head)))
                .map(|p| {
                    let mut v = pr_json(p);
                    if gitea {
                        v["merged"] = json!(p.merged);
                    }
                    v
                })
                .collect();
            if gitea {
                let per = query(full, "limit").and_then(|v| v.parse().ok()).unwrap_or(30usize).clamp(1, 50);
                let page = query(full, "page").and_then(|v| v.parse().ok()).unwrap_or(1usize).max(1);
                let got: Vec<Value> = list.into_iter().skip((page - 1) * per).take(per).collect();
                return j(200, Value::Array(got));
            }
            j(200, Value::Array(list))
        }
        ("POST", ["pulls"]) => {
            let (Some(title), Some(head), Some(base)) =
                (input["title"].as_str(), input["head"].as_str(), input["base"].as_str())
            else {
                return j(422, json!({"message": "Validation Failed", "errors": [{"message": "missing field"}]}));
            };
            if s.pulls.iter().any(|p| p.state == "open" && p.head == head) {
                return j(
                    422,
                    json!({"message": "Validation Failed",
                           "errors": [{"message": format!("A pull request already exists for {OWNER}:{head}.")}]}),
                );
            }
            let number = s.next;
            s.next += 1;
            let pr = Pr {
                number,
                title: title.into(),
                body: input["body"].as_str().unwrap_or("").into(),
                head: head.into(),
                base: base.into(),
                state: "open".into(),
                labels: vec![],
                merged: false,
            };
            let v = pr_json(&pr);
            s.pulls.push(pr);
            j(201, v)
        }
        ("PATCH", ["pulls", n]) => {
            let n: u64 = n.parse().unwrap_or(0);
            let Some(p) = s.pulls.iter_mut().find(|p| p.number == n) else {
                return j(404, json!({"message": "Not Found"}));
            };
            if let Some(t) = input["title"].as_str() {
                p.title = t.into();
            }
            if let Some(b) = input["body"].as_str() {
                p.body = b.into();
            }
            if let Some(x) = input["state"].as_str() {
                p.state = x.into();
            }
            let v = pr_json(p);
            j(200, v)
        }
        ("GET", ["issues", n, "comments"]) => {
            let n: u64 = n.parse().unwrap_or(0);
            let list: Vec<Value> =
                s.comments.iter().filter(|(i, _)| *i == n).map(|(_, b)| json!({"id": 1, "body": b})).collect();
            j(200, Value::Array(list))
        }
        ("POST", ["issues", n, "comments"]) => {
            let n: u64 = n.parse().unwrap_or(0);
            let b = input["body"].as_str().unwrap_or("").to_string();
            s.comments.push((n, b.clone()));
            j(201, json!({"id": s.comments.len(), "body": b}))
        }
        ("GET", ["labels"]) => {
            let list: Vec<Value> = s.labels.iter().map(|(id, n, c)| json!({"id": id, "name": n, "color": c})).collect();
            j(200, Value::Array(list))
        }
        ("POST", ["labels"]) => {
            let name = input["name"].as_str().unwrap_or("").to_string();
            let color = input["color"].as_str().unwrap_or("").to_string();
            if gitea && !color.starts_with('#') {
                return j(422, json!({"message": "Color: invalid color"}));
            }
            if name.is_empty() || s.labels.iter().any(|(_, n, _)| *n == name) {
                return j(422, json!({"message": "Validation Failed", "errors": [{"code": "already_exists"}]}));
            }
            let id = s.labels.len() as u64 + 100;
            s.labels.push((id, name.clone(), color.clone()));
            j(201, json!({"id": id, "name": name, "color": color}))
        }
        ("POST", ["issues", n, "labels"]) => {
            let n: u64 = n.parse().unwrap_or(0);
            let names: Vec<String> = if gitea {
                // Gitea: label ids
                let ids: Vec<u64> =
                    input["labels"].as_array().into_iter().flatten().filter_map(Value::as_u64).collect();
                if ids.len() != input["labels"].as_array().map_or(0, Vec::len) {
                    return j(422, json!({"message": "labels: ids expected"}));
                }
                let mut names = Vec::new();
                for id in ids {
                    match s.labels.iter().find(|(i, _, _)| *i == id) {
                        Some((_, name, _)) => names.push(name.clone()),
                        None => return j(404, json!({"message": format!("label {id} does not exist")})),
                    }
                }
                names
            } else {
                input["labels"].as_array().into_iter().flatten().filter_map(|l| l.as_str().map(String::from)).collect()
            };
            let known: Vec<String> = s.labels.iter().map(|(_, n, _)| n.clone()).collect();
            let Some(p) = s.pulls.iter_mut().find(|p| p.number == n) else {
                return j(404, json!({"message": "Not Found"}));
            };
            for l in names {
                if !p.labels.contains(&l) {
                    p.labels.push(l.clone());
                }
                if !known.contains(&l) {
                    return j(422, json!({"message": format!("label {l} does not exist")}));
                }
            }
            let v: Vec<Value> = p.labels.iter().map(|l| json!({"name": l})).collect();
            j(200, Value::Array(v))
        }
        // GitHub: DELETE /repos/{owner}/{repo}/issues/{n}/labels/{name}: 200 with the labels left,
        // 404 when the issue does not carry the label
        ("DELETE", ["issues", n, "labels", name]) => {
            let n: u64 = n.parse().unwrap_or(0);
            let name = if gitea {
                // Gitea: by id
                let id: u64 = name.parse().unwrap_or(u64::MAX);
                match s.labels.iter().find(|(i, _, _)| *i == id) {
                    Some((_, name, _)) => name.clone(),
                    None => return j(404, json!({"message": "label does not exist"})),
                }
            } else {
                name.replace("%3A", ":").replace("%2F", "/").replace("%20", " ")
            };
            let Some(p) = s.pulls.iter_mut().find(|p| p.number == n) else {
                return j(404, json!({"message": "Not Found"}));
            };
            let before = p.labels.len();
            p.labels.retain(|l| *l != name);
            if p.labels.len() == before {
                return j(404, json!({"message": "Label does not exist"}));
            }
            let v: Vec<Value> = p.labels.iter().map(|l| json!({"name": l})).collect();
            j(200, Value::Array(v))
        }
        _ => j(404, json!({"message": "Not Found"})),
    }
}

type Answer = (u16, Vec<u8>, &'static str, Vec<(String, String)>);

fn ans(status: u16, v: Value) -> Answer {
    (status, v.to_string().into_bytes(), "application/json", Vec::new())
}

/// The common start of every dialect's route: the request recorded, injected failures, files.
fn pre(s: &mut State, method: &str, full: &str, body: &str) -> Option<Answer> {
    s.requests.push(Req { method: method.into(), path: full.into(), body: body.into() });
    let path = full.split('?').next().unwrap_or(full).to_string();
    if let Some(f) = s.fails.iter_mut().find(|f| f.times > 0 && f.method == method && path.starts_with(&f.path)) {
        f.times -= 1;
        let st = f.status;
        return Some(ans(st, json!({"message": format!("injected {st}")})));
    }
    if let Some((_, bytes)) = s.files.iter().find(|(p, _)| *p == path) {
        return Some((200, bytes.clone(), "application/octet-stream", Vec::new()));
    }
    None
}

/// One page of `items` as the dialect pages (`per_page` capped at 100, pages from 1), and the
/// number of pages.
fn paged<T: Clone>(items: &[T], full: &str, default_per_page: usize) -> (Vec<T>, usize, usize, usize) {
    let per = query(full, "per_page").and_then(|v| v.parse().ok()).unwrap_or(default_per_page).clamp(1, 100);
    let page = query(full, "page").and_then(|v| v.parse().ok()).unwrap_or(1usize).max(1);
    let pages = items.len().div_ceil(per).max(1);
    let got = items.iter().skip((page - 1) * per).take(per).cloned().collect();
    (got, page, per, pages)
}

fn gitlab_state(p: &Pr) -> &'static str {
    match (p.state.as_str(), p.merged) {
        ("open", _) => "opened",
        (_, true) => "merged",
        _ => "closed",
    }
}

fn mr_json(p: &Pr) -> Value {
    json!({"id": 1000 + p.number, "iid": p.number, "project_id": 7,
           "web_url": format!("https://gitlab.invalid/{OWNER}/{REPO}/-/merge_requests/{}", p.number),
           "title": p.title, "description": p.body, "state": gitlab_state(p),
           "source_branch": p.head, "target_branch": p.base,
           "sha": "0000000000000000000000000000000000000000", "labels": p.labels})
}

/// GitLab API v4, as documented: `PRIVATE-TOKEN`, projects by url-encoded path, merge requests by
/// `iid`, `PUT` updates with `state_event` / `add_labels` / `remove_labels`, notes, `X-*` paging
/// headers, `{"message": ...}` errors (a string, a list, or field -> list) and 409 on a second open
/// merge request for a source branch.
fn route_gitlab(st: &Arc<Mutex<State>>, method: &str, full: &str, auth: &str, body: &str) -> Answer {
    let mut s = st.lock().unwrap();
    if let Some(a) = pre(&mut s, method, full, body) {
        return a;
    }
    if auth != format!("PRIVATE-TOKEN {TOKEN}") {
        return ans(401, json!({"message": "401 Unauthorized"}));
    }
    let path = full.split('?').next().unwrap_or(full).to_string();
    let prefix = format!("/api/v4/projects/{OWNER}%2F{REPO}");
    let Some(rest) = path.strip_prefix(&prefix) else {
        return ans(404, json!({"message": "404 Project Not Found"}));
    };
    let input: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let segs: Vec<&str> = rest.trim_start_matches('/').split('/').collect();
    let not_found = || ans(404, json!({"message": "404 Not found"}));
    match (method, segs.as_slice()) {
        ("GET", ["merge_requests"]) => {
            let state = query(full, "state").unwrap_or_else(|| "all".into());
            let source = query(full, "source_branch");
            let list: Vec<Value> = s
                .pulls
                .iter()
                .filter(|p| state == "all" || gitlab_state(p) == state)
                .filter(|p| source.as_ref().is_none_or(|b| *b == p.head))
                .map(mr_json)
                .collect();
            let (got, page, per, pages) = paged(&list, full, 20);
            let mut headers = vec![
                ("X-Page".to_string(), page.to_string()),
                ("X-Per-Page".to_string(), per.to_string()),
                ("X-Total".to_string(), list.len().to_string()),
                ("X-Total-Pages".to_string(), pages.to_string()),
            ];
            headers.push(("X-Next-Page".into(), if page < pages { (page + 1).to_string() } else { String::new() }));
            (200, Value::Array(got).to_string().into_bytes(), "application/json", headers)
        }
        ("POST", ["merge_requests"]) => {
            let (Some(source), Some(target), Some(title)) =
                (input["source_branch"].as_str(), input["target_branch"].as_str(), input["title"].as_str())
            else {
                return ans(400, json!({"error": "source_branch, target_branch, title are missing"}));
            };
            if let Some(p) = s.pulls.iter().find(|p| p.state == "open" && p.head == source) {
                return ans(
                    409,
                    json!({"message": [format!("Another open merge request already exists for this source branch: !{}", p.number)]}),
                );
            }
            let number = s.next;
            s.next += 1;
            let pr = Pr {
                number,
                title: title.into(),
                body: input["description"].as_str().unwrap_or("").into(),
                head: source.into(),
                base: target.into(),
                state: "open".into(),
                labels: vec![],
                merged: false,
            };
            let v = mr_json(&pr);
            s.pulls.push(pr);
            ans(201, v)
        }
        ("PUT", ["merge_requests", n]) => {
            let n: u64 = n.parse().unwrap_or(0);
            let known: Vec<String> = s.labels.iter().map(|(_, l, _)| l.clone()).collect();
            let mut created = Vec::new();
            let Some(p) = s.pulls.iter_mut().find(|p| p.number == n) else { return not_found() };
            if let Some(t) = input["title"].as_str() {
                p.title = t.into();
            }
            if let Some(b) = input["description"].as_str() {
                p.body = b.into();
            }
            match input["state_event"].as_str() {
                Some("close") => p.state = "closed".into(),
                Some("reopen") => p.state = "open".into(),
                Some(other) => {
                    return ans(400, json!({"error": format!("state_event does not have a valid value: {other}")}));
                }
                None => {}
            }
            for l in input["add_labels"].as_str().unwrap_or("").split(',').map(str::trim).filter(|l| !l.is_empty()) {
                if !p.labels.iter().any(|x| x == l) {
                    p.labels.push(l.to_string());
                }
                // GitLab creates a label it does not know (with a default colour)
                if !known.iter().any(|k| k == l) {
                    created.push(l.to_string());
                }
            }
            let gone: Vec<&str> = input["remove_labels"]
                .as_str()
                .unwrap_or("")
                .split(',')
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            p.labels.retain(|l| !gone.contains(&l.as_str()));
            let v = mr_json(p);
            for l in created {
                let id = s.labels.len() as u64 + 100;
                s.labels.push((id, l, "#6699cc".into()));
            }
            ans(200, v)
        }
        ("GET", ["merge_requests", n, "notes"]) => {
            let n: u64 = n.parse().unwrap_or(0);
            if !s.pulls.iter().any(|p| p.number == n) {
                return not_found();
            }
            // a system note, as GitLab adds on its own: not a comment of anyone
            let mut list = vec![json!({"id": 1, "body": "added 1 commit", "system": true})];
            list.extend(
                s.comments.iter().filter(|(i, _)| *i == n).map(|(_, b)| json!({"id": 2, "body": b, "system": false})),
            );
            let (got, ..) = paged(&list, full, 20);
            ans(200, Value::Array(got))
        }
        ("POST", ["merge_requests", n, "notes"]) => {
            let n: u64 = n.parse().unwrap_or(0);
            if !s.pulls.iter().any(|p| p.number == n) {
                return not_found();
            }
            let Some(b) = input["body"].as_str() else { return ans(400, json!({"error": "body is missing"})) };
            s.comments.push((n, b.to_string()));
            ans(201, json!({"id": s.comments.len(), "body": b, "system": false}))
        }
        ("GET", ["labels"]) => {
            let list: Vec<Value> = s.labels.iter().map(|(id, n, c)| json!({"id": id, "name": n, "color": c})).collect();
            let (got, ..) = paged(&list, full, 20);
            ans(200, Value::Array(got))
        }
        ("POST", ["labels"]) => {
            let name = input["name"].as_str().unwrap_or("").to_string();
            let color = input["color"].as_str().unwrap_or("").to_string();
            if !color.starts_with('#') {
                return ans(400, json!({"message": {"color": ["must be a valid color code"]}}));
            }
            if s.labels.iter().any(|(_, n, _)| *n == name) {
                return ans(409, json!({"message": "Label already exists"}));
            }
            let id = s.labels.len() as u64 + 100;
            s.labels.push((id, name.clone(), color.clone()));
            ans(201, json!({"id": id, "name": name, "color": color}))
        }
        _ => not_found(),
    }
}

fn gitee_pr_json(p: &Pr) -> Value {
    let state = match (p.state.as_str(), p.merged) {
        ("open", _) => "open",
        (_, true) => "merged",
        _ => "closed",
    };
    json!({"id": 5000 + p.number, "number": p.number,
           "html_url": format!("https://gitee.invalid/{OWNER}/{REPO}/pulls/{}", p.number),
           "title": p.title, "body": p.body, "state": state,
           "head": {"ref": p.head, "sha": "0000000000000000000000000000000000000000", "label": p.head},
           "base": {"ref": p.base},
           "labels": p.labels.iter().enumerate().map(|(i, l)| json!({"id": i, "name": l, "color": "ededed"})).collect::<Vec<_>>(),
           "merged_at": if p.merged { json!("2026-01-01T00:00:00+08:00") } else { Value::Null }})
}

/// Gitee API v5, as documented: the `access_token` parameter, `/repos/O/R/pulls` with states
/// open / closed / merged, comments under `/pulls/N/comments`, labels added as a JSON list of names
/// and removed by name (204), `total_count` / `total_page` headers, 400 on a second pull request
/// for a branch.
fn route_gitee(st: &Arc<Mutex<State>>, method: &str, full: &str, body: &str) -> Answer {
    let mut s = st.lock().unwrap();
    if let Some(a) = pre(&mut s, method, full, body) {
        return a;
    }
    if query(full, "access_token").as_deref() != Some(TOKEN) {
        let sent = query(full, "access_token").unwrap_or_default();
        // echo what was sent: the bot must redact it
        return ans(401, json!({"message": format!("401 Unauthorized: Access token {sent} does not exist")}));
    }
    let path = full.split('?').next().unwrap_or(full).to_string();
    let prefix = format!("/api/v5/repos/{OWNER}/{REPO}");
    let Some(rest) = path.strip_prefix(&prefix) else {
        return ans(404, json!({"message": "Not Found Project"}));
    };
    let input: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let segs: Vec<&str> = rest.trim_start_matches('/').split('/').collect();
    let not_found = || ans(404, json!({"message": "404 Not Found"}));
    match (method, segs.as_slice()) {
        ("GET", ["pulls"]) => {
            let state = query(full, "state").unwrap_or_else(|| "open".into());
            let head = query(full, "head");
            let list: Vec<Value> = s
                .pulls
                .iter()
                .map(gitee_pr_json)
                .filter(|p| state == "all" || p["state"] == state.as_str())
                .filter(|p| {
                    head.as_ref().is_none_or(|h| {
                        let b = h.split_once(':').map_or(h.as_str(), |x| x.1);
                        p["head"]["ref"] == b
                    })
                })
                .collect();
            let (got, _, _, pages) = paged(&list, full, 20);
            let headers = vec![
                ("total_count".to_string(), list.len().to_string()),
                ("total_page".to_string(), pages.to_string()),
            ];
            (200, Value::Array(got).to_string().into_bytes(), "application/json", headers)
        }
        ("POST", ["pulls"]) => {
            let (Some(title), Some(head), Some(base)) =
                (input["title"].as_str(), input["head"].as_str(), input["base"].as_str())
            else {
                return ans(400, json!({"message": "title, head and base are required"}));
            };
            if s.pulls.iter().any(|p| p.state == "open" && p.head == head) {
                return ans(400, json!({"message": format!("Pull request {head} -> {base} already exists")}));
            }
            let number = s.next;
            s.next += 1;
            let pr = Pr {
                number,
                title: title.into(),
                body: input["body"].as_str().unwrap_or("").into(),
                head: head.into(),
                base: base.into(),
                state: "open".into(),
                labels: vec![],
                merged: false,
            };
            let v = gitee_pr_json(&pr);
            s.pulls.push(pr);
            ans(201, v)
        }
        ("PATCH", ["pulls", n]) => {
            let n: u64 = n.parse().unwrap_or(0);
            let Some(p) = s.pulls.iter_mut().find(|p| p.number == n) else { return not_found() };
            if let Some(t) = input["title"].as_str() {
                p.title = t.into();
            }
            if let Some(b) = input["body"].as_str() {
                p.body = b.into();
            }
            match input["state"].as_str() {
                Some("closed") => p.state = "closed".into(),
                Some("open") => p.state = "open".into(),
                Some(other) => return ans(400, json!({"message": format!("state is invalid: {other}")})),
                None => {}
            }
            let v = gitee_pr_json(p);
            ans(200, v)
        }
        ("GET", ["pulls", n, "comments"]) => {
            let n: u64 = n.parse().unwrap_or(0);
            let list: Vec<Value> =
                s.comments.iter().filter(|(i, _)| *i == n).map(|(_, b)| json!({"id": 1, "body": b})).collect();
            let (got, ..) = paged(&list, full, 20);
            ans(200, Value::Array(got))
        }
        ("POST", ["pulls", n, "comments"]) => {
            let n: u64 = n.parse().unwrap_or(0);
            if !s.pulls.iter().any(|p| p.number == n) {
                return not_found();
            }
            let Some(b) = input["body"].as_str() else { return ans(400, json!({"message": "body is required"})) };
            s.comments.push((n, b.to_string()));
            ans(201, json!({"id": s.comments.len(), "body": b}))
        }
        ("GET", ["labels"]) => {
            let list: Vec<Value> = s.labels.iter().map(|(id, n, c)| json!({"id": id, "name": n, "color": c})).collect();
            ans(200, Value::Array(list))
        }
        ("POST", ["labels"]) => {
            let name = input["name"].as_str().unwrap_or("").to_string();
            let color = input["color"].as_str().unwrap_or("").to_string();
            if color.len() != 6 || !color.chars().all(|c| c.is_ascii_hexdigit()) {
                return ans(400, json!({"message": "color is invalid"}));
            }
            if s.labels.iter().any(|(_, n, _)| *n == name) {
                return ans(400, json!({"message": "Label name has already been taken"}));
            }
            let id = s.labels.len() as u64 + 100;
            s.labels.push((id, name.clone(), color.clone()));
            ans(201, json!({"id": id, "name": name, "color": color}))
        }
        ("POST", ["pulls", n, "labels"]) => {
            let n: u64 = n.parse().unwrap_or(0);
            let Some(names) =
                input.as_array().map(|a| a.iter().filter_map(|l| l.as_str().map(String::from)).collect::<Vec<_>>())
            else {
                return ans(400, json!({"message": "body must be a list of label names"}));
            };
            let known: Vec<String> = s.labels.iter().map(|(_, n, _)| n.clone()).collect();
            if let Some(l) = names.iter().find(|l| !known.contains(l)) {
                return ans(400, json!({"message": format!("label {l} does not exist")}));
            }
            let Some(p) = s.pulls.iter_mut().find(|p| p.number == n) else { return not_found() };
            for l in names {
                if !p.labels.contains(&l) {
                    p.labels.push(l);
                }
            }
            let v: Vec<Value> = p.labels.iter().map(|l| json!({"name": l})).collect();
            ans(201, Value::Array(v))
        }
        ("DELETE", ["pulls", n, "labels", name]) => {
            let n: u64 = n.parse().unwrap_or(0);
            let name = decode(name);
            let Some(p) = s.pulls.iter_mut().find(|p| p.number == n) else { return not_found() };
            let before = p.labels.len();
            p.labels.retain(|l| *l != name);
            if p.labels.len() == before {
                return not_found();
            }
            (204, Vec::new(), "application/json", Vec::new())
        }
        _ => not_found(),
    }
}

// ---------------------------------------------------------------------------------------------------
// repositories

pub fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("xirang-bot-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

const TAGS: &str = "- tag: pointwise\n  desc: elementwise\n";

/// A derivatives.yaml for [`native_functions`]: every release since 2.1 ships one, and a stored
/// snapshot of such a release without derivative entries is refused as incomplete.
pub const DERIVATIVES: &str = "- name: add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor\n  self: grad\n  other: maybe_multiply(grad, alpha)\n";

/// A tiny native_functions.yaml: `add.Tensor` always, plus `extra` operators.
pub fn native_functions(extra: &[&str]) -> String {
    let mut s = String::from(
        "- func: add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor\n  variants: function, method\n  \
         tags: pointwise\n",
    );
    for e in extra {
        s.push_str(&format!("\n- func: {e}\n  variants: function\n"));
    }
    s
}

/// Writes a release folder `dir/vX.Y.Z` with the given operators.
pub fn write_release(dir: &Path, version: &str, extra: &[&str]) {
    let d = dir.join(version);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("native_functions.yaml"), native_functions(extra)).unwrap();
    std::fs::write(d.join("tags.yaml"), TAGS).unwrap();
    std::fs::write(d.join("derivatives.yaml"), DERIVATIVES).unwrap();
}

pub struct Fixture {
    pub dir: PathBuf,
    pub work: PathBuf,
    pub remote: PathBuf,
    pub upstream: PathBuf,
    pub base_commit: git2::Oid,
}

pub const DEFAULT_STEPS: &str = r#"steps = [["sh", "-c", "echo regenerated > generated.txt"]]
check = ["sh", "-c", "echo checked"]"#;

pub fn bot_toml(api: &str, steps_and_check: &str) -> String {
    bot_toml_for(Dialect::Github, api, steps_and_check)
}

/// The fixture's `xirang.toml` for a forge speaking `dialect` at `api`.
pub fn bot_toml_for(dialect: Dialect, api: &str, steps_and_check: &str) -> String {
    let forge = dialect.forge();
    format!(
        "# the generator's table: the bot ignores it\n[generate]\nout = \"generated\"\n\n[bot]\nforge = \"{forge}\"\n\
         api_url = \"{api}\"\nowner = \"{OWNER}\"\nrepo = \"{REPO}\"\nremote = \"origin\"\nbase = \"main\"\n\
         {steps_and_check}\nretry = {{ max = 2, base_ms = 5 }}\ntimeout_s = 10\n"
    )
}

fn sig() -> git2::Signature<'static> {
    git2::Signature::now("Ada Maintainer", "ada@example.invalid").unwrap()
}

/// A bare remote with `main` (store with v2.0.0, xirang.toml), a working clone with uncommitted
/// user changes, and an upstream folder with v2.0.0 and v2.1.0.
pub fn fixture(tag: &str, api: &str, steps_and_check: &str) -> Fixture {
    fixture_for(Dialect::Github, tag, api, steps_and_check)
}

/// [`fixture`] for a forge speaking `dialect` at `api`.
pub fn fixture_for(dialect: Dialect, tag: &str, api: &str, steps_and_check: &str) -> Fixture {
    let dir = tmpdir(tag);
    let upstream = dir.join("upstream");
    write_release(&upstream, "v2.0.0", &[]);
    write_release(&upstream, "v2.1.0", &["mul.Tensor(Tensor self, Tensor other) -> Tensor"]);

    let remote = dir.join("remote.git");
    git2::Repository::init_bare(&remote).unwrap();
    let work = dir.join("work");
    let mut opts = git2::RepositoryInitOptions::new();
    opts.initial_head("main");
    let repo = git2::Repository::init_opts(&work, &opts).unwrap();
    std::fs::write(work.join("xirang.toml"), bot_toml_for(dialect, api, steps_and_check)).unwrap();
    std::fs::write(work.join("README.md"), "# the adapter\n").unwrap();
    std::fs::write(work.join(".gitignore"), "target/\n").unwrap();
    let files = source::read(&SourceSpec::Folder(upstream.join("v2.0.0"))).unwrap();
    let snap = PytorchSnapshot::build(&files, &Version::parse("v2.0.0").unwrap()).unwrap();
    Store::new(work.join("schemas")).write_pytorch(&snap).unwrap();
    let mut idx = repo.index().unwrap();
    idx.add_all(["*"], git2::IndexAddOption::DEFAULT, None).unwrap();
    idx.write().unwrap();
    let tree = repo.find_tree(idx.write_tree().unwrap()).unwrap();
    let base_commit = repo.commit(Some("HEAD"), &sig(), &sig(), "initial", &tree, &[]).unwrap();
    repo.remote("origin", remote.to_str().unwrap()).unwrap();
    repo.find_remote("origin").unwrap().push(&["refs/heads/main:refs/heads/main"], None).unwrap();

    // the user's work in progress: modified, untracked and staged files
    std::fs::write(work.join("README.md"), "# the adapter\n\nwork in progress\n").unwrap();
    std::fs::write(work.join("notes.txt"), "do not lose me\n").unwrap();
    std::fs::write(work.join("staged.txt"), "staged\n").unwrap();
    let mut idx = repo.index().unwrap();
    idx.add_path(Path::new("staged.txt")).unwrap();
    idx.write().unwrap();
    Fixture { dir, work, remote, upstream, base_commit }
}

impl Fixture {
    pub fn options(&self, token: Option<&str>, dry_run: bool) -> Options {
        Options {
            repo: self.work.clone(),
            config: BotConfig::load(&self.work).unwrap(),
            upstream: Upstream::Folder(self.upstream.clone()),
            token: token.map(String::from),
            dry_run,
            self_exe: PathBuf::from("/bin/false"),
        }
    }

    /// Runs the bot; returns the outcome and everything it logged. Asserts the token never shows.
    pub fn run_with(&self, opts: &Options) -> (Result<Outcome, BotError>, String) {
        let mut buf = Vec::new();
        // as the CLI does: the token the run was given is redacted from everything it prints
        let given = opts.token.clone().unwrap_or_default();
        let res = {
            let mut log = Log::new(&mut buf, &[TOKEN, given.as_str()]);
            bot::run(opts, &mut log)
        };
        let out = String::from_utf8(buf).unwrap();
        assert!(!out.contains(TOKEN), "token in the log:\n{out}");
        if let Err(e) = &res {
            assert!(!e.to_string().contains(TOKEN), "token in the error: {e}");
            assert!(!format!("{e:?}").contains(TOKEN), "token in the error: {e:?}");
        }
        (res, out)
    }

    pub fn run(&self) -> (Result<Outcome, BotError>, String) {
        self.run_with(&self.options(Some(TOKEN), false))
    }

    /// The user's uncommitted work, HEAD and index are as the fixture left them.
    pub fn assert_user_tree_intact(&self) {
        let w = &self.work;
        assert_eq!(std::fs::read_to_string(w.join("README.md")).unwrap(), "# the adapter\n\nwork in progress\n");
        assert_eq!(std::fs::read_to_string(w.join("notes.txt")).unwrap(), "do not lose me\n");
        assert_eq!(std::fs::read_to_string(w.join("staged.txt")).unwrap(), "staged\n");
        assert!(!w.join("generated.txt").exists(), "a step ran in the user's tree");
        assert!(!w.join("schemas/pytorch/v2.1.0").exists(), "an import landed in the user's tree");
        let repo = git2::Repository::open(w).unwrap();
        let head = repo.head().unwrap();
        assert_eq!(head.shorthand().ok(), Some("main"));
        assert_eq!(head.target(), Some(self.base_commit));
        let idx = repo.index().unwrap();
        assert!(idx.get_path(Path::new("staged.txt"), 0).is_some(), "the user's staged file left the index");
        let statuses = repo.statuses(None).unwrap();
        let dirty: Vec<String> = statuses.iter().filter_map(|s| s.path().ok().map(String::from)).collect();
        assert!(dirty.contains(&"README.md".to_string()) && dirty.contains(&"notes.txt".to_string()), "{dirty:?}");
    }

    /// Everything of the user's repository that the bot must leave alone: HEAD, the branches, the
    /// index file and every file of the working tree.
    pub fn user_state(&self) -> UserState {
        let repo = git2::Repository::open(&self.work).unwrap();
        let head = repo.head().ok().map(|h| (h.name().unwrap_or("?").to_string(), h.target()));
        let mut branches = std::collections::BTreeMap::new();
        for r in repo.references_glob("refs/heads/*").unwrap().flatten() {
            branches.insert(r.name().unwrap_or("?").to_string(), r.target());
        }
        let index = std::fs::read(repo.path().join("index")).unwrap_or_default();
        let mut files = std::collections::BTreeMap::new();
        let mut stack = vec![self.work.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.file_name().is_some_and(|n| n == ".git") {
                    continue;
                }
                if e.file_type().unwrap().is_dir() {
                    stack.push(p);
                } else {
                    let rel = p.strip_prefix(&self.work).unwrap().display().to_string();
                    files.insert(rel, std::fs::read(&p).unwrap_or_default());
                }
            }
        }
        UserState { head, branches, index, files }
    }

    pub fn remote_repo(&self) -> git2::Repository {
        git2::Repository::open_bare(&self.remote).unwrap()
    }

    pub fn remote_tip(&self, branch: &str) -> Option<git2::Oid> {
        self.remote_repo().find_reference(&format!("refs/heads/{branch}")).ok().and_then(|r| r.target())
    }

    /// A file of a remote branch's tree.
    pub fn remote_file(&self, branch: &str, path: &str) -> Option<String> {
        let repo = self.remote_repo();
        let tip = self.remote_tip(branch)?;
        let tree = repo.find_commit(tip).ok()?.tree().ok()?;
        let entry = tree.get_path(Path::new(path)).ok()?;
        let blob = repo.find_blob(entry.id()).ok()?;
        Some(String::from_utf8_lossy(blob.content()).to_string())
    }

    pub fn cleanup(&self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// See [`Fixture::user_state`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserState {
    pub head: Option<(String, Option<git2::Oid>)>,
    pub branches: std::collections::BTreeMap<String, Option<git2::Oid>>,
    pub index: Vec<u8>,
    pub files: std::collections::BTreeMap<String, Vec<u8>>,
}

/// The JSON of a bot pull request body's hidden block.
pub fn meta_of(body: &str) -> Value {
    let start = body.find(bot::META_MARKER).expect("hidden block") + bot::META_MARKER.len();
    let end = body[start..].find(" -->").unwrap() + start;
    serde_json::from_str(&body[start..end]).unwrap()
}
