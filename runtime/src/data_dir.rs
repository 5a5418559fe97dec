//! The data directory a server owns: created when missing, refused at start when it is
//! read-only, and locked for the life of the process (an advisory `flock` on
//! `a2a-edge.lock`), so a second server on it fails at once instead of settling the first
//! one's tasks and killing its command processes.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::Path;

use anyhow::Context;

/// The lock file's name in the data directory.
pub const LOCK_FILE: &str = "a2a-edge.lock";

/// The data directory's lock: held while this value lives.
#[derive(Debug)]
pub struct Lock {
    _file: File,
}

/// Creates `dir` when missing, checks that it (and the database in it, when there is one) can
/// be written, and takes its lock; says which process holds it when another one does.
pub fn lock(dir: &Path, database: Option<&Path>) -> anyhow::Result<Lock> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create data directory {}", dir.display()))?;
    let read_only = |e: &std::io::Error| {
        matches!(
            e.raw_os_error(),
            Some(libc::EROFS | libc::EACCES | libc::EPERM)
        )
    };
    let path = dir.join(LOCK_FILE);
    let mut file = match OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if read_only(&e) => anyhow::bail!(
            "the data directory {} is read-only ({e}): the server writes its database and lock there; give it a writable --data-dir",
            dir.display()
        ),
        Err(e) => {
            return Err(e).with_context(|| format!("cannot open the lock file {}", path.display()));
        }
    };
    // SAFETY: flock only acts on the descriptor it is given, which `file` keeps open.
    if unsafe {
        libc::flock(
            std::os::fd::AsRawFd::as_raw_fd(&file),
            libc::LOCK_EX | libc::LOCK_NB,
        )
    } != 0
    {
        let mut holder = String::new();
        let _ = file.read_to_string(&mut holder);
        let holder = holder.trim();
        let who = if holder.is_empty() {
            "another a2a-edge process".to_owned()
        } else {
            format!("another a2a-edge process (PID {holder})")
        };
        anyhow::bail!(
            "the data directory {} is in use by {who}: stop that server first, or give this one another --data-dir",
            dir.display()
        );
    }
    file.set_len(0)?;
    file.rewind()?;
    write!(file, "{}", std::process::id())?;
    let files = database.map(|db| [db.to_owned(), db.with_extension("db-wal")]);
    for db in files.iter().flatten().filter(|f| f.exists()) {
        if let Err(e) = OpenOptions::new().write(true).open(db) {
            anyhow::bail!(
                "the database {} cannot be written ({e}): the data directory must be writable; give the server a writable --data-dir",
                db.display()
            );
        }
    }
    Ok(Lock { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_names_the_holder_and_a_dropped_lock_is_free() {
        let dir = tempfile::tempdir().unwrap();
        let first = lock(dir.path(), None).unwrap();
        let second = lock(dir.path(), None).unwrap_err().to_string();
        assert!(
            second.contains(&format!("PID {}", std::process::id()))
                && second.contains(&dir.path().display().to_string()),
            "{second}"
        );
        drop(first);
        lock(dir.path(), None).expect("free again once the holder is gone");
    }
}
