//! Tensors: ONNX `TensorProto` ↔ `gopt_ir::Tensor`, element-type codes, sparse tensors,
//! and external data (read only from files inside the model's directory). 4-bit
//! constants are read widened to 8 bits ([`super::int4`] says why and where they are
//! refused); float8, float4 and 2-bit tensors are refused with their type's name.

use super::error::{ImportError, Result};
use super::int4;
use super::proto;
use bytes::Bytes;
use gopt_ir::{Const, DType, Tensor};
use half::{bf16, f16};
use ndarray::{ArrayD, IxDyn};
use prost::Message;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path};

/// The gopt dtype of an ONNX element-type code, if gopt supports it.
pub fn dtype_from_onnx(code: i32) -> Option<DType> {
    Some(match code {
        1 => DType::F32,
        2 => DType::U8,
        3 => DType::I8,
        4 => DType::U16,
        5 => DType::I16,
        6 => DType::I32,
        7 => DType::I64,
        9 => DType::Bool,
        10 => DType::F16,
        11 => DType::F64,
        12 => DType::U32,
        13 => DType::U64,
        16 => DType::BF16,
        _ => return None,
    })
}

/// The ONNX element-type code of a gopt dtype.
pub fn dtype_to_onnx(d: DType) -> i32 {
    match d {
        DType::F32 => 1,
        DType::U8 => 2,
        DType::I8 => 3,
        DType::U16 => 4,
        DType::I16 => 5,
        DType::I32 => 6,
        DType::I64 => 7,
        DType::Bool => 9,
        DType::F16 => 10,
        DType::F64 => 11,
        DType::U32 => 12,
        DType::U64 => 13,
        DType::BF16 => 16,
    }
}

/// ONNX's lower-case name of an element-type code (`float`, `string`, `float8e4m3fn`),
/// for messages.
pub fn onnx_dtype_name(code: i32) -> String {
    match proto::tensor_proto::DataType::try_from(code) {
        Ok(d) => d.as_str_name().to_ascii_lowercase(),
        Err(_) => format!("type code {code}"),
    }
}

/// Maps an element-type code or fails with `UnsupportedDType` naming `tensor`.
pub fn require_dtype(code: i32, tensor: &str) -> Result<DType> {
    dtype_from_onnx(code).ok_or_else(|| ImportError::UnsupportedDType {
        tensor: tensor.to_string(),
        dtype: onnx_dtype_name(code),
    })
}

/// Checks dims (non-negative, product fits) and returns them with the element count.
fn checked_dims(name: &str, dims: &[i64]) -> Result<(Vec<usize>, usize)> {
    let mut shape = Vec::with_capacity(dims.len());
    let mut n: usize = 1;
    // ndarray refuses shapes whose nonzero dims multiply past isize::MAX even when a zero
    // dim makes the tensor empty, so the same bound holds here.
    let mut nonzero: usize = 1;
    for &d in dims {
        if d < 0 {
            return Err(ImportError::invalid(
                "",
                format!("tensor `{name}` has a negative dim in {dims:?}"),
            ));
        }
        let d = usize::try_from(d).map_err(|_| overflow(name, dims))?;
        n = n.checked_mul(d).ok_or_else(|| overflow(name, dims))?;
        nonzero = nonzero
            .checked_mul(d.max(1))
            .filter(|&m| isize::try_from(m).is_ok())
            .ok_or_else(|| overflow(name, dims))?;
        shape.push(d);
    }
    Ok((shape, n))
}

fn overflow(name: &str, dims: &[i64]) -> ImportError {
    ImportError::ShapeOverflow {
        tensor: name.to_string(),
        dims: dims.to_vec(),
    }
}

/// Converts a `TensorProto` to a tensor. `base_dir` is the model's directory, where
/// external data files are looked up (none: external data is an error).
pub fn tensor_from_proto(t: &proto::TensorProto, base_dir: Option<&Path>) -> Result<Tensor> {
    const_from_proto(t, base_dir).map(Const::into_tensor)
}

