//! The `A2A-Version` service parameter (docs/protocol.md "What is served").

/// The protocol version this service speaks (major.minor).
pub const SUPPORTED: &str = "1.0";

/// Whether a requested version is served: absent or empty means 1.0; only major.minor compare.
pub fn is_supported(requested: Option<&str>) -> bool {
    let Some(v) = requested.map(str::trim).filter(|v| !v.is_empty()) else {
        return true;
    };
    let mut it = v.split('.');
    matches!((it.next(), it.next()), (Some("1"), Some("0")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_and_1_0_x_are_supported() {
        for v in [None, Some(""), Some("1.0"), Some("1.0.1"), Some(" 1.0 ")] {
            assert!(is_supported(v), "{v:?}");
        }
    }

    #[test]
    fn other_versions_are_not() {
        for v in ["0.3", "0.3.0", "1.1", "2.0", "1", "latest", "1.00x"] {
            assert!(!is_supported(Some(v)), "{v}");
        }
    }
}
