//! `a2a:edge/admission`: the caller's rate and the instance's concurrency slots.

use wasmtime::component::Resource;

use super::EdgeView;
use super::bindings::admission::{Host, HostSlot};
use crate::admission::Slot;

impl Host for EdgeView<'_> {
    fn check_rate(&mut self) -> wasmtime::Result<Result<(), u64>> {
        let i = &self.req.instance.record;
        let result = self.req.app.admission.check_rate(&i.id, self.req.peer.ip(), &i.limits);
        if result.is_err() {
            self.req.app.metrics.rejection("rate");
        }
        Ok(result)
    }

    fn acquire_slot(&mut self) -> wasmtime::Result<Result<Resource<Slot>, u32>> {
        let i = &self.req.instance.record;
        match self.req.app.admission.acquire(&i.id, i.limits.max_concurrent_tasks) {
            Ok(slot) => Ok(Ok(self.table.push(slot)?)),
            Err(max) => {
                self.req.app.metrics.rejection("quota");
                Ok(Err(max))
            }
        }
    }
}

impl HostSlot for EdgeView<'_> {
    fn drop(&mut self, this: Resource<Slot>) -> wasmtime::Result<()> {
        self.table.delete(this)?;
        Ok(())
    }
}
