//! The three kinds of source give the same upstream files and the same snapshot: a folder, a torch
//! wheel (files under torchgen/packaged/), and a git ref of a PyTorch-layout repository (read from the
//! object database, no checkout).

use std::io::Write;
use std::path::Path;

use xirang_scan::snapshot::PytorchSnapshot;
use xirang_scan::source::{self, SourceSpec, TREE_PATHS, WHEEL_PATHS};
use xirang_scan::version::Version;
use xirang_tests::corpus;

fn tmpdir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("xirang-src-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn make_wheel(from: &Path, to: &Path) {
    let f = std::fs::File::create(to).unwrap();
    let mut z = zip::ZipWriter::new(f);
    let opts = zip::write::SimpleFileOptions::default();
    z.start_file("torch/__init__.py", opts).unwrap();
    z.write_all(b"").unwrap();
    for (name, inner) in WHEEL_PATHS {
        z.start_file(inner, opts).unwrap();
        z.write_all(&std::fs::read(from.join(name)).unwrap()).unwrap();
    }
    z.finish().unwrap();
}

/// Commits the files of `versions` one after another into a bare-bones repository, tagging each.
fn make_repo(dir: &Path, versions: &[(&str, &Path)]) {
    let repo = git2::Repository::init(dir).unwrap();
    let sig = git2::Signature::now("t", "t@example.invalid").unwrap();
    let mut parent: Option<git2::Oid> = None;
    for (tag, from) in versions {
        // build the tree aten/src/ATen/native/{native_functions,tags}.yaml + tools/autograd/derivatives.yaml
        let mut native = repo.treebuilder(None).unwrap();
        for (name, _) in &TREE_PATHS[..2] {
            let blob = repo.blob(&std::fs::read(from.join(name)).unwrap()).unwrap();
            native.insert(name, blob, 0o100644).unwrap();
        }
        let native = native.write().unwrap();
        let nest = |name: &str, child: git2::Oid| {
            let mut b = repo.treebuilder(None).unwrap();
            b.insert(name, child, 0o040000).unwrap();
            b.write().unwrap()
        };
        let aten = nest("aten", nest("src", nest("ATen", nest("native", native))));
        let mut autograd = repo.treebuilder(None).unwrap();
        let blob = repo.blob(&std::fs::read(from.join("derivatives.yaml")).unwrap()).unwrap();
        autograd.insert("derivatives.yaml", blob, 0o100644).unwrap();
        let tools = nest("tools", nest("autograd", autograd.write().unwrap()));
        let mut root = repo.treebuilder(None).unwrap();
        root.insert("aten", repo.find_tree(aten).unwrap().get(0).unwrap().id(), 0o040000).unwrap();
        root.insert("tools", repo.find_tree(tools).unwrap().get(0).unwrap().id(), 0o040000).unwrap();
        let tree = repo.find_tree(root.write().unwrap()).unwrap();
        let parents: Vec<git2::Commit> = parent.iter().map(|p| repo.find_commit(*p).unwrap()).collect();
        let refs: Vec<&git2::Commit> = parents.iter().collect();
        let c = repo.commit(Some("HEAD"), &sig, &sig, tag, &tree, &refs).unwrap();
        repo.tag_lightweight(tag, &repo.find_object(c, None).unwrap(), false).unwrap();
        parent = Some(c);
    }
}

#[test]
fn folder_wheel_and_git_give_the_same_snapshot() {
    let v21 = corpus().join("pytorch/v2.1.0");
    let v23 = corpus().join("pytorch/v2.3.0");
    let ver = Version::parse("v2.1.0").unwrap();
    let from_folder = PytorchSnapshot::build(&source::read(&SourceSpec::Folder(v21.clone())).unwrap(), &ver).unwrap();

    let d = tmpdir("wheel");
    let whl = d.join("torch-2.1.0-cp311-none-macosx_11_0_arm64.whl");
    make_wheel(&v21, &whl);
    let spec = SourceSpec::parse(whl.to_str().unwrap()).unwrap();
    assert!(matches!(spec, SourceSpec::Wheel(_)));
    let files = source::read(&spec).unwrap();
    let from_wheel = PytorchSnapshot::build(&files, &ver).unwrap();
    assert_eq!(from_wheel.registry, from_folder.registry);
    assert_eq!(from_wheel.derivatives, from_folder.derivatives);
    assert_eq!(from_wheel.meta.content_sha256, from_folder.meta.content_sha256);

    let g = tmpdir("git");
    make_repo(&g, &[("v2.1.0", &v21), ("v2.3.0", &v23)]);
    assert_eq!(source::git_release_tags(&g).unwrap(), ["v2.1.0", "v2.3.0"]);
    let spec = SourceSpec::parse(&format!("{}@v2.1.0", g.display())).unwrap();
    assert!(matches!(spec, SourceSpec::Git { .. }));
    let from_git = PytorchSnapshot::build(&source::read(&spec).unwrap(), &ver).unwrap();
    assert_eq!(from_git.registry, from_folder.registry);
    assert_eq!(from_git.meta.content_sha256, from_folder.meta.content_sha256);
    // a ref that is not the checked-out one is read straight from the object database
    let spec = SourceSpec::parse(&format!("git:{}@v2.1.0", g.display())).unwrap();
    let files = source::read(&spec).unwrap();
    assert_eq!(files.native_functions.text(), std::fs::read_to_string(v21.join("native_functions.yaml")).unwrap());
    let head = source::read(&SourceSpec::parse(&format!("{}@HEAD", g.display())).unwrap()).unwrap();
    assert_eq!(head.native_functions.text(), std::fs::read_to_string(v23.join("native_functions.yaml")).unwrap());

    let _ = std::fs::remove_dir_all(&d);
    let _ = std::fs::remove_dir_all(&g);
}

#[test]
fn bad_sources_are_errors_not_panics() {
    assert!(SourceSpec::parse("/definitely/not/here").is_err());
    assert!(SourceSpec::parse("/definitely/not/here.whl").is_err());
    let d = tmpdir("bad");
    let whl = d.join("broken.whl");
    std::fs::write(&whl, b"not a zip").unwrap();
    let e = source::read(&SourceSpec::parse(whl.to_str().unwrap()).unwrap()).unwrap_err();
    assert!(e.to_string().contains("broken.whl"), "{e}");
    let empty = tmpdir("emptydir");
    let e = source::read(&SourceSpec::Folder(empty.clone())).unwrap_err();
    assert!(e.to_string().contains("native_functions.yaml"), "{e}");
    let g = tmpdir("git-bad");
    make_repo(&g, &[("v2.1.0", &corpus().join("pytorch/v2.1.0"))]);
    let e = source::read(&SourceSpec::Git { repo: g.clone(), reference: "v9.9.9".into() }).unwrap_err();
    assert!(e.to_string().contains("v9.9.9"), "{e}");
    let _ = std::fs::remove_dir_all(&d);
    let _ = std::fs::remove_dir_all(&empty);
    let _ = std::fs::remove_dir_all(&g);
}
