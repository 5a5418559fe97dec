//! Push-notification configs (A2A 1.0.1 §4.3): the flattened `TaskPushNotificationConfig`, how
//! a request's config is checked and completed, the list pages, and the headers of a delivery.
//! Where a webhook may point (after DNS) is the runtime's egress guard's to decide, not this.

use serde::{Deserialize, Serialize};

use crate::errors::{ErrorKind, RpcError};

/// The longest webhook URL taken.
pub const MAX_URL: usize = 2048;
/// The longest token, scheme or credentials taken.
pub const MAX_SECRET: usize = 4096;
/// Configs one task may have.
pub const MAX_PER_TASK: usize = 10;
/// The default and largest list page.
pub const PAGE: usize = 50;

/// How a delivery authenticates to the webhook: `Authorization: <scheme> <credentials>`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthenticationInfo {
    /// E.g. `Bearer`.
    pub scheme: String,
    /// What follows the scheme.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<String>,
}

/// One push-notification config of one task.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPushNotificationConfig {
    /// Tenant, as the request named it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    /// The config's id within its task (defaults to the task id).
    #[serde(default)]
    pub id: String,
    /// The task.
    #[serde(default, alias = "task_id")]
    pub task_id: String,
    /// The webhook.
    pub url: String,
    /// Sent back in `X-A2A-Notification-Token`, so the receiver knows the sender.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Sent as `Authorization`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<AuthenticationInfo>,
}

/// `GetTaskPushNotificationConfig` and `DeleteTaskPushNotificationConfig` params.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigRef {
    /// The task.
    #[serde(alias = "task_id")]
    pub task_id: String,
    /// The config's id within the task.
    pub id: String,
}

/// `ListTaskPushNotificationConfigs` params.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListConfigs {
    /// The task.
    #[serde(alias = "task_id")]
    pub task_id: String,
    /// 1..=[`PAGE`], default [`PAGE`].
    #[serde(default, alias = "page_size")]
    pub page_size: Option<i64>,
    /// The previous page's `nextPageToken`.
    #[serde(default, alias = "page_token")]
    pub page_token: String,
}

/// The `ListTaskPushNotificationConfigs` answer.
pub fn list_response(configs: &[TaskPushNotificationConfig], next: String) -> serde_json::Value {
    serde_json::json!({ "configs": configs, "nextPageToken": next })
}

/// What a delivery POSTs for a task update: a `StreamResponse` carrying the task as stored.
pub fn payload(task_json: &str) -> String {
    format!("{{\"task\":{task_json}}}")
}

fn invalid(message: impl Into<String>) -> RpcError {
    RpcError::new(ErrorKind::InvalidParams, message)
}

impl TaskPushNotificationConfig {
    /// Checks a config a client sent for `task_id` (the path's or the new task's, for an inline
    /// config) and completes it: the id defaults to the task id.
    pub fn checked(mut self, task_id: &str) -> Result<Self, RpcError> {
        if !self.task_id.is_empty() && self.task_id != task_id {
            return Err(invalid(format!(
                "the config names task {}, not {task_id}",
                self.task_id
            )));
        }
        self.task_id = task_id.to_owned();
        // proto3 clients send unset strings as "": no token is no token.
        self.token = self.token.filter(|t| !t.is_empty());
        if self.id.is_empty() {
            self.id = task_id.to_owned();
        }
        if self.id.len() > 256 || self.id.chars().any(char::is_control) {
            return Err(invalid("a config id is at most 256 printable characters"));
        }
        webhook(&self.url)?;
        let secrets = [
            self.token.as_deref(),
            self.authentication.as_ref().map(|a| a.scheme.as_str()),
            self.authentication
                .as_ref()
                .and_then(|a| a.credentials.as_deref()),
        ];
        for s in secrets.into_iter().flatten() {
            if s.len() > MAX_SECRET || s.chars().any(|c| c.is_control()) {
                return Err(invalid(format!(
                    "token, scheme and credentials are at most {MAX_SECRET} printable characters"
                )));
            }
        }
        if let Some(a) = &self.authentication
            && (a.scheme.is_empty() || a.scheme.contains(char::is_whitespace))
        {
            return Err(invalid(
                "authentication.scheme must be one word, e.g. Bearer",
            ));
        }
        Ok(self)
    }

