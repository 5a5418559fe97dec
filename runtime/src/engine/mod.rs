//! The wasmtime engine every component runs on: the pooling allocator sized by the runtime
//! settings, epoch interruption with per-store CPU-burst metering and memory limits, the compile
//! cache, and the registry of named components. Knows nothing of what the components do.

mod cache;
pub mod registry;
mod ticker;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use wasmtime::{
    CallHook, Config, InstanceAllocationStrategy, PoolingAllocationConfig, ResourceLimiter, Store,
    StoreLimits, StoreLimitsBuilder, UpdateDeadline,
};

pub use cache::Cache;
pub use registry::Registry;
pub use ticker::{Running, Ticker};

use crate::config::RuntimeSettings;

/// Epoch tick; the CPU limit is counted in these.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// The engine, its compile cache and the limits every store gets.
pub struct Engine {
    /// The wasmtime engine.
    pub wasm: wasmtime::Engine,
    /// Compiled components on disk.
    pub cache: Arc<Cache>,
    /// Where compiled components are kept.
    pub cache_dir: std::path::PathBuf,
    cpu_burst_ticks: u32,
    memory_bytes: usize,
    /// Component instances alive at once: `[runtime] maxInstances`, or fewer where the
    /// process's address space holds fewer.
    pub max_instances: u32,
    ticker: Ticker,
}

/// A pool of `n` component instances whose memories grow to `memory_bytes`, `core_instances`
/// core instances each on average; what the server's and the agents' pools share.
fn slots(n: u32, memory_bytes: usize, core_instances: u32) -> PoolingAllocationConfig {
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(n)
        .total_core_instances(n * core_instances)
        .total_memories(n * 2)
        .total_tables(n * 4)
        .total_stacks(n)
        .max_memory_size(memory_bytes)
        .max_memories_per_component(4)
        .max_tables_per_component(8)
        // Reset a slot's first pages with memset rather than madvise: a request touches about
        // this much, and decommitting it costs a TLB shootdown across cores every time.
        .linear_memory_keep_resident(512 << 10)
        .table_keep_resident(16 << 10)
        .async_stack_keep_resident(64 << 10)
        // What an instance grew past that goes back to the system when it ends: batched, the
        // memories of 63 large requests could stay resident (measured: 38 MiB each after 7 MiB
        // answers). An instance within the pages kept resident decommits nothing.
        .decommit_batch_size(1);
    pool
}

/// The engine configuration of a pool of `max` instances whose memories grow to `memory_bytes`;
/// `sized`: each memory reserves that much address space alone instead of 4 GiB.
///
/// Both engines run components without the component model's concurrency (wasmtime 48.0.10 then
/// compiles none of the `resource.drop` trampoline that lets a guest crash a host with call hooks,
/// GHSA-ww46-ggg6-p7m4, nor the async streams of GHSA-f3r3-8j58-f227: a component that needs them
/// is refused at load) and without fuel (GHSA-pv4f-cfmc-gph7): their CPU limits are epochs.
fn pooled(max: u32, memory_bytes: usize, sized: bool) -> Config {
    let mut pool = slots(max, memory_bytes, 4);
    pool.max_core_instances_per_component(16);
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        .concurrency_support(false)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    if sized {
        config
            .memory_reservation(memory_bytes as u64)
            .memory_reservation_for_growth(0)
            .memory_guard_size(64 << 10);
    }
    config
}

impl Engine {
    /// The engine (pooling allocator sized by `settings`) with its epoch ticker, and the compile
    /// cache (`settings.cache_dir`, default `<data-dir>/cache`).
    pub fn new(settings: &RuntimeSettings, data_dir: &Path) -> anyhow::Result<Engine> {
        Engine::configured(settings, data_dir, |_| {})
    }

    /// An engine whose stores let a test read every memory of the instances in them
    /// (`Store::debug_all_instances`).
    #[cfg(test)]
    pub fn debugging(settings: &RuntimeSettings, data_dir: &Path) -> anyhow::Result<Engine> {
        Engine::configured(settings, data_dir, |config| {
            config.guest_debug(true);
        })
    }

