//! `xirang-scan new-op`: adds a custom operator with its gradient rule.
//!
//! Validates the schema, the gradient formulas and the reference formula (positioned errors that
//! point into the command-line argument), then, as one group of writes (all or nothing):
//! appends the operator to the custom-operator file, regenerates `generated/`, writes the kernel
//! skeleton `adapter-runtime/src/custom/<name>.rs`, rewrites `adapter-runtime/src/custom/mod.rs`
//! (one module and one forwarding `CustomOps` method per kernel file) and writes the tests
//! `adapter-runtime/tests/runtime/custom/<name>.rs`, a module of the runtime's test binary (finite-difference gradient check in f64, and the
//! comparison with the reference composition).

use std::collections::BTreeSet;
use std::path::Path;

use crate::error::{Error, Result, SourceFile};
use crate::schema::{Argument, BaseTy, DefaultValue, Type};

use super::custom::{self, CustomCtx, CustomErrorKind, CustomOp, CustomSet, GradRule, Spanned, Target, kernel_path};
use super::{GeneratedFile, Inputs};

/// What `new-op` was asked.
#[derive(Debug, Clone, Default)]
pub struct NewOp {
    /// `ns::name(args) -> returns`.
    pub schema: String,
    /// `input: formula`, one per differentiable input.
    pub grads: Vec<String>,
    /// A formula in existing operators computing the same function.
    pub reference: Option<String>,
}

/// One file of the write group (path relative to the repository root).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    pub path: String,
    pub text: String,
}

/// The planned result of `new-op`.
#[derive(Debug, Clone)]
pub struct Plan {
    pub qualified: String,
    pub writes: Vec<Write>,
}

/// Splits `input: formula` into the two parts (as spans of the argument).
fn split_grad(arg: &Spanned) -> std::result::Result<(Spanned, Spanned), Box<custom::CustomOpError>> {
    let text = &arg.text;
    let Some(colon) = text.find(':') else {
        return Err(arg.whole(
            CustomErrorKind::Gradient,
            "expected `<input>: <formula>`",
            Some("e.g. --grad \"self: grad * scale\"".into()),
        ));
    };
    let key = &text[..colon];
    let k0 = key.len() - key.trim_start().len();
    let rest = &text[colon + 1..];
    let f0 = colon + 1 + (rest.len() - rest.trim_start().len());
    Ok((arg.sub(k0, key.trim()), arg.sub(f0, text[f0..].trim_end())))
}

/// The new operator from the command line (no validation beyond parsing).
pub fn parse_request(req: &NewOp) -> Result<CustomOp> {
    let func = Spanned::arg("<schema>", req.schema.trim());
    let (namespace, schema) = custom::parse_schema(&func)?;
    let mut rules = Vec::new();
    for (i, g) in req.grads.iter().enumerate() {
        let arg = Spanned::arg(&format!("--grad #{}", i + 1), g);
        let (key, formula) = split_grad(&arg)?;
        let inputs = key.text.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
        rules.push(GradRule { key, inputs, formula });
    }
    let reference = req.reference.as_deref().map(|r| Spanned::arg("--reference", r.trim()));
    let grads_at = (!rules.is_empty()).then(|| func.clone());
    Ok(CustomOp { namespace, schema, func, reference, grads: (!rules.is_empty()).then_some(rules), grads_at })
}