    /// The headers of a delivery: the media type, `Authorization` when the config has
    /// authentication, and the token under both names SDKs read.
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let mut out = vec![("content-type", "application/a2a+json".to_owned())];
        if let Some(a) = &self.authentication {
            let value = match &a.credentials {
                Some(c) => format!("{} {c}", a.scheme),
                None => a.scheme.clone(),
            };
            out.push(("authorization", value));
        }
        if let Some(t) = &self.token {
            out.push(("x-a2a-notification-token", t.clone()));
            out.push(("a2a-notification-token", t.clone()));
        }
        out
    }

    /// The config as an A2A answer shows it: the token and the credentials are write-only (the
    /// webhook receives them; no caller reads them back, so a caller of a shared endpoint cannot
    /// learn another's), the scheme stays.
    pub fn shown(mut self) -> Self {
        self.token = None;
        if let Some(a) = &mut self.authentication {
            a.credentials = None;
        }
        self
    }

    /// The config as the operator sees it: the token and credentials replaced by whether they
    /// are set.
    pub fn redacted(&self) -> serde_json::Value {
        serde_json::json!({
            "id": self.id, "taskId": self.task_id, "url": self.url,
            "hasToken": self.token.is_some(),
            "authentication": self.authentication.as_ref().map(|a| a.scheme.clone()),
        })
    }
}

/// Checks a webhook URL's form: http or https, a host, no user info, at most [`MAX_URL`] bytes.
/// Returns the host and port, for the runtime's guard to resolve and judge.
pub fn webhook(url: &str) -> Result<(String, u16), RpcError> {
    if url.len() > MAX_URL {
        return Err(invalid(format!(
            "the webhook URL is longer than {MAX_URL} bytes"
        )));
    }
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| invalid(format!("the webhook URL {url:?} is not absolute")))?;
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "http" => 80,
        "https" => 443,
        other => return Err(invalid(format!("webhooks are http or https, not {other}"))),
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return Err(invalid(
            "a webhook URL may not carry user info; use authentication",
        ));
    }
    let port = |p: &str| {
        p.parse::<u16>()
            .map_err(|_| invalid(format!("the webhook port {p:?} is not a number")))
    };
    let (host, port) = match authority.strip_prefix('[') {
        Some(bracketed) => match bracketed.split_once(']') {
            Some((h, "")) => (h, default_port),
            Some((h, after)) => match after.strip_prefix(':') {
                Some(p) => (h, port(p)?),
                None => return Err(invalid(format!("the webhook URL {url:?} has a bad host"))),
            },
            None => return Err(invalid(format!("the webhook URL {url:?} has a bad host"))),
        },
        None => match authority.split_once(':') {
            Some((h, p)) => (h, port(p)?),
            None => (authority, default_port),
        },
    };
    if host.is_empty() {
        return Err(invalid(format!("the webhook URL {url:?} has no host")));
    }
    Ok((host.to_ascii_lowercase(), port))
}

