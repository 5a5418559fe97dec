//! Faults made on purpose: a TCP proxy that cuts or freezes what is behind it, and a small
//! tmpfs to fill or make read-only.

use std::process::Command;

/// What a [`Proxy`] does with its connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Passes bytes both ways.
    Pass,
    /// Closes every connection and refuses new ones (a database that is down).
    Cut,
    /// Keeps the connections and passes no byte (a database that hangs).
    Freeze,
}

/// A TCP proxy in front of `upstream` on a loopback port, to fail what is behind it for one
/// client alone (the test database cluster is shared by every test).
pub struct Proxy {
    /// Where it listens.
    pub port: u16,
    fault: tokio::sync::watch::Sender<Fault>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// A proxy to `upstream` (`host:port`), passing.
    pub async fn start(upstream: String) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (fault, watch) = tokio::sync::watch::channel(Fault::Pass);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if *watch.borrow() == Fault::Cut {
                    continue;
                }
                let (watch, upstream) = (watch.clone(), upstream.clone());
                tokio::spawn(async move {
                    let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    tokio::join!(pump(cr, sw, watch.clone()), pump(sr, cw, watch));
                });
            }
        });
        Proxy { port, fault, task }
    }

    /// The proxy to the database of `url`, and `url` through it.
    pub async fn to_postgres(url: &str) -> (Proxy, String) {
        let (head, db) = url.rsplit_once('/').unwrap();
        let (user, hostport) = head.rsplit_once('@').unwrap();
        let proxy = Proxy::start(hostport.to_owned()).await;
        let through = format!("{user}@127.0.0.1:{}/{db}", proxy.port);
        (proxy, through)
    }

    /// Sets what it does from now on.
    pub fn set(&self, fault: Fault) {
        self.fault.send_replace(fault);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.set(Fault::Cut);
        self.task.abort();
    }
}

/// Copies `from` to `to` while the fault allows: holds bytes while frozen, ends when cut.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut fault: tokio::sync::watch::Receiver<Fault>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 16 << 10];
    // Waits while frozen; false once cut.
    async fn passing(fault: &mut tokio::sync::watch::Receiver<Fault>) -> bool {
        loop {
            match *fault.borrow_and_update() {
                Fault::Pass => return true,
                Fault::Cut => return false,
                Fault::Freeze => {}
            }
            if fault.changed().await.is_err() {
                return false;
            }
        }
    }
    loop {
        if !passing(&mut fault).await {
            return;
        }
        let n = tokio::select! {
            n = from.read(&mut buf) => match n {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            _ = fault.changed() => continue,
        };
        if !passing(&mut fault).await || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// Whether this process may mount file systems (a tmpfs for the disk tests): root, in a
/// sandbox that allows it. Says so when it may not.
pub fn can_mount() -> bool {
    let dir = tempfile::tempdir().unwrap();
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(dir.path())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        let _ = Command::new("umount").arg(dir.path()).status();
    } else {
        eprintln!("skipped: mounting a tmpfs needs root");
    }
    ok
}

/// A tmpfs of `mib` MiB mounted on a fresh directory, unmounted when dropped.
pub struct Tmpfs {
    /// Where it is mounted.
    pub dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts one.
    pub fn mount(mib: u32) -> Tmpfs {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(status.success(), "mount tmpfs");
        Tmpfs { dir }
    }

    /// Remounts it read-only.
    pub fn read_only(&self) {
        let status = Command::new("mount")
            .args(["-o", "remount,ro"])
            .arg(self.dir.path())
            .status()
            .unwrap();
        assert!(status.success(), "remount ro");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}
