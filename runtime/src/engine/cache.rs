//! The compile cache: compiled components on disk under their content hash and the engine's
//! compatibility hash, so a restart loads native code instead of compiling again.

use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context;
use sha2::{Digest, Sha256};
use wasmtime::component::Component;

use super::wt;

/// Compiled components of one engine.
pub struct Cache {
    engine: wasmtime::Engine,
    dir: PathBuf,
    /// Components compiled (not loaded from the cache) since start.
    pub compilations: AtomicU64,
}

impl Cache {
    /// The cache in `dir` (created when missing).
    pub fn new(engine: wasmtime::Engine, dir: PathBuf) -> anyhow::Result<Cache> {
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create cache directory {}", dir.display()))?;
        Ok(Cache {
            engine,
            dir,
            compilations: AtomicU64::new(0),
        })
    }

    /// The compiled component of `wasm` (hash `sha256`): from the cache, or compiled now and
    /// cached; whether it came from the cache.
    pub fn compile(
        &self,
        name: &str,
        wasm: &[u8],
        sha256: &str,
    ) -> anyhow::Result<(Component, bool)> {
        let cached = self
            .dir
            .join(format!("{sha256}-{}.cwasm", self.engine_hash()));
        // SAFETY: files in the cache directory are written only by `precompile_component` of an
        // engine with this compatibility hash (below), under their content hash.
        if let Some(Ok(c)) = cached
            .exists()
            .then(|| unsafe { Component::deserialize_file(&self.engine, &cached) })
        {
            return Ok((c, true));
        }
        let compiled = self.engine.precompile_component(wasm).map_err(|e| {
            anyhow::anyhow!(
                "component {name:?} is not a valid WebAssembly component: {}",
                invalid_because(wasm, &e)
            )
        })?;
        self.compilations.fetch_add(1, Ordering::Relaxed);
        let tmp = cached.with_extension(format!("tmp{}", std::process::id()));
        if std::fs::write(&tmp, &compiled)
            .and_then(|_| std::fs::rename(&tmp, &cached))
            .is_err()
        {
            tracing::warn!(path = %cached.display(), "could not write the compile cache");
        }
        // SAFETY: the bytes were produced by `precompile_component` of this engine just now.
        Ok((
            wt(unsafe { Component::deserialize(&self.engine, &compiled) })?,
            false,
        ))
    }

    /// Compiles (or loads from the cache) wasm, with its hash.
    pub fn load(&self, name: &str, wasm: &[u8]) -> anyhow::Result<(Component, String, bool)> {
        let sha256 = hex::encode(Sha256::digest(wasm));
        let (component, from_cache) = self.compile(name, wasm, &sha256)?;
        Ok((component, sha256, from_cache))
    }

    fn engine_hash(&self) -> String {
        struct Sha(Sha256);
        impl Hasher for Sha {
            fn finish(&self) -> u64 {
                0
            }
            fn write(&mut self, bytes: &[u8]) {
                self.0.update(bytes);
            }
        }
        let mut h = Sha(Sha256::new());
        self.engine.precompile_compatibility_hash().hash(&mut h);
        hex::encode(&h.0.finalize()[..8])
    }
}

/// Why wasm bytes are not a component, in words (wasmparser's own message dumps the bytes).
fn invalid_because(wasm: &[u8], e: &wasmtime::Error) -> String {
    match wasm.get(..8) {
        Some(h) if !h.starts_with(b"\0asm") => "the file is not WebAssembly (it does not start with the \\0asm header)".into(),
        Some(h) if h[4..] == [1, 0, 0, 0] => "it is a core WebAssembly module, not a component: build it for wasm32-wasip2 (or wrap it with `wasm-tools component new`)".into(),
        None => "the file is too short to be WebAssembly".into(),
        Some(_) => {
            let root = e.root_cause().to_string();
            root.lines().next().unwrap_or("").split(" - expected").next().unwrap_or("").chars().take(200).collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_components_are_refused_in_words() {
        let e = wasmtime::Error::msg("x");
        assert!(invalid_because(b"hello world, not wasm", &e).contains("not WebAssembly"));
        assert!(invalid_because(b"\0asm\x01\0\0\0", &e).contains("core WebAssembly module"));
        assert!(invalid_because(b"\0as", &e).contains("too short"));
    }
}
