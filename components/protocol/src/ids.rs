//! Identifiers.

/// A version-4 UUID in its text form, from 16 random bytes (the caller supplies the randomness:
/// the guests draw it from `wasi:random`, the runtime from the OS).
pub fn uuid_v4(random: [u8; 16]) -> String {
    uuid::Builder::from_random_bytes(random)
        .into_uuid()
        .hyphenated()
        .to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn version_and_variant_bits() {
        let u = super::uuid_v4([0xff; 16]);
        assert_eq!(u, "ffffffff-ffff-4fff-bfff-ffffffffffff");
        assert_eq!(
            super::uuid_v4([0; 16]),
            "00000000-0000-4000-8000-000000000000"
        );
    }
}
