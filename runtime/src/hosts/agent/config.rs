//! `wasi:config/store`: the preset's non-secret settings (`config = { … }`), read only.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::bindings::wasi::config::store::{Error, Host};

/// The config capability of one turn.
pub struct ConfigCtx(Arc<BTreeMap<String, String>>);

impl ConfigCtx {
    /// The preset's settings.
    pub fn prepare(values: Arc<BTreeMap<String, String>>) -> Self {
        ConfigCtx(values)
    }
}

impl Host for ConfigCtx {
    async fn get(&mut self, key: String) -> wasmtime::Result<Result<Option<String>, Error>> {
        Ok(Ok(self.0.get(&key).cloned()))
    }

    async fn get_all(&mut self) -> wasmtime::Result<Result<Vec<(String, String)>, Error>> {
        Ok(Ok(self
            .0
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()))
    }
}
