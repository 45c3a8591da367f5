//! The bot's git work, all through git2: fetch, inspect the bot branch, a separate worktree for the
//! regeneration (the user's working tree, index, HEAD and branches are never touched), commits, a scan
//! of the commits for the token, push.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use git2::{
    Cred, CredentialType, FetchOptions, IndexAddOption, Oid, PushOptions, RemoteCallbacks, Repository, Signature,
};

use super::config::BotConfig;
use super::{BotError, contains};
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

/// Versions of `upstream` in the snapshot store of a commit's tree (`<store>/<upstream>/vX.Y.Z/meta.json`).
pub fn store_versions(repo: &Repository, commit: Oid, store: &str, upstream: &str) -> Result<Vec<Version>, BotError> {
    let tree = repo.find_commit(commit)?.tree()?;
    let Ok(entry) = tree.get_path(Path::new(store).join(upstream).as_path()) else {
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

/// Folder of the common git directory that holds the bot's worktree lock files.
const LOCK_DIR: &str = "xirang-bot";

/// `xirang-bot-<pid>-<nanos>`: the names the bot gives its worktrees (and nothing else).
fn is_bot_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix(WORKTREE_PREFIX) else { return false };
    let Some((pid, nanos)) = rest.split_once('-') else { return false };
    [pid, nanos].iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

fn write_file(path: &Path, text: &str) -> Result<(), BotError> {
    std::fs::write(path, text).map_err(|e| BotError::io(path, e))
}

/// Removes what a bot worktree left: its git administrative folder, its folder under the temp folder
/// and its lock file. The caller holds the lock, or knows that nobody does.
fn remove_worktree(common: &Path, name: &str) {
    let admin = common.join("worktrees").join(name);
    let mut roots = vec![std::env::temp_dir().join(name)];
    // the folder named in the administrative folder (another temp folder, an older layout)
    if let Ok(gitdir) = std::fs::read_to_string(admin.join("gitdir")) {
        let gitdir = PathBuf::from(gitdir.trim());
        if let Some(root) = gitdir.ancestors().find(|a| a.file_name().is_some_and(|n| n == name)) {
            roots.push(root.to_path_buf());
        }
    }
    let _ = std::fs::remove_dir_all(&admin);
    for root in roots {
        if root.file_name().is_some_and(|n| n == name) {
            let _ = std::fs::remove_dir_all(&root);
        }
    }
}

/// Removes the bot worktrees whose run has ended without cleaning up (a killed bot): those whose lock
/// file is missing or not held by a live process. Worktrees of a bot that is still running are kept.
pub fn remove_stale_worktrees(repo: &Repository) {
    let common = repo.commondir().to_path_buf();
    let locks = common.join(LOCK_DIR);
    let mut names = std::collections::BTreeSet::new();
    for dir in [common.join("worktrees"), locks.clone()] {
        let Ok(rd) = std::fs::read_dir(&dir) else { continue };
        for e in rd.flatten() {
            let file = e.file_name().to_string_lossy().to_string();
            let name = file.strip_suffix(".lock.new").or(file.strip_suffix(".lock")).unwrap_or(&file);
            if is_bot_name(name) {
                names.insert(name.to_string());
            }
        }
    }
    for name in names {
        // a half-made lock (killed between creating and naming it) goes too, when nobody holds it
        let new = locks.join(format!("{name}.lock.new"));
        if let Ok(f) = std::fs::OpenOptions::new().write(true).open(&new)
            && f.try_lock().is_ok()
        {
            let _ = std::fs::remove_file(&new);
        }
        let lock_path = locks.join(format!("{name}.lock"));
        let lock = match std::fs::OpenOptions::new().write(true).open(&lock_path) {
            Ok(f) => match f.try_lock() {
                Ok(()) => Some(f),
                // held: its bot is running
                Err(_) => continue,
            },
            // no lock file: a worktree of a bot that died, or of a bot older than the lock files
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(_) => continue,
        };
        remove_worktree(&common, &name);
        if lock.is_some() {
            let _ = std::fs::remove_file(&lock_path);
        }
    }
}

/// Removes a worktree's traces when dropped (also when [`Worktree::create`] fails half-way).
struct Traces {
    common: PathBuf,
    name: String,
    lock_path: PathBuf,
    /// Held (exclusive advisory lock) for the life of the run; the kernel releases it when the
    /// process dies, however it dies.
    _lock: std::fs::File,
}

impl Drop for Traces {
    fn drop(&mut self) {
        remove_worktree(&self.common, &self.name);
        let _ = std::fs::remove_file(&self.lock_path);
    }
}

/// A linked worktree of the user's repository in which the bot works: a checkout of the base tip on a
/// detached HEAD, under `<temp>/xirang-bot-<pid>-<nanos>/tree`. No branch of the user's repository is
/// created or moved (commits go to the worktree's own HEAD and are pushed from there), so a bot killed
/// at any point leaves the user's branches, HEAD, index and working tree as they were. Everything is
/// removed when the worktree is dropped, and by the next run when the bot was killed (see
/// [`remove_stale_worktrees`]).
pub struct Worktree {
    /// The checkout (the folder steps and the check run in).
    pub path: PathBuf,
    pub wrepo: Repository,
    /// Scratch space next to the checkout (downloads), removed with it.
    pub scratch: PathBuf,
    traces: Traces,
}

impl Worktree {
    /// Checks out `start` in a new linked worktree of `repo`.
    pub fn create(repo: &Repository, start: Oid) -> Result<Worktree, BotError> {
        let common = repo.commondir().to_path_buf();
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let name = format!("{WORKTREE_PREFIX}{}-{nanos}", std::process::id());
        // the lock first, under a name no other run looks at until it is held
        let locks = common.join(LOCK_DIR);
        std::fs::create_dir_all(&locks).map_err(|e| BotError::io(&locks, e))?;
        let new = locks.join(format!("{name}.lock.new"));
        let lock_path = locks.join(format!("{name}.lock"));
        let lock =
            std::fs::OpenOptions::new().write(true).create_new(true).open(&new).map_err(|e| BotError::io(&new, e))?;
        lock.try_lock().map_err(|e| BotError::Git(format!("{}: cannot lock: {e}", new.display())))?;
        std::fs::rename(&new, &lock_path).map_err(|e| BotError::io(&lock_path, e))?;
        let traces = Traces { common: common.clone(), name: name.clone(), lock_path, _lock: lock };

        let root = std::env::temp_dir().join(&name);
        std::fs::create_dir(&root).map_err(|e| BotError::io(&root, e))?;
        let root = root.canonicalize().map_err(|e| BotError::io(&root, e))?;
        let path = root.join("tree");
        let scratch = root.join("scratch");
        std::fs::create_dir(&path).map_err(|e| BotError::io(&path, e))?;
        let admin = common.join("worktrees").join(&name);
        std::fs::create_dir_all(&admin).map_err(|e| BotError::io(&admin, e))?;
        let (Some(dotgit), Some(admin_s)) = (path.join(".git").to_str().map(String::from), admin.to_str()) else {
            return Err(BotError::Git(format!("{}: the worktree path is not UTF-8", path.display())));
        };
        // git's linked worktree layout, with a detached HEAD
        write_file(&admin.join("commondir"), "../..\n")?;
        write_file(&admin.join("HEAD"), &format!("{start}\n"))?;
        write_file(&admin.join("gitdir"), &format!("{dotgit}\n"))?;
        write_file(&path.join(".git"), &format!("gitdir: {admin_s}\n"))?;
        let wrepo = Repository::open(&path)
            .map_err(|e| BotError::Git(format!("worktree {}: {}", path.display(), e.message())))?;
        let mut co = git2::build::CheckoutBuilder::new();
        co.force();
        wrepo.checkout_head(Some(&mut co))?;
        Ok(Worktree { path, wrepo, scratch, traces })
    }

    /// Stages everything (respecting .gitignore) and commits on the worktree's HEAD; `None` when the
    /// tree did not change.
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

    /// The worktree's name (`xirang-bot-<pid>-<nanos>`).
    pub fn name(&self) -> &str {
        &self.traces.name
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
}

/// Where the commits of `head` that `base` lacks carry `secret`: the content or the name of a file
/// they add or change (every commit, not only the end result: a later commit that removes the file
/// does not take it out of the history), or a commit message or signature. The places are described
/// with `secret` replaced by `***`.
pub fn secret_places(repo: &Repository, base: Oid, head: Oid, secret: &[u8]) -> Result<Vec<String>, BotError> {
    let mut places = Vec::new();
    if secret.is_empty() {
        return Ok(places);
    }
    let shown = |b: &[u8]| {
        let s = String::from_utf8_lossy(b).to_string();
        s.replace(String::from_utf8_lossy(secret).as_ref(), "***")
    };
    let mut walk = repo.revwalk()?;
    walk.push(head)?;
    walk.hide(base)?;
    for oid in walk {
        let c = repo.find_commit(oid?)?;
        let short: String = c.id().to_string().chars().take(10).collect();
        let sigs = [c.author(), c.committer()];
        if contains(c.message_raw_bytes(), secret)
            || sigs.iter().any(|s| contains(s.name_bytes(), secret) || contains(s.email_bytes(), secret))
        {
            places.push(format!("the message or author of commit {short}"));
        }
        let tree = c.tree()?;
        let parent = if c.parent_count() > 0 { Some(c.parent(0)?.tree()?) } else { None };
        let diff = repo.diff_tree_to_tree(parent.as_ref(), Some(&tree), None)?;
        for d in diff.deltas() {
            if d.status() == git2::Delta::Deleted {
                continue;
            }
            let f = d.new_file();
            let path = f.path_bytes().unwrap_or_default();
            if contains(path, secret) {
                places.push(format!("the name of `{}` (commit {short})", shown(path)));
            }
            if matches!(f.mode(), git2::FileMode::Blob | git2::FileMode::BlobExecutable | git2::FileMode::Link)
                && contains(repo.find_blob(f.id())?.content(), secret)
            {
                places.push(format!("`{}` (commit {short})", shown(path)));
            }
        }
    }
    Ok(places)
}

/// Force-pushes the HEAD of `repo` (the bot's worktree) to `branch` on the remote. Refuses the base
/// branch and any branch outside the bot's prefix.
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
    let spec = format!("+HEAD:refs/heads/{branch}");
    remote.push(&[spec.as_str()], Some(&mut po)).map_err(|e| push_err(e.message().to_string()))?;
    drop(po);
    if let Some(m) = rejected.into_inner() {
        return Err(push_err(format!(
            "rejected: {m} (the bot force-pushes its own branches, rebuilt on the base at each run: allow \
             force-pushes to `{}/*` in the host's branch protection, or leave those branches unprotected)",
            cfg.branch_prefix
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo_with_a_commit(dir: &Path) -> (Repository, Oid) {
        let _ = std::fs::remove_dir_all(dir);
        let mut o = git2::RepositoryInitOptions::new();
        o.initial_head("main");
        let repo = Repository::init_opts(dir, &o).unwrap();
        std::fs::write(dir.join("f.txt"), "f\n").unwrap();
        let mut idx = repo.index().unwrap();
        idx.add_path(Path::new("f.txt")).unwrap();
        idx.write().unwrap();
        let tree = repo.find_tree(idx.write_tree().unwrap()).unwrap();
        let sig = Signature::now("a", "a@example.invalid").unwrap();
        let c = repo.commit(Some("HEAD"), &sig, &sig, "init", &tree, &[]).unwrap();
        drop(tree);
        (repo, c)
    }

    #[test]
    fn bot_names() {
        assert!(is_bot_name("xirang-bot-123-456"));
        for n in
            ["xirang-bot-123", "xirang-bot-a-1", "xirang-bot--1", "xirang-bot-test-x-1", "mine", "xirang-bot-1-2-3"]
        {
            assert!(!is_bot_name(n), "{n}");
        }
    }

    /// Row 10 of issue #19: worktrees of dead runs (lock file free or missing; folder there or gone; the
    /// libgit2 layout of older bots, which held a branch) are removed at the start of a run; the worktree
    /// of a live run and the user's own worktrees are kept.
    #[test]
    fn stale_worktrees_are_removed_and_live_ones_kept() {
        let dir = std::env::temp_dir().join(format!("xirang-bot-gitops-stale-{}", std::process::id()));
        let (repo, c) = repo_with_a_commit(&dir.join("work"));
        let common = repo.commondir().to_path_buf();
        let live = Worktree::create(&repo, c).unwrap();
        assert!(live.path.join("f.txt").exists());
        assert_eq!(live.wrepo.head().unwrap().name().ok(), Some("HEAD"), "not detached");
        assert_eq!(repo.head().unwrap().shorthand().ok(), Some("main"));

        // a dead run's: lock file there but free, folder there
        let dead = "xirang-bot-1-1";
        std::fs::create_dir_all(std::env::temp_dir().join(dead).join("tree")).unwrap();
        std::fs::create_dir_all(common.join("worktrees").join(dead)).unwrap();
        std::fs::write(common.join("worktrees").join(dead).join("HEAD"), format!("{c}\n")).unwrap();
        std::fs::write(common.join(LOCK_DIR).join(format!("{dead}.lock")), "").unwrap();
        // killed half-way through naming its lock
        std::fs::write(common.join(LOCK_DIR).join("xirang-bot-1-2.lock.new"), "").unwrap();
        // an older bot's worktree (libgit2's layout, on a branch), its folder gone, no lock file
        let old = "xirang-bot-1-3";
        let branch = repo.branch("xirang-bot/pytorch-v9.9.9", &repo.find_commit(c).unwrap(), false).unwrap();
        let mut o = git2::WorktreeAddOptions::new();
        o.reference(Some(branch.get()));
        repo.worktree(old, &dir.join(old), Some(&o)).unwrap();
        std::fs::remove_dir_all(dir.join(old)).unwrap();
        // the user's own worktree
        repo.worktree("mine", &dir.join("mine"), None).unwrap();

        remove_stale_worktrees(&repo);
        let mut names: Vec<String> = repo.worktrees().unwrap().iter().flatten().flatten().map(String::from).collect();
        names.sort();
        assert_eq!(names, vec!["mine".to_string(), live.name().to_string()]);
        assert!(!std::env::temp_dir().join(dead).exists());
        let locks: Vec<String> = std::fs::read_dir(common.join(LOCK_DIR))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().to_string())
            .collect();
        assert_eq!(locks, vec![format!("{}.lock", live.name())]);
        assert!(live.path.join("f.txt").exists());

        // the older bot's branch is free again: a worktree of the user's can take it
        let mut o = git2::WorktreeAddOptions::new();
        o.reference(Some(branch.get()));
        repo.worktree("mine2", &dir.join("mine2"), Some(&o)).unwrap();

        // dropping removes everything of the live one
        let (path, name) = (live.path.clone(), live.name().to_string());
        drop(live);
        assert!(!path.exists() && !std::env::temp_dir().join(&name).exists());
        assert!(!common.join("worktrees").join(&name).exists());
        assert!(!common.join(LOCK_DIR).join(format!("{name}.lock")).exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_token_is_found_in_every_commit_and_never_shown() {
        let dir = std::env::temp_dir().join(format!("xirang-bot-gitops-secret-{}", std::process::id()));
        let (repo, base) = repo_with_a_commit(&dir);
        let secret = b"tok_SECRET_42";
        let sig = Signature::now("a", "a@example.invalid").unwrap();
        let commit = |files: &[(&str, &[u8])], parent: Oid, msg: &str| {
            let p = repo.find_commit(parent).unwrap();
            let mut tb = repo.treebuilder(Some(&p.tree().unwrap())).unwrap();
            for (name, content) in files {
                if content.is_empty() {
                    tb.remove(name).unwrap();
                } else {
                    tb.insert(name, repo.blob(content).unwrap(), 0o100644).unwrap();
                }
            }
            let tree = repo.find_tree(tb.write().unwrap()).unwrap();
            repo.commit(None, &sig, &sig, msg, &tree, &[&p]).unwrap()
        };
        let clean = commit(&[("a.txt", b"nothing here")], base, "clean");
        assert!(secret_places(&repo, base, clean, secret).unwrap().is_empty());
        // added, then removed: still in the history
        let added = commit(&[("leak.txt", b"x tok_SECRET_42 y")], clean, "add");
        let removed = commit(&[("leak.txt", b"")], added, "remove");
        let places = secret_places(&repo, base, removed, secret).unwrap();
        assert_eq!(places.len(), 1, "{places:?}");
        assert!(places[0].contains("`leak.txt`"), "{places:?}");
        // in a file name, in a message
        let named = commit(&[("tok_SECRET_42.txt", b"x")], base, "named");
        let places = secret_places(&repo, base, named, secret).unwrap();
        assert_eq!(places, vec![format!("the name of `***.txt` (commit {})", &named.to_string()[..10])]);
        let msg = commit(&[("b.txt", b"y")], base, "see tok_SECRET_42");
        assert!(secret_places(&repo, base, msg, secret).unwrap()[0].contains("message"));
        // commits the base already has are not looked at
        assert!(secret_places(&repo, added, removed, secret).unwrap().is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
