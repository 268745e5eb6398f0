//! Reading the files a user names (models, external data, tensor files, artifacts):
//! only regular files, and only up to a size gopt can hold. `/dev/zero`, a FIFO or a
//! directory would otherwise be read forever, block, or fail with an obscure message.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// Largest ONNX model file: protobuf messages are limited to 2 GiB (larger models keep
/// their weights as external data).
pub const MAX_MODEL_BYTES: u64 = (1 << 31) - 1;

/// Largest serialized `TensorProto` file (a protobuf message, like a model).
pub const MAX_TENSOR_FILE_BYTES: u64 = (1 << 31) - 1;

/// Opens `path` for reading if it is a regular file of at most `max` bytes; returns the
/// file and its length. Anything else is an error that says what the path is.
pub fn open_regular(path: &Path, max: u64) -> io::Result<(File, u64)> {
    // Checked before opening: opening a FIFO blocks until a writer comes.
    let meta = std::fs::metadata(path)?;
    check_regular(&meta, max)?;
    let f = File::open(path)?;
    // The path may have been swapped between the two calls: check what was opened.
    let meta = f.metadata()?;
    check_regular(&meta, max)?;
    Ok((f, meta.len()))
}

/// Maps a whole regular file of at most `max` bytes (see [`open_regular`]) read-only,
/// as shared bytes that slices of it (a model's weights) keep alive. A file that
/// cannot be mapped (an empty one, a filesystem without mmap) is read instead.
pub fn map_regular(path: &Path, max: u64) -> io::Result<bytes::Bytes> {
    let (f, len) = open_regular(path, max)?;
    if len > 0 {
        // SAFETY: a read-only private mapping of a regular file. If another process
        // truncates or rewrites it while gopt runs, the mapped bytes change or reading
        // them faults: the contract every mmap-based model loader has.
        if let Ok(m) = unsafe { memmap2::Mmap::map(&f) } {
            return Ok(bytes::Bytes::from_owner(m));
        }
    }
    drop(f);
    read_regular(path, max).map(bytes::Bytes::from)
}

/// Reads a whole regular file of at most `max` bytes (see [`open_regular`]).
pub fn read_regular(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let (f, len) = open_regular(path, max)?;
    let mut buf = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    // A file that grows while it is read still stops at the limit.
    f.take(max.saturating_add(1)).read_to_end(&mut buf)?;
    if buf.len() as u64 > max {
        return Err(too_large(buf.len() as u64, max));
    }
    Ok(buf)
}

fn check_regular(meta: &std::fs::Metadata, max: u64) -> io::Result<()> {
    let ft = meta.file_type();
    if !ft.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "not a regular file ({}); gopt reads only regular files",
                kind(&ft)
            ),
        ));
    }
    if meta.len() > max {
        return Err(too_large(meta.len(), max));
    }
    Ok(())
}

fn too_large(len: u64, max: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{len} bytes, over the limit of {max} bytes for this kind of file"),
    )
}

/// What a non-regular file is, in words.
fn kind(ft: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_char_device() {
            return "a character device";
        }
        if ft.is_block_device() {
            return "a block device";
        }
        if ft.is_fifo() {
            return "a FIFO";
        }
        if ft.is_socket() {
            return "a socket";
        }
    }
    if ft.is_dir() {
        "a directory"
    } else {
        "a special file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_devices_directories_and_large_files() {
        let e = read_regular(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        let e = read_regular(Path::new("/"), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("directory"), "{e}");
        let dir = std::env::temp_dir().join(format!("gopt-fs-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("f.bin");
        std::fs::write(&p, [7u8; 10]).unwrap();
        assert_eq!(read_regular(&p, 10).unwrap(), vec![7u8; 10]);
        let e = read_regular(&p, 9).unwrap_err();
        assert!(e.to_string().contains("over the limit"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
