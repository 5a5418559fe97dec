//! `a2a:edge/admission`: the caller's rate and the instance's concurrency slots.

use std::sync::Arc;

use wasmtime::component::Resource;

use super::bindings::admission::{Host, HostSlot};
use super::services::{Invocation, Services, View};
use crate::admission::{Admission, Source, TaskSlot};
use crate::records::Limits;
use crate::telemetry::Metrics;

/// The admission capability of one request: its instance's limits and its caller.
pub struct AdmissionCtx {
    /// Buckets and slots of every instance.
    admission: Arc<Admission>,
    /// Counts refusals.
    metrics: Arc<Metrics>,
    /// The instance.
    instance_id: String,
    /// Its limits (with a named client's own rate).
    limits: Limits,
    /// The caller's rate bucket: its principal's, or its address's.
    source: Source,
}

impl AdmissionCtx {
    /// The capability of `call`: its instance's limits, its caller's bucket.
    pub fn prepare(s: &Services, call: &Invocation) -> AdmissionCtx {
        AdmissionCtx {
            admission: s.admission.clone(),
            metrics: s.metrics.clone(),
            instance_id: call.instance.record.id.clone(),
            limits: Limits {
                rate_per_second: call
                    .caller
                    .as_ref()
                    .and_then(|c| c.key.as_ref()?.rate_per_second)
                    .unwrap_or(call.instance.record.limits.rate_per_second),
                ..call.instance.record.limits
            },
            source: match &call.caller {
                Some(c) if c.individual() => Source::Principal(c.principal.clone()),
                _ => Source::Address(call.peer.ip()),
            },
        }
    }
}

impl Host for View<'_, AdmissionCtx> {
    fn check_rate(&mut self) -> wasmtime::Result<Result<(), u64>> {
        let c = &self.ctx;
        let result = c
            .admission
            .check_rate(&c.instance_id, c.source.clone(), &c.limits);
        if result.is_err() {
            c.metrics.rejection("rate");
        }
        Ok(result)
    }

    fn acquire_slot(&mut self) -> wasmtime::Result<Result<Resource<TaskSlot>, u32>> {
        let c = &self.ctx;
        let principal = match &c.source {
            Source::Principal(p) => Some(p.as_str()),
            Source::Address(_) => None,
        };
        match c.admission.acquire(
            &c.instance_id,
            c.limits.max_concurrent_tasks,
            principal,
            c.limits.max_concurrent_tasks_per_principal,
        ) {
            Ok(slot) => Ok(Ok(self.table.push(slot)?)),
            Err(max) => {
                c.metrics.rejection("quota");
                Ok(Err(max))
            }
        }
    }
}

impl HostSlot for View<'_, AdmissionCtx> {
    fn drop(&mut self, this: Resource<TaskSlot>) -> wasmtime::Result<()> {
        self.table.delete(this)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use wasmtime::component::ResourceTable;

    use super::*;

    fn ctx(limits: Limits) -> AdmissionCtx {
        AdmissionCtx {
            admission: Arc::default(),
            metrics: Arc::default(),
            instance_id: "i".into(),
            limits,
            source: Source::Address("10.0.0.1".parse().unwrap()),
        }
    }

    #[test]
    fn slots_are_held_until_the_guest_drops_them() {
        let mut c = ctx(Limits {
            max_concurrent_tasks: 1,
            ..Limits::default()
        });
        let mut table = ResourceTable::new();
        let mut view = View {
            ctx: &mut c,
            table: &mut table,
        };
        let slot = view
            .acquire_slot()
            .unwrap()
            .expect("the first slot is free");
        assert_eq!(
            view.acquire_slot().unwrap().err(),
            Some(1),
            "the instance's one slot is held"
        );
        HostSlot::drop(&mut view, slot).unwrap();
        assert!(
            view.acquire_slot().unwrap().is_ok(),
            "dropping the resource frees the slot"
        );
        assert_eq!(c.metrics.rejections()["quota"], 1);
    }

    #[test]
    fn the_rate_is_the_callers() {
        let mut c = ctx(Limits {
            rate_per_second: 1.0,
            rate_burst: 1,
            ..Limits::default()
        });
        let mut table = ResourceTable::new();
        let mut view = View {
            ctx: &mut c,
            table: &mut table,
        };
        assert_eq!(view.check_rate().unwrap(), Ok(()));
        assert!(
            view.check_rate().unwrap().is_err(),
            "the burst of one is spent"
        );
        view.ctx.source = Source::Address("10.0.0.2".parse().unwrap());
        assert_eq!(
            view.check_rate().unwrap(),
            Ok(()),
            "another caller has its own bucket"
        );
    }
}
