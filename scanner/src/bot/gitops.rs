//! The bot's git work, all through git2: fetch, inspect the bot branch, a separate worktree for the
//! regeneration (the user's working tree, index and HEAD are never touched), commits, push.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use git2::{
    BranchType, Cred, CredentialType, FetchOptions, IndexAddOption, Oid, PushOptions, RemoteCallbacks, Repository,
    Signature, WorktreeAddOptions, WorktreePruneOptions,
};

use super::BotError;
use super::config::BotConfig;
use crate::version::Version;

/// Footer line naming the idempotency key in every bot commit.
pub const KEY_FOOTER: &str = "Xirang-Bot-Key:";
/// Footer line naming the version a bot commit imports.
pub const VERSION_FOOTER: &str = "Xirang-Bot-Version:";
/// Worktrees the bot creates are named with this prefix.
const WORKTREE_PREFIX: &str = "xirang-bot-";

fn callbacks<'a>(token: Option<&'a str>, tries: &'a Cell<u32>) -> RemoteCallbacks<'a> {
    let mut cb = RemoteCallbacks::new();
    cb.credentials(move |_url, user, allowed| {
        // libgit2 asks again after a refused credential: answer once, then give up
        tries.set(tries.get() + 1);
        if tries.get() > 1 {
            return Err(git2::Error::from_str("the remote refused the credentials"));
        }
        match token {
            Some(t) if allowed.contains(CredentialType::USER_PASS_PLAINTEXT) => {
                Cred::userpass_plaintext(user.unwrap_or("x-access-token"), t)
            }
            _ => Cred::default(),
        }
    });
    cb
}

/// What the remote has: the base branch's tip and the bot's branches.
pub struct RemoteState {
    pub base_tip: Oid,
    pub heads: BTreeMap<String, Oid>,
}

/// Fetches the base branch and the bot's branches into remote-tracking refs.
pub fn fetch(repo: &Repository, cfg: &BotConfig, token: Option<&str>) -> Result<RemoteState, BotError> {
    let mut remote = repo
        .find_remote(&cfg.remote)
        .map_err(|e| BotError::Git(format!("remote `{}`: {}", cfg.remote, e.message())))?;
    let r = &cfg.remote;
    let specs = [
        format!("+refs/heads/{b}:refs/remotes/{r}/{b}", b = cfg.base),
        format!("+refs/heads/{p}/*:refs/remotes/{r}/{p}/*", p = cfg.branch_prefix),
    ];
    let tries = Cell::new(0);
    let mut fo = FetchOptions::new();
    fo.remote_callbacks(callbacks(token, &tries));
    remote
        .fetch(&specs, Some(&mut fo), None)
        .map_err(|e| BotError::Git(format!("fetch from `{r}`: {}", e.message())))?;
    let mut heads = BTreeMap::new();
    for h in remote.list().map_err(|e| BotError::Git(format!("list `{r}`: {}", e.message())))? {
        if let Some(name) = h.name().strip_prefix("refs/heads/") {
            heads.insert(name.to_string(), h.oid());
        }
    }
    let base_tip = heads
        .get(&cfg.base)
        .copied()
        .ok_or_else(|| BotError::Git(format!("remote `{r}` has no branch `{}` (the configured base)", cfg.base)))?;
    Ok(RemoteState { base_tip, heads })
}

/// PyTorch versions in the snapshot store of a commit's tree (`<store>/pytorch/vX.Y.Z/meta.json`).
pub fn store_versions(repo: &Repository, commit: Oid, store: &str) -> Result<Vec<Version>, BotError> {
    let tree = repo.find_commit(commit)?.tree()?;
    let Ok(entry) = tree.get_path(Path::new(store).join("pytorch").as_path()) else {
        return Ok(Vec::new());
    };
    let Ok(sub) = repo.find_tree(entry.id()) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for e in sub.iter() {
        let Some(v) = e.name().ok().and_then(Version::parse) else { continue };
        let has_meta = repo.find_tree(e.id()).is_ok_and(|t| t.get_name("meta.json").is_some());
        if has_meta {
            out.push(v);
        }
    }
    out.sort();
    Ok(out)
}

/// What is on the bot's branch beyond the base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BranchState {
    /// Only bot commits; the tip's idempotency key (if any).
    Bot { key: Option<String> },
    /// A commit that is not the bot's (author or footer).
    Foreign { commit: String, author: String },
}

fn footer<'m>(message: &'m str, name: &str) -> Option<&'m str> {
    message.lines().rev().find_map(|l| l.strip_prefix(name)).map(str::trim)
}

/// Inspects the commits of `tip` that are not in `base`.
pub fn inspect(repo: &Repository, tip: Oid, base: Oid, cfg: &BotConfig) -> Result<BranchState, BotError> {
    let mut walk = repo.revwalk()?;
    walk.push(tip)?;
    walk.hide(base)?;
    for oid in walk {
        let c = repo.find_commit(oid?)?;
        let author = c.author();
        let email = author.email().unwrap_or("");
        let msg = c.message().unwrap_or("");
        if email != cfg.author_email || footer(msg, KEY_FOOTER).is_none() {
            return Ok(BranchState::Foreign {
                commit: c.id().to_string(),
                author: format!("{} <{email}>", author.name().unwrap_or("?")),
            });
        }
    }
    let msg = repo.find_commit(tip)?.message().unwrap_or("").to_string();
    Ok(BranchState::Bot { key: footer(&msg, KEY_FOOTER).map(str::to_string) })
}

/// A linked worktree on the bot's branch, removed (pruned) when dropped.
pub struct Worktree<'r> {
    repo: &'r Repository,
    name: String,
    pub path: PathBuf,
    pub wrepo: Repository,
    branch: String,
    /// The local branch's value before the bot moved it (to restore after a dry run).
    previous: Option<Oid>,
}

