//! Identifiers.

/// A version-4 UUID in its text form, from 16 random bytes (the caller supplies the randomness).
pub fn uuid_v4(random: &[u8]) -> String {
    let mut b = [0u8; 16];
    for (d, s) in b.iter_mut().zip(random) {
        *d = *s;
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

#[cfg(test)]
mod tests {
    #[test]
    fn version_and_variant_bits() {
        let u = super::uuid_v4(&[0xff; 16]);
        assert_eq!(u, "ffffffff-ffff-4fff-bfff-ffffffffffff");
        assert_eq!(super::uuid_v4(&[0; 16]), "00000000-0000-4000-8000-000000000000");
    }
}
