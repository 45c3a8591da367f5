//! The operator profiler on `train_mlp` (committed goldens): trace-event
//! JSON, flame graph, advice for operators forced onto the fallback tier,
//! comparison against the committed PyTorch baseline, bad input files.
//!
//! A profiling session is process-wide, so every test here holds `LOCK` ([`lock`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Mutex;

use serde_json::Value;
use xirang_prof::{advise, compare, report};
use xirang_runtime::dispatch::{self, FallbackMode, Policy, Tier};
use xirang_runtime::profile::{self, Profile};
use xirang_runtime::{Device, Runtime, io};

/// The training loops (shared with the runtime's examples, benches and tests).
#[allow(dead_code)]
#[path = "../../examples/common/train.rs"]
mod train;

static LOCK: Mutex<()> = Mutex::new(());

/// One test at a time (a profiling session, the fallback policy and the tier counters are
/// process-wide), each from the default policy and zeroed counters.
fn lock() -> std::sync::MutexGuard<'static, ()> {
    let g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    dispatch::set_policy(Policy::default());
    dispatch::reset_counters();
    g
}

/// The runtime's folder (`adapter-runtime/`: goldens, profile baselines).
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

const STEPS: usize = 20;

/// Profiles `train_mlp` on the goldens with `force` on the fallback tier.
fn profile_train(force: &[&str]) -> Profile {
    dispatch::set_policy(Policy {
        mode: FallbackMode::Silent,
        force_fallback: force.iter().map(|s| s.to_string()).collect(),
        ..Policy::default()
    });
    let init = io::load_safetensors(root().join("goldens/mlp_init.safetensors")).unwrap();
    let data = io::load_safetensors(root().join("goldens/mlp_data.safetensors")).unwrap();
    let rt = Runtime::simulator().unwrap();
    profile::start().unwrap();
    let r = train::train_mlp(&rt, Device::Npu(0), &init, &data, STEPS, 0.1, |_, _| {});
    let p = profile::stop().unwrap();
    dispatch::set_policy(Policy { mode: FallbackMode::Silent, ..Policy::default() });
    r.unwrap();
    p
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("xirang-profile-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// Checks a Chrome trace-event document: required keys and types of every
/// event, and that complete events nest properly on each thread.
fn validate_trace(doc: &Value) -> usize {
    let events = doc["traceEvents"].as_array().expect("traceEvents is an array");
    let mut per_tid: BTreeMap<u64, Vec<(f64, f64, String)>> = BTreeMap::new();
    let mut complete = 0;
    for e in events {
        let o = e.as_object().expect("event is an object");
        let ph = o["ph"].as_str().expect("ph is a string");
        assert!(o["name"].is_string(), "name: {e}");
        assert!(o["pid"].is_u64() && o["tid"].is_u64(), "pid/tid are integers: {e}");
        match ph {
            "M" => assert!(o["args"]["name"].is_string(), "metadata event names something: {e}"),
            "X" => {
                complete += 1;
                let ts = o["ts"].as_f64().expect("ts is a number");
                let dur = o["dur"].as_f64().expect("dur is a number");
                assert!(ts >= 0.0 && dur >= 0.0, "{e}");
                assert!(o["cat"].is_string());
                let args = o["args"].as_object().expect("args is an object");
                let tier = args["tier"].as_str().unwrap();
                assert!(["native", "recipe", "fallback"].contains(&tier), "{e}");
                for k in ["alloc_bytes", "h2d_bytes", "d2h_bytes", "launches"] {
                    assert!(args[k].is_u64(), "args.{k} is a count: {e}");
                }
                per_tid.entry(o["tid"].as_u64().unwrap()).or_default().push((
                    ts,
                    ts + dur,
                    o["name"].as_str().unwrap().to_string(),
                ));
            }
            other => panic!("unexpected phase {other}"),
        }
    }
    // nesting: sorted by start (longer first on ties), every event either
    // starts after the enclosing one ends or ends inside it
    const EPS: f64 = 1e-3;
    for (tid, mut v) in per_tid {
        v.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.total_cmp(&a.1)));
        let mut stack: Vec<(f64, f64, String)> = Vec::new();
        let mut last_start = f64::NEG_INFINITY;
        for ev in v {
            assert!(ev.0 >= last_start, "timestamps are monotonic on thread {tid}");
            last_start = ev.0;
            while stack.last().is_some_and(|top| ev.0 >= top.1 - EPS && ev.1 > top.1 + EPS) {
                stack.pop();
            }
            if let Some(top) = stack.last() {
                assert!(ev.1 <= top.1 + EPS, "thread {tid}: {} overlaps {} without nesting", ev.2, top.2);
            }
            stack.push(ev);
        }
    }
    complete
}