fn yaml_quote(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// Inserts `lines` at the end of the top-level block `key:` of a yaml text (creating the block
/// at the end of the file when there is none).
fn insert_block(text: &str, key: &str, lines: &str) -> String {
    let all: Vec<&str> = text.split_inclusive('\n').collect();
    let top = |l: &str| {
        let c = l.chars().next();
        c.is_some_and(|c| !c.is_whitespace() && c != '#' && c != '-')
    };
    let header = format!("{key}:");
    let Some(start) = all.iter().position(|l| top(l) && l.trim_end() == header || l.starts_with(&format!("{header} ")))
    else {
        let mut out = text.to_string();
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&header);
        out.push('\n');
        out.push_str(lines);
        return out;
    };
    // `custom: []` (flow style, empty): replace the header
    let flow_empty = all[start].trim_end().ends_with("[]");
    let mut end = all.iter().skip(start + 1).position(|l| top(l)).map(|i| i + start + 1).unwrap_or(all.len());
    // keep trailing blank lines and comments after the insertion
    while end > start + 1 && (all[end - 1].trim().is_empty() || all[end - 1].trim_start().starts_with('#')) {
        end -= 1;
    }
    let mut out = String::new();
    for (i, l) in all.iter().enumerate() {
        if i == start && flow_empty {
            out.push_str(&header);
            out.push('\n');
        } else {
            out.push_str(l);
        }
        if i + 1 == end {
            if !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(lines);
        }
    }
    if end == all.len() && all.is_empty() {
        out.push_str(lines);
    }
    out
}

/// Splits a yaml text before a trailing document-end marker (`...` on a line of its own, with only
/// blank lines and comments after it): new entries go before it, not into a second document.
fn split_document_end(text: &str) -> (&str, &str) {
    let mut cut = text.len();
    let mut offset = text.len();
    for line in text.split_inclusive('\n').rev() {
        offset -= line.len();
        let t = line.trim_end();
        if t == "..." {
            cut = offset;
            break;
        }
        if !(t.trim().is_empty() || t.trim_start().starts_with('#')) {
            break;
        }
    }
    text.split_at(cut)
}

/// The custom-operator file with `op` added.
pub fn add_to_file(text: &str, op: &CustomOp) -> String {
    let (body, end) = split_document_end(text);
    let mut out = add_to_body(body, op);
    if !end.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(end);
    out
}

fn add_to_body(text: &str, op: &CustomOp) -> String {
    let mut text = if text.trim().is_empty() {
        "# Custom operators of this adapter (xirang.toml [operators] custom); see README.md, \"Custom operators\".\n\
         # `xirang-scan new-op` adds entries; `xirang-scan generate` renders them into generated/custom.rs.\n"
            .to_string()
    } else {
        text.to_string()
    };
    let schema = op.schema_text();
    let mut entry = format!("  - func: {}\n", yaml_quote(&schema));
    if let Some(r) = &op.reference {
        entry.push_str(&format!("    reference: {}\n", yaml_quote(&r.text)));
    }
    text = insert_block(&text, "custom", &entry);
    if let Some(rules) = &op.grads {
        let mut d = format!("  - name: {}\n", yaml_quote(&schema));
        for r in rules {
            d.push_str(&format!("    {}: {}\n", r.inputs.join(", "), yaml_quote(&r.formula.text)));
        }
        text = insert_block(&text, "custom_derivatives", &d);
    }
    text
}

