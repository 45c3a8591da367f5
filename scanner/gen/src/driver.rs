//! Driver bindings: the device operations of `[driver]` in xirang.toml bound to the real vendor
//! header's C signatures (from the header snapshot), with fallback chains.
//!
//! Each device operation has a contract: a list of roles (destination pointer, byte count,
//! stream handle, ...) with a C type category. A candidate function's C parameters are bound to
//! the roles in order; a parameter no role takes must be fixed in xirang.toml (`args = {...}`),
//! and an optional role (`dst_max`) may be missing from a candidate. A candidate that cannot be
//! bound is a generate-time error pointing at its xirang.toml line, so a driver release that
//! changes a mapped signature fails `generate`, not a run on hardware.

use std::collections::{BTreeMap, HashMap};

use xirang_headers::{Decl, DeclKind};

use crate::error::{Error, Result};

use super::config::{DRIVER_OPS, LoadedConfig};

/// C type categories of contract roles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cat {
    OutPtr,
    Ptr,
    ConstPtr,
    Size,
    OutSize,
    OutFloat,
    CStr,
    Int,
    OutInt,
    Handle,
    OutHandle,
    Enum,
}

impl Cat {
    /// The Rust type of a role's raw argument.
    fn rust(self) -> &'static str {
        match self {
            Cat::OutPtr => "*mut *mut c_void",
            Cat::Ptr => "*mut c_void",
            Cat::ConstPtr => "*const c_void",
            Cat::Size => "usize",
            Cat::OutSize => "*mut usize",
            Cat::OutFloat => "*mut f32",
            Cat::CStr => "*const c_char",
            Cat::Int => "i64",
            Cat::OutInt => "*mut u32",
            Cat::Handle => "*mut c_void",
            Cat::OutHandle => "*mut *mut c_void",
            Cat::Enum => "i64",
        }
    }
}

/// One role of a device operation's contract.
struct Role {
    name: &'static str,
    cat: Cat,
    optional: bool,
}

const fn r(name: &'static str, cat: Cat) -> Role {
    Role { name, cat, optional: false }
}
const fn opt(name: &'static str, cat: Cat) -> Role {
    Role { name, cat, optional: true }
}

fn contract(op: &str) -> Vec<Role> {
    use Cat::*;
    match op {
        "init" => vec![r("config", CStr)],
        "device_count" => vec![r("count", OutInt)],
        "set_device" | "reset_device" => vec![r("device", Int)],
        "malloc" => vec![r("ptr", OutPtr), r("size", Size)],
        "free" => vec![r("ptr", Ptr)],
        "memcpy" => vec![r("dst", Ptr), opt("dst_max", Size), r("src", ConstPtr), r("count", Size), r("kind", Enum)],
        "memcpy_async" => vec![
            r("dst", Ptr),
            opt("dst_max", Size),
            r("src", ConstPtr),
            r("count", Size),
            r("kind", Enum),
            r("stream", Handle),
        ],
        "get_device" => vec![r("device", OutInt)],
        "memset" => vec![r("dst", Ptr), opt("dst_max", Size), r("value", Int), r("count", Size)],
        "memset_async" => {
            vec![r("dst", Ptr), opt("dst_max", Size), r("value", Int), r("count", Size), r("stream", Handle)]
        }
        "stream_create" => vec![r("stream", OutHandle)],
        "stream_destroy" | "stream_synchronize" => vec![r("stream", Handle)],
        "event_create" => vec![r("event", OutHandle)],
        "event_record" => vec![r("event", Handle), r("stream", Handle)],
        "event_synchronize" | "event_destroy" => vec![r("event", Handle)],
        "event_elapsed" => vec![r("ms", OutFloat), r("start", Handle), r("end", Handle)],
        "event_query" => vec![r("event", Handle), r("status", OutInt)],
        "stream_wait_event" => vec![r("stream", Handle), r("event", Handle)],
        "memory_info" => vec![r("free", OutSize), r("total", OutSize)],
        "malloc_host" => vec![r("ptr", OutPtr), r("size", Size)],
        "free_host" => vec![r("ptr", Ptr)],
        _ => vec![],
    }
}

