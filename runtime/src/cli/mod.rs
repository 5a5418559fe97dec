//! The CLI as a client: of the control API (instances, tasks, sessions, metrics, update) and of
//! any A2A agent (`send`). Human tables by default, `--json` for scripts; failures exit non-zero
//! with the server's message.

pub mod send;
mod table;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use control_api::{Action, Bounded, Flag, Id, InboundCreate, InboundSetAuth, InboundUpdate, SendTest, Session, Str, Text};
use serde_json::{Value, json};

pub use send::SendArgs;

/// Where the control API is and how to print.
#[derive(Args, Clone)]
pub struct ClientOpts {
    /// Control API base URL.
    #[arg(long, global = true, env = "A2A_EDGE_API", default_value = "http://127.0.0.1:3080/a2a/api")]
    pub api: String,
    /// Print the server's JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
}

/// `a2a-edge inbound …`
#[derive(Subcommand)]
pub enum Inbound {
    /// List inbound instances.
    List,
    /// Create an inbound instance.
    Create {
        /// Agent name (the id is derived from it).
        #[arg(long)]
        name: String,
        /// Agent description.
        #[arg(long)]
        description: String,
        /// Agent version.
        #[arg(long, default_value = "0.1.0")]
        version: String,
        /// JSON-RPC endpoint path (default /a2a/<id>).
        #[arg(long)]
        endpoint_path: Option<String>,
        /// Session preset.
        #[arg(long)]
        preset: Option<String>,
        /// Component name.
        #[arg(long)]
        component: Option<String>,
        /// Create it disabled.
        #[arg(long)]
        disabled: bool,
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
        /// New endpoint path.
        #[arg(long)]
        endpoint_path: Option<String>,
        /// New preset.
        #[arg(long)]
        preset: Option<String>,
        /// Swap to this component (re-read from its source).
        #[arg(long)]
        component: Option<String>,
        /// New body limit.
        #[arg(long)]
        max_body_bytes: Option<u64>,
    },
    /// Remove an inbound instance.
    Remove {
        /// Instance id.
        id: String,
    },
    /// Serve an instance's routes.
    Enable {
        /// Instance id.
        id: String,
    },
    /// Stop serving an instance's routes (open streams end).
    Disable {
        /// Instance id.
        id: String,
    },
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

/// `a2a-edge task …`
#[derive(Subcommand)]
pub enum TaskCmd {
    /// List tasks, newest update first.
    List {
        /// Only this state (working, completed, TASK_STATE_FAILED, …).
        #[arg(long)]
        state: Option<String>,
        /// Only this context.
        #[arg(long)]
        context: Option<String>,
        /// Only this instance.
        #[arg(long)]
        server: Option<String>,
        /// Page size.
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Rows to skip.
        #[arg(long, default_value_t = 0)]
        offset: u32,
    },
    /// Show one task.
    Get {
        /// Task id.
        id: String,
    },
    /// Cancel a task.
    Cancel {
        /// Task id.
        id: String,
    },
}

/// `a2a-edge session …`
#[derive(Subcommand)]
pub enum SessionCmd {
    /// List sessions, newest first.
    List,
    /// Cancel a context's active tasks (the session stays).
    Cancel {
        /// Context id.
        id: String,
        /// Only on this instance.
        #[arg(long)]
        server: Option<String>,
    },
    /// Cancel a context's active tasks and release its live session.
    Close {
        /// Context id.
        id: String,
        /// Only on this instance.
        #[arg(long)]
        server: Option<String>,
    },
}

/// A client of the control API.
pub struct Control {
    http: reqwest::Client,
    opts: ClientOpts,
}

impl Control {
    /// A client for `opts.api`.
    pub fn new(opts: ClientOpts) -> Control {
        Control { http: reqwest::Client::new(), opts }
    }

    async fn get(&self, path: &str) -> anyhow::Result<Value> {
        let url = format!("{}{path}", self.opts.api.trim_end_matches('/'));
        let r = self.http.get(&url).send().await.with_context(|| format!("cannot reach the control API at {url} (is `a2a-edge serve` running? set --api)"))?;
        read(r).await
    }

    async fn act(&self, action: Action) -> anyhow::Result<Value> {
        let url = self.opts.api.trim_end_matches('/').to_owned();
        let r = self.http.post(&url).json(&action.to_body()).send().await.with_context(|| format!("cannot reach the control API at {url} (is `a2a-edge serve` running? set --api)"))?;
        read(r).await
    }

    /// Prints `v` as JSON or via `human`.
    fn print(&self, v: &Value, human: impl FnOnce(&Value)) {
        if self.opts.json {
            println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
        } else {
            human(v);
        }
    }

    /// Prints one list of the snapshot as a table (or as JSON).
    async fn snapshot_list(&self, key: &str, header: &[&str], cells: impl Fn(&Value) -> Vec<String>) -> anyhow::Result<()> {
        let v = self.get("").await?;
        self.print(&v[key], |list| table::print(header, list, cells));
        Ok(())
    }

