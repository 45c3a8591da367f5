//! The generic profile on headers written in other vendors' styles (never in the corpus):
//! export and calling-convention macros it has never heard of must not cost a declaration or a
//! parameter.

use xirang_headers::{Decl, DeclKind, HeaderFile, Profile, diff, scan_source, scan_sources};

fn scan(text: &str) -> HeaderFile {
    scan_source(Profile::Generic, "vendor.h", text).expect("scan")
}

fn func<'a>(f: &'a HeaderFile, name: &str) -> &'a Decl {
    f.decls
        .iter()
        .find(|d| d.kind == DeclKind::Function && d.name == name)
        .unwrap_or_else(|| panic!("{name} lost: {:#?}", f.decls))
}

fn sig(d: &Decl) -> (String, Vec<(String, String)>) {
    (d.ret.clone().unwrap_or_default(), d.params.iter().flatten().map(|p| (p.name.clone(), p.ty.clone())).collect())
}

fn p(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(n, t)| (n.to_string(), t.to_string())).collect()
}

#[test]
fn hip_style() {
    let f = scan(
        r#"
#pragma once
#ifdef __cplusplus
extern "C" {
#endif
typedef enum hipError_t { hipSuccess = 0, hipErrorInvalidValue = 1, hipErrorOutOfMemory = 2, hipErrorUnknown = 999 } hipError_t;
typedef struct ihipStream_t* hipStream_t;
hipError_t HIPAPI hipMalloc(void** ptr, size_t size);
hipError_t HIPAPI hipMemcpyAsync(void* dst, const void* src, size_t sizeBytes, hipMemcpyKind kind, hipStream_t stream __dparm(0));
DEPRECATED("use hipHostMalloc") hipError_t hipMallocHost(void** ptr, size_t size);
#ifdef __cplusplus
}
#endif
"#,
    );
    assert_eq!(sig(func(&f, "hipMalloc")), ("hipError_t".into(), p(&[("ptr", "void **"), ("size", "size_t")])));
    let m = func(&f, "hipMemcpyAsync");
    assert_eq!(m.params.as_ref().map(Vec::len), Some(5));
    assert_eq!(m.params.as_ref().map(|ps| ps[4].ty.clone()), Some("hipStream_t".to_string()));
    let h = func(&f, "hipMallocHost");
    assert!(h.deprecated);
    assert_eq!(h.deprecation.as_deref(), Some("use hipHostMalloc"));
    assert_eq!(sig(h).1, p(&[("ptr", "void **"), ("size", "size_t")]));
    let v = |n: &str| f.decls.iter().find(|d| d.name == n && d.kind == DeclKind::Enumerator).and_then(|d| d.value);
    assert_eq!(v("hipErrorOutOfMemory"), Some(2));
    assert_eq!(v("hipErrorUnknown"), Some(999));
}

#[test]
fn level_zero_style() {
    let f = scan(
        r#"
#if defined(_WIN32)
#  define ZE_APICALL __cdecl
#else
#  define ZE_APICALL
#endif
#if defined(_WIN32)
#  define ZE_APIEXPORT __declspec(dllexport)
#endif
#if __GNUC__ >= 4
#  define ZE_APIEXPORT __attribute__ ((visibility ("default")))
#endif
#define ZE_BIT( _i )  ( 1 << _i )
#define ZE_MAKE_VERSION( _major, _minor )  (( _major << 16 )|( _minor & 0x0000ffff))
typedef uint32_t ze_init_flags_t;
typedef enum _ze_init_flag_t
{
    ZE_INIT_FLAG_GPU_ONLY = ZE_BIT(0),
    ZE_INIT_FLAG_VPU_ONLY = ZE_BIT(1),
    ZE_INIT_FLAG_FORCE_UINT32 = 0x7fffffff
} ze_init_flag_t;
typedef enum _ze_api_version_t
{
    ZE_API_VERSION_1_0 = ZE_MAKE_VERSION( 1, 0 ),
    ZE_API_VERSION_1_1 = ZE_MAKE_VERSION( 1, 1 ),
    ZE_API_VERSION_CURRENT = ZE_API_VERSION_1_1,
} ze_api_version_t;
typedef struct _ze_device_uuid_t { uint8_t id[ZE_MAX_DEVICE_UUID_SIZE]; } ze_device_uuid_t;
typedef void (ZE_APICALL *ze_pfnInit_t)(ze_init_flags_t);
ZE_APIEXPORT ze_result_t ZE_APICALL zeInit(ze_init_flags_t flags);
ZE_APIEXPORT ze_result_t ZE_APICALL
zeDriverGet(
    uint32_t* pCount,                               ///< [in,out] pointer to the number of driver instances.
    ze_driver_handle_t* phDrivers                   ///< [in,out][optional][range(0, *pCount)] array of driver instance handles.
    );
"#,
    );
    assert_eq!(sig(func(&f, "zeInit")), ("ze_result_t".into(), p(&[("flags", "ze_init_flags_t")])));
    assert_eq!(
        sig(func(&f, "zeDriverGet")),
        ("ze_result_t".into(), p(&[("pCount", "uint32_t *"), ("phDrivers", "ze_driver_handle_t *")]))
    );
    let v = |n: &str| f.decls.iter().find(|d| d.name == n && d.kind == DeclKind::Enumerator).and_then(|d| d.value);
    assert_eq!(v("ZE_INIT_FLAG_VPU_ONLY"), Some(2));
    assert_eq!(v("ZE_API_VERSION_1_1"), Some(65537));
    assert_eq!(v("ZE_API_VERSION_CURRENT"), Some(65537));
    let td = f.decls.iter().find(|d| d.name == "ze_pfnInit_t").expect("typedef");
    assert_eq!(td.ty.as_deref(), Some("void (*)(ze_init_flags_t)"));
    // unknown macro in an array size: text kept, nothing guessed
    let fld = f.decls.iter().find(|d| d.kind == DeclKind::Field && d.name == "id").expect("field");
    assert_eq!(fld.ty.as_deref(), Some("uint8_t [ZE_MAX_DEVICE_UUID_SIZE]"));
}

