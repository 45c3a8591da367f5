//! `xirang-scan bot`: the command-line front of the regeneration bot.

use std::path::PathBuf;

use super::detect::{PYPI_TORCH_URL, Upstream};
use super::{BotConfig, Log, Options, Outcome};

/// Arguments of `xirang-scan bot`.
#[derive(Debug, Clone, clap::Args)]
#[command(long_about = "Finds PyTorch releases missing from the base branch's snapshot store, imports them in a \
separate git worktree, runs the regeneration steps and the check, commits on `<prefix>/pytorch-vX.Y.Z`, pushes, \
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
    /// Upstream: the package index's JSON API for torch (default when no --from-* is given)
    #[arg(long, value_name = "URL", group = "upstream", num_args = 0..=1, default_missing_value = PYPI_TORCH_URL)]
    pub from_pypi: Option<String>,
    /// The repository (default: the current directory)
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub repo: PathBuf,
    /// Print the branch, the commit and the pull request it would open; push and open nothing
    #[arg(long)]
    pub dry_run: bool,
}

/// Runs `xirang-scan bot`; returns the exit code.
pub fn main(args: BotArgs) -> u8 {
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
    let token = std::env::var(&config.token_env).ok().filter(|t| !t.is_empty());
    let upstream = match (&args.from_folder, &args.from_git, &args.from_pypi) {
        (Some(d), _, _) => Upstream::Folder(d.clone()),
        (_, Some(g), _) => Upstream::Git(g.clone()),
        (_, _, Some(u)) => Upstream::Pypi(u.clone()),
        _ => Upstream::Pypi(PYPI_TORCH_URL.to_string()),
    };
    let self_exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("xirang-scan"));
    let opts = Options { repo: repo_root, config, upstream, token: token.clone(), dry_run: args.dry_run, self_exe };
    let secrets: Vec<&str> = token.as_deref().into_iter().collect();
    let mut log = Log::new(&mut stdout, &secrets);
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