/// Converts a `TensorProto` to a shared constant without copying its data: `raw_data`
/// stays a slice of the buffer the model was decoded from (the memory-mapped file when
/// it was loaded from one), and external data is memory-mapped from its file. Only the
/// typed `*_data` fields are decoded here. Lengths are checked against the dims.
pub fn const_from_proto(t: &proto::TensorProto, base_dir: Option<&Path>) -> Result<Const> {
    let name = t.name.as_deref().unwrap_or("");
    let code = t.data_type.unwrap_or(0);
    let (shape, n) = checked_dims(name, &t.dims)?;
    if t.segment.is_some() {
        return Err(ImportError::invalid(
            "",
            format!("tensor `{name}` is segmented, which gopt does not read"),
        ));
    }
    if let Some(dtype) = int4::widened(code) {
        return widened_from_proto(t, name, dtype, &shape, n, base_dir).map(Const::from);
    }
    let dtype = require_dtype(code, name)?;
    let nbytes = n
        .checked_mul(dtype.size())
        .ok_or_else(|| overflow(name, &t.dims))?;
    let external = t.data_location == Some(proto::tensor_proto::DataLocation::External as i32);
    if external {
        let bytes = map_external(t, name, nbytes, base_dir)?;
        return from_raw(name, dtype, shape, bytes);
    }
    if let Some(raw) = &t.raw_data {
        return from_raw(name, dtype, shape, raw.clone());
    }
    from_typed(t, name, dtype, &shape, n).map(Const::from)
}

/// A 4-bit tensor read from any of its three storages and widened ([`int4`]).
fn widened_from_proto(
    t: &proto::TensorProto,
    name: &str,
    dtype: DType,
    shape: &[usize],
    n: usize,
    base_dir: Option<&Path>,
) -> Result<Tensor> {
    let external = t.data_location == Some(proto::tensor_proto::DataLocation::External as i32);
    if external {
        let bytes = map_external(t, name, int4::packed_bytes(n), base_dir)?;
        return int4::unpack(name, dtype, shape, &bytes);
    }
    match &t.raw_data {
        Some(raw) => int4::unpack(name, dtype, shape, raw),
        None => int4::unpack_int32(name, dtype, shape, &t.int32_data),
    }
}

fn bad_len(name: &str, field: &str, found: usize, want: usize) -> ImportError {
    ImportError::invalid(
        "",
        format!("tensor `{name}`: {field} holds {found} elements, its dims need {want}"),
    )
}

fn array<T>(name: &str, shape: &[usize], v: Vec<T>) -> Result<ArrayD<T>> {
    let n = v.len();
    ArrayD::from_shape_vec(IxDyn(shape), v).map_err(|_| {
        ImportError::invalid(
            "",
            format!("tensor `{name}`: {n} elements do not fit {shape:?}"),
        )
    })
}

/// Wraps little-endian raw bytes (shared, not copied) after checking their length.
fn from_raw(name: &str, dtype: DType, shape: Vec<usize>, raw: Bytes) -> Result<Const> {
    let want = shape.iter().product::<usize>() * dtype.size();
    if raw.len() != want {
        return Err(ImportError::invalid(
            "",
            format!(
                "tensor `{name}`: raw data has {} bytes, {dtype}{shape:?} needs {want}",
                raw.len()
            ),
        ));
    }
    Const::from_le_bytes(dtype, shape, raw)
        .map_err(|e| ImportError::invalid("", format!("tensor `{name}`: {e}")))
}

