//! Presets: named session configurations instances run on, each with its backend and that
//! backend's settings.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// A named session configuration.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(try_from = "PresetDecl", into = "PresetDecl")]
pub struct Preset {
    /// Id instances refer to.
    pub id: String,
    /// Display name.
    pub name: Option<String>,
    /// What it is for.
    pub description: Option<String>,
    /// Skills announced by instances on this preset (default: `chat`).
    pub skills: Vec<SkillDecl>,
    /// The preset of instances that name none.
    pub default: bool,
    /// The session backend and its settings.
    pub backend: Backend,
}

/// A session backend with its settings.
#[derive(Clone, Debug, PartialEq)]
pub enum Backend {
    /// Replies with the prompt, word by word.
    Echo,
    /// Deterministic conformance behaviours.
    Scripted,
    /// A program run once per turn.
    Command(CommandSettings),
    /// An OpenAI-compatible chat model.
    OpenAi(OpenAiSettings),
    /// An agent component (docs/agents.md).
    Component(ComponentSettings),
}

/// The `component` backend's settings: which agent component, what it is granted, its limits.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ComponentSettings {
    /// The agent component's name (`<data-dir>/components/<name>.wasm`, or a built-in one).
    pub component: String,
    /// What it may use; anything else is refused.
    pub grants: Grants,
    /// How much it may take.
    pub limits: AgentLimits,
    /// The non-secret settings it reads through `wasi:config/store`.
    pub config: BTreeMap<String, String>,
}

/// What an agent component is granted; by default nothing.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct Grants {
    /// The model it may call through `llm`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llm: Option<LlmGrant>,
    /// The outbound connections (by name) it may call through `agents`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<String>,
    /// The hosts (`name` or `name:port`) `wasi:http/outgoing-handler` may reach.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_hosts: Vec<String>,
    /// Whether those hosts may resolve to loopback or private addresses.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub allow_private: bool,
    /// Whether it may keep `wasi:keyvalue` buckets.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub key_value: bool,
}

/// The model an agent may call.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LlmGrant {
    /// The API base URL, up to `/chat/completions` (default `https://api.deepseek.com`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The model (default `deepseek-chat`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The secret holding the API key (default `DEEPSEEK_API_KEY`); the agent never sees it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
}

/// What one agent turn may take.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct AgentLimits {
    /// Linear memory of one turn's instance, MiB.
    pub memory_mib: u32,
    /// Computing time of one turn (10 ms resolution), ms.
    pub cpu_ms: u64,
    /// Wall-clock time of one turn, waits included, ms.
    pub timeout_ms: u64,
    /// Turns of this preset running at once; more wait for a slot within their timeout.
    pub concurrent_turns: u32,
    /// What the instance's key-value buckets may hold in all (keys and values), MiB.
    pub key_value_mib: u32,
}

impl Default for AgentLimits {
    fn default() -> Self {
        AgentLimits {
            memory_mib: 256,
            cpu_ms: 10_000,
            timeout_ms: 120_000,
            concurrent_turns: 16,
            key_value_mib: 16,
        }
    }
}

/// The `command` backend's settings.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CommandSettings {
    /// The program and its arguments (never empty).
    pub command: Vec<String>,
    /// Working directory (default: the runtime's).
    pub working_dir: Option<PathBuf>,
    /// Longest a turn may run before its process group is killed (default 300 s), ms.
    pub timeout_ms: Option<u64>,
}

/// The `openai` backend's settings.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpenAiSettings {
    /// The API base URL, up to `/chat/completions` (default `https://api.deepseek.com`).
    pub base_url: Option<String>,
    /// The model (default `deepseek-chat`).
    pub model: Option<String>,
    /// The secret holding the API key (default `DEEPSEEK_API_KEY`).
    pub api_key_env: Option<String>,
    /// The system prompt.
    pub system_prompt: Option<String>,
    /// Most model requests of one turn (tool rounds + the answer; default 8).
    pub max_steps: Option<u32>,
    /// Longest one model request may take (default 120 s), ms.
    pub timeout_ms: Option<u64>,
}

