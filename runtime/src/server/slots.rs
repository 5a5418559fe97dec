//! Connection slots: at most so many open client connections in all (at the cap new ones wait in
//! the listen backlog) and so many from one address (past that a new one is closed at once), so
//! one client never holds every slot.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The slots of one or more listeners.
pub struct Slots {
    all: Arc<Semaphore>,
    per_peer: u32,
    open: Mutex<HashMap<IpAddr, u32>>,
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

    /// Takes `permit` for a connection from `peer`, unless that address has all its slots.
    pub fn take(self: &Arc<Self>, peer: IpAddr, permit: OwnedSemaphorePermit) -> Option<Slot> {
        let mut open = self.open.lock().unwrap();
        let n = open.entry(peer).or_default();
        if *n >= self.per_peer {
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
    }
}
