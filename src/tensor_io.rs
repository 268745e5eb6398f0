//! Tensor files at the edges of the pipeline: run-time inputs and outputs as NumPy `.npy`
//! files or serialized ONNX `TensorProto`s (`.pb`), and the numeric summary `gopt run`
//! prints for each output. Everything inside the pipeline uses `gopt_ir::Tensor`.

use crate::error::{GoptError, Result};
use gopt_ir::tensor::array_from;
use gopt_ir::{with_tensor, DType, Elem, Tensor};
use half::f16;
use npyz::{TypeChar, WriterBuilder};
use serde::Serialize;
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::Path;

/// Largest `.npy` input file read.
pub const MAX_NPY_BYTES: u64 = 1 << 36;

/// A tensor file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorFormat {
    /// NumPy `.npy` (version 1-3 headers, C or Fortran order).
    Npy,
    /// A serialized ONNX `TensorProto`, as in the ONNX backend test layout.
    Pb,
}

impl TensorFormat {
    /// The format a path's extension names, if any.
    pub fn of_path(path: &Path) -> Option<TensorFormat> {
        match path.extension()?.to_str()? {
            "npy" => Some(TensorFormat::Npy),
            "pb" => Some(TensorFormat::Pb),
            _ => None,
        }
    }

    /// The file extension, without the dot.
    pub fn extension(self) -> &'static str {
        match self {
            TensorFormat::Npy => "npy",
            TensorFormat::Pb => "pb",
        }
    }
}

/// Reads a tensor from a `.npy` or `.pb` file; returns the name stored in the file (only
/// `.pb` files store one, and it may be empty) and the tensor.
pub fn read_tensor(path: &Path) -> Result<(Option<String>, Tensor)> {
    match TensorFormat::of_path(path) {
        Some(TensorFormat::Npy) => Ok((None, read_npy(path)?)),
        Some(TensorFormat::Pb) => {
            let (name, t) = gopt_frontends::read_tensor_file(path)?;
            Ok(((!name.is_empty()).then_some(name), t))
        }
        None => Err(GoptError::TensorFile {
            path: path.to_path_buf(),
            msg: "unknown tensor file type: expected a `.npy` or `.pb` extension".into(),
        }),
    }
}

/// Writes `t` to `path` in `format`; `name` is stored in `.pb` files.
pub fn write_tensor(path: &Path, name: &str, t: &Tensor, format: TensorFormat) -> Result<()> {
    match format {
        TensorFormat::Npy => write_npy(path, t),
        TensorFormat::Pb => Ok(gopt_frontends::write_tensor_file(path, name, t)?),
    }
}