impl<'r> Worktree<'r> {
    /// Points the local branch `branch` at `start` and checks it out in a new worktree under the
    /// system temp folder.
    pub fn create(repo: &'r Repository, branch: &str, start: Oid) -> Result<Worktree<'r>, BotError> {
        prune_stale(repo);
        if let Ok(head) = repo.head()
            && head.shorthand().ok() == Some(branch)
        {
            return Err(BotError::Refused(format!("`{branch}` is checked out in the working tree")));
        }
        let previous = repo.find_branch(branch, BranchType::Local).ok().and_then(|b| b.get().target());
        let commit = repo.find_commit(start)?;
        let reference = repo.branch(branch, &commit, true)?.into_reference();
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let name = format!("{WORKTREE_PREFIX}{}-{nanos}", std::process::id());
        let path = std::env::temp_dir().join(&name);
        let mut opts = WorktreeAddOptions::new();
        opts.reference(Some(&reference));
        repo.worktree(&name, &path, Some(&opts))
            .map_err(|e| BotError::Git(format!("worktree {}: {}", path.display(), e.message())))?;
        let wrepo = Repository::open(&path)?;
        Ok(Worktree { repo, name, path, wrepo, branch: branch.to_string(), previous })
    }

    /// Stages everything (respecting .gitignore) and commits on the branch; `None` when the tree did
    /// not change.
    pub fn commit_all(&self, message: &str, cfg: &BotConfig) -> Result<Option<Oid>, BotError> {
        let mut idx = self.wrepo.index()?;
        idx.add_all(["*"], IndexAddOption::DEFAULT, None)?;
        idx.update_all(["*"], None)?;
        idx.write()?;
        let tree_id = idx.write_tree()?;
        let head = self.wrepo.head()?.peel_to_commit()?;
        if tree_id == head.tree_id() {
            return Ok(None);
        }
        let tree = self.wrepo.find_tree(tree_id)?;
        let sig = Signature::now(&cfg.author_name, &cfg.author_email)?;
        Ok(Some(self.wrepo.commit(Some("HEAD"), &sig, &sig, message, &tree, &[&head])?))
    }

    pub fn head(&self) -> Result<Oid, BotError> {
        Ok(self.wrepo.head()?.peel_to_commit()?.id())
    }

    /// Paths changed between two commits.
    pub fn changed_paths(&self, from: Oid, to: Oid) -> Result<Vec<String>, BotError> {
        let a = self.wrepo.find_commit(from)?.tree()?;
        let b = self.wrepo.find_commit(to)?.tree()?;
        let diff = self.wrepo.diff_tree_to_tree(Some(&a), Some(&b), None)?;
        let mut out: Vec<String> = diff
            .deltas()
            .filter_map(|d| d.new_file().path().or(d.old_file().path()).map(|p| p.display().to_string()))
            .collect();
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// Puts the local branch back where it was (dry run).
    pub fn restore_branch(&self) -> Result<(), BotError> {
        let name = format!("refs/heads/{}", self.branch);
        match self.previous {
            Some(oid) => {
                self.repo.reference(&name, oid, true, "xirang-bot: dry run, restore")?;
            }
            None => {
                // the worktree still holds the branch: detach it first
                let oid = self.head()?;
                self.wrepo.set_head_detached(oid)?;
                if let Ok(mut b) = self.repo.find_branch(&self.branch, BranchType::Local) {
                    b.delete()?;
                }
            }
        }
        Ok(())
    }
}

impl Drop for Worktree<'_> {
    fn drop(&mut self) {
        if let Ok(wt) = self.repo.find_worktree(&self.name) {
            let mut opts = WorktreePruneOptions::new();
            opts.valid(true).locked(true).working_tree(true);
            let _ = wt.prune(Some(&mut opts));
        }
        if self.path.exists() {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Removes bot worktrees left behind by a run that was killed (their folder is gone).
fn prune_stale(repo: &Repository) {
    let Ok(names) = repo.worktrees() else { return };
    for name in names.iter().flatten().flatten() {
        if !name.starts_with(WORKTREE_PREFIX) {
            continue;
        }
        if let Ok(wt) = repo.find_worktree(name)
            && wt.validate().is_err()
        {
            let _ = wt.prune(None);
        }
    }
}

/// Force-pushes the local `branch` to the same name on the remote. Refuses the base branch.
pub fn push(repo: &Repository, cfg: &BotConfig, branch: &str, token: Option<&str>) -> Result<(), BotError> {
    if branch == cfg.base || !branch.starts_with(&format!("{}/", cfg.branch_prefix)) {
        return Err(BotError::Refused(format!("push to `{branch}`")));
    }
    let push_err = |message: String| BotError::Push { branch: branch.to_string(), remote: cfg.remote.clone(), message };
    let mut remote = repo.find_remote(&cfg.remote).map_err(|e| push_err(e.message().to_string()))?;
    let rejected: RefCell<Option<String>> = RefCell::new(None);
    let tries = Cell::new(0);
    let mut cb = callbacks(token, &tries);
    cb.push_update_reference(|refname, status| {
        if let Some(s) = status {
            *rejected.borrow_mut() = Some(format!("{refname}: {s}"));
        }
        Ok(())
    });
    let mut po = PushOptions::new();
    po.remote_callbacks(cb);
    let spec = format!("+refs/heads/{branch}:refs/heads/{branch}");
    remote.push(&[spec.as_str()], Some(&mut po)).map_err(|e| push_err(e.message().to_string()))?;
    drop(po);
    if let Some(m) = rejected.into_inner() {
        return Err(push_err(format!("rejected: {m}")));
    }
    Ok(())
}
