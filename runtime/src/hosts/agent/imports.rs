//! What an agent component may import: WASI and its own world, nothing else. A component that
//! imports anything outside them is refused at load, naming the import.

use wasmtime::component::Component;

/// Package prefixes an agent may import from.
const ALLOWED: &[&str] = &["wasi:", "a2a:agent/"];

/// The names of the interfaces `component` imports.
pub fn of(component: &Component, engine: &wasmtime::Engine) -> Vec<String> {
    component
        .component_type()
        .imports(engine)
        .map(|(name, _)| name.to_owned())
        .collect()
}

/// Refuses the first import outside WASI and the `a2a:agent` world.
pub fn check(agent: &str, imports: &[String]) -> anyhow::Result<()> {
    match imports
        .iter()
        .find(|i| !ALLOWED.iter().any(|p| i.starts_with(p)))
    {
        Some(i) => anyhow::bail!(
            "agent component {agent:?} imports `{i}`, which agents cannot use: an agent imports only WASI and the a2a:agent world (docs/agents.md)"
        ),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_wasi_and_the_agent_world_pass() {
        let ok: Vec<String> = ["wasi:cli/environment@0.2.6", "a2a:agent/progress@0.1.0"]
            .map(String::from)
            .into();
        check("a", &ok).unwrap();
        let bad = [ok, vec!["a2a:edge/storage@0.1.0".into()]].concat();
        let e = check("a", &bad).unwrap_err().to_string();
        assert!(e.contains("imports `a2a:edge/storage@0.1.0`"), "{e}");
        let e = check("a", &["acme:db/query".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("acme:db/query"), "{e}");
    }
}