    /// Runs an action and prints its message.
    async fn action(&self, action: Action) -> anyhow::Result<()> {
        let v = self.act(action).await?;
        self.print(&v, |v| {
            println!("{}", v["message"].as_str().unwrap_or("done"));
            if let Some(id) = v["id"].as_str() {
                println!("id: {id}");
            }
        });
        Ok(())
    }

    /// `inbound …`
    pub async fn inbound(&self, cmd: Inbound) -> anyhow::Result<()> {
        match cmd {
            Inbound::List => {
                self.snapshot_list("inbounds", &["ID", "NAME", "ENABLED", "PRESET", "ENDPOINT", "AUTH", "COMPONENT"], |i| {
                    let auth = i["authTokenEnv"].as_str().map_or("-".into(), |_| "bearer".into());
                    vec![s(&i["id"]), s(&i["name"]), s(&i["enabled"]), s(&i["preset"]), s(&i["endpointUrl"]), auth, s(&i["component"])]
                })
                .await
            }
            Inbound::Create { name, description, version, endpoint_path, preset, component, disabled } => {
                self.action(Action::InboundCreate(InboundCreate {
                    name: Text(name),
                    description: Text(description),
                    version: Text(version),
                    enabled: Some(Flag(!disabled)),
                    endpoint_path: endpoint_path.map(Text),
                    preset: preset.map(Text),
                    auth_token_env: None,
                    component: component.map(Text),
                    max_body_bytes: None,
                    limits: None,
                }))
                .await
            }
            Inbound::Update { id, name, description, version, endpoint_path, preset, component, max_body_bytes } => {
                self.action(Action::InboundUpdate(InboundUpdate {
                    id: Text(id),
                    name: name.map(Text),
                    description: description.map(Text),
                    version: version.map(Text),
                    endpoint_path: endpoint_path.map(Text),
                    preset: preset.map(Text),
                    auth_token_env: None,
                    component: component.map(Text),
                    max_body_bytes: max_body_bytes.map(Bounded),
                    limits: None,
                }))
                .await
            }
            Inbound::Remove { id } => self.action(Action::InboundRemove(Id { id: Text(id) })).await,
            Inbound::Enable { id } => self.action(Action::InboundEnable(Id { id: Text(id) })).await,
            Inbound::Disable { id } => self.action(Action::InboundDisable(Id { id: Text(id) })).await,
            Inbound::Auth { id, token, token_stdin, clear, allow_weak } => {
                let token = match (token, token_stdin, clear) {
                    (Some(t), _, _) => t,
                    (None, true, _) => {
                        let mut t = String::new();
                        std::io::stdin().read_line(&mut t).context("cannot read the token from standard input")?;
                        t.trim().to_owned()
                    }
                    (None, false, true) => {
                        return self.action(Action::InboundSetAuth(InboundSetAuth { id: Text(id), token: None, clear: Some(Flag(true)), allow_weak: None })).await;
                    }
                    (None, false, false) => bail!("give --token-stdin (or --token) to set a token, or --clear to remove it"),
                };
                let allow_weak = allow_weak.then_some(Flag(true));
                self.action(Action::InboundSetAuth(InboundSetAuth { id: Text(id), token: Some(Str(token)), clear: None, allow_weak })).await
            }
            Inbound::Test { id, text, context, skill } => {
                let v = self.act(Action::InboundSendTest(SendTest { id: Text(id), text: Text(text), context_id: context.map(Text), skill: skill.map(Text) })).await?;
                self.print(&v, |v| {
                    println!("task {} {}", s(&v["taskId"]), s(&v["state"]));
                    let task = &v["result"]["task"];
                    let text = send::output_text(task).or_else(|| send::message_text(&v["result"]["message"]));
                    if let Some(t) = text {
                        println!("{t}");
                    }
                });
                Ok(())
            }
        }
    }

    /// `task …`
    pub async fn task(&self, cmd: TaskCmd) -> anyhow::Result<()> {
        match cmd {
            TaskCmd::List { state, context, server, limit, offset } => {
                let mut q = vec![format!("taskLimit={limit}"), format!("taskOffset={offset}")];
                for (k, v) in [("taskState", state), ("taskContextId", context), ("taskServerId", server)] {
                    if let Some(v) = v {
                        q.push(format!("{k}={}", form_urlencoded::byte_serialize(v.as_bytes()).collect::<String>()));
                    }
                }
                let v = self.get(&format!("?{}", q.join("&"))).await?;
                let page = json!({ "tasks": v["tasks"], "taskTotal": v["taskTotal"], "taskNextOffset": v["taskNextOffset"] });
                self.print(&page, |p| {
                    table::print(&["TASK", "STATE", "SERVER", "CONTEXT", "SKILL", "UPDATED"], &p["tasks"], |t| {
                        vec![s(&t["taskId"]), short_state(&t["state"]), s(&t["serverId"]), s(&t["contextId"]), s(&t["skill"]), time(&t["updatedAt"])]
                    });
                    let next = p["taskNextOffset"].as_u64().map(|n| format!("; next page: --offset {n}")).unwrap_or_default();
                    println!("{} task(s) in all{next}", p["taskTotal"]);
                });
                Ok(())
            }
            TaskCmd::Get { id } => {
                let v = self.get(&format!("/task?id={}", form_urlencoded::byte_serialize(id.as_bytes()).collect::<String>())).await?;
                self.print(&v, |t| {
                    for k in ["taskId", "state", "serverId", "contextId", "skill", "peerId"] {
                        println!("{k:<10} {}", s(&t[k]));
                    }
                    println!("{:<10} {}", "updated", time(&t["updatedAt"]));
                    if let Some(e) = t["error"].as_object() {
                        println!("{:<10} {}", "error", s(&e["message"].clone()));
                    }
                    if let Some(out) = send::output_text(&json!({ "artifacts": t["artifacts"] })) {
                        println!("\n{out}");
                    }
                });
                Ok(())
            }
            TaskCmd::Cancel { id } => self.action(Action::TaskCancel(Id { id: Text(id) })).await,
        }
    }

