//! The epoch ticker: advances an engine's epoch every [`EPOCH_TICK`] while one of its guests
//! runs, and sleeps without waking while none does, so an idle server makes no wake-ups.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::thread::Thread;

use super::EPOCH_TICK;

/// The ticker of one engine; clones share it. Its thread ends when the engine and every clone
/// are gone.
#[derive(Clone)]
pub struct Ticker(Arc<Shared>);

struct Shared {
    /// Guests running now ([`Running`] guards alive).
    running: AtomicUsize,
    thread: OnceLock<Thread>,
    /// Epochs advanced.
    #[cfg(test)]
    ticks: AtomicUsize,
}

impl Shared {
    fn wake(&self) {
        if let Some(thread) = self.thread.get() {
            thread.unpark();
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // The thread holds only a weak reference while it sleeps: woken, it finds it gone.
        self.wake();
    }
}

impl Ticker {
    /// Starts the ticker thread of `engine`, sleeping until a guest runs.
    pub fn start(engine: &wasmtime::Engine) -> Ticker {
        let shared = Arc::new(Shared {
            running: AtomicUsize::new(0),
            thread: OnceLock::new(),
            #[cfg(test)]
            ticks: AtomicUsize::new(0),
        });
        let (weak, engine) = (Arc::downgrade(&shared), engine.weak());
        let thread = std::thread::Builder::new()
            .name("a2a-edge-epoch".into())
            .spawn(move || tick(&weak, &engine))
            .expect("spawning the epoch thread");
        shared
            .thread
            .set(thread.thread().clone())
            .expect("the ticker's thread is set once");
        Ticker(shared)
    }

    /// Marks a guest running until the guard is dropped: the epoch advances meanwhile.
    pub fn running(&self) -> Running {
        if self.0.running.fetch_add(1, Ordering::AcqRel) == 0 {
            self.0.wake();
        }
        Running(self.0.clone())
    }

    /// Guests running now.
    #[cfg(test)]
    fn guests(&self) -> usize {
        self.0.running.load(Ordering::Acquire)
    }
}

/// A guest running (see [`Ticker::running`]).
pub struct Running(Arc<Shared>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The ticker thread: while a guest runs, a tick then an epoch; while none does, parked.
fn tick(shared: &Weak<Shared>, engine: &wasmtime::EngineWeak) {
    loop {
        let Some(live) = shared.upgrade() else { return };
        let idle = live.running.load(Ordering::Acquire) == 0;
        drop(live);
        if idle {
            // `running` unparks after its increment, so a guest that starts between the load
            // and here leaves the token that makes this return at once.
            std::thread::park();
            continue;
        }
        std::thread::sleep(EPOCH_TICK);
        let Some(engine) = engine.upgrade() else {
            return;
        };
        engine.increment_epoch();
        #[cfg(test)]
        if let Some(live) = shared.upgrade() {
            live.ticks.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The epochs `ticker` advanced over `wait`.
    fn ticks_over(ticker: &Ticker, wait: std::time::Duration) -> usize {
        let before = ticker.0.ticks.load(Ordering::Relaxed);
        std::thread::sleep(wait);
        ticker.0.ticks.load(Ordering::Relaxed) - before
    }

    #[test]
    fn the_epoch_advances_only_while_a_guest_runs() {
        let engine = wasmtime::Engine::default();
        let ticker = Ticker::start(&engine);
        let wait = EPOCH_TICK * 10;
        assert_eq!(ticks_over(&ticker, wait), 0, "no guest runs: no tick");
        let first = ticker.running();
        let second = ticker.running();
        assert_eq!(ticker.guests(), 2);
        assert!(ticks_over(&ticker, wait) >= 3, "guests run: it ticks");
        drop(first);
        assert!(ticks_over(&ticker, wait) >= 3, "one still runs");
        drop(second);
        assert_eq!(ticker.guests(), 0);
        std::thread::sleep(EPOCH_TICK * 2);
        assert_eq!(ticks_over(&ticker, wait), 0, "none runs: it sleeps again");
    }

    #[test]
    fn the_thread_ends_with_its_last_handle() {
        let engine = wasmtime::Engine::default();
        let ticker = Ticker::start(&engine);
        let weak = Arc::downgrade(&ticker.0);
        let running = ticker.running();
        drop(ticker);
        assert!(weak.upgrade().is_some(), "a running guest keeps it");
        drop(running);
        assert!(weak.upgrade().is_none(), "gone, and its thread with it");
    }
}
