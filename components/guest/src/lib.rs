//! The guests' side of the `a2a:edge` contract (`wit/edge.wit`): the bindings of each world, and
//! the conversions between its records and the protocol crate's types, written once here for
//! every component.
//!
//! A component enables the feature of its world and exports itself with that world's macro:
//! `a2a_guest::server::export_server!(Component)` or `a2a_guest::client::export_client!(Component)`.

#[cfg(feature = "client")]
pub mod client;
pub mod scrub;
#[cfg(feature = "server")]
pub mod server;

/// Milliseconds since the Unix epoch (`wasi:clocks/wall-clock`).
pub fn now_ms() -> u64 {
    let t = wasip2::clocks::wall_clock::now();
    t.seconds * 1000 + u64::from(t.nanoseconds / 1_000_000)
}

/// A time-ordered (v7) UUID: the wall clock, and randomness from `wasi:random`.
pub fn uuid() -> String {
    uuid_at(now_ms())
}

/// A time-ordered (v7) UUID of a moment the caller read from the clock already.
pub fn uuid_at(now_ms: u64) -> String {
    let [id] = uuids_at(now_ms);
    id
}

/// `N` time-ordered (v7) UUIDs of one moment, from one draw of `wasi:random`.
pub fn uuids_at<const N: usize>(now_ms: u64) -> [String; N] {
    let bytes = wasip2::random::random::get_random_bytes(10 * N as u64);
    std::array::from_fn(|i| {
        let mine = bytes.get(10 * i..10 * i + 10).unwrap_or_default();
        a2a_protocol::ids::uuid_v7(now_ms, mine.try_into().unwrap_or([0; 10]))
    })
}