#[test]
fn opencl_style() {
    let f = scan(
        r#"
#ifdef __cplusplus
extern "C" {
#endif
#define CL_SUCCESS                                  0
#define CL_DEVICE_NOT_FOUND                         -1
#define CL_DEVICE_TYPE_GPU                          (1 << 2)
typedef struct _cl_platform_id *    cl_platform_id;
extern CL_API_ENTRY cl_int CL_API_CALL
clGetPlatformIDs(cl_uint          num_entries,
                 cl_platform_id * platforms,
                 cl_uint *        num_platforms) CL_API_SUFFIX__VERSION_1_0;
extern CL_API_ENTRY cl_int CL_API_CALL clGetPlatformInfo(cl_platform_id, cl_platform_info, size_t, void *, size_t *) CL_API_SUFFIX__VERSION_1_0;
extern CL_API_ENTRY CL_API_PREFIX__VERSION_1_1_DEPRECATED cl_int CL_API_CALL
clUnloadCompiler(void) CL_API_SUFFIX__VERSION_1_1_DEPRECATED;
extern CL_API_ENTRY cl_context CL_API_CALL
clCreateContext(const cl_context_properties * properties, cl_uint num_devices, const cl_device_id * devices,
                void (CL_CALLBACK * pfn_notify)(const char * errinfo, const void * private_info, size_t cb, void * user_data),
                void * user_data, cl_int * errcode_ret) CL_API_SUFFIX__VERSION_1_0;
#ifdef __cplusplus
}
#endif
"#,
    );
    assert_eq!(
        sig(func(&f, "clGetPlatformIDs")),
        (
            "cl_int".into(),
            p(&[("num_entries", "cl_uint"), ("platforms", "cl_platform_id *"), ("num_platforms", "cl_uint *")])
        )
    );
    assert_eq!(
        sig(func(&f, "clGetPlatformInfo")).1,
        p(&[("", "cl_platform_id"), ("", "cl_platform_info"), ("", "size_t"), ("", "void *"), ("", "size_t *")])
    );
    let u = func(&f, "clUnloadCompiler");
    assert_eq!(sig(u), ("cl_int".into(), vec![]));
    assert!(u.deprecated);
    let c = func(&f, "clCreateContext");
    let ps = sig(c).1;
    assert_eq!(ps.len(), 6);
    assert_eq!(ps[3], ("pfn_notify".to_string(), "void (*)(const char *, const void *, size_t, void *)".to_string()));
    let m = |n: &str| f.decls.iter().find(|d| d.name == n && d.kind == DeclKind::Macro).and_then(|d| d.value);
    assert_eq!(m("CL_DEVICE_NOT_FOUND"), Some(-1));
    assert_eq!(m("CL_DEVICE_TYPE_GPU"), Some(4));
}