/// Decodes the typed `*_data` fields.
fn from_typed(
    t: &proto::TensorProto,
    name: &str,
    dtype: DType,
    shape: &[usize],
    n: usize,
) -> Result<Tensor> {
    fn take<S: Copy, D>(
        name: &str,
        field: &str,
        src: &[S],
        n: usize,
        shape: &[usize],
        f: impl Fn(S) -> D,
    ) -> Result<ArrayD<D>> {
        if src.len() != n {
            return Err(bad_len(name, field, src.len(), n));
        }
        array(name, shape, src.iter().map(|&x| f(x)).collect())
    }
    let i32s = &t.int32_data;
    Ok(match dtype {
        DType::F32 => Tensor::F32(take(name, "float_data", &t.float_data, n, shape, |x| x)?),
        DType::F64 => Tensor::F64(take(name, "double_data", &t.double_data, n, shape, |x| x)?),
        // 16-bit floats are stored as their bit patterns in int32_data.
        DType::F16 => Tensor::F16(take(name, "int32_data", i32s, n, shape, |x| {
            f16::from_bits(x as u16)
        })?),
        DType::BF16 => Tensor::BF16(take(name, "int32_data", i32s, n, shape, |x| {
            bf16::from_bits(x as u16)
        })?),
        DType::I8 => Tensor::I8(take(name, "int32_data", i32s, n, shape, |x| x as i8)?),
        DType::I16 => Tensor::I16(take(name, "int32_data", i32s, n, shape, |x| x as i16)?),
        DType::I32 => Tensor::I32(take(name, "int32_data", i32s, n, shape, |x| x)?),
        DType::U8 => Tensor::U8(take(name, "int32_data", i32s, n, shape, |x| x as u8)?),
        DType::U16 => Tensor::U16(take(name, "int32_data", i32s, n, shape, |x| x as u16)?),
        DType::Bool => Tensor::Bool(take(name, "int32_data", i32s, n, shape, |x| x != 0)?),
        DType::I64 => Tensor::I64(take(name, "int64_data", &t.int64_data, n, shape, |x| x)?),
        DType::U32 => Tensor::U32(take(name, "uint64_data", &t.uint64_data, n, shape, |x| {
            x as u32
        })?),
        DType::U64 => Tensor::U64(take(name, "uint64_data", &t.uint64_data, n, shape, |x| x)?),
    })
}

