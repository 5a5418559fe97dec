//! ProtoJSON types: what parses serialises, and parses again to the same value.
#![no_main]

use a2a_protocol::{Message, StreamResponse, Task};
use libfuzzer_sys::fuzz_target;

fn round_trip<T: serde::de::DeserializeOwned + serde::Serialize + PartialEq + std::fmt::Debug>(
    data: &[u8],
) {
    if let Ok(v) = serde_json::from_slice::<T>(data) {
        let text = serde_json::to_string(&v).expect("a parsed value serialises");
        let again: T = serde_json::from_str(&text).expect("what was written parses");
        assert_eq!(v, again);
    }
}

fuzz_target!(|data: &[u8]| {
    round_trip::<Task>(data);
    round_trip::<Message>(data);
    round_trip::<StreamResponse>(data);
});