#[test]
fn vulkan_cambricon_windows_and_cxx_attributes() {
    let f = scan(
        r#"
#define VKAPI_ATTR
#define VKAPI_CALL __stdcall
#define VKAPI_PTR  VKAPI_CALL
typedef enum VkResult { VK_SUCCESS = 0, VK_ERROR_OUT_OF_HOST_MEMORY = -1, VK_RESULT_MAX_ENUM = 0x7FFFFFFF } VkResult;
typedef VkResult (VKAPI_PTR *PFN_vkCreateInstance)(const VkInstanceCreateInfo* pCreateInfo, const VkAllocationCallbacks* pAllocator, VkInstance* pInstance);
VKAPI_ATTR VkResult VKAPI_CALL vkCreateInstance(
    const VkInstanceCreateInfo*                 pCreateInfo,
    const VkAllocationCallbacks*                pAllocator,
    VkInstance*                                 pInstance);
CNRT_DLL_API cnrtRet_t cnrtMalloc(void **pPtr, size_t bytes);
__declspec(dllexport) int __stdcall WinThing(unsigned long long x, const wchar_t *name);
[[deprecated("use bar2")]] int bar(int a, int b = 3);
__attribute__((visibility("default"))) __attribute__((deprecated)) void baz(void);
enum Mode : unsigned { MODE_A = 'A', MODE_B = MODE_A + 1, MODE_C = (unsigned)-1, MODE_D = sizeof(int) };
typedef struct Packed { unsigned flag : 1; unsigned rest : 31; char tail[4]; } Packed;
"#,
    );
    assert_eq!(
        sig(func(&f, "vkCreateInstance")),
        (
            "VkResult".into(),
            p(&[
                ("pCreateInfo", "const VkInstanceCreateInfo *"),
                ("pAllocator", "const VkAllocationCallbacks *"),
                ("pInstance", "VkInstance *")
            ])
        )
    );
    assert_eq!(sig(func(&f, "cnrtMalloc")), ("cnrtRet_t".into(), p(&[("pPtr", "void **"), ("bytes", "size_t")])));
    assert_eq!(
        sig(func(&f, "WinThing")),
        ("int".into(), p(&[("x", "unsigned long long"), ("name", "const wchar_t *")]))
    );
    let b = func(&f, "bar");
    assert!(b.deprecated);
    assert_eq!(b.deprecation.as_deref(), Some("use bar2"));
    assert_eq!(b.params.as_ref().and_then(|ps| ps[1].default.clone()).as_deref(), Some("3"));
    assert!(func(&f, "baz").deprecated);
    let td = f.decls.iter().find(|d| d.name == "PFN_vkCreateInstance").expect("pfn");
    assert_eq!(
        td.ty.as_deref(),
        Some("VkResult (*)(const VkInstanceCreateInfo *, const VkAllocationCallbacks *, VkInstance *)")
    );
    let v = |n: &str| f.decls.iter().find(|d| d.name == n && d.kind == DeclKind::Enumerator).and_then(|d| d.value);
    assert_eq!(v("VK_ERROR_OUT_OF_HOST_MEMORY"), Some(-1));
    assert_eq!(v("VK_RESULT_MAX_ENUM"), Some(0x7FFF_FFFF));
    assert_eq!(v("MODE_A"), Some(65));
    assert_eq!(v("MODE_B"), Some(66));
    assert_eq!(v("MODE_C"), Some(4_294_967_295));
    // sizeof cannot be decided: keep the text, no value
    let d = f.decls.iter().find(|d| d.name == "MODE_D").expect("MODE_D");
    assert_eq!((d.value, d.expr.as_deref()), (None, Some("sizeof(int)")));
    let bits: Vec<(String, Option<String>)> = f
        .decls
        .iter()
        .filter(|d| d.kind == DeclKind::Field && d.parent.as_deref() == Some("Packed"))
        .map(|d| (d.name.clone(), d.bits.clone()))
        .collect();
    assert_eq!(
        bits,
        vec![("flag".into(), Some("1".into())), ("rest".into(), Some("31".into())), ("tail".into(), None)]
    );
}