/// A test value of an argument: (declaration, expression passing it), or why there is none.
fn test_value(a: &Argument, name: &str, k: usize) -> std::result::Result<(String, String), String> {
    let d = a.default.as_ref().map(|d| &d.value);
    Ok(match &a.ty {
        Type::Base(BaseTy::Tensor) => (format!("let {name} = input({k});"), format!("&{name}")),
        Type::Optional(inner) if **inner == Type::Base(BaseTy::Tensor) => {
            (format!("let {name}: Option<&Tensor> = None;"), name.to_string())
        }
        Type::Base(BaseTy::Float) => {
            let v = match d {
                // not the default itself: 1.0 and 0.0 hide mistakes in gradient rules
                Some(DefaultValue::Float(x)) if *x != 0.0 => format!("{:?}", x * 1.5),
                Some(DefaultValue::Int(i)) if *i != 0 => format!("{:?}", *i as f64 * 1.5),
                _ => "0.75".into(),
            };
            (format!("let {name}: f64 = {v};"), name.to_string())
        }
        Type::Base(BaseTy::Int | BaseTy::SymInt) => {
            let v = match d {
                Some(DefaultValue::Int(i)) => i.to_string(),
                _ => "2".into(),
            };
            (format!("let {name}: i64 = {v};"), name.to_string())
        }
        Type::Base(BaseTy::Bool) => {
            let v = matches!(d, Some(DefaultValue::Bool(true)));
            (format!("let {name} = {v};"), name.to_string())
        }
        Type::Base(BaseTy::Scalar) => {
            let v = match d {
                Some(DefaultValue::Int(i)) => format!("Scalar::Int({i})"),
                Some(DefaultValue::Float(x)) => format!("Scalar::Float({x:?})"),
                _ => "Scalar::Float(0.5)".into(),
            };
            (format!("let {name} = {v};"), name.to_string())
        }
        Type::Base(BaseTy::Str) => {
            let v = match d {
                Some(DefaultValue::Str(s)) => s.clone(),
                _ => String::new(),
            };
            (format!("let {name} = {v:?};"), name.to_string())
        }
        Type::List { elem, .. } if matches!(**elem, Type::Base(BaseTy::Int | BaseTy::SymInt)) => {
            let v = match d {
                Some(DefaultValue::List(xs)) => xs
                    .iter()
                    .filter_map(|x| if let DefaultValue::Int(i) = x { Some(i.to_string()) } else { None })
                    .collect::<Vec<_>>()
                    .join(", "),
                _ => String::new(),
            };
            (format!("let {name}: Vec<i64> = vec![{v}];"), format!("&{name}"))
        }
        t => return Err(format!("`{}` is a `{t}`", a.name)),
    })
}

/// The kernel skeleton of `op`.
fn kernel_text(op: &CustomOp, ctx: &CustomCtx) -> String {
    let params: String = ctx.params.iter().map(|p| format!(", {}: {}", p.name, p.ty)).collect();
    let names: Vec<&str> = ctx.params.iter().map(|p| p.name.as_str()).collect();
    let mut doc = String::new();
    if let Some(rules) = &op.grads {
        for r in rules {
            doc.push_str(&format!("//! Gradient rule: `{}: {}`.\n", r.inputs.join(", "), r.formula.text));
        }
    }
    if let Some(r) = &op.reference {
        doc.push_str(&format!("//! Reference: `{}` (the tests compare the kernel with it).\n", r.text));
    }
    format!(
        "//! Kernel of the custom operator `{schema}`.\n\
         //!\n\
         //! Written by `xirang-scan new-op`; the body is yours (it is never regenerated). Compose existing\n\
         //! operators through their front-ends (`aten::tanh(o, self_)?`) or launch a device kernel.\n\
         //! Tests: `cargo test -p xirang-runtime --test runtime custom::{stem}::`.\n\
         {doc}\n\
         #[allow(unused_imports)]\n\
         use crate::dtype::{{DType, Scalar}};\n\
         #[allow(unused_imports)]\n\
         use crate::error::{{Error, Result}};\n\
         #[allow(unused_imports)]\n\
         use crate::generated::ops::aten;\n\
         #[allow(unused_imports)]\n\
         use crate::ivalue::{{Generator, Layout, MemoryFormat, Opaque}};\n\
         use crate::kernels::NpuOps;\n\
         #[allow(unused_imports)]\n\
         use crate::tensor::Tensor;\n\
         \n\
         /// `{schema}`\n\
         pub fn {method}(o: &NpuOps{params}) -> Result<{ret}> {{\n\
         \x20   let _ = (o, {names});\n\
         \x20   Err(Error::Unsupported({msg}.to_string()))\n\
         }}\n",
        schema = ctx.schema,
        stem = op.stem(),
        method = ctx.method,
        ret = ctx.ret,
        names = names.join(", "),
        msg = ctx.not_implemented,
    )
}

/// `adapter-runtime/src/custom/mod.rs` for the operators that have kernel files.
/// The folder of the custom operators' tests: modules of the runtime's one test binary
/// (`adapter-runtime/tests/runtime/main.rs` declares `mod custom;`).
pub const TESTS_DIR: &str = "adapter-runtime/tests/runtime/custom";