#[test]
fn train_mlp_trace_validates_against_the_trace_event_format() {
    let _g = lock();
    let p = profile_train(&[]);
    // every operator of the loop, once per step (addmm and mm more). Autograd runs `mm` three
    // times per step: both gradients of fc2's addmm, and only the weight's of fc1's (the input `x`
    // needs none: the engine passes `should_compute_output` to the node, as PyTorch does).
    let ops = p.by_operator();
    let calls: BTreeMap<&str, u64> = ops.iter().map(|s| (s.op.as_str(), s.calls)).collect();
    assert_eq!(calls["addmm"], 2 * STEPS as u64);
    assert_eq!(calls["mm"], 3 * STEPS as u64);
    assert_eq!(calls["relu"], STEPS as u64);
    assert_eq!(calls["add_.Tensor"], 4 * STEPS as u64);
    assert!(p.calls.iter().all(|c| c.tier == "native"), "no forced fallback: everything native");
    // device time, allocator bytes and launches of native calls
    let addmm: Vec<_> = p.calls.iter().filter(|c| c.op == "addmm").collect();
    assert!(addmm.iter().all(|c| c.launches >= 1 && c.device_ns.is_some() && c.alloc_bytes > 0), "{:?}", addmm[0]);
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);

    let trace = report::chrome_trace(&p);
    let doc: Value = serde_json::from_str(&trace).unwrap();
    assert_eq!(validate_trace(&doc), p.calls.len());
    println!("train_mlp trace: {} calls, {} bytes of trace JSON", p.calls.len(), trace.len());

    // round trip through the file format
    let path = tmp("train.json");
    p.write(&path).unwrap();
    assert_eq!(Profile::read(&path).unwrap(), p);
    let table = report::summary(&p, report::Format::Table);
    assert!(table.lines().any(|l| l.starts_with("addmm ")), "{table}");
    let md = report::summary(&p, report::Format::Markdown);
    assert!(md.contains("| `addmm` | 40 | native 40 |"), "{md}");
}

