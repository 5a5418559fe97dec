//! `a2a-edge task …` and `a2a-edge session …`.

use clap::Subcommand;
use control_api::{Action, Id, Session, Text};
use serde_json::json;

use super::{Control, s, send, short_state, table, time};

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

impl Control {
    /// `task …`
    // One arm per subcommand, each a request and its table: it reads better whole.
    pub async fn task(&self, cmd: TaskCmd) -> anyhow::Result<()> {
        match cmd {
            TaskCmd::List {
                state,
                context,
                server,
                limit,
                offset,
            } => {
                let mut q = vec![format!("taskLimit={limit}"), format!("taskOffset={offset}")];
                for (k, v) in [
                    ("taskState", state),
                    ("taskContextId", context),
                    ("taskServerId", server),
                ] {
                    if let Some(v) = v {
                        q.push(format!(
                            "{k}={}",
                            form_urlencoded::byte_serialize(v.as_bytes()).collect::<String>()
                        ));
                    }
                }
                let v = self.get(&format!("?{}", q.join("&"))).await?;
                let page = json!({ "tasks": v["tasks"], "taskTotal": v["taskTotal"], "taskNextOffset": v["taskNextOffset"] });
                self.print(&page, |p| {
                    table::print(
                        &["TASK", "STATE", "SERVER", "CONTEXT", "SKILL", "UPDATED"],
                        &p["tasks"],
                        |t| {
                            vec![
                                s(&t["taskId"]),
                                short_state(&t["state"]),
                                s(&t["serverId"]),
                                s(&t["contextId"]),
                                s(&t["skill"]),
                                time(&t["updatedAt"]),
                            ]
                        },
                    );
                    let next = p["taskNextOffset"]
                        .as_u64()
                        .map(|n| format!("; next page: --offset {n}"))
                        .unwrap_or_default();
                    println!("{} task(s) in all{next}", p["taskTotal"]);
                });
                Ok(())
            }
            TaskCmd::Get { id } => {
                let v = self
                    .get(&format!(
                        "/task?id={}",
                        form_urlencoded::byte_serialize(id.as_bytes()).collect::<String>()
                    ))
                    .await?;
                self.print(&v, |t| {
                    for k in [
                        "taskId",
                        "state",
                        "serverId",
                        "contextId",
                        "skill",
                        "peerId",
                    ] {
                        println!("{k:<10} {}", s(&t[k]));
                    }
                    println!("{:<10} {}", "updated", time(&t["updatedAt"]));
                    if let Some(e) = t["error"].as_object() {
                        println!("{:<10} {}", "error", s(&e["message"].clone()));
                        // The operator's reason, which the caller never sees.
                        if let Some(detail) = e.get("detail") {
                            println!("{:<10} {}", "why", s(detail));
                        }
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
        let session = |id: String, server: Option<String>| Session {
            id: Text(id),
            server_id: server.map(Text),
        };
        match cmd {
            SessionCmd::List => {
                self.snapshot_list(
                    "sessions",
                    &[
                        "CONTEXT",
                        "SERVER",
                        "STATUS",
                        "TASKS",
                        "ACTIVE",
                        "LIVE",
                        "STREAMING",
                        "LAST SEEN",
                    ],
                    |x| {
                        [
                            "contextId",
                            "serverId",
                            "status",
                            "taskCount",
                            "activeCount",
                            "live",
                            "streaming",
                        ]
                        .iter()
                        .map(|k| s(&x[*k]))
                        .chain([time(&x["lastSeen"])])
                        .collect()
                    },
                )
                .await
            }
            SessionCmd::Cancel { id, server } => {
                self.action(Action::SessionCancel(session(id, server)))
                    .await
            }
            SessionCmd::Close { id, server } => {
                self.action(Action::SessionClose(session(id, server))).await
            }
        }
    }
}