/// `tests/runtime/custom/mod.rs`: one module per test file.
fn tests_mod_text(stems: &[String]) -> String {
    let mut s = String::from(
        "// @generated by xirang-scan new-op: one module per custom operator's test file in this folder.\n",
    );
    for stem in stems {
        // a stem that is a keyword is a raw identifier (`mod r#fn;` reads `fn.rs`); one that cannot
        // be one (`self`) gets another name and the file's path
        match crate::naming::ident(stem) {
            Some(m) => s.push_str(&format!("mod {m};\n")),
            None => s.push_str(&format!("#[path = \"{stem}.rs\"]\nmod {stem}_op;\n")),
        }
    }
    s
}

fn mod_text(ctxs: &[(String, &CustomCtx)]) -> String {
    let mut s = String::from(
        "//! Kernels of the custom operators (`generated/custom.rs`, trait `CustomOps`).\n\
         //!\n\
         //! Maintained by `xirang-scan new-op`, which rewrites this file: one module per operator\n\
         //! (`<name>.rs`, the kernel body: yours) and one forwarding method below. Custom operators without\n\
         //! a kernel file keep the trait's default body (an \"not implemented\" error).\n\
         \n\
         #[allow(unused_imports)]\n\
         use crate::dtype::{DType, Scalar};\n\
         #[allow(unused_imports)]\n\
         use crate::error::Result;\n\
         use crate::generated::custom::CustomOps;\n\
         #[allow(unused_imports)]\n\
         use crate::ivalue::{Generator, Layout, MemoryFormat, Opaque};\n\
         use crate::kernels::NpuOps;\n\
         #[allow(unused_imports)]\n\
         use crate::tensor::Tensor;\n",
    );
    if !ctxs.is_empty() {
        s.push('\n');
    }
    // a stem that is a keyword (`fn`, `type`) is a raw identifier; the file keeps the plain name
    let module = |stem: &str| crate::naming::ident(stem).unwrap_or_else(|| format!("{stem}_op"));
    for (stem, _) in ctxs {
        s.push_str(&format!("mod {};\n", module(stem)));
    }
    if ctxs.is_empty() {
        s.push_str("\nimpl CustomOps for NpuOps {}\n");
        return s;
    }
    s.push_str("\nimpl CustomOps for NpuOps {\n");
    for (i, (stem, c)) in ctxs.iter().enumerate() {
        if i > 0 {
            s.push('\n');
        }
        let params: String = c.params.iter().map(|p| format!(", {}: {}", p.name, p.ty)).collect();
        s.push_str(&format!(
            "    fn {m}(&self{params}) -> Result<{ret}> {{\n        {module}::{m}(self{args})\n    }}\n",
            m = c.method,
            module = module(stem),
            ret = c.ret,
            args = c.call_args,
        ));
    }
    s.push_str("}\n");
    s
}

