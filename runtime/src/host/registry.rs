//! Components by name: the embedded ones and `<data-dir>/components/*.wasm`. Compiled code is
//! cached on disk under the wasm's sha256 and the engine's compatibility hash; a swap compiles
//! and validates off the request path and replaces the entry only when the new one is good.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use anyhow::Context;
use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::{Component, Linker};
use wasmtime_wasi_http::p2::bindings::ProxyPre;

use super::{State, wt};

/// The components built into the binary.
pub const EMBEDDED: &[(&str, &[u8])] = &[(crate::instances::DEFAULT_COMPONENT, include_bytes!(env!("A2A_EDGE_SERVER_WASM")))];

/// The outbound A2A client component (world `outbound-client`), built into the binary.
pub const CLIENT_WASM: &[u8] = include_bytes!(env!("A2A_EDGE_CLIENT_WASM"));

/// Where a component came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Built into the binary.
    Embedded,
    /// A file in the components directory.
    File(PathBuf),
}

/// A loaded, validated component.
pub struct Loaded {
    /// Name instances refer to.
    pub name: String,
    /// Origin.
    pub source: Source,
    /// sha256 of the wasm, hex.
    pub sha256: String,
    /// Size of the wasm, bytes.
    pub size: usize,
    /// When it was loaded, ms.
    pub loaded_at: u64,
    /// Whether the compiled code came from the disk cache.
    pub from_cache: bool,
    /// Pre-instantiated, ready to serve.
    pub pre: ProxyPre<State>,
}

/// The component registry.
pub struct Registry {
    engine: Engine,
    linker: Linker<State>,
    cache_dir: PathBuf,
    components_dir: PathBuf,
    entries: RwLock<HashMap<String, Arc<Loaded>>>,
    /// Components compiled (not loaded from cache) since start.
    pub compilations: AtomicU64,
}

