//! Reading and writing tensors as safetensors files (host tensors).

use std::collections::BTreeMap;
use std::path::Path;

use safetensors::{Dtype as StDtype, SafeTensors};

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

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

/// Reads a safetensors file into host tensors by name.
pub fn load_safetensors(path: impl AsRef<Path>) -> Result<BTreeMap<String, Tensor>> {
    let p = path.as_ref();
    let what = p.display().to_string();
    let bytes = std::fs::read(p).map_err(|e| st_err(&what, e))?;
    parse_safetensors(&what, &bytes)
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