/// A bound candidate.
#[derive(Debug, Clone)]
pub struct CandCtx {
    pub symbol: String,
    /// The C declaration, for the docs.
    pub c_decl: String,
    pub header: String,
    /// `unsafe extern "C" fn(...) -> ...`
    pub fn_type: String,
    /// Call arguments in C order (role names or constants, cast with `as _`).
    pub call: String,
    pub index: usize,
}

/// One device operation.
#[derive(Debug, Clone)]
pub struct DriverOpCtx {
    pub name: String,
    pub doc: String,
    pub required: bool,
    /// `, dst: *mut c_void, ...`
    pub raw_params: String,
    /// `*const c_char` for error_text, else `i32` (the status).
    pub raw_ret: String,
    pub candidates: Vec<CandCtx>,
}

/// One variant of the status enum.
#[derive(Debug, Clone)]
pub struct StatusCtx {
    pub variant: String,
    pub constant: String,
    pub value: i64,
    pub aliases: String,
}

/// The model of generated/driver.rs.
pub struct DriverModel {
    pub ops: Vec<DriverOpCtx>,
    pub statuses: Vec<StatusCtx>,
    pub success: i64,
    /// (constant, value) of host-to-device, device-to-host, device-to-device.
    pub memcpy_kinds: [(String, i64); 3],
}

fn int_ty(t: &str) -> bool {
    matches!(
        t,
        "int"
            | "int32_t"
            | "uint32_t"
            | "int64_t"
            | "uint64_t"
            | "unsigned int"
            | "long"
            | "int8_t"
            | "uint8_t"
            | "int16_t"
            | "uint16_t"
    )
}

fn int_rust(t: &str) -> &'static str {
    match t {
        "uint32_t" | "unsigned int" => "u32",
        "int64_t" | "long" => "i64",
        "uint64_t" => "u64",
        "int8_t" => "i8",
        "uint8_t" => "u8",
        "int16_t" => "i16",
        "uint16_t" => "u16",
        _ => "i32",
    }
}

struct Types<'a> {
    typedefs: HashMap<&'a str, &'a str>,
    enums: std::collections::HashSet<&'a str>,
}

impl Types<'_> {
    /// Resolves a typedef chain to its final text.
    fn resolve<'b>(&'b self, mut t: &'b str) -> &'b str {
        for _ in 0..8 {
            match self.typedefs.get(t) {
                Some(next) if *next != t => t = next,
                _ => break,
            }
        }
        t
    }
    /// (category, Rust FFI type) of a C parameter type.
    fn classify(&self, ty: &str) -> Option<(Cat, String)> {
        let ty = ty.trim();
        let (base, ptrs) = match ty.strip_suffix('*') {
            Some(b) => match b.trim().strip_suffix('*') {
                Some(bb) => (bb.trim(), 2),
                None => (b.trim(), 1),
            },
            None => (ty, 0),
        };
        let resolved = self.resolve(base);
        let is_enum = self.enums.contains(base) || resolved.starts_with("enum ");
        let handle = resolved == "void *";
        Some(match (base, ptrs) {
            ("void", 2) => (Cat::OutPtr, "*mut *mut c_void".into()),
            ("void", 1) => (Cat::Ptr, "*mut c_void".into()),
            ("const void", 1) => (Cat::ConstPtr, "*const c_void".into()),
            ("const char", 1) => (Cat::CStr, "*const c_char".into()),
            ("size_t", 0) => (Cat::Size, "usize".into()),
            ("size_t", 1) => (Cat::OutSize, "*mut usize".into()),
            ("float", 1) => (Cat::OutFloat, "*mut f32".into()),
            (b, 0) if int_ty(b) => (Cat::Int, int_rust(b).into()),
            (b, 1) if int_ty(b) => (Cat::OutInt, format!("*mut {}", int_rust(b))),
            (_, 0) if handle => (Cat::Handle, "*mut c_void".into()),
            (_, 1) if handle => (Cat::OutHandle, "*mut *mut c_void".into()),
            (_, 0) if is_enum => (Cat::Enum, "c_int".into()),
            // an enum out-parameter (aclrtQueryEventStatus's status): a C int the driver writes
            (_, 1) if is_enum => (Cat::OutInt, "*mut c_int".into()),
            (_, 0) if int_ty(resolved) => (Cat::Int, int_rust(resolved).into()),
            _ => return None,
        })
    }
}