/// Maps the bytes of an external tensor (read-only, private: nothing is read until
/// used, and pages the OS may drop again), refusing locations outside `base_dir`. A
/// file that cannot be mapped is read instead.
fn map_external(
    t: &proto::TensorProto,
    name: &str,
    nbytes: usize,
    base_dir: Option<&Path>,
) -> Result<Bytes> {
    let err = |msg: String| ImportError::ExternalData {
        tensor: name.to_string(),
        msg,
    };
    let mut location = None;
    let mut offset: u64 = 0;
    let mut length: Option<u64> = None;
    for e in &t.external_data {
        let key = e.key.as_deref().unwrap_or("");
        let value = e.value.as_deref().unwrap_or("");
        let num = |v: &str| {
            v.trim()
                .parse::<u64>()
                .map_err(|_| err(format!("`{key}` is `{v}`, not a byte count")))
        };
        match key {
            "location" => location = Some(value),
            "offset" => offset = num(value)?,
            "length" => length = Some(num(value)?),
            _ => {}
        }
    }
    let location = location.ok_or_else(|| err("no `location` entry".into()))?;
    let base = base_dir.ok_or_else(|| {
        err(format!(
            "`{location}` cannot be resolved: the model was not read from a file"
        ))
    })?;
    let rel = Path::new(location);
    if location.is_empty()
        || rel.is_absolute()
        || location.starts_with('/')
        || location.starts_with('\\')
        || rel
            .components()
            .any(|c| matches!(c, Component::Prefix(_) | Component::RootDir))
    {
        return Err(err(format!(
            "location `{location}` is absolute; it must be relative to the model's directory"
        )));
    }
    if rel.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(err(format!(
            "location `{location}` leaves the model's directory"
        )));
    }
    let path = base.join(rel);
    let real = path
        .canonicalize()
        .map_err(|e| err(format!("cannot open `{}`: {e}", path.display())))?;
    let real_base = base
        .canonicalize()
        .map_err(|e| err(format!("cannot resolve `{}`: {e}", base.display())))?;
    if !real.starts_with(&real_base) {
        return Err(err(format!(
            "location `{location}` resolves to `{}`, outside the model's directory",
            real.display()
        )));
    }
    // A regular file only: a FIFO would block the import, a device never end.
    let (mut f, file_len) = crate::fs::open_regular(&real, u64::MAX)
        .map_err(|e| err(format!("cannot open `{}`: {e}", real.display())))?;
    let length = length.unwrap_or_else(|| file_len.saturating_sub(offset));
    if length != nbytes as u64 {
        return Err(err(format!(
            "declared length {length} bytes, the tensor's dims need {nbytes}"
        )));
    }
    let end = offset
        .checked_add(length)
        .ok_or_else(|| err(format!("offset {offset} + length {length} overflows")))?;
    if end > file_len {
        return Err(err(format!(
            "`{location}` has {file_len} bytes, shorter than offset {offset} + length {length}"
        )));
    }
    if nbytes == 0 {
        return Ok(Bytes::new());
    }
    // SAFETY: a read-only private mapping of a regular file inside the model's
    // directory. If another process truncates or rewrites the file while gopt runs, the
    // mapped bytes change or reading them faults: the same contract as onnxruntime's
    // and safetensors' mapped weights.
    let mapped = unsafe {
        memmap2::MmapOptions::new()
            .offset(offset)
            .len(nbytes)
            .map(&f)
    };
    if let Ok(m) = mapped {
        return Ok(Bytes::from_owner(m));
    }
    let mut buf = vec![0u8; nbytes];
    f.seek(SeekFrom::Start(offset))
        .and_then(|_| f.read_exact(&mut buf))
        .map_err(|e| err(format!("reading `{location}`: {e}")))?;
    Ok(Bytes::from(buf))
}

/// Largest dense tensor a sparse one may expand to (its size is not backed by file
/// data, so an absurd shape must fail cleanly instead of exhausting memory).
const MAX_DENSE_BYTES: usize = 1 << 32;

/// Densifies a COO sparse tensor.
pub fn sparse_to_dense(s: &proto::SparseTensorProto, base_dir: Option<&Path>) -> Result<Tensor> {
    let values = s
        .values
        .as_ref()
        .ok_or_else(|| ImportError::invalid("", "sparse tensor without values"))?;
    let name = values.name.as_deref().unwrap_or("");
    let vals = tensor_from_proto(values, base_dir)?;
    let (shape, n) = checked_dims(name, &s.dims)?;
    let nnz = vals.len();
    let idx: Vec<i64> = match &s.indices {
        Some(i) => tensor_from_proto(i, base_dir)?.to_i64_vec(),
        None if nnz == 0 => Vec::new(),
        None => {
            return Err(ImportError::invalid(
                "",
                format!("sparse tensor `{name}` without indices"),
            ))
        }
    };
    let bytes = n.saturating_mul(vals.dtype().size());
    if bytes > MAX_DENSE_BYTES {
        return Err(ImportError::invalid(
            "",
            format!(
                "sparse tensor `{name}` with dims {:?} densifies to {bytes} bytes, over gopt's limit of {MAX_DENSE_BYTES}",
                s.dims
            ),
        ));
    }
    let rank = shape.len();
    let linear: Vec<usize> = if idx.len() == nnz {
        idx.iter()
            .map(|&i| usize::try_from(i).unwrap_or(usize::MAX))
            .collect()
    } else if rank > 0 && idx.len() == nnz * rank {
        idx.chunks_exact(rank)
            .map(|c| {
                c.iter()
                    .zip(&shape)
                    .try_fold(0usize, |acc, (&i, &d)| {
                        let i = usize::try_from(i).ok().filter(|&i| i < d)?;
                        Some(acc * d + i)
                    })
                    .unwrap_or(usize::MAX)
            })
            .collect()
    } else {
        return Err(ImportError::invalid(
            "",
            format!(
                "sparse tensor `{name}`: {} indices for {nnz} values of rank {rank}",
                idx.len()
            ),
        ));
    };
    if linear.iter().any(|&i| i >= n) {
        return Err(ImportError::invalid(
            "",
            format!(
                "sparse tensor `{name}`: an index is out of range for dims {:?}",
                s.dims
            ),
        ));
    }
    fn scatter<T: gopt_ir::Elem>(
        v: &ArrayD<T>,
        lin: &[usize],
        n: usize,
        shape: &[usize],
    ) -> Tensor {
        let mut out = vec![T::default(); n];
        for (&i, &x) in lin.iter().zip(v.iter()) {
            out[i] = x;
        }
        T::wrap(ArrayD::from_shape_vec(IxDyn(shape), out).expect("dims checked"))
    }
    Ok(gopt_ir::with_tensor!(&vals, a => scatter(a, &linear, n, &shape)))
}