    fn configured(
        settings: &RuntimeSettings,
        data_dir: &Path,
        tune: impl Fn(&mut Config),
    ) -> anyhow::Result<Engine> {
        let memory_bytes =
            usize::try_from(settings.memory_mib.max(1) << 20).context("memoryMib is too large")?;
        let wanted = settings.max_instances.max(1);
        // The fast pool first: each memory reserves wasmtime's 4 GiB, so loads and stores need
        // no bounds checks. Where that much address space cannot be had (`ulimit -v`, valgrind),
        // memories reserve `memoryMib` alone (bounds-checked), and then fewer instances.
        let fewest = wanted.min(16);
        let mut tries = std::iter::once((wanted, false)).chain(
            (0..)
                .map(|halved| (wanted >> halved, true))
                .take_while(|(n, _)| *n >= fewest),
        );
        let mut last_error: Option<wasmtime::Error> = None;
        let (wasm, max, sized) = loop {
            let Some((max, sized)) = tries.next() else {
                let cause: anyhow::Error = last_error.expect("a pool was tried").into();
                return Err(cause.context(format!(
                    "cannot reserve the address space of even {fewest} component instances of {} MiB: raise the process's address-space limit (ulimit -v) or lower [runtime] memoryMib",
                    settings.memory_mib
                )));
            };
            let mut config = pooled(max, memory_bytes, sized);
            tune(&mut config);
            match wasmtime::Engine::new(&config) {
                Ok(wasm) => break (wasm, max, sized),
                Err(e) => {
                    tracing::debug!(instances = max, sized, error = %e, "the wasmtime pool could not be reserved");
                    last_error = Some(e);
                }
            }
        };
        if sized {
            tracing::warn!(
                instances = max,
                wanted,
                "this process cannot reserve 4 GiB of address space per component memory (ulimit -v, valgrind): memories reserve [runtime] memoryMib each (bounds-checked, somewhat slower){}",
                if max < wanted {
                    ", and fewer instances fit: raise the address-space limit to serve [runtime] maxInstances"
                } else {
                    ""
                }
            );
        }
        let ticker = Ticker::start(&wasm);
        let cache_dir = settings
            .cache_dir
            .clone()
            .unwrap_or_else(|| data_dir.join("cache"));
        let cache = Arc::new(Cache::new(wasm.clone(), cache_dir.clone())?);
        let cpu_burst_ticks = u32::try_from(settings.cpu_burst_ms / EPOCH_TICK.as_millis() as u64)
            .unwrap_or(u32::MAX)
            .max(1);
        Ok(Engine {
            wasm,
            cache,
            cache_dir,
            cpu_burst_ticks,
            memory_bytes,
            max_instances: max,
            ticker,
        })
    }

    /// The memory limits of one store.
    pub fn limits(&self) -> Limits {
        Limits {
            limit: StoreLimitsBuilder::new()
                .memory_size(self.memory_bytes)
                .build(),
            grown_to: 0,
        }
    }

    /// A store for `data`, metered: memory limited, and trapping when the guest computes for
    /// more than the CPU burst without returning to the host.
    pub fn store<T: Metered>(&self, data: T) -> Store<T> {
        let mut store = Store::new(&self.wasm, data);
        let max_ticks = self.cpu_burst_ticks;
        store.limiter(|s| s.limits());
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |mut ctx| {
            let b = ctx.data_mut().burst();
            b.ticks += 1;
            b.in_epoch_callback = true;
            if b.ticks > max_ticks {
                wasmtime::bail!(
                    "CPU limit: the component computed for more than {} ms without waiting",
                    max_ticks as u128 * EPOCH_TICK.as_millis()
                );
            }
            Ok(UpdateDeadline::Yield(1))
        });
        let ticker = self.ticker.clone();
        store.call_hook(move |mut ctx, hook| {
            let b = ctx.data_mut().burst();
            match hook {
                CallHook::CallingWasm => {
                    b.depth += 1;
                    if b.depth == 1 {
                        b.running = Some(ticker.running());
                    }
                }
                CallHook::ReturningFromWasm => {
                    b.depth = b.depth.saturating_sub(1);
                    if b.depth == 0 {
                        b.running = None;
                    }
                }
                CallHook::CallingHost => b.host_calls += 1,
                // The epoch callback itself is a host call: its return must not reset the count.
                CallHook::ReturningFromHost if !std::mem::take(&mut b.in_epoch_callback) => {
                    b.ticks = 0
                }
                _ => {}
            }
            Ok(())
        });
        store
    }
}