/// An announced skill.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SkillDecl {
    /// Id clients select with `metadata.skill`.
    pub id: String,
    /// Display name (default: the id).
    #[serde(default)]
    pub name: Option<String>,
    /// What it does.
    #[serde(default)]
    pub description: String,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// The backends this runtime has, as presets name them.
pub const BACKENDS: &[&str] = &["echo", "scripted", "command", "openai", "component"];

impl Backend {
    /// The name presets give it.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Echo => "echo",
            Backend::Scripted => "scripted",
            Backend::Command(_) => "command",
            Backend::OpenAi(_) => "openai",
            Backend::Component(_) => "component",
        }
    }
}

impl Preset {
    /// A preset `id` on `backend`: no name, description or skills, not the default.
    pub fn new(id: &str, backend: Backend) -> Preset {
        Preset {
            id: id.into(),
            name: None,
            description: None,
            skills: Vec::new(),
            default: false,
            backend,
        }
    }

    /// A built-in preset without settings.
    pub fn builtin(id: &str, name: &str, description: &str, backend: Backend) -> Preset {
        Preset {
            name: Some(name.into()),
            description: Some(description.into()),
            ..Preset::new(id, backend)
        }
    }
}

/// A preset as the config file writes it: one flat table, `backend` naming which of the
/// backend-specific keys apply.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PresetDecl {
    id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    backend: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    skills: Vec<SkillDecl>,
    #[serde(default)]
    default: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    command: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    working_dir: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    base_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    api_key_env: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    system_prompt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_steps: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    component: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    grants: Option<Grants>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    limits: Option<AgentLimits>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    config: Option<BTreeMap<String, String>>,
}

impl PresetDecl {
    /// Refuses a backend-specific key the chosen backend does not take.
    fn check_keys(&self) -> Result<(), String> {
        let (command, openai, both, component): (&[&str], &[&str], &[&str], &[&str]) = (
            &["command"],
            &["openai"],
            &["command", "openai"],
            &["component"],
        );
        let keys = [
            ("command", !self.command.is_empty(), command),
            ("workingDir", self.working_dir.is_some(), command),
            ("timeoutMs", self.timeout_ms.is_some(), both),
            ("baseUrl", self.base_url.is_some(), openai),
            ("model", self.model.is_some(), openai),
            ("apiKeyEnv", self.api_key_env.is_some(), openai),
            ("systemPrompt", self.system_prompt.is_some(), openai),
            ("maxSteps", self.max_steps.is_some(), openai),
            ("component", self.component.is_some(), component),
            ("grants", self.grants.is_some(), component),
            ("limits", self.limits.is_some(), component),
            ("config", self.config.is_some(), component),
        ];
        match keys
            .iter()
            .find(|(_, set, owners)| *set && !owners.contains(&self.backend.as_str()))
        {
            Some((key, _, owners)) => {
                let plural = if owners.len() > 1 { "s" } else { "" };
                Err(format!(
                    "preset {:?}: `{key}` is a setting of the {} backend{plural}, not of {:?}",
                    self.id,
                    owners.join(" and "),
                    self.backend
                ))
            }
            None => Ok(()),
        }
    }
}

impl TryFrom<PresetDecl> for Preset {
    type Error = String;