/// Converts a tensor to a `TensorProto` with little-endian `raw_data`.
pub fn tensor_to_proto(name: &str, t: &Tensor) -> proto::TensorProto {
    let mut raw = Vec::with_capacity(t.byte_size());
    macro_rules! put {
        ($a:expr, $f:expr) => {
            for x in $a.iter() {
                raw.extend_from_slice(&$f(*x).to_le_bytes());
            }
        };
    }
    match t {
        Tensor::F32(a) => put!(a, |x: f32| x),
        Tensor::F64(a) => put!(a, |x: f64| x),
        Tensor::F16(a) => put!(a, |x: f16| x.to_bits()),
        Tensor::BF16(a) => put!(a, |x: bf16| x.to_bits()),
        Tensor::I8(a) => put!(a, |x: i8| x),
        Tensor::I16(a) => put!(a, |x: i16| x),
        Tensor::I32(a) => put!(a, |x: i32| x),
        Tensor::I64(a) => put!(a, |x: i64| x),
        Tensor::U8(a) => put!(a, |x: u8| x),
        Tensor::U16(a) => put!(a, |x: u16| x),
        Tensor::U32(a) => put!(a, |x: u32| x),
        Tensor::U64(a) => put!(a, |x: u64| x),
        Tensor::Bool(a) => put!(a, |x: bool| x as u8),
    }
    proto::TensorProto {
        dims: t.shape().iter().map(|&d| d as i64).collect(),
        data_type: Some(dtype_to_onnx(t.dtype())),
        name: Some(name.to_string()),
        raw_data: Some(raw.into()),
        ..Default::default()
    }
}

/// Reads a serialized `TensorProto` file (`input_0.pb`); returns its name and data.
pub fn read_tensor_file(path: &Path) -> Result<(String, Tensor)> {
    let bytes =
        crate::fs::read_regular(path, crate::fs::MAX_TENSOR_FILE_BYTES).map_err(|source| {
            ImportError::Io {
                path: path.to_path_buf(),
                source,
            }
        })?;
    let t = proto::TensorProto::decode(bytes.as_slice()).map_err(|e| ImportError::Decode {
        what: path.display().to_string(),
        msg: e.to_string(),
    })?;
    let tensor = tensor_from_proto(&t, path.parent()).map_err(|e| e.in_file(path))?;
    Ok((t.name.unwrap_or_default(), tensor))
}

/// Writes a tensor as a serialized `TensorProto` file.
pub fn write_tensor_file(path: &Path, name: &str, t: &Tensor) -> Result<()> {
    let bytes = tensor_to_proto(name, t).encode_to_vec();
    std::fs::write(path, bytes).map_err(|source| ImportError::Io {
        path: path.to_path_buf(),
        source,
    })
}
