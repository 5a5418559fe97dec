//! Message bounds and the idempotency decision never panic on any message and task.
#![no_main]

use a2a_protocol::{Message, Task, idempotency};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok((m, t)) = serde_json::from_slice::<(Message, Task)>(data) else {
        return;
    };
    let _ = m.check_bounds(1000);
    let fp = idempotency::fingerprint(&m);
    let retry = idempotency::is_retry(&m, &fp, &fp, &t);
    // Never a retry of a message with other parts or another taskId.
    assert!(!idempotency::is_retry(&m, &fp, "another fingerprint", &t));
    // A retry names the task's own context (or none) and the task's last user message.
    if retry {
        assert!(m.context_id.as_deref().is_none_or(|c| c == t.context_id));
        assert_eq!(
            t.history
                .iter()
                .rev()
                .find(|x| x.role == a2a_protocol::Role::User)
                .map(|x| x.message_id.as_str()),
            Some(m.message_id.as_str())
        );
    }
});
