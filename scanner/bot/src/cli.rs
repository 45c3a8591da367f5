//! `xirang-scan bot`: the command-line front of the regeneration bot.
//!
//! The forge token never stays in the bot's environment. A process's initial environment stays readable
//! (`/proc/PID/environ`) by every process of the same user for as long as it lives, whatever the process
//! later does to its environment, and the bot's steps and check (and the build scripts the check runs)
//! are such processes. So when the bot finds the token in its environment, it executes itself again
//! (same executable, same arguments, same process id) with the variable removed and the token written
//! to a pipe that becomes the new image's stdin, marked by `XIRANG_BOT_TOKEN_VIA_STDIN=1`; the new image
//! reads the token from stdin before it does anything else. Children get an empty stdin and neither the
//! token variable nor the marker.

use std::io::Read;
use std::path::PathBuf;

use super::detect::Upstream;
use super::{BotConfig, Log, Options, Outcome};

/// Arguments of `xirang-scan bot`.
#[derive(Debug, Clone, clap::Args)]
#[command(long_about = "Finds PyTorch releases (or, with --headers, driver header releases) missing from the base \
branch's snapshot store, imports them in a separate git worktree, runs the regeneration steps and the check, commits on `<prefix>/pytorch-vX.Y.Z`, pushes, \
and opens or updates a pull request whose body is the drift report. Configured by the [bot] table of xirang.toml; \
the token is read from $XIRANG_BOT_TOKEN (or the variable named by token_env) and never printed.\n\n\
Exit codes: 0 done (or nothing to do), 1 error, 2 usage error, 3 stopped (a commit that is not the bot's is on \
its branch), 4 pull request published but the check failed.")]
pub struct BotArgs {
    /// Upstream: a folder of `vX.Y.Z` release folders
    #[arg(long, value_name = "DIR", group = "upstream")]
    pub from_folder: Option<PathBuf>,
    /// Upstream: a PyTorch clone (its `vX.Y.Z` tags)
    #[arg(long, value_name = "REPO", group = "upstream")]
    pub from_git: Option<PathBuf>,
    /// Upstream: the package index's JSON API for torch at URL; without URL, and when no --from-* is
    /// given, `[bot] index_url` (default PyPI)
    #[arg(long, value_name = "URL", group = "upstream", num_args = 0..=1)]
    pub from_pypi: Option<Option<String>>,
    /// Track a vendor's driver headers instead of PyTorch: VENDOR is `ascend` or `cuda`, and the
    /// releases are the `vX.Y.Z[.postN]` folders of --from-folder DIR. The bot imports the new header
    /// snapshots, points `[vendor] headers` of xirang.toml at the newest (when `[vendor] name` is
    /// VENDOR), regenerates, and opens `<prefix>/VENDOR-headers-vX.Y.Z` with the header drift report
    #[arg(long, value_name = "VENDOR", requires = "from_folder", value_parser = ["ascend", "cuda"])]
    pub headers: Option<String>,
    /// The repository (default: the current directory)
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub repo: PathBuf,
    /// Print the branch, the commit and the pull request it would open; push and open nothing
    #[arg(long)]
    pub dry_run: bool,
}

/// Set (to `1`) when the forge token comes on stdin rather than in the environment.
pub const TOKEN_STDIN_ENV: &str = "XIRANG_BOT_TOKEN_VIA_STDIN";
/// The longest token accepted (a pipe holds at least this much without a reader).
const MAX_TOKEN: usize = 4096;

/// The token handed over on stdin (see the module documentation), when the marker says so.
fn token_from_stdin() -> Result<Option<String>, String> {
    if std::env::var_os(TOKEN_STDIN_ENV).is_none_or(|v| v != "1") {
        return Ok(None);
    }
    let mut buf = Vec::new();
    std::io::stdin()
        .lock()
        .take(MAX_TOKEN as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|e| format!("reading the token from stdin ({TOKEN_STDIN_ENV}=1): {e}"))?;
    if buf.len() > MAX_TOKEN {
        return Err(format!("the token on stdin is longer than {MAX_TOKEN} bytes"));
    }
    let token = String::from_utf8(buf).map_err(|_| "the token on stdin is not UTF-8".to_string())?;
    let token = token.trim();
    Ok((!token.is_empty()).then(|| token.to_string()))
}

/// When the token is in the environment (`var`), executes this program again without it (nor any other
/// variable whose value holds it), handing it over on stdin. Returns only on failure.
#[cfg(unix)]
fn reexec_without_token(var: &str) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::process::CommandExt;
    let Some(value) = std::env::var_os(var).filter(|v| !v.is_empty()) else { return Ok(()) };
    let holders: Vec<std::ffi::OsString> =
        std::env::vars_os().filter(|(_, v)| super::contains(v.as_bytes(), value.as_bytes())).map(|(k, _)| k).collect();
    let fail = |m: String| format!("cannot take ${var} out of the environment: {m}");
    if value.len() > MAX_TOKEN {
        return Err(fail(format!("the token is longer than {MAX_TOKEN} bytes")));
    }
    let exe = std::env::current_exe().map_err(|e| fail(format!("this executable: {e}")))?;
    let (reader, mut writer) = std::io::pipe().map_err(|e| fail(format!("pipe: {e}")))?;
    // fits in the pipe's buffer: nobody reads until the exec
    writer.write_all(value.as_bytes()).map_err(|e| fail(format!("pipe: {e}")))?;
    drop(writer);
    let mut args = std::env::args_os();
    let mut cmd = std::process::Command::new(&exe);
    if let Some(arg0) = args.next() {
        cmd.arg0(arg0);
    }
    cmd.args(args).env_remove(var);
    for k in holders {
        cmd.env_remove(k);
    }
    let err = cmd.env(TOKEN_STDIN_ENV, "1").stdin(reader).exec();
    Err(fail(format!("{}: {err}", exe.display())))
}

