//! `a2a-edge inbound …`: the CLI's arguments as control actions.

use anyhow::bail;
use clap::{Args, Subcommand};
use control_api::{
    Action, Bounded, Flag, Id, InboundCreate, InboundSetAuth, InboundSetMtls, InboundSetOidc,
    InboundSettings, InboundUpdate, KeyCreate, KeyRevoke, Names, SendTest, Str, Text,
};

use super::{Control, Target, s, send};

/// `a2a-edge inbound …`
#[derive(Subcommand)]
pub enum Inbound {
    /// List inbound instances.
    List,
    /// Create an inbound instance.
    Create {
        /// Agent name (the id is derived from it unless --id is given).
        #[arg(long)]
        name: String,
        /// The instance id (1-64 letters, digits, - or _; default `<slug of name>-<8 hex>`).
        #[arg(long)]
        id: Option<String>,
        /// Create it although another instance has the same name.
        #[arg(long)]
        allow_duplicate_name: bool,
        /// Agent description.
        #[arg(long)]
        description: String,
        /// Agent version.
        #[arg(long, default_value = "0.1.0")]
        version: String,
        /// Create it disabled.
        #[arg(long)]
        disabled: bool,
        /// Its settings.
        #[command(flatten)]
        settings: Settings,
    },
    /// Change an inbound instance.
    Update {
        /// Instance id.
        id: String,
        /// New name.
        #[arg(long)]
        name: Option<String>,
        /// New description.
        #[arg(long)]
        description: Option<String>,
        /// New version.
        #[arg(long)]
        version: Option<String>,
        /// Its settings.
        #[command(flatten)]
        settings: Settings,
    },
    /// Remove an inbound instance.
    Remove(Target),
    /// Serve an instance's routes.
    Enable(Target),
    /// Stop serving an instance's routes (open streams end).
    Disable(Target),
    /// Set or clear an instance's bearer token.
    Auth {
        /// Instance id.
        id: String,
        /// The token (prefer --token-stdin: arguments show in process lists and shell history).
        #[arg(long, conflicts_with_all = ["token_stdin", "clear"])]
        token: Option<String>,
        /// Read the token from standard input.
        #[arg(long, conflicts_with = "clear")]
        token_stdin: bool,
        /// Remove the token (the endpoint then accepts calls without one).
        #[arg(long)]
        clear: bool,
        /// Accept a token shorter than 16 characters.
        #[arg(long)]
        allow_weak: bool,
    },
    /// Accept OpenID Connect bearer tokens from an issuer, or stop (--clear).
    Oidc {
        /// Instance id.
        id: String,
        /// The issuer (`iss`); its keys come from its discovery document unless --jwks-url.
        #[arg(long, required_unless_present = "clear", conflicts_with = "clear")]
        issuer: Option<String>,
        /// The audience tokens must name (`aud`).
        #[arg(long, required_unless_present = "clear", conflicts_with = "clear")]
        audience: Option<String>,
        /// The key set's URL.
        #[arg(long, conflicts_with = "clear")]
        jwks_url: Option<String>,
        /// An algorithm accepted (repeat for more; default RS256 and ES256; never none or HMAC).
        #[arg(long = "algorithm", conflicts_with = "clear")]
        algorithms: Vec<String>,
        /// A scope every token must grant (repeat for more).
        #[arg(long = "scope", conflicts_with = "clear")]
        scopes: Vec<String>,
        /// The claim naming the principal (default `sub`).
        #[arg(long, conflicts_with = "clear")]
        principal_claim: Option<String>,
        /// Stop accepting OpenID Connect tokens.
        #[arg(long)]
        clear: bool,
        /// With --clear: remove the instance's last credential although it then takes calls
        /// from anyone.
        #[arg(long, requires = "clear")]
        open: bool,
    },
    /// Accept client certificates the listener verifies (mutual TLS), or stop (--clear).
    Mtls {
        /// Instance id.
        id: String,
        /// Which name of the certificate is the principal.
        #[arg(long, value_parser = ["subject", "san"], conflicts_with = "clear")]
        from: Option<String>,
        /// Stop accepting client certificates.
        #[arg(long)]
        clear: bool,
        /// With --clear: remove the instance's last credential although it then takes calls
        /// from anyone.
        #[arg(long, requires = "clear")]
        open: bool,
    },
    /// Named clients with their own API keys.
    Keys {
        /// What to do with them.
        #[command(subcommand)]
        cmd: Keys,
    },
    /// Send a test message through an instance (same gate and lifecycle, no HTTP auth).
    Test {
        /// Instance id.
        id: String,
        /// Message text.
        text: String,
        /// Continue this context.
        #[arg(long)]
        context: Option<String>,
        /// Skill to ask for (default: the instance's first announced skill).
        #[arg(long)]
        skill: Option<String>,
    },
}

