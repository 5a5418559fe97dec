//! Secret resolution. Secrets are looked up by name when an instance is assembled and never
//! leave the host: not in records, snapshots, cards, logs, errors or guest memory.

/// The value of the secret `name`: the process environment variable of that name.
pub fn resolve(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Constant-time comparison of a presented bearer token with the expected one.
pub fn bearer_matches(authorization: Option<&str>, expected: &str) -> bool {
    use subtle::ConstantTimeEq;
    let presented = authorization.and_then(|h| h.strip_prefix("Bearer ").or_else(|| h.strip_prefix("bearer "))).unwrap_or("");
    bool::from(presented.as_bytes().ct_eq(expected.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer() {
        assert!(bearer_matches(Some("Bearer s3cret"), "s3cret"));
        assert!(!bearer_matches(Some("Bearer s3cre"), "s3cret"));
        assert!(!bearer_matches(Some("s3cret"), "s3cret"));
        assert!(!bearer_matches(None, "s3cret"));
    }
}