#[test]
fn train_mlp_flamegraph_is_valid_xml_with_frames() {
    let _g = lock();
    let p = profile_train(&[]);
    let svg = report::flamegraph(&p, "train_mlp").unwrap();
    let mut reader = quick_xml::Reader::from_str(&svg);
    let (mut groups, mut titles, mut depth, mut root) = (0, Vec::new(), 0i64, None);
    let mut in_title = false;
    loop {
        match reader.read_event().expect("flame graph SVG is well-formed XML") {
            quick_xml::events::Event::Start(e) => {
                depth += 1;
                let name = String::from_utf8(e.name().as_ref().to_vec()).unwrap();
                root.get_or_insert(name.clone());
                if name == "g" {
                    groups += 1;
                }
                in_title = name == "title";
            }
            quick_xml::events::Event::End(_) => {
                depth -= 1;
                in_title = false;
            }
            quick_xml::events::Event::Text(t) if in_title => {
                titles.push(String::from_utf8_lossy(t.as_ref()).to_string())
            }
            quick_xml::events::Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(depth, 0, "balanced elements");
    assert_eq!(root.as_deref(), Some("svg"));
    assert!(groups > 10, "{groups} frame groups");
    for op in ["addmm [native]", "mm [native]", "add_.Tensor [native]"] {
        assert!(titles.iter().any(|t| t.starts_with(op)), "a frame for {op}: {titles:?}");
    }
}

#[test]
fn advice_names_the_operators_forced_onto_the_fallback_tier() {
    let _g = lock();
    let p = profile_train(&["addmm", "threshold_backward"]);
    let tiers: BTreeMap<&str, BTreeSet<&str>> = p.calls.iter().fold(BTreeMap::new(), |mut m, c| {
        m.entry(c.op.as_str()).or_default().insert(c.tier.as_str());
        m
    });
    assert_eq!(tiers["addmm"], BTreeSet::from(["fallback"]));
    assert_eq!(tiers["mm"], BTreeSet::from(["native"]));
    // the fallback copies between host and device
    let a = p.calls.iter().find(|c| c.op == "addmm").unwrap();
    assert!(a.h2d_bytes > 0 && a.d2h_bytes > 0, "{a:?}");

    let rules = advise::Rules::builtin().unwrap();
    let advice = advise::advise(&p, &rules);
    let text = advise::render(&advice, false);
    println!("{text}");
    let fallback: BTreeSet<&str> =
        advice.iter().filter(|a| a.rule == "fallback-hot").map(|a| a.subject.as_str()).collect();
    assert_eq!(fallback, BTreeSet::from(["addmm", "threshold_backward"]), "{text}");
    let addmm = advice.iter().find(|a| a.subject == "addmm").unwrap();
    assert!(addmm.message.contains("addmm ran 40 time(s) on the CPU fallback"), "{}", addmm.message);
    assert!(addmm.saving_ns > 0);
    // the four SGD updates in a row are a fusion candidate
    assert!(
        advice.iter().any(|a| a.rule == "elementwise-fusion" && a.subject.contains("add_.Tensor -> add_.Tensor")),
        "{text}"
    );
    // deterministic order: by saving, then rule, then subject
    assert!(advice.windows(2).all(|w| w[0].saving_ns >= w[1].saving_ns));
}

#[test]
fn nested_calls_are_a_stack_and_aggregate_per_operator() {
    let _g = lock();
    profile::start().unwrap();
    assert!(matches!(profile::start(), Err(profile::ProfileError::AlreadyRunning)));
    for _ in 0..3 {
        dispatch::call("x.outer", || {
            dispatch::mark(Tier::Recipe);
            dispatch::call("x.inner", || Ok(()))?;
            dispatch::call("x.inner", || Ok(()))
        })
        .unwrap();
    }
    let p = profile::stop().unwrap();
    assert!(matches!(profile::stop(), Err(profile::ProfileError::NotRunning)));
    assert_eq!(p.calls.len(), 9);
    let outer: Vec<_> = p.calls.iter().filter(|c| c.op == "x.outer").collect();
    for c in p.calls.iter().filter(|c| c.op == "x.inner") {
        let parent = outer.iter().find(|o| Some(o.id) == c.parent).expect("inner has an outer parent");
        assert_eq!(c.depth, 1);
        assert!(c.start_ns >= parent.start_ns && c.start_ns + c.host_ns <= parent.start_ns + parent.host_ns);
        assert_eq!(c.tier, "native");
    }
    assert!(outer.iter().all(|o| o.tier == "recipe" && o.parent.is_none() && o.self_ns <= o.host_ns));
    let stats = p.by_operator();
    let inner = stats.iter().find(|s| s.op == "x.inner").unwrap();
    assert_eq!((inner.calls, inner.native), (6, 6));
    let folded = report::folded(&p);
    assert!(folded.contains("x.outer [recipe];x.inner [native] "), "{folded}");
    // the recipe rule sees the recipe and what it calls
    let rules = advise::Rules::parse(
        "[[rule]]\nid = \"r\"\nkind = \"recipe\"\nmessage = \"{op} via {children}\"\n",
        std::path::Path::new("inline"),
    )
    .unwrap();
    let a = advise::advise(&p, &rules);
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].message, "x.outer via x.inner");
    // with no session, calls are not recorded
    dispatch::call("x.unrecorded", || Ok(())).unwrap();
}