/// The test file of `op`.
fn test_text(op: &CustomOp, ctx: &CustomCtx) -> std::result::Result<String, String> {
    let args: Vec<&Argument> = op.schema.arguments.positional.iter().chain(&op.schema.arguments.kwarg_only).collect();
    let mut decls = Vec::new();
    let mut pass = Vec::new();
    let mut uses_scalar = false;
    for (i, (a, p)) in args.iter().zip(&ctx.params).enumerate() {
        let (d, x) = test_value(a, &p.name, i)?;
        uses_scalar |= d.contains("Scalar::");
        decls.push(format!("    {d}"));
        pass.push(x);
    }
    let decls = decls.join("\n");
    let m = &ctx.method;
    let md = &ctx.module;
    let call = |module: &str, with: &[String]| format!("custom_ops::{module}::{m}(&o, {})", with.join(", "));
    let grads = ctx.node.as_ref().map(|n| n.inputs.clone()).unwrap_or_default();
    let mut imports = vec!["Result", "Tensor"];
    if !grads.is_empty() {
        imports.insert(0, "Error");
    }
    if uses_scalar {
        imports.insert(imports.len() - 1, "Scalar");
    }
    let stem = op.stem();
    let mut s = format!(
        "//! Tests of the custom operator `{schema}`,\n\
         //! written by `xirang-scan new-op` (edit freely: it is never regenerated). They fail with\n\
         //! \"not implemented\" until the kernel in\n\
         //! `{kernel}` is written.\n\
         \n\
         use xirang_runtime::generated::custom as custom_ops;\n\
         use xirang_runtime::kernels::NpuOps;\n\
         use xirang_runtime::{{{imports}}};\n\
         \n\
         /// A deterministic f64 input (2x3), number `k`.\n\
         fn input(k: usize) -> Tensor {{\n\
         \x20   let v: Vec<f64> = (0..6).map(|i| ((i * 7 + k * 5) % 13) as f64 / 6.0 - 1.0).collect();\n\
         \x20   Tensor::from_vec(v, &[2, 3]).expect(\"a 2x3 host tensor\")\n\
         }}\n\
         \n\
         fn values(t: &Tensor) -> Result<Vec<f64>> {{\n\
         \x20   t.to_vec::<f64>()\n\
         }}\n\
         \n\
         fn run(r: Result<()>) {{\n\
         \x20   if let Err(e) = r {{\n\
         \x20       panic!(\"{{e}}\");\n\
         \x20   }}\n\
         }}\n\
         \n\
         #[test]\n\
         fn {stem}_runs() {{\n\
         \x20   run(forward());\n\
         }}\n\
         \n\
         fn forward() -> Result<()> {{\n\
         \x20   let o = NpuOps;\n\
         {decls}\n\
         \x20   let r = values(&{fwd}?)?;\n\
         \x20   assert!(r.iter().all(|x| x.is_finite()), \"non-finite output: {{r:?}}\");\n\
         \x20   Ok(())\n\
         }}\n",
        schema = ctx.schema,
        kernel = kernel_path(op),
        imports = imports.join(", "),
        fwd = call(md, &pass),
    );
    if !grads.is_empty() {
        let mut checks = String::new();
        for (j, input) in grads.iter().enumerate() {
            let i = args.iter().position(|a| &a.name == input).unwrap_or(0);
            let p = &ctx.params[i].name;
            if !matches!(args[i].ty, Type::Base(BaseTy::Tensor)) {
                continue; // an optional tensor is None in these tests
            }
            let mut with = pass.clone();
            with[i] = "x".into();
            checks.push_str(&format!(
                "    check_gradient(\"{input}\", &{p}, grads[{j}].as_ref(), |x| dot(&g, &{}?))?;\n",
                call(md, &with)
            ));
        }
        s.push_str(&format!(
            "\n\
             fn dot(a: &Tensor, b: &Tensor) -> Result<f64> {{\n\
             \x20   Ok(values(a)?.iter().zip(values(b)?).map(|(x, y)| x * y).sum())\n\
             }}\n\
             \n\
             /// An upstream gradient of the given shape.\n\
             fn ramp(sizes: &[usize]) -> Result<Tensor> {{\n\
             \x20   let n: usize = sizes.iter().product();\n\
             \x20   Tensor::from_vec((0..n).map(|i| 0.5 + (i % 5) as f64 * 0.25).collect::<Vec<f64>>(), sizes)\n\
             }}\n\
             \n\
             /// Central finite differences of `f` at `x` against the backward node's gradient.\n\
             fn check_gradient(name: &str, x: &Tensor, analytic: Option<&Tensor>, f: impl Fn(&Tensor) -> Result<f64>) -> Result<()> {{\n\
             \x20   let analytic = values(analytic.ok_or_else(|| Error::InvalidArgument(format!(\"no gradient for `{{name}}`\")))?)?;\n\
             \x20   let base = values(x)?;\n\
             \x20   assert_eq!(analytic.len(), base.len(), \"gradient of `{{name}}`: number of elements\");\n\
             \x20   let h = 1e-6;\n\
             \x20   for (i, &want) in analytic.iter().enumerate() {{\n\
             \x20       let mut plus = base.clone();\n\
             \x20       plus[i] += h;\n\
             \x20       let mut minus = base.clone();\n\
             \x20       minus[i] -= h;\n\
             \x20       let numeric = (f(&Tensor::from_vec(plus, x.sizes())?)? - f(&Tensor::from_vec(minus, x.sizes())?)?) / (2.0 * h);\n\
             \x20       let err = (numeric - want).abs();\n\
             \x20       assert!(err <= 1e-5 * (1.0 + numeric.abs()), \"d/d{{name}}[{{i}}]: finite differences {{numeric}}, backward node {{want}}\");\n\
             \x20   }}\n\
             \x20   Ok(())\n\
             }}\n\
             \n\
             #[test]\n\
             fn {stem}_gradients_match_finite_differences() {{\n\
             \x20   run(gradients());\n\
             }}\n\
             \n\
             fn gradients() -> Result<()> {{\n\
             \x20   let o = NpuOps;\n\
             {decls}\n\
             \x20   let (result, node) = {fwd}?;\n\
             \x20   let g = ramp(result.sizes())?;\n\
             \x20   let grads = node.apply(&o, &[Some(g.clone())])?;\n\
             {checks}\
             \x20   Ok(())\n\
             }}\n",
            fwd = call("autograd", &pass),
        ));
    }
    if ctx.reference.is_some() {
        s.push_str(&format!(
            "\n\
             #[test]\n\
             fn {stem}_matches_the_reference() {{\n\
             \x20   run(reference());\n\
             }}\n\
             \n\
             fn reference() -> Result<()> {{\n\
             \x20   let o = NpuOps;\n\
             {decls}\n\
             \x20   let got = values(&{got}?)?;\n\
             \x20   let want = values(&{want}?)?;\n\
             \x20   assert_eq!(got.len(), want.len(), \"number of elements\");\n\
             \x20   for (i, (a, b)) in got.iter().zip(&want).enumerate() {{\n\
             \x20       assert!((a - b).abs() <= 1e-9 * (1.0 + b.abs()), \"element {{i}}: kernel {{a}}, reference {{b}}\");\n\
             \x20   }}\n\
             \x20   Ok(())\n\
             }}\n",
            got = call(md, &pass),
            want = call("reference", &pass),
        ));
    }
    Ok(s)
}