fn camel(constant: &str, prefixes: &[String]) -> String {
    let mut s = constant;
    for p in prefixes {
        if let Some(rest) = s.strip_prefix(p.as_str()) {
            s = rest;
            break;
        }
    }
    let mut out = String::new();
    for part in s.split('_').filter(|p| !p.is_empty()) {
        let mut cs = part.chars();
        if let Some(c) = cs.next() {
            out.push(c.to_ascii_uppercase());
            out.extend(cs.map(|c| c.to_ascii_lowercase()));
        }
    }
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, 'E');
    }
    out
}

/// Binds the configured candidates to the header's declarations.
pub fn model(cfg: &LoadedConfig, decls: &[Decl]) -> Result<DriverModel> {
    let c = &cfg.config;
    let types = Types {
        typedefs: decls
            .iter()
            .filter(|d| d.kind == DeclKind::Typedef)
            .filter_map(|d| d.ty.as_deref().map(|t| (d.name.as_str(), t)))
            .collect(),
        enums: decls.iter().filter(|d| d.kind == DeclKind::Enum).map(|d| d.name.as_str()).collect(),
    };
    // the exported C declaration of each function: it wins over an inline C++ definition of the
    // same name (ascend 2.14's acl_rt_api.h adds `template <typename T> aclError aclrtMalloc(T **devPtr,
    // ...)` beside acl_rt.h's `aclrtMalloc(void **devPtr, ...)`), whatever the file order
    let mut functions: HashMap<&str, &Decl> = HashMap::new();
    for d in decls.iter().filter(|d| d.kind == DeclKind::Function) {
        match functions.get(d.name.as_str()) {
            Some(prev) if !prev.definition || d.definition => {}
            _ => {
                functions.insert(d.name.as_str(), d);
            }
        }
    }
    let values: HashMap<&str, i64> = decls
        .iter()
        .filter(|d| matches!(d.kind, DeclKind::Enumerator | DeclKind::Constant | DeclKind::Macro))
        .filter_map(|d| d.value.map(|v| (d.name.as_str(), v)))
        .collect();
    let status_ok =
        |ret: &str| ret == c.vendor.status_type || types.resolve(ret) == types.resolve(&c.vendor.status_type);

    let mut ops = Vec::new();
    for dop in DRIVER_OPS {
        let roles = contract(dop.name);
        let raw_params: String = roles.iter().map(|r| format!(", {}: {}", r.name, r.cat.rust())).collect();
        let is_text = dop.name == "error_text";
        let mut candidates = Vec::new();
        if let Some(chain) = c.driver.get(dop.name) {
            for (index, cand) in chain.candidates().into_iter().enumerate() {
                let at = |msg: String| cfg.error_at(&["driver", dop.name], msg);
                let Some(decl) = functions.get(cand.function.as_str()) else {
                    return Err(at(format!(
                        "`{}` (device operation `{}`) is not declared in the {} {} headers",
                        cand.function, dop.name, c.vendor.name, c.vendor.headers
                    )));
                };
                let ret = decl.ret.clone().unwrap_or_default();
                if is_text {
                    if ret.trim() != "const char *" {
                        return Err(at(format!("`{}` returns `{ret}`, not `const char *`", cand.function)));
                    }
                } else if !status_ok(&ret) {
                    return Err(at(format!(
                        "`{}` returns `{ret}`, not the status type `{}`",
                        cand.function, c.vendor.status_type
                    )));
                }
                let params = decl.params.clone().unwrap_or_default();
                let mut ri = 0;
                let mut c_types = Vec::new();
                let mut call = Vec::new();
                for p in &params {
                    let Some((cat, rust)) = types.classify(&p.ty) else {
                        return Err(at(format!(
                            "`{}`: parameter `{} {}` has a type the bindings cannot map",
                            cand.function, p.ty, p.name
                        )));
                    };
                    c_types.push(rust);
                    while ri < roles.len() && roles[ri].cat != cat && roles[ri].optional {
                        ri += 1;
                    }
                    if ri < roles.len() && roles[ri].cat == cat && !cand.args.contains_key(&p.name) {
                        call.push(format!("{} as _", roles[ri].name));
                        ri += 1;
                    } else if let Some(v) = cand.args.get(&p.name) {
                        let n = match v {
                            toml::Value::Integer(i) => *i,
                            toml::Value::String(s) => *values.get(s.as_str()).ok_or_else(|| {
                                at(format!("`{s}` (for `{}` of `{}`) is not a header constant", p.name, cand.function))
                            })?,
                            other => {
                                return Err(at(format!(
                                    "`{}`: args values are integers or constant names, not {other}",
                                    p.name
                                )));
                            }
                        };
                        call.push(format!("{n} as _"));
                    } else {
                        return Err(at(format!(
                            "`{}`: parameter `{} {}` matches no role of `{}` ({}); fix it with `args = {{ {} = ... }}`",
                            cand.function,
                            p.ty,
                            p.name,
                            dop.name,
                            roles.iter().map(|r| r.name).collect::<Vec<_>>().join(", "),
                            p.name
                        )));
                    }
                }
                if let Some(missing) = roles[ri.min(roles.len())..].iter().find(|r| !r.optional) {
                    return Err(at(format!(
                        "`{}` has no parameter for `{}` of device operation `{}`",
                        cand.function, missing.name, dop.name
                    )));
                }
                for k in cand.args.keys() {
                    if !params.iter().any(|p| &p.name == k) {
                        return Err(at(format!("`{}` has no parameter `{k}`", cand.function)));
                    }
                }
                let ret_rust = if is_text { "*const c_char" } else { "c_int" };
                let c_decl = format!(
                    "{ret} {}({})",
                    decl.name,
                    params.iter().map(|p| format!("{} {}", p.ty, p.name)).collect::<Vec<_>>().join(", ")
                );
                candidates.push(CandCtx {
                    symbol: cand.function.clone(),
                    c_decl,
                    header: format!("{}:{}", decl.file, decl.line),
                    fn_type: format!("unsafe extern \"C\" fn({}) -> {ret_rust}", c_types.join(", ")),
                    call: call.join(", "),
                    index,
                });
            }
        }
        ops.push(DriverOpCtx {
            name: dop.name.into(),
            doc: dop.doc.into(),
            required: dop.required,
            raw_params,
            raw_ret: if is_text { "*const c_char".into() } else { "c_int".into() },
            candidates,
        });
    }

    // status codes -> enum (first name per value, others as aliases)
    let mut by_value: BTreeMap<i64, Vec<&str>> = BTreeMap::new();
    for d in decls.iter().filter(|d| matches!(d.kind, DeclKind::Constant | DeclKind::Macro | DeclKind::Enumerator)) {
        if c.vendor.error_prefixes.iter().any(|p| d.name.starts_with(p.as_str()))
            && let Some(v) = d.value
        {
            by_value.entry(v).or_default().push(d.name.as_str());
        }
    }
    let success = *values.get(c.vendor.success.as_str()).ok_or_else(|| {
        cfg.error_at(&["vendor", "success"], format!("`{}` is not a header constant", c.vendor.success))
    })?;
    let mut statuses = Vec::new();
    let mut used = std::collections::HashSet::new();
    for (value, mut names) in by_value {
        if value == success {
            continue;
        }
        names.sort_unstable();
        names.dedup();
        let mut variant = camel(names[0], &c.vendor.error_prefixes);
        while !used.insert(variant.clone()) {
            variant.push('_');
        }
        statuses.push(StatusCtx { variant, constant: names[0].to_string(), value, aliases: names[1..].join(", ") });
    }
    if statuses.is_empty() {
        return Err(Error::Invalid(format!(
            "no status constants with prefixes {:?} in the {} headers",
            c.vendor.error_prefixes, c.vendor.name
        )));
    }
    let k = &c.vendor.memcpy_kind;
    let kind = |key: &str, name: &str| -> Result<(String, i64)> {
        values.get(name).map(|v| (name.to_string(), *v)).ok_or_else(|| {
            cfg.error_at(&["vendor", "memcpy_kind"], format!("`{name}` ({key}) is not a header enumerator or constant"))
        })
    };
    let memcpy_kinds = [
        kind("host_to_device", &k.host_to_device)?,
        kind("device_to_host", &k.device_to_host)?,
        kind("device_to_device", &k.device_to_device)?,
    ];
    Ok(DriverModel { ops, statuses, success, memcpy_kinds })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn camel_case_variants() {
        let p = vec!["ACL_ERROR_".to_string()];
        assert_eq!(camel("ACL_ERROR_RT_MEMORY_ALLOCATION", &p), "RtMemoryAllocation");
        assert_eq!(camel("ACL_ERROR_", &p), "E");
    }
}