#[cfg(not(unix))]
fn reexec_without_token(_var: &str) -> Result<(), String> {
    Ok(())
}

/// Processes above this one (parent, grandparent, ...) whose initial environment holds the token (in
/// any variable): the bot's children can read it there. Linux only (empty elsewhere).
#[cfg(target_os = "linux")]
fn ancestors_holding(token: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut pid = std::os::unix::process::parent_id();
    for _ in 0..64 {
        if pid <= 1 {
            break;
        }
        let proc = PathBuf::from(format!("/proc/{pid}"));
        if let Ok(env) = std::fs::read(proc.join("environ"))
            && super::contains(&env, token.as_bytes())
        {
            let comm = std::fs::read_to_string(proc.join("comm")).unwrap_or_default();
            out.push(format!("{pid} ({})", comm.trim()));
        }
        let status = std::fs::read_to_string(proc.join("status")).unwrap_or_default();
        match status.lines().find_map(|l| l.strip_prefix("PPid:")).and_then(|p| p.trim().parse().ok()) {
            Some(p) => pid = p,
            None => break,
        }
    }
    out
}

#[cfg(not(target_os = "linux"))]
fn ancestors_holding(_token: &str) -> Vec<String> {
    Vec::new()
}

/// Runs `xirang-scan bot`; returns the exit code.
pub fn main(args: BotArgs) -> u8 {
    // first: a token handed over by the previous image of this process
    let piped = match token_from_stdin() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    let mut stdout = std::io::stdout();
    let repo_root = git2::Repository::discover(&args.repo)
        .ok()
        .and_then(|r| r.workdir().map(|p| p.to_path_buf()))
        .unwrap_or_else(|| args.repo.clone());
    let config = match BotConfig::load(&repo_root) {
        Ok(mut c) => {
            // in GitHub Actions the repository is known without configuration
            if (c.owner.is_empty() || c.repo.is_empty())
                && let Ok(gr) = std::env::var("GITHUB_REPOSITORY")
                && let Some((o, r)) = gr.split_once('/')
            {
                c.owner = o.to_string();
                c.repo = r.to_string();
            }
            c
        }
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    // the token must not stay in this process's environment, where children can read it
    if let Err(e) = reexec_without_token(&config.token_env) {
        eprintln!("error: {e}");
        return 1;
    }
    let token = piped;
    let upstream = match (&args.from_folder, &args.from_git, &args.from_pypi) {
        (Some(d), _, _) => match &args.headers {
            Some(vendor) => Upstream::Headers { vendor: vendor.clone(), dir: d.clone() },
            None => Upstream::Folder(d.clone()),
        },
        (_, Some(g), _) => Upstream::Git(g.clone()),
        (_, _, Some(Some(u))) => Upstream::Pypi(u.clone()),
        _ => Upstream::Pypi(config.index_url.clone()),
    };
    let self_exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("xirang-scan"));
    let opts = Options { repo: repo_root, config, upstream, token: token.clone(), dry_run: args.dry_run, self_exe };
    let secrets: Vec<&str> = token.as_deref().into_iter().collect();
    let mut log = Log::new(&mut stdout, &secrets);
    if let Some(t) = &token {
        for p in ancestors_holding(t) {
            log.line(&format!(
                "warning: process {p}, an ancestor of the bot, has the token in its environment, where the bot's \
                 steps can read it (/proc/PID/environ); start the bot with `exec`, or hand it the token on stdin \
                 with {TOKEN_STDIN_ENV}=1"
            ));
        }
    }
    match super::run(&opts, &mut log) {
        Ok(outcome) => {
            print_outcome(&mut log, &outcome);
            outcome.exit_code()
        }
        Err(e) => {
            let msg = log.redact(&format!("error: {e}"));
            eprintln!("{msg}");
            1
        }
    }
}

fn print_outcome(log: &mut Log<'_>, o: &Outcome) {
    match o {
        Outcome::UpToDate => log.line("nothing to do"),
        Outcome::Unchanged { branch, pull } => log
            .line(&format!("unchanged: {branch}{}", pull.map(|n| format!(" (pull request #{n})")).unwrap_or_default())),
        Outcome::Published { branch, commit, pull, url, updated, check_passed } => log.line(&format!(
            "{} pull request #{pull} {url} for {branch} at {commit}; check: {}",
            if *updated { "updated" } else { "opened" },
            match check_passed {
                Some(true) => "passed",
                Some(false) => "FAILED",
                None => "not run",
            }
        )),
        Outcome::Stopped { branch, commit, author, pull, .. } => log.line(&format!(
            "stopped: {branch} has commit {commit} by {author}{}",
            pull.map(|n| format!(" (pull request #{n})")).unwrap_or_default()
        )),
        Outcome::Declined { branch, pull } => {
            log.line(&format!("declined: pull request #{pull} for {branch} was closed without merging; not recreated"))
        }
        Outcome::DryRun { branch, commit, message, title, body, labels } => {
            log.line(&format!("branch: {branch}"));
            log.line(&format!("commit: {commit} (not pushed)"));
            log.line(&format!("commit message:\n{message}"));
            log.line(&format!("pull request title: {title}"));
            log.line(&format!("labels: {}", labels.join(", ")));
            log.line(&format!("pull request body:\n{body}"));
        }
    }
}