    /// `session …`
    pub async fn session(&self, cmd: SessionCmd) -> anyhow::Result<()> {
        let session = |id: String, server: Option<String>| Session { id: Text(id), server_id: server.map(Text) };
        match cmd {
            SessionCmd::List => {
                self.snapshot_list("sessions", &["CONTEXT", "SERVER", "STATUS", "TASKS", "ACTIVE", "LIVE", "STREAMING", "LAST SEEN"], |x| {
                    ["contextId", "serverId", "status", "taskCount", "activeCount", "live", "streaming"].iter().map(|k| s(&x[*k])).chain([time(&x["lastSeen"])]).collect()
                })
                .await
            }
            SessionCmd::Cancel { id, server } => self.action(Action::SessionCancel(session(id, server))).await,
            SessionCmd::Close { id, server } => self.action(Action::SessionClose(session(id, server))).await,
        }
    }

    /// `metrics`
    pub async fn metrics(&self, prometheus: bool) -> anyhow::Result<()> {
        if prometheus {
            let url = format!("{}/metrics?format=prometheus", self.opts.api.trim_end_matches('/'));
            let r = self.http.get(&url).send().await.with_context(|| format!("cannot reach {url}"))?;
            print!("{}", r.error_for_status()?.text().await?);
            return Ok(());
        }
        let v = self.get("/metrics").await?;
        self.print(&v, |m| {
            println!("active tasks    {}", m["activeTasks"]);
            println!("open streams    {}", m["openStreams"]);
            println!("live sessions   {}", m["liveSessions"]);
            let l = &m["sendMessageLatency"];
            println!("SendMessage     {} calls, p50 {} µs, p99 {} µs", l["count"], s(&l["p50Us"]), s(&l["p99Us"]));
            println!("tasks by state  {}", m["tasksByState"]);
            println!("gate rejections {}", m["gateRejections"]);
            println!("components      {}", m["components"]);
            println!("store           {}", m["store"]);
            table::print(&["INSTANCE", "METHOD", "OUTCOME", "COUNT"], &m["requests"], |r| vec![s(&r["instance"]), s(&r["method"]), s(&r["outcome"]), s(&r["count"])]);
        });
        Ok(())
    }

    /// `update`
    pub async fn update(&self, refresh: bool) -> anyhow::Result<()> {
        let v = self.get(if refresh { "/update?refresh=1" } else { "/update" }).await?;
        let ok = v["ok"] == true;
        self.print(&v, |u| {
            if !ok {
                return; // reported as the error below
            }
            if u["hasUpdate"] == true {
                println!("a2a-edge {} → {} is available ({}; {})", s(&u["current"]), s(&u["latest"]), s(&u["source"]), s(&u["repoUrl"]));
            } else if u["ahead"] == true {
                println!("a2a-edge {} is ahead of the latest release {}", s(&u["current"]), s(&u["latest"]));
            } else {
                println!("a2a-edge {} is up to date", s(&u["current"]));
            }
        });
        if v["ok"] != true {
            bail!("the update check failed: {}", s(&v["error"]));
        }
        Ok(())
    }
}

/// The JSON of a control answer; a non-2xx status becomes an error with the server's message.
async fn read(r: reqwest::Response) -> anyhow::Result<Value> {
    let status = r.status();
    let text = r.text().await.context("the control API's answer broke off")?;
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|_| json!({ "message": text }));
    if !status.is_success() {
        let why = v["message"].as_str().or_else(|| v["error"].as_str()).unwrap_or("no message");
        bail!("{why} (HTTP {})", status.as_u16());
    }
    Ok(v)
}

/// A cell: strings bare, null as `-`, anything else as JSON.
fn s(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(x) => x.clone(),
        other => other.to_string(),
    }
}

fn short_state(v: &Value) -> String {
    s(v).trim_start_matches("TASK_STATE_").to_ascii_lowercase()
}

/// A ms timestamp as RFC 3339.
fn time(v: &Value) -> String {
    v.as_u64().map_or_else(|| "-".into(), a2a_protocol::time::rfc3339_ms)
}