#[test]
fn guard_writes_the_profile_when_dropped() {
    let _g = lock();
    let path = tmp("guard.json");
    {
        let _guard = profile::Guard::to_file(&path).unwrap();
        dispatch::call("x.guarded", || Ok(())).unwrap();
    }
    let p = Profile::read(&path).unwrap();
    assert_eq!(p.calls.len(), 1);
    assert_eq!(p.calls[0].op, "x.guarded");
}

#[test]
fn comparison_with_the_pytorch_baseline_and_with_a_previous_profile() {
    let _g = lock();
    let p = profile_train(&[]);
    let base = compare::Baseline::read(root().join("profile/baselines/train_mlp_torch_cpu.json")).unwrap();
    let c = compare::compare(&base, &p, 1.2, 0);
    assert_eq!(c.baseline, "torch");
    for op in ["addmm", "mm", "relu", "_log_softmax", "nll_loss_forward", "sum", "add_", "threshold_backward"] {
        let r = c.rows.iter().find(|r| r.op == op).unwrap_or_else(|| panic!("{op} in the comparison"));
        assert!(r.ratio.is_some() && r.base_calls > 0 && r.new_calls > 0, "{r:?}");
    }
    let add = c.rows.iter().find(|r| r.op == "add_").unwrap();
    assert_eq!((add.base_calls, add.new_calls), (80, 80));
    println!("{}", compare::render(&c, report::Format::Table));

    // against itself: ratio 1, nothing flagged
    let same = compare::compare(&compare::Baseline::Xirang(p.clone()), &p, 1.2, 0);
    assert_eq!(same.regressions().count(), 0);
    assert!(same.rows.iter().all(|r| r.ratio.is_some_and(|x| (x - 1.0).abs() < 1e-9)));
    // mm made 3x slower is flagged, and only mm
    let mut slow = p.clone();
    for c in slow.calls.iter_mut().filter(|c| c.op == "mm") {
        c.host_ns *= 3;
        c.self_ns *= 3;
    }
    let c = compare::compare(&compare::Baseline::Xirang(p), &slow, 1.2, 0);
    let flagged: Vec<&str> = c.regressions().map(|r| r.op.as_str()).collect();
    assert_eq!(flagged, ["mm"]);
    assert!(compare::render(&c, report::Format::Markdown).contains("| `mm` |"));
}

