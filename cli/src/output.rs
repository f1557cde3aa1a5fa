//! An output file a command writes (`trace -o`, `plot -o`): created, and on
//! a failure removed only when the command made it. A path that was there
//! before (a file the user keeps, `/dev/full`, a FIFO) is never removed.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// An output file, and whether this command made it.
pub struct Output {
    pub file: File,
    path: PathBuf,
    /// (device, inode) of the regular file this command created; None when
    /// the path was there before.
    made: Option<(u64, u64)>,
}

impl Output {
    /// Creates `path`, or opens it emptied when it exists (as
    /// `File::create`), knowing which.
    pub fn create(path: &Path) -> std::io::Result<Output> {
        let (file, new) = match File::options().write(true).create_new(true).open(path) {
            Ok(f) => (f, true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => (File::create(path)?, false),
            Err(e) => return Err(e),
        };
        let meta = file.metadata()?;
        let made = (new && meta.file_type().is_file()).then(|| (meta.dev(), meta.ino()));
        Ok(Output { file, path: path.to_path_buf(), made })
    }

    /// After a failure: removes the file when this command made it and the
    /// path still names it.
    pub fn discard(self) {
        let Output { file, path, made } = self;
        drop(file);
        if let (Some(id), Ok(m)) = (made, std::fs::symlink_metadata(&path)) {
            if (m.dev(), m.ino()) == id {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
}