    fn try_from(d: PresetDecl) -> Result<Preset, String> {
        if !BACKENDS.contains(&d.backend.as_str()) {
            return Err(format!(
                "preset {:?}: unknown backend {:?} (known: {})",
                d.id,
                d.backend,
                BACKENDS.join(", ")
            ));
        }
        d.check_keys()?;
        let backend = match d.backend.as_str() {
            "echo" => Backend::Echo,
            "scripted" => Backend::Scripted,
            "command" if d.command.is_empty() => {
                return Err(format!(
                    "preset {:?}: the command backend needs `command = [\"program\", \"arg\", …]`",
                    d.id
                ));
            }
            "command" => Backend::Command(CommandSettings {
                command: d.command,
                working_dir: d.working_dir,
                timeout_ms: d.timeout_ms,
            }),
            "component" => {
                let component = d.component.ok_or_else(|| {
                    format!(
                        "preset {:?}: the component backend needs `component = \"<name>\"` (an agent component in the data directory's components/ folder, or `echo-agent`)",
                        d.id
                    )
                })?;
                let limits = d.limits.unwrap_or_default();
                check_limits(&d.id, &limits)?;
                let grants = d.grants.unwrap_or_default();
                if let Some(bad) = grants
                    .allowed_hosts
                    .iter()
                    .find(|h| crate::egress::allowed_entry(h).is_none())
                {
                    return Err(format!(
                        "preset {:?}: grants.allowedHosts entry {bad:?} is not a host or host:port (an IPv6 address in brackets, as [::1] or [::1]:8080)",
                        d.id
                    ));
                }
                Backend::Component(ComponentSettings {
                    component,
                    grants,
                    limits,
                    config: d.config.unwrap_or_default(),
                })
            }
            _ => Backend::OpenAi(OpenAiSettings {
                base_url: d.base_url,
                model: d.model,
                api_key_env: d.api_key_env,
                system_prompt: d.system_prompt,
                max_steps: d.max_steps,
                timeout_ms: d.timeout_ms,
            }),
        };
        Ok(Preset {
            id: d.id,
            name: d.name,
            description: d.description,
            skills: d.skills,
            default: d.default,
            backend,
        })
    }
}

impl From<Preset> for PresetDecl {
    fn from(p: Preset) -> PresetDecl {
        let mut d = PresetDecl {
            id: p.id,
            name: p.name,
            description: p.description,
            backend: p.backend.name().into(),
            skills: p.skills,
            default: p.default,
            ..PresetDecl::default()
        };
        match p.backend {
            Backend::Echo | Backend::Scripted => {}
            Backend::Command(c) => {
                (d.command, d.working_dir, d.timeout_ms) = (c.command, c.working_dir, c.timeout_ms)
            }
            Backend::Component(c) => {
                d.component = Some(c.component);
                d.grants = Some(c.grants);
                d.limits = Some(c.limits);
                d.config = (!c.config.is_empty()).then_some(c.config);
            }
            Backend::OpenAi(o) => {
                (
                    d.base_url,
                    d.model,
                    d.api_key_env,
                    d.system_prompt,
                    d.max_steps,
                    d.timeout_ms,
                ) = (
                    o.base_url,
                    o.model,
                    o.api_key_env,
                    o.system_prompt,
                    o.max_steps,
                    o.timeout_ms,
                )
            }
        }
        d
    }
}

/// Refuses limits no turn could run within.
fn check_limits(id: &str, l: &AgentLimits) -> Result<(), String> {
    let bad = [
        (
            "memoryMib",
            l.memory_mib == 0 || l.memory_mib > 4096,
            "1 to 4096",
        ),
        ("cpuMs", l.cpu_ms < 10, "at least 10"),
        ("timeoutMs", l.timeout_ms < 10, "at least 10"),
        (
            "concurrentTurns",
            l.concurrent_turns == 0 || l.concurrent_turns > 10_000,
            "1 to 10000",
        ),
        ("keyValueMib", l.key_value_mib > 4096, "at most 4096"),
    ];
    match bad.iter().find(|(_, bad, _)| *bad) {
        Some((key, _, range)) => Err(format!("preset {id:?}: `limits.{key}` must be {range}")),
        None => Ok(()),
    }
}

