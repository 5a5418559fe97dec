//! Connection slots: at most so many open client connections in all (at the cap new ones wait in
//! the listen backlog) and so many from one client (past that a new one is closed at once, and
//! the log says so at most once a minute), so one client never holds every slot. A client is an
//! address, or an IPv6 /64 (what one host is given).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The slots of one or more listeners.
pub struct Slots {
    all: Arc<Semaphore>,
    per_peer: u32,
    open: Mutex<HashMap<IpAddr, u32>>,
    /// When a closed connection was last logged, ms.
    warned_at: AtomicU64,
}

/// The least time between two log lines about closed connections, ms.
const WARN_EVERY_MS: u64 = 60_000;

/// The client an address is: itself, or its IPv6 /64.
fn client(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        v4 => v4,
    }
}

/// One connection's slot, given back when dropped.
pub struct Slot {
    slots: Arc<Slots>,
    peer: IpAddr,
    _permit: OwnedSemaphorePermit,
}

impl Slots {
    /// `all` connections at once, at most `per_peer` of them from one address.
    pub fn new(all: u32, per_peer: u32) -> Arc<Slots> {
        Arc::new(Slots {
            all: Arc::new(Semaphore::new(all.max(1) as usize)),
            per_peer: per_peer.max(1),
            open: Mutex::default(),
            warned_at: AtomicU64::new(0),
        })
    }

    /// Waits for a free slot of all (before accepting the next connection).
    pub async fn free(&self) -> OwnedSemaphorePermit {
        self.all
            .clone()
            .acquire_owned()
            .await
            .expect("the connection semaphore is never closed")
    }

    /// Takes `permit` for a connection from `peer`, unless its client has all its slots.
    pub fn take(self: &Arc<Self>, peer: IpAddr, permit: OwnedSemaphorePermit) -> Option<Slot> {
        let peer = client(peer);
        let mut open = self.open.lock().unwrap();
        let n = open.entry(peer).or_default();
        if *n >= self.per_peer {
            let now = crate::clock::now_ms();
            let last = self.warned_at.load(Ordering::Relaxed);
            if now.saturating_sub(last) >= WARN_EVERY_MS
                && self
                    .warned_at
                    .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                tracing::warn!(%peer, open = *n, "closed a new connection: its client holds runtime.maxConnectionsPerPeer connections (behind a proxy, raise it); said at most once a minute");
            }
            return None;
        }
        *n += 1;
        Some(Slot {
            slots: self.clone(),
            peer,
            _permit: permit,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.slots.open.lock().unwrap();
        if let Some(n) = open.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.peer);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_address_holds_at_most_its_share_and_gets_it_back() {
        let slots = Slots::new(10, 2);
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let first = slots.take(a, slots.free().await).unwrap();
        let _second = slots.take(a, slots.free().await).unwrap();
        assert!(slots.take(a, slots.free().await).is_none(), "a's third");
        let _other = slots.take(b, slots.free().await).unwrap();
        drop(first);
        let again = slots.take(a, slots.free().await);
        assert!(again.is_some(), "a's slot back");
        assert_eq!(
            slots.all.available_permits(),
            10 - 3,
            "held: a's two and b's one; the refused one's permit is free"
        );
        // One IPv6 host's addresses are one client.
        let host = |n: u16| -> IpAddr { Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0, 0, 0, n).into() };
        let _one = slots.take(host(1), slots.free().await).unwrap();
        let _two = slots.take(host(2), slots.free().await).unwrap();
        assert!(slots.take(host(3), slots.free().await).is_none());
    }
}
