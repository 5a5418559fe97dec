//! `wasi:keyvalue/store`: buckets kept durably in the runtime's store, each instance's apart
//! (on PostgreSQL shared by every node), within bounded key and value sizes and the preset's
//! quota. Without the `keyValue` grant every bucket is refused.

use std::sync::Arc;

use wasmtime::component::{HasData, Resource, ResourceTable};

use super::bindings::wasi::keyvalue::store::{Error, Host, HostBucket, KeyResponse};
use super::bucket::Bucket;
use crate::store::{KeyValues, KvKey, StoreError};

/// Longest bucket name, bytes.
pub const MAX_BUCKET_BYTES: usize = 128;
/// Longest key, bytes.
pub const MAX_KEY_BYTES: usize = 1 << 10;
/// Largest value, bytes.
pub const MAX_VALUE_BYTES: usize = 1 << 20;
/// Keys in one page of `list-keys`.
const PAGE: u32 = 100;

/// The key-value capability of one turn.
pub struct KeyValueCtx {
    /// The store, when the preset grants `keyValue`.
    store: Option<Arc<dyn KeyValues>>,
    scope: String,
    quota: u64,
}

impl KeyValueCtx {
    /// Buckets of `instance_id` in `store` within `quota` bytes; none without the grant.
    pub fn prepare(store: Option<Arc<dyn KeyValues>>, instance_id: &str, quota: u64) -> Self {
        KeyValueCtx {
            store,
            scope: instance_id.to_owned(),
            quota,
        }
    }
}

/// The key-value capability with the store's resource table.
pub struct KeyValueView<'a> {
    pub(super) ctx: &'a mut KeyValueCtx,
    pub(super) table: &'a mut ResourceTable,
}

/// The [`HasData`] of a [`KeyValueView`].
pub struct WithBuckets;

impl HasData for WithBuckets {
    type Data<'a> = KeyValueView<'a>;
}

/// A store failure as the agent reads it: a refusal says what to change; the database's own
/// words stay in the runtime's log.
fn refused(e: StoreError) -> Error {
    match e {
        StoreError::Invalid(why) => Error::Other(why),
        other => {
            tracing::warn!(error = %other, "an agent's key-value call failed");
            Error::Other("the key-value store is unavailable; try again".into())
        }
    }
}

/// Where a value lives, and the store that keeps it.
type Target = (KvKey, Arc<dyn KeyValues>);

impl KeyValueView<'_> {
    /// Where `key` of `bucket` lives, and the store to ask; a refusal when the key is too long
    /// or nothing is granted.
    fn target(
        &self,
        bucket: &Resource<Bucket>,
        key: String,
    ) -> wasmtime::Result<Result<Target, Error>> {
        let name = self.table.get(bucket)?.name.clone();
        let Some(store) = self.ctx.store.clone() else {
            return Ok(Err(Error::AccessDenied));
        };
        if key.len() > MAX_KEY_BYTES {
            return Ok(Err(Error::Other(format!(
                "a key has at most {MAX_KEY_BYTES} bytes"
            ))));
        }
        let at = KvKey {
            scope: self.ctx.scope.clone(),
            bucket: name,
            key,
        };
        Ok(Ok((at, store)))
    }
}

impl Host for KeyValueView<'_> {
    async fn open(
        &mut self,
        identifier: String,
    ) -> wasmtime::Result<Result<Resource<Bucket>, Error>> {
        if self.ctx.store.is_none() {
            return Ok(Err(Error::AccessDenied));
        }
        if identifier.len() > MAX_BUCKET_BYTES {
            return Ok(Err(Error::Other(format!(
                "a bucket name has at most {MAX_BUCKET_BYTES} bytes"
            ))));
        }
        Ok(Ok(self.table.push(Bucket { name: identifier })?))
    }
}

impl HostBucket for KeyValueView<'_> {
    async fn get(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
    ) -> wasmtime::Result<Result<Option<Vec<u8>>, Error>> {
        let (at, store) = match self.target(&bucket, key)? {
            Ok(t) => t,
            Err(e) => return Ok(Err(e)),
        };
        Ok(store.kv_get(at).await.map_err(refused))
    }

    async fn set(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
        value: Vec<u8>,
    ) -> wasmtime::Result<Result<(), Error>> {
        if value.len() > MAX_VALUE_BYTES {
            return Ok(Err(Error::Other(format!(
                "a value has at most {MAX_VALUE_BYTES} bytes"
            ))));
        }
        let (at, store) = match self.target(&bucket, key)? {
            Ok(t) => t,
            Err(e) => return Ok(Err(e)),
        };
        Ok(store
            .kv_set(at, value, self.ctx.quota)
            .await
            .map_err(refused))
    }

    async fn delete(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
    ) -> wasmtime::Result<Result<(), Error>> {
        let (at, store) = match self.target(&bucket, key)? {
            Ok(t) => t,
            Err(e) => return Ok(Err(e)),
        };
        Ok(store.kv_delete(at).await.map_err(refused))
    }

    async fn exists(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
    ) -> wasmtime::Result<Result<bool, Error>> {
        Ok(self.get(bucket, key).await?.map(|v| v.is_some()))
    }

    async fn list_keys(
        &mut self,
        bucket: Resource<Bucket>,
        cursor: Option<u64>,
    ) -> wasmtime::Result<Result<KeyResponse, Error>> {
        let (at, store) = match self.target(&bucket, String::new())? {
            Ok(t) => t,
            Err(e) => return Ok(Err(e)),
        };
        let offset = cursor.unwrap_or(0);
        if offset > i64::MAX as u64 - u64::from(PAGE) {
            return Ok(Err(Error::Other(format!(
                "cursor {offset} is not one list-keys gave"
            ))));
        }
        let keys = match store.kv_keys(at.scope, at.bucket, offset, PAGE).await {
            Ok(k) => k,
            Err(e) => return Ok(Err(refused(e))),
        };
        let cursor = (keys.len() == PAGE as usize).then(|| offset + PAGE as u64);
        Ok(Ok(KeyResponse { keys, cursor }))
    }

    async fn drop(&mut self, bucket: Resource<Bucket>) -> wasmtime::Result<()> {
        self.table.delete(bucket)?;
        Ok(())
    }
}
