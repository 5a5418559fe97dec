//! Message ids reserved in memory by the request deciding what they mean (docs/protocol.md "A2A methods"): from the
//! moment a request looks a message id up until its write with that id's claim is durable (or the
//! request ends), another request for the same id waits. A concurrent resend therefore finds the
//! first one's task instead of running a second turn, and a blocking send may keep its task in
//! memory until it settles and write it once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

/// The held ids of every instance: `(instance, message id)`.
type Held = Arc<Mutex<HashMap<(String, String), watch::Receiver<()>>>>;

/// Every message id held now.
#[derive(Clone, Default)]
pub struct Holds(Held);

/// A held message id; dropping it releases the id and wakes whoever waits for it.
pub struct Hold {
    held: Held,
    key: (String, String),
    _release: watch::Sender<()>,
}

impl Holds {
    /// Holds `message_id` of `instance_id`, first waiting for another request's hold on it to end.
    pub async fn hold(&self, instance_id: &str, message_id: &str) -> Hold {
        let key = (instance_id.to_owned(), message_id.to_owned());
        loop {
            let mut other = {
                let mut held = self.0.lock().unwrap();
                match held.get(&key) {
                    Some(rx) => rx.clone(),
                    None => {
                        let (tx, rx) = watch::channel(());
                        held.insert(key.clone(), rx);
                        return Hold {
                            held: self.0.clone(),
                            key,
                            _release: tx,
                        };
                    }
                }
            };
            // The sender never sends: this returns when the other hold is dropped.
            let _ = other.changed().await;
        }
    }

    /// How many ids are held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

impl Hold {
    /// The message id held.
    pub fn message_id(&self) -> &str {
        &self.key.1
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.held.lock().unwrap().remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_second_hold_waits_for_the_first_and_ids_are_per_instance() {
        let holds = Holds::default();
        let first = holds.hold("i", "m").await;
        let other_instance = holds.hold("j", "m").await;
        let other_id = holds.hold("i", "n").await;
        assert_eq!(holds.len(), 3);
        let waiting = tokio::spawn({
            let holds = holds.clone();
            async move { holds.hold("i", "m").await.message_id().to_owned() }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !waiting.is_finished(),
            "the id is held by the first request"
        );
        drop(first);
        assert_eq!(
            tokio::time::timeout(Duration::from_secs(1), waiting)
                .await
                .expect("released ids are taken at once")
                .unwrap(),
            "m"
        );
        drop((other_instance, other_id));
        assert_eq!(holds.len(), 0, "every hold is gone with its guard");
    }
}