/// One page of `configs` (in their stored order) after `token` (the last id of the previous
/// page, empty for the first), at most `size` long: the page and the next token (empty at
/// the end).
pub fn page<'a>(
    configs: &'a [TaskPushNotificationConfig],
    size: Option<i64>,
    token: &str,
) -> Result<(&'a [TaskPushNotificationConfig], String), RpcError> {
    // proto3: a zero page size is the field left unset.
    let size = match size {
        None | Some(0) => PAGE,
        Some(n) if (1..=PAGE as i64).contains(&n) => n as usize,
        Some(n) => return Err(invalid(format!("pageSize must be 1 to {PAGE}, not {n}"))),
    };
    let start = if token.is_empty() {
        0
    } else {
        configs
            .iter()
            .position(|c| c.id == token)
            .map(|i| i + 1)
            .ok_or_else(|| invalid("pageToken does not name a config of this task"))?
    };
    let rest = &configs[start..];
    let shown = &rest[..rest.len().min(size)];
    let next = if rest.len() > size {
        shown.last().map(|c| c.id.clone()).unwrap_or_default()
    } else {
        String::new()
    };
    Ok((shown, next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_never_carry_the_webhook_secrets() {
        let c: TaskPushNotificationConfig = serde_json::from_value(serde_json::json!({
            "id": "c", "taskId": "t", "url": "https://h/w", "token": "tok-secret",
            "authentication": {"scheme": "Bearer", "credentials": "cred-secret"}
        }))
        .unwrap();
        let shown = serde_json::to_string(&c.clone().shown()).unwrap();
        assert!(
            !shown.contains("secret") && shown.contains("\"scheme\":\"Bearer\""),
            "{shown}"
        );
        let headers = c.headers();
        assert!(
            headers.iter().any(|(_, v)| v == "Bearer cred-secret")
                && headers.iter().any(|(_, v)| v == "tok-secret"),
            "deliveries still carry both"
        );
    }

    fn config(url: &str) -> TaskPushNotificationConfig {
        serde_json::from_value(serde_json::json!({ "url": url })).unwrap()
    }

    #[test]
    fn a_config_is_completed_for_its_task_and_checked() {
        let c = config("https://hooks.example/a2a").checked("t1").unwrap();
        assert_eq!((c.id.as_str(), c.task_id.as_str()), ("t1", "t1"));
        let named: TaskPushNotificationConfig = serde_json::from_value(serde_json::json!({
            "id": "c1", "taskId": "t1", "url": "http://h:8080/x", "token": "tok",
            "authentication": { "scheme": "Bearer", "credentials": "cred" }
        }))
        .unwrap();
        let c = named.clone().checked("t1").unwrap();
        assert_eq!(c.id, "c1");
        let mut unset = config("https://h/x");
        unset.token = Some(String::new());
        assert_eq!(
            unset.checked("t").unwrap().token,
            None,
            "an empty token is none"
        );
        assert!(
            named
                .checked("t2")
                .unwrap_err()
                .message
                .contains("names task t1")
        );
        for bad in [
            "ftp://h/x",
            "h/x",
            "http://user:pw@h/x",
            "http:///x",
            "http://h:port/x",
        ] {
            assert_eq!(
                config(bad).checked("t").unwrap_err().kind,
                ErrorKind::InvalidParams,
                "{bad}"
            );
        }
        let long = format!("https://h/{}", "x".repeat(MAX_URL));
        assert!(config(&long).checked("t").is_err());
        let mut spaced = config("https://h/x");
        spaced.authentication = Some(AuthenticationInfo {
            scheme: "Bea rer".into(),
            credentials: None,
        });
        assert!(spaced.checked("t").is_err());
    }

    #[test]
    fn webhook_hosts_and_ports_are_read_for_the_guard() {
        assert_eq!(
            webhook("https://Hooks.Example/a").unwrap(),
            ("hooks.example".into(), 443)
        );
        assert_eq!(
            webhook("http://10.0.0.1:9000").unwrap(),
            ("10.0.0.1".into(), 9000)
        );
        assert_eq!(
            webhook("http://[::1]:8080/x").unwrap(),
            ("::1".into(), 8080)
        );
        assert_eq!(webhook("http://[::1]/x").unwrap(), ("::1".into(), 80));
        assert_eq!(
            webhook("http://169.254.169.254/latest").unwrap(),
            ("169.254.169.254".into(), 80)
        );
    }

    #[test]
    fn deliveries_carry_the_media_type_the_authorization_and_the_token_twice() {
        let mut c = config("https://h/x").checked("t").unwrap();
        assert_eq!(
            c.headers(),
            [("content-type", "application/a2a+json".to_owned())]
        );
        c.token = Some("tok".into());
        c.authentication = Some(AuthenticationInfo {
            scheme: "Bearer".into(),
            credentials: Some("cred".into()),
        });
        let h = c.headers();
        assert!(h.contains(&("authorization", "Bearer cred".to_owned())));
        assert!(h.contains(&("x-a2a-notification-token", "tok".to_owned())));
        assert!(h.contains(&("a2a-notification-token", "tok".to_owned())));
        let shown = c.redacted().to_string();
        assert!(
            !shown.contains("cred") && !shown.contains("\"tok\""),
            "{shown}"
        );
    }

    #[test]
    fn requests_take_both_spellings_and_answers_have_the_proto_shape() {
        let r: ConfigRef =
            serde_json::from_value(serde_json::json!({ "task_id": "t", "id": "c" })).unwrap();
        assert_eq!((r.task_id.as_str(), r.id.as_str()), ("t", "c"));
        let l: ListConfigs =
            serde_json::from_value(serde_json::json!({ "taskId": "t", "pageSize": 2 })).unwrap();
        assert_eq!((l.page_size, l.page_token.as_str()), (Some(2), ""));
        let c = config("https://h/x").checked("t").unwrap();
        let v = list_response(std::slice::from_ref(&c), String::new());
        assert_eq!(v["configs"][0]["taskId"], "t");
        assert_eq!(v["nextPageToken"], "");
        let body: serde_json::Value =
            serde_json::from_str(&payload(r#"{"id":"t","status":{}}"#)).unwrap();
        assert_eq!(body["task"]["id"], "t");
        assert_eq!(body.as_object().unwrap().len(), 1, "exactly one member");
    }

    #[test]
    fn lists_page_by_the_last_id() {
        let all: Vec<_> = (0..5)
            .map(|i| {
                let mut c = config("https://h/x");
                c.id = format!("c{i}");
                c.checked("t").unwrap()
            })
            .collect();
        let (first, next) = page(&all, Some(2), "").unwrap();
        assert_eq!((first.len(), next.as_str()), (2, "c1"));
        let (second, next) = page(&all, Some(2), &next).unwrap();
        assert_eq!((second[0].id.as_str(), next.as_str()), ("c2", "c3"));
        let (last, next) = page(&all, Some(2), &next).unwrap();
        assert_eq!((last.len(), next.as_str()), (1, ""));
        assert_eq!(page(&all, Some(0), "").unwrap().0.len(), 5, "0 is unset");
        assert!(page(&all, Some(-1), "").is_err());
        assert!(page(&all, Some(51), "").is_err());
        assert!(page(&all, None, "nope").is_err());
    }
}
