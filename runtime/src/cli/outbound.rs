//! `a2a-edge outbound …`: remote A2A agents whose skills become tools, as control actions.

use clap::{Args, Subcommand};
use control_api::{
    Action, Bounded, Call, Discover, Flag, Names, OutboundCreate, OutboundSetAuth,
    OutboundSetOAuth, OutboundSettings, OutboundUpdate, Str, Text,
};
use serde_json::Value;

use super::{Control, Target, s, secret_from_stdin, table};

/// `a2a-edge outbound …`
#[derive(Subcommand)]
pub enum Outbound {
    /// List outbound connections.
    List,
    /// Read a remote AgentCard and show what a connection would offer (nothing is created).
    Discover {
        /// The remote AgentCard URL.
        url: String,
        /// Read a bearer token for the remote from standard input.
        #[arg(long)]
        token_stdin: bool,
        /// Let the card's endpoints reach internal addresses.
        #[arg(long)]
        allow_private: bool,
    },
    /// Connect to a remote agent: its skills become tools.
    Create {
        /// The remote AgentCard URL.
        url: String,
        /// Its name (tools are named after it).
        #[arg(long)]
        name: String,
        /// The secret holding the bearer token sent to the remote.
        #[arg(long)]
        bearer_token_env: Option<String>,
        /// Create it disabled.
        #[arg(long)]
        disabled: bool,
        /// Its settings.
        #[command(flatten)]
        settings: Settings,
    },
    /// Change a connection (its card URL stays: remove it and create another instead).
    Update {
        /// Connection id.
        id: String,
        /// New name.
        #[arg(long)]
        name: Option<String>,
        /// Its settings.
        #[command(flatten)]
        settings: Settings,
    },
    /// Remove a connection (its tools go).
    Remove(Target),
    /// Connect a connection and offer its tools.
    Enable(Target),
    /// Stop offering a connection's tools.
    Disable(Target),
    /// Read the remote card again (new skills, new endpoint).
    Refresh(Target),
    /// Set the credential sent to the remote: a bearer token, or OAuth 2.0 client credentials.
    Auth(AuthArgs),
    /// Call a remote skill through a connection, as a tool would, and print its answer.
    Call {
        /// Connection id.
        id: String,
        /// The remote skill.
        skill: String,
        /// What to ask.
        prompt: String,
        /// Continue this remote task.
        #[arg(long)]
        task: Option<String>,
        /// The remote context (default: the control API's own).
        #[arg(long)]
        context: Option<String>,
    },
}

/// `outbound auth`: one of a token from standard input, `--clear`, or the OAuth flags.
#[derive(Args)]
pub struct AuthArgs {
    /// Connection id.
    id: String,
    /// Read the bearer token from standard input (an empty one is refused).
    #[arg(long, conflicts_with_all = ["clear", "oauth_token_url", "clear_oauth"])]
    token_stdin: bool,
    /// Remove the bearer token (the connection then sends none).
    #[arg(long, conflicts_with_all = ["oauth_token_url", "clear_oauth"])]
    clear: bool,
    /// OAuth 2.0 client credentials: the token endpoint.
    #[arg(long, requires = "client_id", conflicts_with = "clear_oauth")]
    oauth_token_url: Option<String>,
    /// OAuth: the client id.
    #[arg(long, requires = "oauth_token_url")]
    client_id: Option<String>,
    /// OAuth: read the client secret from standard input.
    #[arg(
        long,
        requires = "oauth_token_url",
        conflicts_with = "client_secret_env"
    )]
    client_secret_stdin: bool,
    /// OAuth: the name of a secret already set that holds the client secret.
    #[arg(long, requires = "oauth_token_url")]
    client_secret_env: Option<String>,
    /// OAuth: a scope to ask for (repeat for more).
    #[arg(long = "scope", requires = "oauth_token_url")]
    scopes: Vec<String>,
    /// Remove the OAuth client (the connection then sends no token).
    #[arg(long)]
    clear_oauth: bool,
}

/// The settings `create` and `update` share (`control_api::OutboundSettings`).
#[derive(Args)]
pub struct Settings {
    /// Only sessions of this preset see its tools.
    #[arg(long)]
    preset: Option<String>,
    /// Longest a remote call may take, ms (100 to 3600000).
    #[arg(long)]
    timeout_ms: Option<u64>,
    /// A skill that registers no tool (repeat for more).
    #[arg(long = "disable-skill")]
    disabled_skills: Vec<String>,
    /// Let endpoints the remote card announces reach internal addresses (true or false).
    #[arg(long)]
    allow_private: Option<bool>,
}

impl From<Settings> for OutboundSettings {
    fn from(s: Settings) -> OutboundSettings {
        OutboundSettings {
            preset: s.preset.map(Text),
            timeout_ms: s.timeout_ms.map(Bounded),
            disabled_skills: (!s.disabled_skills.is_empty()).then_some(Names(s.disabled_skills)),
            skill_overrides: None,
            allow_private: s.allow_private.map(Flag),
        }
    }
}

