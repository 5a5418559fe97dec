//! Push notifications: the webhook guard and the delivery worker that empties the store's
//! outbox (every task write queues one notification per config, in the write's transaction).

pub mod deliver;
pub mod webhooks;

pub use deliver::Worker;
pub use webhooks::{Unreachable, Webhooks};