/// CPU-burst accounting of a store (see [`Engine::store`]).
#[derive(Default)]
pub struct Burst {
    /// Epoch ticks since the guest last returned from a host function.
    ticks: u32,
    in_epoch_callback: bool,
    host_calls: u64,
    /// Calls into the guest under way (a host call may call back in).
    depth: u32,
    /// Held while the guest is entered, so the epoch advances; dropped with the store when a
    /// call is abandoned midway.
    running: Option<Running>,
}

impl Burst {
    /// Host functions the guest called so far.
    pub fn host_calls(&self) -> u64 {
        self.host_calls
    }
}

/// Store data whose memory and CPU bursts are limited.
pub trait Metered: Send + 'static {
    /// Its burst accounting.
    fn burst(&mut self) -> &mut Burst;
    /// Its memory limits.
    fn limits(&mut self) -> &mut Limits;
}

/// The memory limit of a store, and the largest memory its instances grew to.
pub struct Limits {
    limit: StoreLimits,
    grown_to: usize,
}

impl Limits {
    /// The largest size a memory of the store grew to, bytes (0 when none grew).
    pub fn grown_to(&self) -> usize {
        self.grown_to
    }
}

impl ResourceLimiter for Limits {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = self.limit.memory_growing(current, desired, maximum)?;
        if allowed {
            self.grown_to = self.grown_to.max(desired);
        }
        Ok(allowed)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.limit.table_growing(current, desired, maximum)
    }

    fn instances(&self) -> usize {
        self.limit.instances()
    }

    fn tables(&self) -> usize {
        self.limit.tables()
    }

    fn memories(&self) -> usize {
        self.limit.memories()
    }
}

/// A wasmtime result as an anyhow one.
pub fn wt<T>(r: wasmtime::Result<T>) -> anyhow::Result<T> {
    r.map_err(Into::into)
}

/// The cause of a failed invocation in words (`wasm trap: wasm \`unreachable\` instruction
/// executed`, `CPU limit: …`: a trap says so itself), its first line without wasmtime's
/// backtrace.
pub fn trap_cause(e: &wasmtime::Error) -> String {
    let root = e.root_cause().to_string();
    let line = root.lines().next().unwrap_or("");
    line.chars().take(300).collect()
}

/// The engine agent components run on, and its compile cache (`<cache_dir>/agents`): a pool of
/// `slots` instances (the turns that may run at once), each memory reserving `memory_bytes`
/// (the largest preset limit; the store's limiter holds each turn to its own), sized for
/// language runtimes (CPython, StarlingMonkey: many core instances, large tables); epoch
/// interruption for their CPU limit and cancel (its ticker: a turn holds [`Ticker::running`]).
/// With no slot (no agent preset) nothing is reserved: the engine only loads components.
pub fn agent_engine(
    cache_dir: &Path,
    slots: u32,
    memory_bytes: usize,
) -> anyhow::Result<(wasmtime::Engine, Cache, Ticker)> {
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        .concurrency_support(false)
        // Each memory reserves what the presets' largest limit needs, not wasmtime's 4 GiB
        // default: the pool is the presets' size in address space too.
        .memory_reservation(memory_bytes.max(1 << 16) as u64)
        .memory_reservation_for_growth(0);
    if slots > 0 {
        let mut pool = self::slots(slots, memory_bytes, 64);
        pool.max_core_instances_per_component(64)
            .table_elements(1 << 16)
            .max_core_instance_size(4 << 20)
            .max_component_instance_size(4 << 20);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    let wasm = wt(wasmtime::Engine::new(&config))
        .context("cannot create the agents' engine (is enough virtual address space available?)")?;
    let ticker = Ticker::start(&wasm);
    let cache = Cache::new(wasm.clone(), cache_dir.join("agents"))?;
    Ok((wasm, cache, ticker))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_engine_compiles_what_the_open_wasmtime_advisories_need() {
        let dir = tempfile::tempdir().unwrap();
        let server = Engine::new(&RuntimeSettings::default(), dir.path()).unwrap();
        let (agents, _, _) = agent_engine(dir.path(), 2, 16 << 20).unwrap();
        for engine in [&server.wasm, &agents] {
            assert!(
                !engine.get_concurrency_support(),
                "GHSA-ww46-ggg6-p7m4, GHSA-f3r3-8j58-f227"
            );
            assert!(!engine.get_consume_fuel(), "GHSA-pv4f-cfmc-gph7");
        }
    }
}
