//! The `wasi:keyvalue/store.bucket` resource: an open bucket, by name.

/// An open bucket.
pub struct Bucket {
    /// Its name.
    pub name: String,
}