/// Reads a NumPy `.npy` file of bool, (u)int8..64 or float16/32/64 elements.
pub fn read_npy(path: &Path) -> Result<Tensor> {
    let bad = |msg: String| GoptError::TensorFile {
        path: path.to_path_buf(),
        msg,
    };
    let (file, file_len) = gopt_frontends::fs::open_regular(path, MAX_NPY_BYTES)
        .map_err(|e| GoptError::io(path, e))?;
    // The whole header (up to 64 KiB) in the buffer, for the check.
    let mut reader = BufReader::with_capacity(1 << 16, file);
    check_npy_header(&mut reader, file_len).map_err(bad)?;
    let npy = npyz::NpyFile::new(reader).map_err(|e| bad(format!("not a valid .npy file: {e}")))?;
    let shape: Vec<usize> = npy
        .shape()
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| bad(format!("dim {d} is too large"))))
        .collect::<Result<_>>()?;
    let fortran = npy.order() == npyz::Order::Fortran;
    let npyz::DType::Plain(ts) = npy.dtype() else {
        return Err(bad(
            "structured (record) arrays are not supported; save a plain array".into(),
        ));
    };
    let dtype = match (ts.type_char(), ts.size_field()) {
        (TypeChar::Bool, 1) => DType::Bool,
        (TypeChar::Int, 1) => DType::I8,
        (TypeChar::Int, 2) => DType::I16,
        (TypeChar::Int, 4) => DType::I32,
        (TypeChar::Int, 8) => DType::I64,
        (TypeChar::Uint, 1) => DType::U8,
        (TypeChar::Uint, 2) => DType::U16,
        (TypeChar::Uint, 4) => DType::U32,
        (TypeChar::Uint, 8) => DType::U64,
        (TypeChar::Float, 2) => DType::F16,
        (TypeChar::Float, 4) => DType::F32,
        (TypeChar::Float, 8) => DType::F64,
        _ => {
            return Err(bad(format!(
                "npy dtype `{ts}` is not supported (use bool, int8..int64, uint8..uint64 or \
                 float16/32/64)"
            )))
        }
    };
    fn load<T: Elem + npyz::Deserialize, R: std::io::Read>(
        npy: npyz::NpyFile<R>,
        shape: &[usize],
        fortran: bool,
    ) -> std::result::Result<Tensor, String> {
        let data: Vec<T> = npy
            .into_vec()
            .map_err(|e| format!("cannot read data: {e}"))?;
        if fortran {
            let rev: Vec<usize> = shape.iter().rev().copied().collect();
            let a = array_from(&rev, data).map_err(|e| e.to_string())?;
            Ok(T::wrap(a.reversed_axes().as_standard_layout().into_owned()))
        } else {
            Ok(T::wrap(array_from(shape, data).map_err(|e| e.to_string())?))
        }
    }
    // The header's shape must fit in the file: a forged shape is refused before reading.
    let data_bytes = shape
        .iter()
        .try_fold(dtype.size() as u64, |n, &d| n.checked_mul(d as u64));
    if data_bytes.is_none_or(|n| n > file_len) {
        return Err(bad(format!(
            "its header declares shape {shape:?} of {dtype}, more data than the file's \
             {file_len} bytes hold"
        )));
    }
    let t = match dtype {
        DType::Bool => load::<bool, _>(npy, &shape, fortran),
        DType::I8 => load::<i8, _>(npy, &shape, fortran),
        DType::I16 => load::<i16, _>(npy, &shape, fortran),
        DType::I32 => load::<i32, _>(npy, &shape, fortran),
        DType::I64 => load::<i64, _>(npy, &shape, fortran),
        DType::U8 => load::<u8, _>(npy, &shape, fortran),
        DType::U16 => load::<u16, _>(npy, &shape, fortran),
        DType::U32 => load::<u32, _>(npy, &shape, fortran),
        DType::U64 => load::<u64, _>(npy, &shape, fortran),
        DType::F16 => load::<f16, _>(npy, &shape, fortran),
        DType::F32 => load::<f32, _>(npy, &shape, fortran),
        DType::F64 => load::<f64, _>(npy, &shape, fortran),
        DType::BF16 => Err("bfloat16 has no .npy dtype".into()),
    };
    t.map_err(bad)
}

/// Deepest bracket nesting of a `.npy` header gopt reads: a plain array's header is a
/// dict holding a shape tuple (2); a structured dtype nests a little deeper (refused with
/// its own message later).
const MAX_NPY_HEADER_DEPTH: usize = 4;

/// Longest `.npy` header gopt reads: the whole header must fit the 64 KiB read buffer
/// the checks look at (NumPy itself refuses headers over 10,000 bytes by default).
const MAX_NPY_HEADER_BYTES: u64 = (1 << 16) - 12;

