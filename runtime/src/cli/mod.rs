//! The CLI as a client: of the control API (instances, tasks, sessions, metrics, update) and of
//! any A2A agent (`send`). Human tables by default, `--json` for scripts; failures exit non-zero
//! with the server's message.

pub mod agent;
pub mod card;
mod component;
mod inbound;
mod outbound;
pub mod send;
mod table;
mod work;

use anyhow::{Context, bail};
use clap::Args;
use control_api::Action;
use serde_json::{Value, json};

pub use component::ComponentCmd;
pub use inbound::Inbound;
pub use outbound::Outbound;
pub use send::SendArgs;
pub use work::{SessionCmd, TaskCmd};

/// Where the control API is and how to print.
#[derive(Args, Clone)]
pub struct ClientOpts {
    /// Control API base URL.
    #[arg(
        long,
        global = true,
        env = "A2A_EDGE_API",
        default_value = "http://127.0.0.1:3080/a2a/api"
    )]
    pub api: String,
    /// Print the server's JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
}

/// The one instance or connection a command acts on.
#[derive(Args)]
pub struct Target {
    /// Its id (`inbound list`, `outbound list` show them).
    id: String,
}

impl Target {
    /// As the control action's `id`.
    fn id(self) -> control_api::Id {
        control_api::Id {
            id: control_api::Text(self.id),
        }
    }
}

/// A client of the control API.
pub struct Control {
    http: reqwest::Client,
    opts: ClientOpts,
}

impl Control {
    /// A client for `opts.api`.
    pub fn new(opts: ClientOpts) -> Control {
        Control {
            http: reqwest::Client::new(),
            opts,
        }
    }

    async fn get(&self, path: &str) -> anyhow::Result<Value> {
        let url = format!("{}{path}", self.opts.api.trim_end_matches('/'));
        let r = self.http.get(&url).send().await.with_context(|| {
            format!(
                "cannot reach the control API at {url} (is `a2a-edge serve` running? set --api)"
            )
        })?;
        read(r).await
    }