/// Formats Rust source with the repository's rustfmt settings when `rustfmt` is available (the
/// files `new-op` writes are then `cargo fmt` clean); otherwise returns the text unchanged.
fn rustfmt(root: &Path, text: String) -> String {
    use std::io::Write as _;
    let child = std::process::Command::new("rustfmt")
        .args(["--edition", "2024", "--emit", "stdout", "--quiet"])
        .current_dir(root)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn();
    let Ok(mut child) = child else { return text };
    if let Some(mut stdin) = child.stdin.take()
        && stdin.write_all(text.as_bytes()).is_err()
    {
        let _ = child.kill();
        let _ = child.wait();
        return text;
    }
    match child.wait_with_output() {
        Ok(out) if out.status.success() && !out.stdout.is_empty() => String::from_utf8(out.stdout).unwrap_or(text),
        _ => text,
    }
}

/// Plans `new-op` in memory: validates everything, renders every file. Nothing is written.
pub fn plan(inputs: &Inputs, req: &NewOp) -> Result<Plan> {
    let root = inputs.cfg.root.clone();
    let op = parse_request(req)?;
    let one_tensor = op.schema.returns.len() == 1 && op.schema.returns[0].ty == Type::Base(BaseTy::Tensor);
    if !one_tensor {
        return Err(op
            .func
            .whole(
                CustomErrorKind::Schema,
                "new-op writes tests for operators that return one Tensor",
                Some("write other operators into the custom-operator file by hand".into()),
            )
            .into());
    }
    let (file_name, file_path) = custom::file_of(&inputs.cfg);
    let old_text = match std::fs::read_to_string(&file_path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(Error::io(&file_path, e)),
    };
    let mut set: CustomSet = custom::parse_file(&SourceFile::new(file_name.clone(), old_text.clone()))?;
    set.ops.push(op.clone());
    // validate: conflicts, formulas, reference (errors point into the command line)
    let cfg = &inputs.cfg.config;
    let functions = &inputs.snapshot.registry.functions;
    let selected: BTreeSet<String> =
        super::ops::select(cfg, functions).iter().map(|(f, _)| f.func.name.to_string()).collect();
    let target = Target { functions, selected: &selected, cfg };
    custom::check_conflicts(&set, functions)?;
    let ctxs = custom::model(&set, &target)?;
    let q = op.qualified();
    let Some(ctx) = ctxs.iter().find(|c| c.qualified == q) else {
        return Err(Error::Internal(format!("no context for {q}")));
    };
    let test = test_text(&op, ctx).map_err(|why| {
        op.func.whole(
            CustomErrorKind::Schema,
            format!("new-op cannot write test inputs: {why}"),
            Some("new-op's tests take Tensor, Tensor?, int, float, bool, Scalar, str and int[] arguments".into()),
        )
    })?;
    // the files
    let new_text = add_to_file(&old_text, &op);
    let src = SourceFile::new(file_name.clone(), new_text.clone());
    // what is written must read back with the operator and its rules (never "added" and lost)
    let reread = custom::parse_file(&src)?;
    let back = reread.ops.iter().find(|o| o.qualified() == op.qualified());
    let rules_back = back.and_then(|o| o.grads.as_ref()).map_or(0, Vec::len);
    if back.is_none() || rules_back != op.grads.as_ref().map_or(0, Vec::len) {
        return Err(Error::Invalid(format!(
            "{file_name}: new-op cannot add `{}` to this file's layout (it would not read back); add the entry by hand",
            op.qualified()
        )));
    }
    let (files, _) = super::render_all_with(inputs, Some(&src))?;
    let mut writes = vec![Write { path: file_name.clone(), text: new_text }];
    let gen_folder = &cfg.adapter.generated;
    for GeneratedFile { path, text } in files {
        let rel = format!("{gen_folder}/{path}");
        if std::fs::read(root.join(&rel)).is_ok_and(|b| b == text.as_bytes()) {
            continue;
        }
        writes.push(Write { path: rel, text });
    }
    let kernel = kernel_path(&op);
    let test_path = format!("{TESTS_DIR}/{}.rs", op.stem());
    for p in [&kernel, &test_path] {
        if root.join(p).exists() {
            return Err(op
                .func
                .whole(
                    CustomErrorKind::Conflict,
                    format!("`{p}` already exists"),
                    Some("remove it, or choose another operator name".into()),
                )
                .into());
        }
    }
    writes.push(Write { path: kernel.clone(), text: rustfmt(&root, kernel_text(&op, ctx)) });
    // custom/mod.rs: the operators with kernel files (existing ones and the new one)
    let mut with_kernels: Vec<(String, &CustomCtx)> = Vec::new();
    for o in &set.ops {
        let k = kernel_path(o);
        if (k == kernel || root.join(&k).exists())
            && let Some(c) = ctxs.iter().find(|c| c.qualified == o.qualified())
        {
            with_kernels.push((o.stem(), c));
        }
    }
    with_kernels.sort_by(|a, b| a.0.cmp(&b.0));
    writes.push(Write {
        path: "adapter-runtime/src/custom/mod.rs".into(),
        text: rustfmt(&root, mod_text(&with_kernels)),
    });
    // the runtime's test binary takes the test file as a module: the folder's mod.rs lists them all
    let mut stems: Vec<String> = match std::fs::read_dir(root.join(TESTS_DIR)) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_suffix(".rs")).map(String::from))
            .filter(|s| s != "mod" && !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
            .collect(),
        Err(_) => Vec::new(),
    };
    stems.push(op.stem());
    stems.sort();
    stems.dedup();
    writes.push(Write { path: format!("{TESTS_DIR}/mod.rs"), text: tests_mod_text(&stems) });
    writes.push(Write { path: test_path, text: rustfmt(&root, test) });
    Ok(Plan { qualified: q, writes })
}

