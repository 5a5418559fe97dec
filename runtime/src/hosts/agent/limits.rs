//! What one turn's store may take: memory (a [`Limiter`] that also keeps the high-water mark)
//! and computing time (a [`Meter`] counted in epoch ticks while the guest runs).

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

/// The computing time of one turn, in epoch ticks: the engine's epoch advances every
/// [`crate::engine::EPOCH_TICK`], and each advance that finds the guest running counts one.
pub struct Meter {
    /// Ticks counted so far.
    pub ticks: u64,
    max_ticks: u64,
    cpu_ms: u64,
}

impl Meter {
    /// At most `cpu_ms` of computing.
    pub fn new(cpu_ms: u64) -> Self {
        Meter {
            ticks: 0,
            max_ticks: (cpu_ms / crate::engine::EPOCH_TICK.as_millis() as u64).max(1),
            cpu_ms,
        }
    }

    /// One more tick; an error past the limit (it traps the guest).
    pub fn tick(&mut self) -> wasmtime::Result<()> {
        self.ticks += 1;
        if self.ticks > self.max_ticks {
            wasmtime::bail!(
                "CPU limit: the agent computed for more than {} ms in this turn (the preset's limits.cpuMs)",
                self.cpu_ms
            );
        }
        Ok(())
    }

    /// Computing time counted, ms.
    pub fn cpu_ms(&self) -> u64 {
        self.ticks * crate::engine::EPOCH_TICK.as_millis() as u64
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

    #[test]
    fn cpu_is_counted_in_ticks_up_to_the_limit() {
        let mut m = Meter::new(30);
        for _ in 0..3 {
            m.tick().unwrap();
        }
        let e = m.tick().unwrap_err().to_string();
        assert!(e.contains("more than 30 ms"), "{e}");
        assert_eq!(m.cpu_ms(), 40);
    }
}