impl Registry {
    /// Loads the embedded components and every `*.wasm` in `components_dir` (a bad file is
    /// logged and skipped; a bad embedded component is an error).
    pub fn new(engine: Engine, linker: Linker<State>, cache_dir: PathBuf, components_dir: PathBuf) -> anyhow::Result<Registry> {
        std::fs::create_dir_all(&cache_dir).with_context(|| format!("cannot create cache directory {}", cache_dir.display()))?;
        let registry = Registry { engine, linker, cache_dir, components_dir, entries: RwLock::default(), compilations: AtomicU64::new(0) };
        for (name, wasm) in EMBEDDED {
            let loaded = registry.load(name, wasm, Source::Embedded).with_context(|| format!("embedded component {name}"))?;
            registry.insert(loaded);
        }
        if let Ok(dir) = std::fs::read_dir(&registry.components_dir) {
            for entry in dir.flatten() {
                let path = entry.path();
                let Some(name) = component_name(&path) else { continue };
                match std::fs::read(&path).map_err(anyhow::Error::from).and_then(|wasm| registry.load(&name, &wasm, Source::File(path.clone()))) {
                    Ok(loaded) => registry.insert(loaded),
                    Err(e) => tracing::error!(component = %name, error = %format!("{e:#}"), "component not loaded"),
                }
            }
        }
        Ok(registry)
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The component named `name`.
    pub fn get(&self, name: &str) -> Option<Arc<Loaded>> {
        self.entries.read().unwrap().get(name).cloned()
    }

    /// Every loaded component, by name.
    pub fn all(&self) -> Vec<Arc<Loaded>> {
        let mut all: Vec<_> = self.entries.read().unwrap().values().cloned().collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    fn insert(&self, loaded: Loaded) {
        tracing::info!(component = %loaded.name, sha256 = %&loaded.sha256[..12], from_cache = loaded.from_cache, "component ready");
        self.entries.write().unwrap().insert(loaded.name.clone(), Arc::new(loaded));
    }

    /// Re-reads `name` from its source (`<components-dir>/<name>.wasm`; an embedded one from the
    /// binary), compiles and validates it on a blocking thread, then swaps it in. On any error
    /// the current entry keeps serving. Requests already running keep the version they started on.
    ///
    /// The name is checked before any path is built, and no error names a host path or says why
    /// a file could not be read (the log does, for the operator).
    pub async fn reload(self: &Arc<Self>, name: &str) -> anyhow::Result<Arc<Loaded>> {
        check_name(name)?;
        let path = self.components_dir.join(format!("{name}.wasm"));
        let embedded = EMBEDDED.iter().find(|(n, _)| *n == name).map(|(_, w)| *w);
        let (wasm, source) = match (std::fs::read(&path), embedded) {
            (Ok(wasm), _) => (wasm, Source::File(path)),
            (Err(_), Some(wasm)) => (wasm.to_vec(), Source::Embedded),
            (Err(e), None) => {
                tracing::warn!(component = %name, path = %path.display(), error = %e, "component file not readable");
                let built_in: Vec<&str> = EMBEDDED.iter().map(|(n, _)| *n).collect();
                anyhow::bail!("there is no component {name:?}: put {name}.wasm in the data directory's components/ folder, or use a built-in one ({})", built_in.join(", "));
            }
        };
        let this = self.clone();
        let owned = name.to_owned();
        let loaded = tokio::task::spawn_blocking(move || this.load(&owned, &wasm, source)).await??;
        self.insert(loaded);
        Ok(self.get(name).expect("just inserted"))
    }

    /// Compiles (or loads from cache) and validates a component.
    fn load(&self, name: &str, wasm: &[u8], source: Source) -> anyhow::Result<Loaded> {
        check_name(name)?;
        let sha256 = hex::encode(Sha256::digest(wasm));
        let (component, from_cache) = self.compile(name, wasm, &sha256)?;
        let instance_pre = wt(self.linker.instantiate_pre(&component)).with_context(|| format!("component {name:?} imports something this runtime does not provide"))?;
        let pre = wt(ProxyPre::new(instance_pre)).with_context(|| format!("component {name:?} does not export wasi:http/incoming-handler"))?;
        Ok(Loaded { name: name.to_owned(), source, sha256, size: wasm.len(), loaded_at: crate::tasks::now_ms(), from_cache, pre })
    }

    /// The compiled component of `wasm` (hash `sha256`): from the on-disk cache, or compiled now
    /// and cached; whether it came from the cache.
    pub fn compile(&self, name: &str, wasm: &[u8], sha256: &str) -> anyhow::Result<(Component, bool)> {
        let cached = self.cache_dir.join(format!("{sha256}-{}.cwasm", self.engine_hash()));
        // SAFETY: files in the cache directory are written only by `precompile_component` of an
        // engine with this compatibility hash (below), under their content hash.
        if let Some(Ok(c)) = cached.exists().then(|| unsafe { Component::deserialize_file(&self.engine, &cached) }) {
            return Ok((c, true));
        }
        let compiled =
            self.engine.precompile_component(wasm).map_err(|e| anyhow::anyhow!("component {name:?} is not a valid WebAssembly component: {}", invalid_because(wasm, &e)))?;
        self.compilations.fetch_add(1, Ordering::Relaxed);
        let tmp = cached.with_extension(format!("tmp{}", std::process::id()));
        if std::fs::write(&tmp, &compiled).and_then(|_| std::fs::rename(&tmp, &cached)).is_err() {
            tracing::warn!(path = %cached.display(), "could not write the compile cache");
        }
        // SAFETY: the bytes were produced by `precompile_component` of this engine just now.
        Ok((wt(unsafe { Component::deserialize(&self.engine, &compiled) })?, false))
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

/// `<name>.wasm` → `name`.
fn component_name(path: &Path) -> Option<String> {
    (path.extension()? == "wasm").then(|| path.file_stem()?.to_str().map(str::to_owned)).flatten()
}

/// Component names are `[a-z0-9][a-z0-9_-]{0,63}`: nothing that could leave the components folder.
fn check_name(name: &str) -> anyhow::Result<()> {
    let lower_digit = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let ok = name.len() <= 64 && name.as_bytes().first().is_some_and(lower_digit) && name.bytes().all(|b| lower_digit(&b) || b == b'-' || b == b'_');
    if ok {
        return Ok(());
    }
    let shown: String = name.chars().take(64).collect();
    anyhow::bail!("component name {shown:?} is not valid: use 1-64 characters of a-z, 0-9, - and _, starting with a letter or digit")
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
    fn names_are_checked_before_any_path() {
        for ok in ["a2a-server", "x", "my_comp-2", &"a".repeat(64)] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "../../dir/x", "-x", "_x", "X", "a/b", "a.b", "a\0", &"a".repeat(65)] {
            let e = check_name(bad).unwrap_err().to_string();
            assert!(e.contains("is not valid"), "{bad}: {e}");
        }
    }

    #[test]
    fn invalid_components_are_refused_in_words() {
        let e = wasmtime::Error::msg("x");
        assert!(invalid_because(b"hello world, not wasm", &e).contains("not WebAssembly"));
        assert!(invalid_because(b"\0asm\x01\0\0\0", &e).contains("core WebAssembly module"));
        assert!(invalid_because(b"\0as", &e).contains("too short"));
    }
}
