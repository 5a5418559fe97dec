//! The RFC 3339 parser: whatever it accepts formats back to a timestamp it reads the same.
#![no_main]

use a2a_protocol::time::{parse_rfc3339_ms, rfc3339_ms};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(ms) = parse_rfc3339_ms(s) {
        assert_eq!(parse_rfc3339_ms(&rfc3339_ms(ms)), Some(ms), "{s}");
    }
});