/// Writes a group of files all or nothing ([`crate::fsio::WriteGroup`] rooted at `root`: a full
/// disk, an error or a kill leaves the tree as it was, or, once committed, completes on the next run).
pub fn write_all(root: &Path, writes: &[Write]) -> Result<()> {
    let mut group = crate::fsio::WriteGroup::new(root);
    for w in writes {
        group.write(&w.path, w.text.as_bytes())?;
    }
    Ok(group.commit()?)
}

/// `xirang-scan new-op`: plan, then write the group.
pub fn run(inputs: &Inputs, req: &NewOp) -> Result<Plan> {
    let plan = plan(inputs, req)?;
    write_all(&inputs.cfg.root, &plan.writes)?;
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_blocks_are_extended_in_place() {
        let t = "# head\ncustom:\n  - func: \"a::x(Tensor self) -> Tensor\"\n\n# tail\nother: 1\n";
        let out = insert_block(t, "custom", "  - func: \"a::y(Tensor self) -> Tensor\"\n");
        assert_eq!(
            out,
            "# head\ncustom:\n  - func: \"a::x(Tensor self) -> Tensor\"\n  - func: \"a::y(Tensor self) -> Tensor\"\n\n# tail\nother: 1\n"
        );
        let out = insert_block("custom: []\n", "custom", "  - func: x\n");
        assert_eq!(out, "custom:\n  - func: x\n");
        let out = insert_block("custom:\n  - func: x\n", "custom_derivatives", "  - name: x\n");
        assert_eq!(out, "custom:\n  - func: x\ncustom_derivatives:\n  - name: x\n");
    }

    #[test]
    fn entries_go_before_a_trailing_document_end() {
        assert_eq!(split_document_end("custom:\n  - a\n...\n# c\n"), ("custom:\n  - a\n", "...\n# c\n"));
        assert_eq!(split_document_end("custom:\n  - a\n"), ("custom:\n  - a\n", ""));
        // a `...` that is followed by content is not trailing
        assert_eq!(split_document_end("a: 1\n...\nb: 2\n").1, "");
    }

    #[test]
    fn a_failing_write_group_leaves_nothing_behind() {
        let root = std::env::temp_dir().join(format!("xirang-newop-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("a.txt"), "old").unwrap();
        // `blocker` is a file, so `blocker/c.txt` cannot be written
        std::fs::write(root.join("blocker"), "x").unwrap();
        let writes = [
            Write { path: "a.txt".into(), text: "new".into() },
            Write { path: "sub/b.txt".into(), text: "b".into() },
            Write { path: "blocker/c.txt".into(), text: "c".into() },
        ];
        assert!(write_all(&root, &writes).is_err());
        assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "old");
        assert!(!root.join("sub").exists());
        let mut names: Vec<String> =
            std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        assert_eq!(names, ["a.txt", "blocker"]);
        // and a good group is written
        write_all(&root, &writes[..2]).unwrap();
        assert_eq!(std::fs::read_to_string(root.join("sub/b.txt")).unwrap(), "b");
        assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "new");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn grad_arguments_split_at_the_first_colon() {
        let a = Spanned::arg("--grad", "self:  at::mul(grad, 2) ");
        let (k, f) = split_grad(&a).unwrap();
        assert_eq!((k.text.as_str(), f.text.as_str(), f.offset), ("self", "at::mul(grad, 2)", 7));
        assert!(split_grad(&Spanned::arg("--grad", "grad * 2")).is_err());
    }
}