#[test]
fn macros_from_other_files_of_a_set_and_drift() {
    let v1 = vec![
        ("base.h".to_string(), "#define MYLIB_API __attribute__((visibility(\"default\")))\n#define MYLIB_ERR_BASE 1000\n".to_string()),
        (
            "api.h".to_string(),
            "#include \"base.h\"\ntypedef enum { E_OK = 0, E_FAIL = MYLIB_ERR_BASE + 1 } err_t;\ntypedef struct S { int a; int b; } S;\nMYLIB_API err_t lib_open(const char *path, int flags);\nMYLIB_API err_t lib_close(void *h);\n".to_string(),
        ),
    ];
    let v2 = vec![
        ("base.h".to_string(), "#define MYLIB_API __attribute__((visibility(\"default\")))\n#define MYLIB_ERR_BASE 2000\n".to_string()),
        (
            "api.h".to_string(),
            "#include \"base.h\"\ntypedef enum { E_OK = 0, E_FAIL = MYLIB_ERR_BASE + 1 } err_t;\ntypedef struct S { int b; int a; long c; } S;\nMYLIB_API err_t lib_open(const char *path, unsigned flags, int mode);\n".to_string(),
        ),
    ];
    let a = scan_sources(Profile::Generic, &v1).expect("v1");
    let b = scan_sources(Profile::Generic, &v2).expect("v2");
    assert_eq!(a.value_of("E_FAIL"), Some(1001));
    assert_eq!(a.include_graph.len(), 1);
    let ch = diff(&a, &b);
    let rules: Vec<(&str, &str)> = ch.iter().map(|c| (c.rule, c.subject.as_str())).collect();
    for want in [
        ("header.function.removed", "lib_close"),
        ("header.function.param_retyped", "lib_open"),
        ("header.function.param_added", "lib_open"),
        ("header.enumerator.value_changed", "err_t::E_FAIL"),
        ("header.macro.value_changed", "MYLIB_ERR_BASE"),
        ("header.struct.field_added", "S.c"),
        ("header.struct.field_reordered", "S"),
    ] {
        assert!(rules.contains(&want), "{want:?} not in {rules:?}");
    }
}

