//! The component registry: named components (the embedded ones and `<data-dir>/components/*.wasm`),
//! validated against a linker and pre-instantiated, swapped whole on reload.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use anyhow::Context;
use wasmtime::component::Linker;
use wasmtime_wasi_http::p2::bindings::ProxyPre;

use super::{Cache, wt};

/// The name of the built-in A2A server component.
pub const DEFAULT_COMPONENT: &str = "a2a-server";

/// The components built into the binary.
pub const EMBEDDED: &[(&str, &[u8])] = &[(
    DEFAULT_COMPONENT,
    include_bytes!(env!("A2A_EDGE_SERVER_WASM")),
)];

/// Where a component came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Built into the binary.
    Embedded,
    /// A file in the components directory.
    File(PathBuf),
}

/// A loaded, validated component, ready to instantiate into stores of `T`.
pub struct Loaded<T: 'static> {
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
    pub pre: ProxyPre<T>,
    /// The interfaces it imports (`a2a:edge/storage@0.7.0`, …).
    imports: Vec<String>,
}

impl<T> Loaded<T> {
    /// Whether it imports `interface` (its name with package and version).
    pub fn imports(&self, interface: &str) -> bool {
        self.imports.iter().any(|i| i == interface)
    }
}

/// The components of one linker (one kind of store data `T`).
pub struct Registry<T: 'static> {
    cache: Arc<Cache>,
    linker: Linker<T>,
    components_dir: PathBuf,
    entries: RwLock<HashMap<String, Arc<Loaded<T>>>>,
}

impl<T: Send + 'static> Registry<T> {
    /// Loads the embedded components and every `*.wasm` in `components_dir` (a bad file is
    /// logged and skipped; a bad embedded component is an error).
    pub fn new(
        cache: Arc<Cache>,
        linker: Linker<T>,
        components_dir: PathBuf,
    ) -> anyhow::Result<Registry<T>> {
        let registry = Registry {
            cache,
            linker,
            components_dir,
            entries: RwLock::default(),
        };
        for (name, wasm) in EMBEDDED {
            let loaded = registry
                .load(name, wasm, Source::Embedded)
                .with_context(|| format!("embedded component {name}"))?;
            registry.insert(loaded);
        }
        if let Ok(dir) = std::fs::read_dir(&registry.components_dir) {
            for entry in dir.flatten() {
                let path = entry.path();
                let Some(name) = component_name(&path) else {
                    continue;
                };
                let wasm = std::fs::read(&path);
                if wasm.as_deref().is_ok_and(is_agent) {
                    tracing::debug!(component = %name, "an agent component: its presets load it");
                    continue;
                }
                match wasm
                    .map_err(anyhow::Error::from)
                    .and_then(|wasm| registry.load(&name, &wasm, Source::File(path.clone())))
                {
                    Ok(loaded) => registry.insert(loaded),
                    Err(e) => {
                        tracing::error!(component = %name, error = %format!("{e:#}"), "component not loaded")
                    }
                }
            }
        }
        Ok(registry)
    }

    /// The component named `name`.
    pub fn get(&self, name: &str) -> Option<Arc<Loaded<T>>> {
        self.entries.read().unwrap().get(name).cloned()
    }

    /// Every loaded component, by name.
    pub fn all(&self) -> Vec<Arc<Loaded<T>>> {
        let mut all: Vec<_> = self.entries.read().unwrap().values().cloned().collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    fn insert(&self, loaded: Loaded<T>) {
        tracing::info!(component = %loaded.name, sha256 = %&loaded.sha256[..12], from_cache = loaded.from_cache, "component ready");
        self.entries
            .write()
            .unwrap()
            .insert(loaded.name.clone(), Arc::new(loaded));
    }

    /// Re-reads `name` from its source (`<components-dir>/<name>.wasm`; an embedded one from the
    /// binary), compiles and validates it on a blocking thread, then swaps it in. On any error
    /// the current entry keeps serving. Requests already running keep the version they started on.
    ///
    /// The name is checked before any path is built, and no error names a host path or says why
    /// a file could not be read (the log does, for the operator).
    pub async fn reload(self: &Arc<Self>, name: &str) -> anyhow::Result<Arc<Loaded<T>>> {
        let (wasm, source) = read(&self.components_dir, name, EMBEDDED, "component")?;
        let this = self.clone();
        let owned = name.to_owned();
        let loaded =
            tokio::task::spawn_blocking(move || this.load(&owned, &wasm, source)).await??;
        self.insert(loaded);
        Ok(self.get(name).expect("just inserted"))
    }

    /// Compiles (or loads from cache) and validates a component.
    fn load(&self, name: &str, wasm: &[u8], source: Source) -> anyhow::Result<Loaded<T>> {
        check_name(name)?;
        let (component, sha256, from_cache) = self.cache.load(name, wasm)?;
        let imports = component
            .component_type()
            .imports(self.linker.engine())
            .map(|(name, _)| name.to_owned())
            .collect();
        let instance_pre = wt(self.linker.instantiate_pre(&component)).with_context(|| {
            format!("component {name:?} imports something this runtime does not provide")
        })?;
        let pre = wt(ProxyPre::new(instance_pre)).with_context(|| {
            format!("component {name:?} does not export wasi:http/incoming-handler")
        })?;
        Ok(Loaded {
            name: name.to_owned(),
            source,
            sha256,
            size: wasm.len(),
            loaded_at: crate::clock::now_ms(),
            from_cache,
            pre,
            imports,
        })
    }
}