/// Refuses a `.npy` header whose brackets nest deeper than [`MAX_NPY_HEADER_DEPTH`]
/// before npyz parses it: its backtracking grammar takes exponential time on nested
/// brackets (a 141-byte header of `{{{{{{{{{{{{{` hung it; found by fuzz/npy). Leaves
/// `reader` at the start of the file. Also refuses a header length the file cannot hold
/// or longer than [`MAX_NPY_HEADER_BYTES`]: npyz allocates the declared length before
/// reading it (a version-3 header declaring 2.3 GiB in a 146-byte file; found by
/// fuzz/npy).
fn check_npy_header<R: std::io::BufRead>(
    reader: &mut R,
    file_len: u64,
) -> std::result::Result<(), String> {
    let head = reader.fill_buf().map_err(|e| format!("cannot read: {e}"))?;
    let (start, len) = match head.get(6) {
        Some(1) if head.len() >= 10 => (10, u64::from(u16::from_le_bytes([head[8], head[9]]))),
        Some(2 | 3) if head.len() >= 12 => (
            12,
            u64::from(u32::from_le_bytes([head[8], head[9], head[10], head[11]])),
        ),
        // Not a header npyz reads: it refuses it with its own message.
        _ => return Ok(()),
    };
    if len > MAX_NPY_HEADER_BYTES || start + len > file_len {
        return Err(format!(
            "not a valid .npy file: its header declares {len} bytes (the file has {file_len}, \
             and headers gopt reads are at most {MAX_NPY_HEADER_BYTES})"
        ));
    }
    let text = head.get(start as usize..).unwrap_or_default();
    let line_end = text.iter().position(|&c| c == b'\n').unwrap_or(text.len());
    let text = &text[..line_end];
    check_npy_shape(text)?;
    let mut depth = 0usize;
    for &c in text {
        match c {
            b'{' | b'[' | b'(' => depth += 1,
            b'}' | b']' | b')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth > MAX_NPY_HEADER_DEPTH {
            return Err(format!(
                "not a valid .npy file: its header nests brackets deeper than \
                 {MAX_NPY_HEADER_DEPTH}"
            ));
        }
    }
    Ok(())
}

/// Refuses a header whose `'shape'` dims multiply past `u64` (left to right, as npyz
/// multiplies them, which panics in a checked build and wraps in a release one) or past
/// `isize::MAX` counting only nonzero dims (ndarray's bound, even for an empty tensor).
/// A shape this cannot read is left to npyz, which refuses it with its own message.
fn check_npy_shape(header: &[u8]) -> std::result::Result<(), String> {
    let Some(key) = header
        .windows(7)
        .position(|w| &w[1..6] == b"shape" && w[0] == w[6])
    else {
        return Ok(());
    };
    let rest = &header[key + 7..];
    let Some(open) = rest.iter().position(|&c| c == b'(') else {
        return Ok(());
    };
    let Some(close) = rest[open..].iter().position(|&c| c == b')') else {
        return Ok(());
    };
    let dims = String::from_utf8_lossy(&rest[open + 1..open + close]);
    let too_large = || format!("not a valid .npy file: its shape ({dims}) has too many elements");
    let (mut all, mut nonzero) = (Some(1u64), 1u64);
    for d in dims.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        if !d.bytes().all(|c| c.is_ascii_digit()) {
            return Ok(());
        }
        let d: u64 = d.parse().map_err(|_| too_large())?;
        all = all.and_then(|n| n.checked_mul(d));
        nonzero = nonzero
            .checked_mul(d.max(1))
            .filter(|&m| m <= isize::MAX as u64)
            .ok_or_else(too_large)?;
        if all.is_none() {
            return Err(too_large());
        }
    }
    Ok(())
}

/// Writes a tensor as a C-order `.npy` file. NumPy has no bfloat16, so bf16 tensors are
/// written as float32 (exactly: every bf16 value is an f32 value).
pub fn write_npy(path: &Path, t: &Tensor) -> Result<()> {
    fn write<T: Elem + npyz::AutoSerialize>(
        path: &Path,
        shape: &[u64],
        data: impl Iterator<Item = T>,
    ) -> std::io::Result<()> {
        let file = BufWriter::new(File::create(path)?);
        let mut w = npyz::WriteOptions::new()
            .default_dtype()
            .shape(shape)
            .writer(file)
            .begin_nd()?;
        w.extend(data)?;
        w.finish()
    }
    let shape: Vec<u64> = t.shape().iter().map(|&d| d as u64).collect();
    let r = match t {
        Tensor::F32(a) => write(path, &shape, a.iter().copied()),
        Tensor::F16(a) => write(path, &shape, a.iter().copied()),
        Tensor::BF16(a) => write(path, &shape, a.iter().map(|x| x.to_f32())),
        Tensor::F64(a) => write(path, &shape, a.iter().copied()),
        Tensor::I8(a) => write(path, &shape, a.iter().copied()),
        Tensor::I16(a) => write(path, &shape, a.iter().copied()),
        Tensor::I32(a) => write(path, &shape, a.iter().copied()),
        Tensor::I64(a) => write(path, &shape, a.iter().copied()),
        Tensor::U8(a) => write(path, &shape, a.iter().copied()),
        Tensor::U16(a) => write(path, &shape, a.iter().copied()),
        Tensor::U32(a) => write(path, &shape, a.iter().copied()),
        Tensor::U64(a) => write(path, &shape, a.iter().copied()),
        Tensor::Bool(a) => write(path, &shape, a.iter().copied()),
    };
    r.map_err(|e| GoptError::io(path, e))
}

