//! The control action parser: any body is parsed or refused in words; a parsed action written
//! back as JSON (as the CLI sends it) parses to the same action.
#![no_main]

use control_api::{Action, parse};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(serde_json::Value::Object(body)) = serde_json::from_slice(data) else {
        return;
    };
    match parse(&body) {
        Ok(action) => {
            assert!(Action::NAMES.contains(&action.name()));
            let written = action.to_body();
            assert_eq!(parse(&written).as_ref(), Ok(&action), "{written:?}");
        }
        Err(m) => assert!(!m.is_empty() && m.len() < 4096, "{m}"),
    }
});
