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
    ids_of(
        now_ms,
        &wasip2::random::random::get_random_bytes(10 * N as u64),
    )
}

/// `N` time-ordered (v7) UUIDs of `now_ms`, ten of `bytes` each.
fn ids_of<const N: usize>(now_ms: u64, bytes: &[u8]) -> [String; N] {
    std::array::from_fn(|i| {
        let mine = bytes.get(10 * i..10 * i + 10).unwrap_or_default();
        a2a_protocol::ids::uuid_v7(now_ms, mine.try_into().unwrap_or([0; 10]))
    })
}

/// What the host told of a request's arrival (`exchange.begin`): when it came, and random bytes
/// for the ids it makes, so the first few ids and times cost no crossing.
#[derive(Clone, Debug, Default)]
pub struct Arrival {
    /// The wall clock, ms since the Unix epoch.
    pub ms: u64,
    /// The request's monotonic clock, ns.
    pub ns: u64,
    random: Vec<u8>,
}

impl Arrival {
    /// The arrival at `ms` and `ns`, with `random` bytes to make ids of.
    pub fn new(ms: u64, ns: u64, random: Vec<u8>) -> Arrival {
        Arrival { ms, ns, random }
    }

    /// [`uuids_at`], from the arrival's random bytes while they last.
    pub fn uuids_at<const N: usize>(&mut self, now_ms: u64) -> [String; N] {
        if self.random.len() < 10 * N {
            return uuids_at(now_ms);
        }
        let ids = ids_of(now_ms, &self.random[..10 * N]);
        self.random.drain(..10 * N);
        ids
    }

    /// [`uuid_at`], from the arrival's random bytes while they last.
    pub fn uuid_at(&mut self, now_ms: u64) -> String {
        let [id] = self.uuids_at(now_ms);
        id
    }
}
