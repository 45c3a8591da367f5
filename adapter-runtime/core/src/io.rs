//! Reading and writing tensors as safetensors files (host tensors), and
//! [`read_file`], the bounded reader of every file the runtime's tools take
//! from a user path (safetensors, profiles, baselines, advice rules).

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use safetensors::{Dtype as StDtype, SafeTensors};

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// The largest safetensors file [`load_safetensors`] reads: 4 GiB.
pub const MAX_SAFETENSORS_BYTES: u64 = 4 << 30;

/// Why a file given by path was not read ([`read_file`]).
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A directory, FIFO, socket or device: refused before it is opened
    /// (opening a FIFO blocks until a writer comes, `/dev/zero` never ends).
    #[error("{}: not a regular file (a {kind})", path.display())]
    NotRegularFile { path: PathBuf, kind: &'static str },
    /// The file is larger than the limit for its kind.
    #[error("{}: {size} bytes is more than the limit of {limit} bytes for {what}", path.display())]
    TooLarge { path: PathBuf, what: &'static str, size: u64, limit: u64 },
}

fn file_kind(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        return "directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if t.is_fifo() {
            return "FIFO";
        }
        if t.is_char_device() {
            return "character device";
        }
        if t.is_block_device() {
            return "block device";
        }
        if t.is_socket() {
            return "socket";
        }
    }
    "special file"
}

/// Reads the regular file at `path` (symbolic links followed) if it holds at
/// most `limit` bytes; `what` names the kind of file in the size error.
///
/// The type and size are checked from the path's metadata before the file
/// is opened, then again on the open file, and the read stops after
/// `limit + 1` bytes (a file that grows while it is read is refused too).
pub fn read_file(path: &Path, what: &'static str, limit: u64) -> std::result::Result<Vec<u8>, ReadError> {
    let io = |source| ReadError::Io { path: path.into(), source };
    let check = |meta: &std::fs::Metadata| {
        if !meta.is_file() {
            return Err(ReadError::NotRegularFile { path: path.into(), kind: file_kind(meta.file_type()) });
        }
        if meta.len() > limit {
            return Err(ReadError::TooLarge { path: path.into(), what, size: meta.len(), limit });
        }
        Ok(meta.len())
    };
    check(&std::fs::metadata(path).map_err(io)?)?;
    let file = std::fs::File::open(path).map_err(io)?;
    let len = check(&file.metadata().map_err(io)?)?;
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes).map_err(io)?;
    let read = bytes.len() as u64;
    if read > limit {
        return Err(ReadError::TooLarge { path: path.into(), what, size: read, limit });
    }
    Ok(bytes)
}

fn st_err(path: &str, e: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{path}: {e}"))
}

fn dtype_of(name: &str, d: StDtype) -> Result<DType> {
    Ok(match d {
        StDtype::F32 => DType::F32,
        StDtype::F64 => DType::F64,
        StDtype::F16 => DType::F16,
        StDtype::BF16 => DType::BF16,
        StDtype::I64 => DType::I64,
        StDtype::I32 => DType::I32,
        StDtype::I16 => DType::I16,
        StDtype::I8 => DType::I8,
        StDtype::U8 => DType::U8,
        StDtype::BOOL => DType::Bool,
        other => return Err(Error::DType(format!("{name}: safetensors dtype {other:?} is not supported"))),
    })
}

fn st_dtype(d: DType) -> StDtype {
    match d {
        DType::F32 => StDtype::F32,
        DType::F64 => StDtype::F64,
        DType::F16 => StDtype::F16,
        DType::BF16 => StDtype::BF16,
        DType::I64 => StDtype::I64,
        DType::I32 => StDtype::I32,
        DType::I8 => StDtype::I8,
        DType::U8 => StDtype::U8,
        DType::I16 => StDtype::I16,
        DType::Bool => StDtype::BOOL,
    }
}

/// Parses safetensors bytes into host tensors by name (`what` names the
/// source in errors).
pub fn parse_safetensors(what: &str, bytes: &[u8]) -> Result<BTreeMap<String, Tensor>> {
    let st = SafeTensors::deserialize(bytes).map_err(|e| st_err(what, e))?;
    let mut out = BTreeMap::new();
    for (name, view) in st.tensors() {
        let d = dtype_of(&name, view.dtype())?;
        let t = Tensor::from_bytes(view.data().to_vec(), view.shape(), d)?;
        out.insert(name, t);
    }
    Ok(out)
}

/// Reads a safetensors file into host tensors by name: a regular file of at
/// most [`MAX_SAFETENSORS_BYTES`].
pub fn load_safetensors(path: impl AsRef<Path>) -> Result<BTreeMap<String, Tensor>> {
    load_safetensors_with_limit(path, MAX_SAFETENSORS_BYTES)
}

/// [`load_safetensors`] with another size limit in bytes.
pub fn load_safetensors_with_limit(path: impl AsRef<Path>, limit: u64) -> Result<BTreeMap<String, Tensor>> {
    let p = path.as_ref();
    let bytes = read_file(p, "a safetensors file", limit).map_err(|e| Error::InvalidArgument(e.to_string()))?;
    parse_safetensors(&p.display().to_string(), &bytes)
}

/// Writes tensors (any device; copied to the host) as a safetensors file.
pub fn save_safetensors(path: impl AsRef<Path>, tensors: &BTreeMap<String, Tensor>) -> Result<()> {
    let p = path.as_ref();
    let what = p.display().to_string();
    let mut data = Vec::new();
    for (name, t) in tensors {
        data.push((name.clone(), t.dtype(), t.sizes().to_vec(), t.gather_bytes()?));
    }
    let views = data
        .iter()
        .map(|(n, d, s, b)| safetensors::tensor::TensorView::new(st_dtype(*d), s.clone(), b).map(|v| (n.clone(), v)))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| st_err(&what, e))?;
    safetensors::serialize_to_file(views, &None, p).map_err(|e| st_err(&what, e))
}