#[test]
fn malformed_profiles_baselines_and_rules_are_errors() {
    let _g = lock();
    for (text, want) in [
        ("", "EOF"),
        ("[]", "no `format` field"),
        (r#"{"format": "other"}"#, "format is `other`"),
        (r#"{"format": "xirang-profile", "version": 9, "calls": []}"#, "version 9"),
        (r#"{"format": "xirang-profile", "version": 1}"#, "missing field `calls`"),
        (
            r#"{"format": "xirang-profile", "version": 1, "calls": [{"id": 0, "parent": 7, "depth": 1, "tid": 1, "op": "a", "tier": "native", "start_ns": 0, "host_ns": 1, "self_ns": 1, "device_ns": null, "alloc_bytes": 0, "h2d_bytes": 0, "d2h_bytes": 0, "launches": 0, "contiguous_copies": 0, "contiguous_bytes": 0}]}"#,
            "parent 7 does not exist",
        ),
        (
            r#"{"format": "xirang-profile", "version": 1, "calls": [{"id": 0, "parent": null, "depth": 0, "tid": 1, "op": "a", "tier": "gpu", "start_ns": 0, "host_ns": 1, "self_ns": 1, "device_ns": null, "alloc_bytes": 0, "h2d_bytes": 0, "d2h_bytes": 0, "launches": 0, "contiguous_copies": 0, "contiguous_bytes": 0}]}"#,
            "unknown tier `gpu`",
        ),
    ] {
        let e = Profile::parse(text.as_bytes()).unwrap_err();
        assert!(e.contains(want), "{text}: {e}");
    }
    let path = tmp("bad.json");
    std::fs::write(&path, r#"{"format": "torch-profile", "version": 1, "source": "x", "ops": [{"op": "aten::mm"}]}"#)
        .unwrap();
    let e = compare::Baseline::read(&path).unwrap_err().to_string();
    assert!(e.contains("bad.json") && e.contains("missing field"), "{e}");
    assert!(Profile::read(tmp("missing.json")).is_err());
    for (rules, want) in [
        ("[[rule]]\nid = \"a\"\nkind = \"fallback\"\nmessage = \"{nope}\"\n", "unknown placeholder {nope}"),
        ("[[rule]]\nid = \"a\"\nkind = \"teleport\"\nmessage = \"\"\n", "teleport"),
        ("[[rule]]\nid = \"a\"\nkind = \"fallback\"\nmin_share = 2.0\nmessage = \"\"\n", "min_share"),
        ("[[rule]]\nid = \"a\"\nkind = \"fallback\"\nmessage = \"{op\"\n", "unclosed"),
        ("rule = 3", "invalid type"),
    ] {
        let e = advise::Rules::parse(rules, std::path::Path::new("r.toml")).unwrap_err().to_string();
        assert!(e.contains(want), "{rules}: {e}");
    }
}

#[test]
fn cli_subcommands_and_exit_codes() {
    let _g = lock();
    let exe = env!("CARGO_BIN_EXE_xirang-prof");
    let p = profile_train(&["addmm"]);
    let path = tmp("cli.json");
    p.write(&path).unwrap();
    let run = |args: &[&str]| {
        let o = std::process::Command::new(exe).args(args).output().unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).to_string(),
            String::from_utf8_lossy(&o.stderr).to_string(),
        )
    };
    let f = path.to_str().unwrap();
    let (code, out, _) = run(&["summary", f, "--format", "markdown"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("`addmm`"), "{out}");
    let trace = tmp("cli-trace.json");
    assert_eq!(run(&["trace", f, "--out", trace.to_str().unwrap()]).0, Some(0));
    validate_trace(&serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap());
    let svg = tmp("cli.svg");
    assert_eq!(run(&["flamegraph", f, "--out", svg.to_str().unwrap()]).0, Some(0));
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
    let (code, out, _) = run(&["advise", f]);
    assert_eq!(code, Some(0));
    assert!(out.contains("[fallback-hot] addmm ran 40 time(s)"), "{out}");
    // compare: the run against a copy with addmm made 3x slower flags addmm (a scaled copy, not a
    // second timed run: which tier is faster in a debug build on a loaded machine is not a
    // property to test)
    let mut slow = p.clone();
    for c in slow.calls.iter_mut().filter(|c| c.op == "addmm") {
        c.host_ns *= 3;
        c.self_ns *= 3;
    }
    let slow_path = tmp("cli-slow.json");
    slow.write(&slow_path).unwrap();
    let (code, out, _) = run(&["compare", f, slow_path.to_str().unwrap(), "--threshold", "1.5"]);
    assert_eq!(code, Some(4), "{out}");
    assert!(out.lines().any(|l| l.starts_with("addmm ") && l.ends_with("REGRESSION")), "{out}");
    assert_eq!(run(&["compare", f, f]).0, Some(0));
    let torch = root().join("profile/baselines/train_mlp_torch_cpu.json");
    assert!(matches!(run(&["compare", torch.to_str().unwrap(), f, "--threshold", "1e9"]).0, Some(0)));
    // errors and usage
    let bad = tmp("cli-bad.json");
    std::fs::write(&bad, "{").unwrap();
    let (code, _, err) = run(&["summary", bad.to_str().unwrap()]);
    assert_eq!(code, Some(1));
    assert!(err.contains("cli-bad.json") && err.contains("not a valid xirang profile"), "{err}");
    assert_eq!(run(&["summary"]).0, Some(2));
    assert_eq!(run(&["compare", f, f, "--threshold", "-1"]).0, Some(2));
    let (_, help, _) = run(&["--help"]);
    assert!(help.contains("Exit codes"), "{help}");
}

// ---- hostile profiles (issue #19): huge names, parent cycles, deep chains, non-regular files ----

fn rec(id: u64, parent: Option<u64>, depth: u32, op: &str, start_ns: u64, host_ns: u64) -> profile::Call {
    profile::Call {
        id,
        parent,
        depth,
        tid: 1,
        op: op.to_string(),
        tier: "native".into(),
        start_ns,
        host_ns,
        self_ns: 0,
        device_ns: None,
        alloc_bytes: 0,
        h2d_bytes: 0,
        d2h_bytes: 0,
        launches: 0,
        contiguous_copies: 0,
        contiguous_bytes: 0,
    }
}

/// A profile exactly as given (not sorted, not checked).
fn raw(calls: Vec<profile::Call>) -> Profile {
    Profile { format: profile::model::FORMAT.into(), version: profile::model::VERSION, warnings: Vec::new(), calls }
}

/// `n` calls, each the parent of the next; every one encloses its child in time.
fn chain(n: u64) -> Profile {
    raw((0..n).map(|i| rec(i, i.checked_sub(1), i as u32, "x.nest", i, 2 * (n - i))).collect())
}

/// Runs `f` on another thread; fails when it has not returned within `secs`.
fn within<T: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs)).unwrap_or_else(|_| panic!("{what}: no answer in {secs} s"))
}

