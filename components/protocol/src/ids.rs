//! Identifiers.

/// A version-7 UUID in its text form: the Unix time in milliseconds, then 74 random bits from
/// `random` (the caller supplies the randomness: the guests draw it from `wasi:random`). Ids made
/// later sort later, so a store indexes new tasks at the end of its B-trees instead of at random
/// pages, and 74 random bits keep them unguessable.
pub fn uuid_v7(unix_ms: u64, random: [u8; 10]) -> String {
    uuid::Builder::from_unix_timestamp_millis(unix_ms, &random)
        .into_uuid()
        .hyphenated()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::uuid_v7;

    #[test]
    fn version_variant_time_and_randomness() {
        let u = uuid_v7(0x0123_4567_89ab, [0xff; 10]);
        assert_eq!(u, "01234567-89ab-7fff-bfff-ffffffffffff");
        assert_eq!(uuid_v7(0, [0; 10]), "00000000-0000-7000-8000-000000000000");
    }

    #[test]
    fn later_ids_sort_later_and_randomness_tells_apart() {
        let (a, b) = (uuid_v7(1_000, [9; 10]), uuid_v7(1_001, [0; 10]));
        assert!(a < b, "{a} < {b}");
        assert_ne!(uuid_v7(1_000, [1; 10]), uuid_v7(1_000, [2; 10]));
    }
}