/// The wasm of `name`: `<components_dir>/<name>.wasm`, else the built-in one of that name. The
/// name is checked before any path is built, and no error names a host path or says why a file
/// could not be read (the log does, for the operator); `what` names the kind in the error.
pub fn read(
    components_dir: &Path,
    name: &str,
    built_in: &[(&str, &[u8])],
    what: &str,
) -> anyhow::Result<(Vec<u8>, Source)> {
    check_name(name)?;
    let path = components_dir.join(format!("{name}.wasm"));
    let embedded = built_in.iter().find(|(n, _)| *n == name).map(|(_, w)| *w);
    match (std::fs::read(&path), embedded) {
        (Ok(wasm), _) => Ok((wasm, Source::File(path))),
        (Err(_), Some(wasm)) => Ok((wasm.to_vec(), Source::Embedded)),
        (Err(e), None) => {
            tracing::warn!(component = %name, path = %path.display(), error = %e, "{what} file not readable");
            let names: Vec<&str> = built_in.iter().map(|(n, _)| *n).collect();
            anyhow::bail!(
                "there is no {what} {name:?}: put {name}.wasm in the data directory's components/ folder, or use a built-in one ({})",
                names.join(", ")
            )
        }
    }
}

/// Whether `wasm` is an agent component (world `a2a:agent/agent`: it exports `run`), which the
/// agents' host loads, not this registry.
pub fn is_agent(wasm: &[u8]) -> bool {
    use wasmparser::{Parser, Payload};
    let mut depth = 0u32;
    for payload in Parser::new(0).parse_all(wasm) {
        match payload {
            Ok(Payload::ModuleSection { .. } | Payload::ComponentSection { .. }) => depth += 1,
            Ok(Payload::End(_)) => depth = depth.saturating_sub(1),
            Ok(Payload::ComponentExportSection(exports)) if depth == 0 => {
                if exports.into_iter().flatten().any(|e| e.name.name == "run") {
                    return true;
                }
            }
            Ok(_) => {}
            Err(_) => return false,
        }
    }
    false
}

/// `<name>.wasm` → `name`.
fn component_name(path: &Path) -> Option<String> {
    (path.extension()? == "wasm")
        .then(|| path.file_stem()?.to_str().map(str::to_owned))
        .flatten()
}

/// Component names are `[a-z0-9][a-z0-9_-]{0,63}`: nothing that could leave the components folder.
pub fn check_name(name: &str) -> anyhow::Result<()> {
    let lower_digit = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let ok = name.len() <= 64
        && name.as_bytes().first().is_some_and(lower_digit)
        && name
            .bytes()
            .all(|b| lower_digit(&b) || b == b'-' || b == b'_');
    if ok {
        return Ok(());
    }
    let shown: String = name.chars().take(64).collect();
    anyhow::bail!(
        "component name {shown:?} is not valid: use 1-64 characters of a-z, 0-9, - and _, starting with a letter or digit"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_before_any_path() {
        for ok in ["a2a-server", "x", "my_comp-2", &"a".repeat(64)] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "../../dir/x",
            "-x",
            "_x",
            "X",
            "a/b",
            "a.b",
            "a\0",
            &"a".repeat(65),
        ] {
            let e = check_name(bad).unwrap_err().to_string();
            assert!(e.contains("is not valid"), "{bad}: {e}");
        }
    }
}