/// Runs the CLI; kills it and fails when it runs longer than `secs`.
fn cli_within(secs: u64, args: &[&str]) -> (Option<i32>, String, String) {
    use std::io::Read as _;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_xirang-prof"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("xirang-prof {args:?}: still running after {secs} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let (mut out, mut err) = (String::new(), String::new());
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (status.code(), out, err)
}

/// Row 2: a 65,536-character operator name panicked the table renderers ("Formatting argument out
/// of range": a `{:<width$}` wider than u16::MAX). Names are cut with `...` in every table; a name
/// with a newline or a `|` does not break the rows.
#[test]
fn huge_and_odd_operator_names_are_cut_in_every_table() {
    let _g = lock();
    let huge = "n".repeat(65_536);
    let odd = "evil|op\nsecond line\t`tick`";
    let p = Profile::from_calls(
        vec![rec(0, None, 0, &huge, 0, 30), rec(1, None, 0, odd, 30, 20), rec(2, None, 0, "mm", 50, 10)],
        Vec::new(),
    );
    let cmp = compare::compare(&compare::Baseline::Xirang(p.clone()), &p, 1.2, 0);
    for format in [report::Format::Table, report::Format::Markdown] {
        for (what, text) in [("summary", report::summary(&p, format)), ("compare", compare::render(&cmp, format))] {
            assert!(text.contains("nnn..."), "{what} {format:?}: the long name is cut:\n{text}");
            assert!(!text.contains(&"n".repeat(1000)), "{what} {format:?}");
            assert!(text.lines().all(|l| l.chars().count() <= 300), "{what} {format:?}: a line is too long");
            // one line per operator: the newline in the odd name is escaped
            let rows = text.lines().filter(|l| l.contains("evil")).count();
            assert_eq!(rows, 1, "{what} {format:?}:\n{text}");
            if format == report::Format::Markdown {
                let row = text.lines().find(|l| l.contains("evil")).unwrap();
                let cells = row.replace("\\|", "").matches('|').count();
                let head = text.lines().find(|l| l.starts_with("| operator")).unwrap().matches('|').count();
                assert_eq!(cells, head, "the `|` in the name does not add a column: {row}");
            }
        }
    }
    // folded stacks: one line per stack, the frame cut too
    let folded = report::folded(&p);
    assert_eq!(folded.lines().count(), 3, "{folded}");
    assert!(folded.lines().all(|l| l.len() < 1000), "{folded}");
    // the CLI on the same file
    let path = tmp("huge-name.json");
    p.write(&path).unwrap();
    let f = path.to_str().unwrap();
    for args in [vec!["summary", f], vec!["summary", f, "--format", "markdown"], vec!["compare", f, f]] {
        let (code, out, err) = cli_within(120, &args);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        assert!(out.contains("nnn...") && !err.contains("panicked"), "{args:?}: {out}{err}");
    }
    let svg = tmp("huge-name.svg");
    let (code, _, err) = cli_within(120, &["flamegraph", f, "--out", svg.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
}

/// Row 19: parent links that form a cycle made `flamegraph` grow without bound; a 100k-deep chain
/// took minutes. The reader now refuses both: a parent must be an earlier record (no cycle can be
/// written down), depths must follow the parents, and nesting is capped.
#[test]
fn parent_cycles_and_deep_chains_are_refused_on_read() {
    let _g = lock();
    let parse = |p: &Profile| Profile::parse(p.to_json().as_bytes());
    // a 2-cycle whose calls span the same time (so each "encloses" the other), and a self-parent
    let cycle = raw(vec![rec(0, Some(1), 1, "a", 0, 10), rec(1, Some(0), 1, "b", 0, 10)]);
    let e = parse(&cycle).unwrap_err();
    assert!(e.contains("earlier record"), "{e}");
    let e = parse(&raw(vec![rec(5, Some(5), 1, "a", 0, 10)])).unwrap_err();
    assert!(e.contains("earlier record"), "{e}");
    // a parent that comes later in the file
    let e = parse(&raw(vec![rec(1, Some(0), 1, "inner", 1, 1), rec(0, None, 0, "outer", 0, 5)])).unwrap_err();
    assert!(e.contains("earlier record"), "{e}");
    // depth must be the parent's plus one
    let e = parse(&raw(vec![rec(0, None, 0, "outer", 0, 5), rec(1, Some(0), 7, "inner", 1, 1)])).unwrap_err();
    assert!(e.contains("depth 7"), "{e}");
    let e = parse(&raw(vec![rec(0, None, 3, "outer", 0, 5)])).unwrap_err();
    assert!(e.contains("depth 3"), "{e}");
    // nesting: 256 levels below the program are fine, 257 are not; a 100k chain is refused quickly
    let ok = parse(&chain(257)).unwrap();
    assert_eq!(ok.calls.len(), 257);
    let e = parse(&chain(258)).unwrap_err();
    assert!(e.contains("depth 257") && e.contains("limit of 256"), "{e}");
    let deep = chain(100_000).to_json();
    let t = std::time::Instant::now();
    let e = Profile::parse(deep.as_bytes()).unwrap_err();
    assert!(e.contains("limit of 256"), "{e}");
    assert!(t.elapsed().as_secs() < 10, "{:?}", t.elapsed());

    // the CLI: every subcommand refuses the cycle and the deep chain, quickly
    let cyc = tmp("cycle.json");
    std::fs::write(&cyc, cycle.to_json()).unwrap();
    let deep_path = tmp("deep.json");
    std::fs::write(&deep_path, &deep).unwrap();
    let svg = tmp("cycle.svg");
    for file in [&cyc, &deep_path] {
        let f = file.to_str().unwrap();
        for args in [
            vec!["summary", f],
            vec!["flamegraph", f, "--out", svg.to_str().unwrap()],
            vec!["trace", f, "--out", svg.to_str().unwrap()],
            vec!["advise", f],
            vec!["compare", f, f],
        ] {
            let (code, _, err) = cli_within(60, &args);
            assert_eq!(code, Some(1), "{args:?}: {err}");
            assert!(err.contains("not a valid"), "{args:?}: {err}");
        }
    }
}

/// Profiles built in memory are not checked: the traversals still end on a cycle or a deep chain.
#[test]
fn traversals_end_on_unchecked_cycles_and_chains() {
    let _g = lock();
    let cycle = raw(vec![rec(0, Some(1), 1, "a", 0, 10), rec(1, Some(0), 1, "b", 0, 10)]);
    let deep = chain(100_000);
    for (what, p) in [("cycle", cycle), ("chain", deep)] {
        let (folded, stats, advice) = within(60, what, move || {
            let folded = report::folded(&p);
            let stats = p.by_operator();
            let advice = advise::advise(&p, &advise::Rules::builtin().unwrap());
            let _ = report::flamegraph(&p, "t");
            let _ = report::summary(&p, report::Format::Table);
            (folded, stats, advice)
        });
        assert!(!folded.is_empty() && !stats.is_empty(), "{what}");
        assert!(folded.lines().all(|l| l.matches(';').count() <= 256), "{what}: stacks are depth-bounded");
        let _ = advice;
    }
}

/// Row 18: profiles, baselines and rules are read only from regular files, up to a size limit.
/// A FIFO blocked the open; `/dev/zero` was read until the process was killed for memory.
#[cfg(unix)]
#[test]
fn profile_inputs_must_be_regular_files_of_bounded_size() {
    let _g = lock();
    let fifo = tmp("input.fifo");
    let _ = std::fs::remove_file(&fifo);
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let dir = tmp("a-directory");
    std::fs::create_dir_all(&dir).unwrap();
    for path in [fifo.clone(), dir.clone(), PathBuf::from("/dev/zero")] {
        let p = path.clone();
        let errs = within(30, &path.display().to_string(), move || {
            [
                Profile::read(&p).map(|_| ()).unwrap_err().to_string(),
                compare::Baseline::read(&p).map(|_| ()).unwrap_err().to_string(),
                advise::Rules::read(&p).map(|_| ()).unwrap_err().to_string(),
            ]
        });
        for e in errs {
            assert!(e.contains("not a regular file"), "{}: {e}", path.display());
        }
    }
    let (code, _, err) = cli_within(30, &["summary", fifo.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("not a regular file"), "{err}");
    // a sparse file just over the limits (no disk space used; the size alone refuses it)
    let big = tmp("big.json");
    std::fs::File::create(&big).unwrap().set_len((1 << 30) + 1).unwrap();
    let e = Profile::read(&big).unwrap_err().to_string();
    assert!(e.contains("limit of 1073741824 bytes"), "{e}");
    let e = compare::Baseline::read(&big).unwrap_err().to_string();
    assert!(e.contains("limit of 1073741824 bytes"), "{e}");
    std::fs::File::create(&big).unwrap().set_len((4 << 20) + 1).unwrap();
    let e = advise::Rules::read(&big).unwrap_err().to_string();
    assert!(e.contains("limit of 4194304 bytes"), "{e}");
    std::fs::remove_file(&big).unwrap();
}

/// Counters near u64::MAX (found by the fuzzer, `fuzz/`): sums saturate, and a flame graph whose
/// total self time does not fit in 64 bits is an error, not an overflow inside inferno (a panic in
/// a build with overflow checks, a wrapped total in release).
#[test]
fn counters_near_u64_max_do_not_overflow() {
    let _g = lock();
    let max = u64::MAX;
    let big = |id: u64, tier: &str| profile::Call {
        tier: tier.into(),
        self_ns: max,
        device_ns: Some(max),
        alloc_bytes: max,
        h2d_bytes: max,
        d2h_bytes: max,
        launches: max,
        contiguous_copies: max,
        contiguous_bytes: max,
        ..rec(id, None, 0, "a", 0, max)
    };
    let p =
        Profile::parse(raw(vec![big(0, "native"), big(1, "fallback"), big(2, "recipe")]).to_json().as_bytes()).unwrap();
    let s = &p.by_operator()[0];
    assert_eq!((s.calls, s.host_ns, s.self_ns, s.alloc_bytes), (3, max, max, max));
    assert_eq!(p.top_level_ns(), max);
    for f in [report::Format::Table, report::Format::Markdown] {
        assert!(report::summary(&p, f).contains("18446744073.710 s"));
        let _ = compare::render(&compare::compare(&compare::Baseline::Xirang(p.clone()), &p, 1.2, 0), f);
    }
    let _ = advise::render(&advise::advise(&p, &advise::Rules::builtin().unwrap()), false);
    assert_eq!(report::folded(&p), format!("a [fallback] {max}\na [native] {max}\na [recipe] {max}\n"));
    let e = report::flamegraph(&p, "t").unwrap_err().to_string();
    assert!(e.contains("does not fit"), "{e}");
    // one stack of u64::MAX still draws
    let one = Profile::parse(raw(vec![big(0, "native")]).to_json().as_bytes()).unwrap();
    assert!(report::flamegraph(&one, "t").unwrap().contains("<svg"));
}