/// `a2a-edge inbound keys …`
#[derive(Subcommand)]
pub enum Keys {
    /// Create a client's key; it is printed this once (only its hash is kept).
    Create {
        /// Instance id.
        id: String,
        /// The client's name (its principal is `key:<name>`).
        name: String,
        /// A skill it may call (repeat for more; default: all).
        #[arg(long = "skill")]
        skills: Vec<String>,
        /// Its own sustained requests per second (default: the instance's).
        #[arg(long)]
        rate: Option<u64>,
    },
    /// List an instance's clients (never their keys).
    List {
        /// Instance id.
        id: String,
    },
    /// Revoke a client's key: it stops working at once.
    Revoke {
        /// Instance id.
        id: String,
        /// The client's name.
        name: String,
        /// Revoke it although it is the instance's last credential (which then takes calls
        /// from anyone).
        #[arg(long)]
        open: bool,
    },
}

/// The settings `create` and `update` share (`control_api::InboundSettings`); on update, each
/// given one replaces the instance's.
#[derive(Args)]
pub struct Settings {
    /// JSON-RPC endpoint path (on create, default `/a2a/<id>`).
    #[arg(long)]
    endpoint_path: Option<String>,
    /// Session preset.
    #[arg(long)]
    preset: Option<String>,
    /// Component name (on update: swap to it, re-read from its source).
    #[arg(long)]
    component: Option<String>,
    /// Largest request body in bytes.
    #[arg(long)]
    max_body_bytes: Option<u64>,
    /// Serve push notifications (true or false; default true).
    #[arg(long)]
    push: Option<bool>,
    /// Serve A2A 0.3 callers too, with the 0.3 fields on the card (true or false; default true).
    #[arg(long)]
    compat03: Option<bool>,
    /// Run requests on kept instances of a third-party component that keeps nothing between
    /// requests (true or false; default false).
    #[arg(long)]
    reuse_instances: Option<bool>,
}

impl From<Settings> for InboundSettings {
    fn from(s: Settings) -> InboundSettings {
        InboundSettings {
            endpoint_path: s.endpoint_path.map(Text),
            preset: s.preset.map(Text),
            auth_token_env: None,
            component: s.component.map(Text),
            max_body_bytes: s.max_body_bytes.map(Bounded),
            limits: None,
            push_notifications: s.push.map(Flag),
            compat03: s.compat03.map(Flag),
            reuse_instances: s.reuse_instances.map(Flag),
        }
    }
}

impl Inbound {
    /// The action this command asks for (`list` and `test` print more than its message).
    fn action(self) -> anyhow::Result<Action> {
        Ok(match self {
            Inbound::List | Inbound::Test { .. } | Inbound::Keys { .. } => {
                unreachable!("answered by Control::inbound")
            }
            Inbound::Create {
                name,
                id,
                allow_duplicate_name,
                description,
                version,
                disabled,
                settings,
            } => Action::InboundCreate(InboundCreate::new(
                Text(name),
                Text(description),
                Text(version),
                Some(Flag(!disabled)),
                id.map(Text),
                allow_duplicate_name.then_some(Flag(true)),
                settings.into(),
            )),
            Inbound::Update {
                id,
                name,
                description,
                version,
                settings,
            } => Action::InboundUpdate(InboundUpdate::new(
                Text(id),
                name.map(Text),
                description.map(Text),
                version.map(Text),
                settings.into(),
            )),
            Inbound::Remove(t) => Action::InboundRemove(t.id()),
            Inbound::Enable(t) => Action::InboundEnable(t.id()),
            Inbound::Disable(t) => Action::InboundDisable(t.id()),
            Inbound::Auth {
                id,
                token,
                token_stdin,
                clear,
                allow_weak,
            } => {
                let token = match (token, token_stdin, clear) {
                    (Some(t), _, _) => Some(t),
                    (None, true, _) => Some(super::secret_from_stdin("the token")?),
                    (None, false, true) => None,
                    (None, false, false) => bail!(
                        "give --token-stdin (or --token) to set a token, or --clear to remove it"
                    ),
                };
                let clear = token.is_none().then_some(Flag(true));
                let allow_weak = (allow_weak && token.is_some()).then_some(Flag(true));
                Action::InboundSetAuth(InboundSetAuth {
                    id: Text(id),
                    token: token.map(Str),
                    clear,
                    allow_weak,
                })
            }
            Inbound::Oidc {
                id,
                issuer,
                audience,
                jwks_url,
                algorithms,
                scopes,
                principal_claim,
                clear,
                open,
            } => {
                let listed = |v: Vec<String>| (!v.is_empty()).then_some(Names(v));
                Action::InboundSetOidc(InboundSetOidc {
                    id: Text(id),
                    issuer: issuer.map(Text),
                    audience: audience.map(Text),
                    jwks_url: jwks_url.map(Text),
                    algorithms: listed(algorithms),
                    scopes: listed(scopes),
                    principal_claim: principal_claim.map(Text),
                    clear: clear.then_some(Flag(true)),
                    open: open.then_some(Flag(true)),
                })
            }
            Inbound::Mtls {
                id,
                from,
                clear,
                open,
            } => Action::InboundSetMtls(InboundSetMtls {
                id: Text(id),
                principal_from: from.map(Text),
                clear: clear.then_some(Flag(true)),
                open: open.then_some(Flag(true)),
            }),
        })
    }
}

