//! A value computed by one caller at a time and reused while fresh: for answers that cost the
//! server work (a store round trip) and that anyone may ask for often, such as `/readyz`.

use std::future::Future;
use std::time::{Duration, Instant};

/// The latest value and when it was computed.
pub struct Memo<T> {
    kept: tokio::sync::Mutex<Option<(Instant, T)>>,
    fresh: Duration,
}

impl<T: Clone> Memo<T> {
    /// A memo whose values are reused for `fresh`.
    pub fn new(fresh: Duration) -> Memo<T> {
        Memo {
            kept: tokio::sync::Mutex::default(),
            fresh,
        }
    }

    /// The kept value while fresh, else `compute`'s (other callers wait for it meanwhile); when
    /// computed now, also the value it replaced.
    pub async fn get<F: Future<Output = T>>(&self, compute: impl FnOnce() -> F) -> (T, Option<T>) {
        let mut kept = self.kept.lock().await;
        if let Some((at, value)) = kept.as_ref()
            && at.elapsed() < self.fresh
        {
            return (value.clone(), None);
        }
        let value = compute().await;
        let before = kept
            .replace((Instant::now(), value.clone()))
            .map(|(_, v)| v);
        (value, before)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_fresh_value_is_reused_and_a_stale_one_recomputed() {
        let memo = Memo::new(Duration::from_millis(50));
        assert_eq!(memo.get(|| async { 1 }).await, (1, None));
        assert_eq!(memo.get(|| async { 2 }).await, (1, None), "still fresh");
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert_eq!(memo.get(|| async { 3 }).await, (3, Some(1)));
    }
}
