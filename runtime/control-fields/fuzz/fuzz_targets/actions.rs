//! The control action parser: any body is parsed or refused in words, and no field reading
//! panics; a parsed action is one of the table's.
#![no_main]

use control_fields::{ACTIONS, Fields, parse};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(serde_json::Value::Object(body)) = serde_json::from_slice(data) else { return };
    match parse(&body) {
        Ok(name) => assert!(ACTIONS.iter().any(|(n, _)| *n == name)),
        Err(m) => assert!(!m.is_empty() && m.len() < 4096, "{m}"),
    }
    let f = Fields(&body);
    for k in body.keys() {
        let _ = (f.opt_str(k), f.str(k), f.opt_bool(k), f.opt_u64(k, 0..=100), f.opt_object(k), f.opt_nonempty(k));
    }
    let _ = f.auth_change(16);
});
