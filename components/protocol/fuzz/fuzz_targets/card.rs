//! The outbound client's card reading: endpoint choice, preview, skills, URL split.
#![no_main]

use a2a_protocol::client;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(card) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    if let Ok(ep) = client::endpoint(&card) {
        let _ = client::split_url(&ep.url);
    }
    let _ = client::preview(&card);
    let _ = client::skill_ids(&card);
    if let Some(s) = card.as_str() {
        let _ = client::split_url(s);
    }
});