#[test]
fn conditional_branches() {
    let f = scan(
        r#"
#if 0
this is not C at all {{{ (
int removed_fn(int);
#define GONE 1
#endif
#if defined(_WIN32)
typedef struct __declspec(align(8)) Foo {
#else
typedef struct Foo {
#endif
    int a;
    int b;
} Foo_t;
#ifdef USE_V2
int vfunc(int a, int b);
#elif defined(OLD)
int vfunc(int a, int b, int c);
#else
int vfunc(int a);
#endif
#ifdef __cplusplus
extern "C" {
#endif
int after(void);
#ifdef __cplusplus
}
#endif
"#,
    );
    assert!(!f.decls.iter().any(|d| d.name == "removed_fn" || d.name == "GONE"));
    let fields: Vec<&str> = f
        .decls
        .iter()
        .filter(|d| d.kind == DeclKind::Field && d.parent.as_deref() == Some("Foo"))
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(fields, vec!["a", "b"]);
    assert_eq!(func(&f, "vfunc").params.as_ref().map(Vec::len), Some(2));
    assert_eq!(func(&f, "after").params.as_ref().map(Vec::len), Some(0));
    assert!(f.diagnostics.is_empty(), "{:?}", f.diagnostics);
}

/// Return-type and prototype wrappers (libgit2, CPython, zlib, bzip2 and libpng styles), both
/// with their definitions in the set and without.
#[test]
fn wrapper_macros() {
    let f = scan(
        r#"
GIT_EXTERN(int) git_repository_open(git_repository **out, const char *path);
PyAPI_FUNC(PyObject *) PyObject_Repr(PyObject *);
PyAPI_DATA(PyTypeObject) PyType_Type;
ZEXTERN int ZEXPORT deflate OF((z_streamp strm, int flush));
"#,
    );
    assert_eq!(
        sig(func(&f, "git_repository_open")),
        ("int".into(), p(&[("out", "git_repository **"), ("path", "const char *")]))
    );
    assert_eq!(sig(func(&f, "PyObject_Repr")), ("PyObject *".into(), p(&[("", "PyObject *")])));
    assert_eq!(sig(func(&f, "deflate")), ("int".into(), p(&[("strm", "z_streamp"), ("flush", "int")])));
    assert!(
        !f.decls.iter().any(|d| d.kind == DeclKind::Function && d.name.starts_with("Py") && d.name != "PyObject_Repr")
    );

    let set = scan_sources(
        Profile::Generic,
        &[
            (
                "conf.h".to_string(),
                r#"
#ifdef _WIN32
#  define BZ_API(func) WINAPI func
#  define MY_IMPEXP __declspec(dllimport)
#else
#  define BZ_API(func) func
#  define MY_IMPEXP
#endif
#define MY_EMPTY /* nothing */
#define MY_FUNCTION(type, name, args, attributes) attributes type name args
#define MY_EXPORT_TYPE(type) MY_IMPEXP type
#define MY_EXPORTA(ordinal, type, name, args, attributes) \
      MY_FUNCTION(MY_EXPORT_TYPE(type), (name), args, extern attributes)
#define MY_EXPORT(ordinal, type, name, args) MY_EXPORTA(ordinal, type, name, args, MY_EMPTY)
"#
                .to_string(),
            ),
            (
                "lib.h".to_string(),
                r#"
#include "conf.h"
extern int BZ_API(BZ2_bzCompressInit) (bz_stream *strm, int blockSize100k, int verbosity, int workFactor);
MY_EXPORT(1, my_uint_32, my_access_version_number, (void));
MY_EXPORT(2, void, my_set_sig_bytes, (my_structrp my_ptr, int num_bytes));
"#
                .to_string(),
            ),
        ],
    )
    .expect("scan");
    let s = |n: &str| sig(set.function(n).unwrap_or_else(|| panic!("{n} lost")));
    assert_eq!(s("BZ2_bzCompressInit").1.len(), 4);
    assert_eq!(s("my_access_version_number"), ("my_uint_32".into(), vec![]));
    assert_eq!(s("my_set_sig_bytes"), ("void".into(), p(&[("my_ptr", "my_structrp"), ("num_bytes", "int")])));
}

/// Object-like macros that stand for members (CPython's `PyObject_HEAD` style) are expanded in
/// place, keeping line numbers.
#[test]
fn member_list_macros() {
    let f = scan(
        "#define OBJ_HEAD long refcnt; struct type *ob_type;\n#define EXC_HEAD OBJ_HEAD void *dict;\n\ntypedef struct {\n    EXC_HEAD\n    int code;\n} Exc;\nint after(Exc *e);\n",
    );
    let fields: Vec<(&str, &str, u32)> = f
        .decls
        .iter()
        .filter(|d| d.kind == DeclKind::Field)
        .map(|d| (d.name.as_str(), d.ty.as_deref().unwrap_or(""), d.line))
        .collect();
    assert_eq!(
        fields,
        vec![("refcnt", "long", 5), ("ob_type", "struct type *", 5), ("dict", "void *", 5), ("code", "int", 6)]
    );
    assert_eq!(func(&f, "after").line, 8);
    assert!(f.diagnostics.is_empty());
}

/// Keyword spellings (`_Xconst`) and `extern "C" {` guards behind macros (X11 style).
#[test]
fn keyword_and_guard_macros() {
    let f = scan(
        "#ifdef __cplusplus\n#define _XFUNCPROTOBEGIN extern \"C\" {\n#define _XFUNCPROTOEND }\n#else\n#define _XFUNCPROTOBEGIN\n#define _XFUNCPROTOEND\n#endif\n#define _Xconst const\n_XFUNCPROTOBEGIN\ntypedef int (*XextErrorHandler) (Display * /* dpy */, _Xconst char* /* ext_name */);\nextern int XFoo(_Xconst char *name, int n);\n_XFUNCPROTOEND\n",
    );
    assert_eq!(sig(func(&f, "XFoo")), ("int".into(), p(&[("name", "const char *"), ("n", "int")])));
    let td = f.decls.iter().find(|d| d.name == "XextErrorHandler").expect("typedef");
    assert_eq!(td.ty.as_deref(), Some("int (*)(Display *, const char *)"));
    assert!(f.diagnostics.is_empty(), "{:?}", f.diagnostics);
}

/// `int f(T *a, int (*cb)(T *))` with an unknown `T` reads as a C++ variable initialized by a
/// call; it is a function declaration.
#[test]
fn most_vexing_parse() {
    let f = scan("int f2(PyObject *mp, int (*predicate)(PyObject *value), ...);\n");
    let d = func(&f, "f2");
    assert_eq!(sig(d), ("int".into(), p(&[("mp", "PyObject *"), ("predicate", "int (*)(PyObject *)")])));
    assert!(d.variadic);
}

#[test]
fn most_vexing_parse_with_arrays_and_real_initializers() {
    let f = scan("int g(PyObject *mp, char buf[32], int (*cb)(PyObject *v));\nstruct S x(2 * 4);\n");
    assert_eq!(sig(func(&f, "g")).1, p(&[("mp", "PyObject *"), ("buf", "char [32]"), ("cb", "int (*)(PyObject *)")]));
    assert!(!f.decls.iter().any(|d| d.kind == DeclKind::Function && d.name == "x"));
}
