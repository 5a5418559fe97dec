//! The process groups of running `command` turns, so none outlives the runtime: each group is
//! recorded in memory and as a file `<data-dir>/run/<pgid>` while it runs; shutdown kills every
//! live group; a start after a crash kills the groups its predecessor recorded (after checking,
//! through `/proc`, that a process of that group still carries the turn's marker, so a reused
//! process id is never touched). The group leader also gets a parent-death signal.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The environment variable marking a turn's processes: `<instance>/<task>`.
pub const TURN_MARKER: &str = "A2A_EDGE_TURN";

/// Live process groups of command turns.
#[derive(Debug, Default)]
pub struct Groups {
    dir: Option<PathBuf>,
    live: Mutex<HashMap<i32, String>>,
}

impl Groups {
    /// Groups recorded under `dir` (none: in memory only).
    pub fn new(dir: Option<PathBuf>) -> Groups {
        Groups {
            dir,
            live: Mutex::default(),
        }
    }

    /// Records a started group of the turn `marker`.
    pub fn started(&self, pgid: i32, marker: &str) {
        self.live.lock().unwrap().insert(pgid, marker.to_owned());
        if let Some(dir) = &self.dir {
            let written = std::fs::create_dir_all(dir)
                .and_then(|_| std::fs::write(dir.join(pgid.to_string()), marker));
            if let Err(e) = written {
                tracing::warn!(pgid, error = %e, "could not record a command's process group; a crash would leave it running");
            }
        }
    }

    /// Kills a group and forgets it.
    pub fn kill(&self, pgid: i32) {
        // SAFETY: signalling a process group this runtime created; a gone group only gives ESRCH.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        self.live.lock().unwrap().remove(&pgid);
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_file(dir.join(pgid.to_string()));
        }
    }

    /// Kills every live group (at shutdown); returns how many.
    pub fn kill_all(&self) -> usize {
        let all: Vec<i32> = self.live.lock().unwrap().keys().copied().collect();
        for pgid in &all {
            self.kill(*pgid);
        }
        all.len()
    }
}

/// Kills what a previous process recorded under `dir` and left running; returns how many
/// processes were killed.
pub fn reap(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut killed = 0;
    for entry in entries.flatten() {
        let (Some(pgid), Ok(marker)) = (
            entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok()),
            std::fs::read_to_string(entry.path()),
        ) else {
            continue;
        };
        for pid in members(pgid, &marker) {
            // SAFETY: the process is in the recorded group and carries the turn's marker.
            if unsafe { libc::kill(pid, libc::SIGKILL) } == 0 {
                killed += 1;
            }
        }
        let _ = std::fs::remove_file(entry.path());
    }
    killed
}

/// The processes of group `pgid` whose environment holds `A2A_EDGE_TURN=<marker>`.
fn members(pgid: i32, marker: &str) -> Vec<i32> {
    let want = format!("{TURN_MARKER}={marker}");
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .flatten()
        .filter_map(|p| p.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // Field 5 (pgrp) follows the parenthesised command name, which may hold spaces.
            let group = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(2)?.parse::<i32>().ok());
            group == Some(pgid)
                && std::fs::read(format!("/proc/{pid}/environ"))
                    .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == want.as_bytes()))
        })
        .collect()
}

/// Makes the calling process (a forked child, before exec) die with its parent.
pub fn die_with_parent() -> std::io::Result<()> {
    // SAFETY: prctl with PR_SET_PDEATHSIG only sets a flag of the calling process.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reap_kills_only_marked_members_of_recorded_groups() {
        let dir = tempfile::tempdir().unwrap();
        let spawn = |marker: &str| {
            use std::os::unix::process::CommandExt;
            std::process::Command::new("sleep")
                .arg("30")
                .env(TURN_MARKER, marker)
                .process_group(0)
                .spawn()
                .unwrap()
        };
        // Until a child's exec has set up its new stack, /proc shows no marker in its
        // environment (its name changes earlier): wait for the marker itself, as a real turn's
        // processes carry it long before a later start reaps them.
        let marked_up = |child: &std::process::Child, marker: &str| {
            let want = format!("{TURN_MARKER}={marker}");
            let environ = format!("/proc/{}/environ", child.id());
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while !std::fs::read(&environ)
                .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == want.as_bytes()))
            {
                assert!(
                    std::time::Instant::now() < deadline,
                    "{marker} never started"
                );
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        };
        let mut marked = spawn("i/t1");
        let mut other = spawn("i/t2");
        marked_up(&marked, "i/t1");
        marked_up(&other, "i/t2");
        std::fs::write(dir.path().join(marked.id().to_string()), "i/t1").unwrap();
        // A record whose group now holds a process of another turn (a reused id) kills nothing.
        std::fs::write(dir.path().join(other.id().to_string()), "i/t9").unwrap();
        assert_eq!(reap(dir.path()), 1);
        assert!(
            marked.wait().unwrap().code().is_none(),
            "killed by a signal"
        );
        assert!(
            other.try_wait().unwrap().is_none(),
            "the unmarked one still runs"
        );
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "records are consumed"
        );
        other.kill().unwrap();
        other.wait().unwrap();
    }
}