impl Control {
    /// `inbound …`
    pub async fn inbound(&self, cmd: Inbound) -> anyhow::Result<()> {
        match cmd {
            Inbound::List => {
                let header = [
                    "ID",
                    "NAME",
                    "ENABLED",
                    "PRESET",
                    "ENDPOINT",
                    "AUTH",
                    "COMPONENT",
                ];
                self.snapshot_list("inbounds", &header, |i| {
                    let schemes: Vec<&str> = i["schemes"]
                        .as_array()
                        .map(|a| a.iter().filter_map(serde_json::Value::as_str).collect())
                        .unwrap_or_default();
                    let auth = if schemes.is_empty() {
                        "-".to_owned()
                    } else {
                        schemes.join(", ")
                    };
                    let cell = |k: &str| s(&i[k]);
                    vec![
                        cell("id"),
                        cell("name"),
                        cell("enabled"),
                        cell("preset"),
                        cell("endpointUrl"),
                        auth,
                        cell("component"),
                    ]
                })
                .await
            }
            Inbound::Test {
                id,
                text,
                context,
                skill,
            } => {
                let test = SendTest {
                    id: Text(id),
                    text: Text(text),
                    context_id: context.map(Text),
                    skill: skill.map(Text),
                };
                let v = self.act(Action::InboundSendTest(test)).await?;
                self.print(&v, |v| {
                    println!("task {} {}", s(&v["taskId"]), s(&v["state"]));
                    let task = &v["result"]["task"];
                    if let Some(t) = send::output_text(task)
                        .or_else(|| send::message_text(&v["result"]["message"]))
                    {
                        println!("{t}");
                    }
                });
                Ok(())
            }
            Inbound::Keys { cmd } => self.keys(cmd).await,
            cmd => self.action(cmd.action()?).await,
        }
    }

    /// `inbound keys …`
    async fn keys(&self, cmd: Keys) -> anyhow::Result<()> {
        match cmd {
            Keys::Create {
                id,
                name,
                skills,
                rate,
            } => {
                let create = KeyCreate {
                    id: Text(id),
                    name: Text(name),
                    skills: (!skills.is_empty()).then_some(Names(skills)),
                    rate_per_second: rate.map(Bounded),
                };
                let v = self.act(Action::InboundKeysCreate(create)).await?;
                self.print(&v, |v| {
                    eprintln!("{}", s(&v["message"]));
                    println!("{}", s(&v["key"]));
                });
                Ok(())
            }
            Keys::List { id } => {
                let v = self
                    .act(Action::InboundKeysList(Id { id: Text(id) }))
                    .await?;
                self.print(&v, |v| {
                    let header = [
                        "NAME",
                        "PRINCIPAL",
                        "SKILLS",
                        "RATE/S",
                        "CREATED",
                        "REVOKED",
                    ];
                    super::table::print(&header, &v["keys"], |k| {
                        let skills: Vec<String> = k["skills"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(s)
                            .collect();
                        vec![
                            s(&k["name"]),
                            s(&k["principal"]),
                            if skills.is_empty() {
                                "all".into()
                            } else {
                                skills.join(",")
                            },
                            k["ratePerSecond"]
                                .as_f64()
                                .map_or("-".into(), |r| r.to_string()),
                            s(&k["createdAt"]),
                            s(&k["revokedAt"]),
                        ]
                    })
                });
                Ok(())
            }
            Keys::Revoke { id, name, open } => {
                self.action(Action::InboundKeysRevoke(KeyRevoke {
                    id: Text(id),
                    name: Text(name),
                    open: open.then_some(Flag(true)),
                }))
                .await
            }
        }
    }
}