    async fn act(&self, action: Action) -> anyhow::Result<Value> {
        let url = self.opts.api.trim_end_matches('/').to_owned();
        let r = self
            .http
            .post(&url)
            .json(&action.to_body())
            .send()
            .await
            .with_context(|| {
                format!(
                    "cannot reach the control API at {url} (is `a2a-edge serve` running? set --api)"
                )
            })?;
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
    async fn snapshot_list(
        &self,
        key: &str,
        header: &[&str],
        cells: impl Fn(&Value) -> Vec<String>,
    ) -> anyhow::Result<()> {
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

    /// `metrics`
    pub async fn metrics(&self, prometheus: bool) -> anyhow::Result<()> {
        if prometheus {
            let url = format!(
                "{}/metrics?format=prometheus",
                self.opts.api.trim_end_matches('/')
            );
            let r = self
                .http
                .get(&url)
                .send()
                .await
                .with_context(|| format!("cannot reach {url}"))?;
            print!("{}", r.error_for_status()?.text().await?);
            return Ok(());
        }
        let v = self.get("/metrics").await?;
        self.print(&v, |m| {
            println!("active tasks    {}", m["activeTasks"]);
            println!("open streams    {}", m["openStreams"]);
            println!("live sessions   {}", m["liveSessions"]);
            let l = &m["sendMessageLatency"];
            println!(
                "SendMessage     {} calls, p50 {} µs, p99 {} µs",
                l["count"],
                s(&l["p50Us"]),
                s(&l["p99Us"])
            );
            println!("tasks by state  {}", m["tasksByState"]);
            println!("gate rejections {}", m["gateRejections"]);
            println!("components      {}", m["components"]);
            println!("store           {}", m["store"]);
            table::print(
                &["INSTANCE", "METHOD", "OUTCOME", "COUNT"],
                &m["requests"],
                |r| {
                    vec![
                        s(&r["instance"]),
                        s(&r["method"]),
                        s(&r["outcome"]),
                        s(&r["count"]),
                    ]
                },
            );
        });
        Ok(())
    }

    /// `update`
    pub async fn update(&self, refresh: bool) -> anyhow::Result<()> {
        let v = self
            .get(if refresh {
                "/update?refresh=1"
            } else {
                "/update"
            })
            .await?;
        // A failed check is the command's error, printed once (as JSON with --json).
        if v["ok"] != true {
            bail!("the update check failed: {}", s(&v["error"]));
        }
        self.print(&v, |u| {
            if u["hasUpdate"] == true {
                println!(
                    "a2a-edge {} → {} is available ({}; {})",
                    s(&u["current"]),
                    s(&u["latest"]),
                    s(&u["source"]),
                    s(&u["repoUrl"])
                );
            } else if u["ahead"] == true {
                println!(
                    "a2a-edge {} is ahead of the latest release {}",
                    s(&u["current"]),
                    s(&u["latest"])
                );
            } else {
                println!("a2a-edge {} is up to date", s(&u["current"]));
            }
        });
        Ok(())
    }
}

/// The JSON of a control answer; a non-2xx status becomes an error with the server's message.
async fn read(r: reqwest::Response) -> anyhow::Result<Value> {
    let status = r.status();
    let text = r
        .text()
        .await
        .context("the control API's answer broke off")?;
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|_| json!({ "message": text }));
    if !status.is_success() {
        let why = v["message"]
            .as_str()
            .or_else(|| v["error"].as_str())
            .or_else(|| v["error"]["message"].as_str())
            .unwrap_or("the control API refused without saying why");
        return Err(Refused {
            message: in_cli_terms(why),
            status: status.as_u16(),
        }
        .into());
    }
    Ok(v)
}

/// The control API's words for what the CLI names otherwise (its fields, actions and reads), as
/// a refusal may use them, and the CLI's flags and commands for them.
const CLI_TERMS: [(&str, &str); 8] = [
    (
        "GET /a2a/api lists the instances",
        "`a2a-edge inbound list` lists them",
    ),
    (
        "GET /a2a/api lists the connections",
        "`a2a-edge outbound list` lists them",
    ),
    ("send \"allowWeak\": true", "pass --allow-weak"),
    ("send \"clear\": true", "pass --clear"),
    (
        "give either \"token\" or \"clear\": true, not both",
        "give either a token or --clear, not both",
    ),
    (
        "set tokenUrl and clientId (or clear: true to remove the client)",
        "pass --oauth-token-url and --client-id (or --clear-oauth to remove the client)",
    ),
    (
        "set issuer and audience (or clear: true to remove the scheme)",
        "pass --issuer and --audience (or --clear to remove the scheme)",
    ),
    ("field \"token\"", "the token"),
];

/// A control API refusal in the CLI's words ([`CLI_TERMS`]).
fn in_cli_terms(message: &str) -> String {
    CLI_TERMS
        .iter()
        .fold(message.to_owned(), |m, (api, cli)| m.replace(api, cli))
}

/// A refusal of the control API: its message (what a person reads) and its HTTP status (which
/// only `--json` prints).
#[derive(Debug)]
pub struct Refused {
    /// The server's message.
    pub message: String,
    /// The HTTP status.
    pub status: u16,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Refused {}

/// One line of standard input, trimmed: a secret kept out of arguments (process lists, shell
/// history); `what` names it in the error.
fn secret_from_stdin(what: &str) -> anyhow::Result<String> {
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .with_context(|| format!("cannot read {what} from standard input"))?;
    Ok(line.trim().to_owned())
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
    v.as_u64()
        .map_or_else(|| "-".into(), a2a_protocol::time::rfc3339_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use control_api::{Flag, Str};

    #[test]
    fn token_refusals_name_the_cli_flags() {
        let token = |t: &str| Str(t.into());
        for (token, clear, flag) in [
            (Some(token("short")), None, "--allow-weak"),
            (Some(token(" ")), None, "--clear"),
            (
                Some(token("long-enough-token")),
                Some(Flag(true)),
                "--clear",
            ),
        ] {
            let refused = control_api::auth_change(token.as_ref(), clear, None, 16).unwrap_err();
            let said = in_cli_terms(&refused);
            assert!(
                said.contains(flag) && !said.contains('"'),
                "{refused} -> {said}"
            );
        }
    }
}