/// How many leading values a [`Summary`] keeps.
pub const SUMMARY_LEADING: usize = 6;

/// Statistics of a tensor's values, for printing. NaNs are counted apart and left out of
/// min/max/mean/std; all four are `None` when no finite-or-infinite value remains.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// Element type.
    pub dtype: String,
    /// Concrete shape.
    pub shape: Vec<usize>,
    /// Smallest value.
    pub min: Option<f64>,
    /// Largest value.
    pub max: Option<f64>,
    /// Arithmetic mean.
    pub mean: Option<f64>,
    /// Population standard deviation.
    pub std: Option<f64>,
    /// Number of NaNs.
    pub nans: usize,
    /// The first few values in row-major order.
    pub leading: Vec<f64>,
}

impl Summary {
    /// Summarizes `t`.
    pub fn of(t: &Tensor) -> Summary {
        let (mut min, mut max, mut sum, mut n, mut nans) =
            (f64::INFINITY, f64::NEG_INFINITY, 0.0, 0usize, 0);
        let mut leading = Vec::with_capacity(SUMMARY_LEADING);
        with_tensor!(t, a => {
            for x in a.iter() {
                let v = x.to_f64();
                if leading.len() < SUMMARY_LEADING {
                    leading.push(v);
                }
                if v.is_nan() {
                    nans += 1;
                    continue;
                }
                min = min.min(v);
                max = max.max(v);
                sum += v;
                n += 1;
            }
        });
        let (mut mean, mut std) = (None, None);
        if n > 0 {
            let m = sum / n as f64;
            let mut var = 0.0;
            with_tensor!(t, a => {
                for x in a.iter() {
                    let v = x.to_f64();
                    if !v.is_nan() {
                        var += (v - m) * (v - m);
                    }
                }
            });
            mean = Some(m);
            std = Some((var / n as f64).sqrt());
        }
        Summary {
            dtype: t.dtype().to_string(),
            shape: t.shape().to_vec(),
            min: (n > 0).then_some(min),
            max: (n > 0).then_some(max),
            mean,
            std,
            nans,
            leading,
        }
    }
}

/// Longest file stem [`unique_stems`] makes (file systems allow 255 bytes a name).
pub const MAX_STEM: usize = 120;

/// Distinct file names for `stems` (already safe, see [`file_stem`]): each cut to
/// [`MAX_STEM`] bytes, and a stem equal to an earlier one, ignoring case (`a/b` and
/// `a_b` both give `a_b`; `A` and `a` are one file on macOS), gets `_2`, `_3`, ...
pub fn unique_stems(stems: &[String]) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    stems
        .iter()
        .map(|s| {
            let mut cut = s.clone();
            if cut.len() > MAX_STEM {
                let mut end = MAX_STEM;
                while !cut.is_char_boundary(end) {
                    end -= 1;
                }
                cut.truncate(end);
            }
            let mut name = cut.clone();
            let mut k = 1;
            while !seen.insert(name.to_lowercase()) {
                k += 1;
                name = format!("{cut}_{k}");
            }
            name
        })
        .collect()
}

/// A file name for a tensor named `name`: characters that are not safe in file names
/// become `_` (ONNX value names may contain `/`, `:` and the like).
pub fn file_stem(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with('.') {
        format!("_{s}")
    } else {
        s
    }
}
