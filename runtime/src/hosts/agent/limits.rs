//! What one turn's store may take: memory (a [`Limiter`] that also keeps the high-water mark)
//! and computing time (a [`Meter`] of the guest thread's CPU clock).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use wasmtime::ResourceLimiter;

/// Most table elements of one instance.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

/// The memory limit of one turn: every linear memory of the instance together.
pub struct Limiter {
    max_bytes: usize,
    total: usize,
    /// The most the instance held at once, bytes.
    pub peak: usize,
}

impl Limiter {
    /// At most `max_bytes` of linear memory.
    pub fn new(max_bytes: usize) -> Self {
        Limiter {
            max_bytes,
            total: 0,
            peak: 0,
        }
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self.total.saturating_sub(current).saturating_add(desired);
        if total > self.max_bytes {
            wasmtime::bail!(
                "memory limit: the agent asked for more than {} MiB (the preset's limits.memoryMib)",
                self.max_bytes >> 20
            );
        }
        self.total = total;
        self.peak = self.peak.max(total);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

/// The computing time of one turn: the time the guest's thread spends on its CPU while the
/// turn is polled (from each entry into the guest to where it waits), read from the thread's own
/// CPU clock, so a turn that waits on a clock, a body or a store is never billed for it. Shared
/// by the turn's polls ([`Meter::enter`], [`Meter::leave`]) and the epoch callback that checks
/// it every [`crate::engine::EPOCH_TICK`] while the guest runs ([`Meter::check`]).
#[derive(Clone)]
pub struct Meter(Arc<Spent>);

struct Spent {
    /// CPU time of the polls that ended, ns.
    ended: AtomicU64,
    /// The thread's CPU clock when the running poll began, ns; 0 between polls.
    entered: AtomicU64,
    cpu_ms: u64,
}

/// The calling thread's CPU time, ns (at least 1, so 0 can mean "between polls").
fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write; CLOCK_THREAD_CPUTIME_ID exists on every Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    (t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64).max(1)
}

impl Meter {
    /// At most `cpu_ms` of computing.
    pub fn new(cpu_ms: u64) -> Self {
        Meter(Arc::new(Spent {
            ended: AtomicU64::new(0),
            entered: AtomicU64::new(0),
            cpu_ms,
        }))
    }

    /// A poll of the turn begins on this thread.
    pub fn enter(&self) {
        self.0.entered.store(thread_cpu_ns(), Relaxed);
    }

    /// The poll that began on this thread ends.
    pub fn leave(&self) {
        let entered = self.0.entered.swap(0, Relaxed);
        if entered > 0 {
            let spent = thread_cpu_ns().saturating_sub(entered);
            self.0.ended.fetch_add(spent, Relaxed);
        }
    }

    /// Computing time so far, ns: the ended polls and the running one (read on its thread).
    fn spent_ns(&self) -> u64 {
        let entered = self.0.entered.load(Relaxed);
        let running = if entered > 0 {
            thread_cpu_ns().saturating_sub(entered)
        } else {
            0
        };
        self.0.ended.load(Relaxed) + running
    }

    /// An error once the turn computed past its limit (it traps the guest); called on the
    /// guest's thread.
    pub fn check(&self) -> wasmtime::Result<()> {
        if self.spent_ns() > self.0.cpu_ms.saturating_mul(1_000_000) {
            wasmtime::bail!(
                "CPU limit: the agent computed for more than {} ms in this turn (the preset's limits.cpuMs)",
                self.0.cpu_ms
            );
        }
        Ok(())
    }

    /// Computing time of the ended polls.
    pub fn cpu(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.0.ended.load(Relaxed))
    }

    /// `future` with each of its polls metered.
    pub fn polls<F: Future>(&self, future: F) -> impl Future<Output = F::Output> {
        let meter = self.clone();
        let mut future = Box::pin(future);
        std::future::poll_fn(move |cx| {
            meter.enter();
            let polled = future.as_mut().poll(cx);
            meter.leave();
            polled
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_counts_every_memory_and_keeps_the_peak() {
        let mut l = Limiter::new(100);
        assert!(l.memory_growing(0, 60, None).unwrap());
        assert!(l.memory_growing(0, 30, None).unwrap());
        assert!(l.memory_growing(30, 40, None).unwrap(), "100 in all");
        let e = l.memory_growing(40, 41, None).unwrap_err().to_string();
        assert!(e.starts_with("memory limit"), "{e}");
        assert_eq!((l.total, l.peak), (100, 100));
    }

    /// Computes on this thread until its CPU clock advanced by `ms`.
    fn compute(ms: u64) {
        let began = thread_cpu_ns();
        while thread_cpu_ns() - began < ms * 1_000_000 {
            std::hint::black_box(0u64);
        }
    }

    #[test]
    fn cpu_is_the_threads_computing_inside_polls_not_the_waits_between() {
        let ms = std::time::Duration::from_millis;
        let m = Meter::new(30);
        m.enter();
        compute(20);
        m.check().unwrap();
        m.leave();
        std::thread::sleep(ms(100));
        m.check().expect("the wait is not billed");
        assert!(m.cpu() >= ms(20) && m.cpu() < ms(100), "{:?}", m.cpu());
        m.enter();
        compute(15);
        let e = m.check().unwrap_err().to_string();
        assert!(e.contains("more than 30 ms"), "{e}");
    }
}