impl AuthArgs {
    /// The action these flags ask for.
    fn action(self) -> anyhow::Result<Action> {
        let id = Text(self.id);
        if let Some(url) = self.oauth_token_url {
            let secret = if self.client_secret_stdin {
                Some(Str(secret_from_stdin("the client secret")?))
            } else {
                None
            };
            if secret.is_none() && self.client_secret_env.is_none() {
                anyhow::bail!(
                    "give the client secret: --client-secret-stdin or --client-secret-env NAME"
                );
            }
            return Ok(Action::OutboundSetOAuth(OutboundSetOAuth {
                id,
                token_url: Some(Text(url)),
                client_id: self.client_id.map(Text),
                client_secret: secret,
                client_secret_env: self.client_secret_env.map(Text),
                scopes: (!self.scopes.is_empty()).then_some(Names(self.scopes)),
                clear: None,
            }));
        }
        if self.clear_oauth {
            return Ok(Action::OutboundSetOAuth(OutboundSetOAuth {
                id,
                token_url: None,
                client_id: None,
                client_secret: None,
                client_secret_env: None,
                scopes: None,
                clear: Some(Flag(true)),
            }));
        }
        let token = match (self.token_stdin, self.clear) {
            (true, _) => Some(Str(secret_from_stdin("the token")?)),
            (false, true) => None,
            (false, false) => {
                anyhow::bail!("give --token-stdin, --clear, --oauth-token-url … or --clear-oauth")
            }
        };
        let clear = token.is_none().then_some(Flag(true));
        Ok(Action::OutboundSetAuth(OutboundSetAuth {
            id,
            token,
            clear,
        }))
    }
}

impl Control {
    /// `outbound …`
    pub async fn outbound(&self, cmd: Outbound) -> anyhow::Result<()> {
        let action =
            match cmd {
                Outbound::List => {
                    let header = ["ID", "NAME", "ENABLED", "STATE", "TOOLS", "CARD"];
                    return self
                        .snapshot_list("outbounds", &header, |c| {
                            let cell = |k: &str| s(&c[k]);
                            vec![
                                cell("id"),
                                cell("name"),
                                cell("enabled"),
                                cell("state"),
                                cell("toolCount"),
                                cell("agentCardUrl"),
                            ]
                        })
                        .await;
                }
                Outbound::Discover {
                    url,
                    token_stdin,
                    allow_private,
                } => {
                    let token = if token_stdin {
                        Some(Str(secret_from_stdin("the token")?))
                    } else {
                        None
                    };
                    let discover = Discover {
                        agent_card_url: Text(url),
                        token,
                        allow_private: allow_private.then_some(Flag(true)),
                    };
                    let v = self.act(Action::OutboundDiscover(discover)).await?;
                    self.print(&v, |v| print_preview(&v["preview"]));
                    return Ok(());
                }
                Outbound::Call {
                    id,
                    skill,
                    prompt,
                    task,
                    context,
                } => {
                    let call = Call {
                        id: Text(id),
                        skill: Text(skill),
                        prompt: Text(prompt),
                        task_id: task.map(Text),
                        context_id: context.map(Text),
                    };
                    let v = self.act(Action::OutboundCall(call)).await?;
                    self.print(&v, |v| println!("{}", s(&v["result"])));
                    return Ok(());
                }
                Outbound::Create {
                    url,
                    name,
                    bearer_token_env,
                    disabled,
                    settings,
                } => Action::OutboundCreate(OutboundCreate::new(
                    Text(name),
                    Text(url),
                    bearer_token_env.map(Text),
                    Some(Flag(!disabled)),
                    settings.into(),
                )),
                Outbound::Update { id, name, settings } => Action::OutboundUpdate(
                    OutboundUpdate::new(Text(id), name.map(Text), None, settings.into()),
                ),
                Outbound::Remove(t) => Action::OutboundRemove(t.id()),
                Outbound::Enable(t) => Action::OutboundEnable(t.id()),
                Outbound::Disable(t) => Action::OutboundDisable(t.id()),
                Outbound::Refresh(t) => Action::OutboundRefresh(t.id()),
                Outbound::Auth(args) => args.action()?,
            };
        self.action(action).await
    }
}

/// A discovered card: what it is, where it is called, its skills.
fn print_preview(p: &Value) {
    println!("{} {}", s(&p["name"]), s(&p["version"]));
    if let Some(d) = p["description"].as_str() {
        println!("{d}");
    }
    println!(
        "endpoint {} (A2A {})",
        s(&p["endpoint"]),
        s(&p["protocolVersion"])
    );
    table::print(&["SKILL", "NAME", "DESCRIPTION"], &p["skills"], |k| {
        vec![s(&k["id"]), s(&k["name"]), s(&k["description"])]
    });
}
