//! A binary of its own: it sets `SQLITE_TMPDIR`, which the whole process reads.
//!
//! The SQLite writer commits its groups without temporary files: the journal of each write's
//! savepoint stays in memory. Before, a group whose savepoint journal passed SQLite's 64 KiB
//! spill threshold created, wrote and unlinked a file in the temporary directory (about one per
//! nine SendMessages under load), and a read-only temporary directory failed those writes.
//!
//! Alone in its test binary: SQLite reads `SQLITE_TMPDIR` once, when the process first uses it.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use serde_json::json;
use tokio::task::JoinSet;

use a2a_edge_tests::Server;
use a2a_edge_tests::jsonrpc::call;

/// Counts the files created in a directory while it is watched (inotify: SQLite unlinks its
/// temporary files as soon as it opens them, so a listing would show none).
struct Creations(i32);

impl Creations {
    fn watch(dir: &Path) -> Creations {
        // SAFETY: plain system calls on a descriptor this value owns, with a NUL-terminated path.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        assert!(
            fd >= 0,
            "inotify_init1: {}",
            std::io::Error::last_os_error()
        );
        let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
        let wd = unsafe { libc::inotify_add_watch(fd, path.as_ptr(), libc::IN_CREATE) };
        assert!(
            wd >= 0,
            "inotify_add_watch: {}",
            std::io::Error::last_os_error()
        );
        Creations(fd)
    }

    /// The creations seen since the last call.
    fn take(&self) -> usize {
        let mut buf = vec![0u8; 64 * 1024];
        let mut seen = 0;
        loop {
            // SAFETY: reads into a buffer this function owns, at most its length.
            let n = unsafe { libc::read(self.0, buf.as_mut_ptr().cast(), buf.len()) };
            let Ok(n) = usize::try_from(n) else {
                return seen; // EAGAIN: nothing more queued
            };
            let mut at = 0;
            while at < n {
                // SAFETY: the kernel wrote whole events; the buffer has no alignment guarantee.
                let event: libc::inotify_event =
                    unsafe { std::ptr::read_unaligned(buf[at..].as_ptr().cast()) };
                seen += 1;
                at += size_of::<libc::inotify_event>() + event.len as usize;
            }
        }
    }
}

impl Drop for Creations {
    fn drop(&mut self) {
        // SAFETY: closes the descriptor this value owns.
        unsafe { libc::close(self.0) };
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_sends_commit_without_temporary_files() {
    let tmp = tempfile::tempdir().unwrap();
    // SAFETY: set before this process first uses SQLite, and nothing else here reads the
    // environment meanwhile.
    unsafe { std::env::set_var("SQLITE_TMPDIR", tmp.path()) };
    let created = Creations::watch(tmp.path());
    std::fs::write(tmp.path().join("probe"), b"").unwrap();
    assert_eq!(created.take(), 1, "the watch sees a file created there");

    let served = Server::default().await;
    // Sixteen callers at a time: the writer commits them in groups, each write in a savepoint.
    let mut callers = JoinSet::new();
    for caller in 0..16 {
        let base = served.base();
        callers.spawn(async move {
            for n in 0..25 {
                let params = json!({"message": {"messageId": format!("m-{caller}-{n}"),
                    "role": "ROLE_USER", "parts": [{"text": "hello ".repeat(200)}]}});
                let answer = call(&base, "demo", "SendMessage", params).await;
                assert_eq!(
                    answer["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
                    "{answer}"
                );
            }
        });
    }
    while let Some(done) = callers.join_next().await {
        done.unwrap();
    }
    assert_eq!(
        created.take(),
        0,
        "400 concurrent SendMessages created files in SQLite's temporary directory"
    );
}