/// The agent components `presets` name, each with the presets that run it (in order).
pub fn agents(presets: &[Preset]) -> BTreeMap<String, Vec<Preset>> {
    let mut agents: BTreeMap<String, Vec<Preset>> = BTreeMap::new();
    for p in presets {
        if let Backend::Component(c) = &p.backend {
            agents
                .entry(c.component.clone())
                .or_default()
                .push(p.clone());
        }
    }
    agents
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preset(toml_text: &str) -> Result<Preset, String> {
        toml::from_str::<Preset>(toml_text).map_err(|e| e.to_string())
    }

    #[test]
    fn each_backend_takes_its_own_settings() {
        let c = preset("id = \"c\"\nbackend = \"command\"\ncommand = [\"cat\"]\ntimeoutMs = 5")
            .unwrap();
        assert_eq!(
            c.backend,
            Backend::Command(CommandSettings {
                command: vec!["cat".into()],
                working_dir: None,
                timeout_ms: Some(5)
            })
        );
        let o = preset("id = \"o\"\nbackend = \"openai\"\nmodel = \"m\"").unwrap();
        assert!(matches!(&o.backend, Backend::OpenAi(s) if s.model.as_deref() == Some("m")));
        assert!(
            preset("id = \"e\"\nbackend = \"echo\"\nmodel = \"m\"")
                .unwrap_err()
                .contains("`model` is a setting of the openai backend")
        );
        assert!(
            preset("id = \"o\"\nbackend = \"openai\"\ncommand = [\"x\"]")
                .unwrap_err()
                .contains("`command` is a setting of the command backend")
        );
        assert!(
            preset("id = \"c\"\nbackend = \"command\"")
                .unwrap_err()
                .contains("needs `command")
        );
        assert!(
            preset("id = \"x\"\nbackend = \"telepathy\"")
                .unwrap_err()
                .contains("unknown backend \"telepathy\"")
        );
        assert!(
            preset("id = \"x\"\nbackend = \"echo\"\ncolour = 1")
                .unwrap_err()
                .contains("unknown field `colour`")
        );
    }

    #[test]
    fn a_component_preset_names_its_agent_grants_and_limits() {
        let c = preset(
            "id = \"a\"\nbackend = \"component\"\ncomponent = \"echo-agent\"\n\
             grants = { keyValue = true, allowedHosts = [\"api.example.com\"], llm = { model = \"m\" } }\n\
             limits = { memoryMib = 64 }\nconfig = { greeting = \"hi\" }",
        )
        .unwrap();
        let Backend::Component(s) = &c.backend else {
            panic!("{c:?}")
        };
        assert_eq!(s.component, "echo-agent");
        assert!(s.grants.key_value && s.grants.agents.is_empty() && !s.grants.allow_private);
        assert_eq!(s.grants.llm.as_ref().unwrap().model.as_deref(), Some("m"));
        assert_eq!(
            (s.limits.memory_mib, s.limits.cpu_ms),
            (64, AgentLimits::default().cpu_ms),
            "unset limits keep their defaults"
        );
        assert_eq!(s.config["greeting"], "hi");
        assert_eq!(preset(&toml::to_string(&c).unwrap()).unwrap(), c);
        for (text, says) in [
            ("id = \"a\"\nbackend = \"component\"", "needs `component"),
            (
                "id = \"a\"\nbackend = \"component\"\ncomponent = \"x\"\nlimits = { memoryMib = 0 }",
                "`limits.memoryMib` must be 1 to 4096",
            ),
            (
                "id = \"a\"\nbackend = \"component\"\ncomponent = \"x\"\ngrants = { llm = true }",
                "invalid type",
            ),
            (
                "id = \"a\"\nbackend = \"component\"\ncomponent = \"x\"\ngrants = { network = true }",
                "unknown field `network`",
            ),
            (
                "id = \"e\"\nbackend = \"echo\"\ngrants = {}",
                "`grants` is a setting of the component backend",
            ),
        ] {
            let e = preset(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn round_trips_as_the_file_writes_it() {
        let o =
            preset("id = \"o\"\nbackend = \"openai\"\nmodel = \"m\"\nmaxSteps = 3\ndefault = true")
                .unwrap();
        assert_eq!(preset(&toml::to_string(&o).unwrap()).unwrap(), o);
    }
}
