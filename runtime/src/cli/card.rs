//! `a2a-edge card URL`: any agent's card fetched, checked as the panel checks it, and printed.

use anyhow::{Context, bail};
use serde_json::{Value, json};

use super::{s, table};

/// The largest card read.
const MAX_CARD_BYTES: usize = 1 << 20;

/// Fetches the card at `url`, prints it with its checks (or, with `json`, both as one JSON
/// document); fails when a check does.
pub async fn run(url: &str, json: bool) -> anyhow::Result<()> {
    let card = fetch(url).await?;
    let checks = a2a_protocol::card::checks(&card);
    let failed = checks.iter().filter(|c| !c.ok).count();
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({ "ok": failed == 0, "card": card, "checks": checks })
            )?
        );
    } else {
        println!("{} {}", s(&card["name"]), s(&card["version"]));
        if let Some(d) = card["description"].as_str() {
            println!("{d}");
        }
        table::print(
            &["BINDING", "VERSION", "URL"],
            &card["supportedInterfaces"],
            |i| {
                vec![
                    s(&i["protocolBinding"]),
                    s(&i["protocolVersion"]),
                    s(&i["url"]),
                ]
            },
        );
        table::print(&["SKILL", "NAME", "DESCRIPTION"], &card["skills"], |k| {
            vec![s(&k["id"]), s(&k["name"]), s(&k["description"])]
        });
        for c in &checks {
            let mark = if c.ok { "ok  " } else { "FAIL" };
            let detail = if c.detail.is_empty() {
                String::new()
            } else {
                format!(" ({})", c.detail)
            };
            println!("{mark} {}{detail}", c.label);
        }
    }
    if failed > 0 {
        bail!(
            "the card at {url} fails {failed} of {} checks",
            checks.len()
        );
    }
    Ok(())
}

/// The card's JSON, read up to [`MAX_CARD_BYTES`].
async fn fetch(url: &str) -> anyhow::Result<Value> {
    let http = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(10))
        .build()?;
    let mut r = http
        .get(url)
        .header("accept", "application/json")
        .send()
        .await
        .with_context(|| format!("cannot fetch the card at {url}"))?;
    if !r.status().is_success() {
        bail!("the card at {url} answered HTTP {}", r.status().as_u16());
    }
    let mut body = Vec::new();
    while let Some(chunk) = r
        .chunk()
        .await
        .with_context(|| format!("the card at {url} broke off"))?
    {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_CARD_BYTES {
            bail!("the card at {url} is larger than {MAX_CARD_BYTES} bytes");
        }
    }
    let card: Value =
        serde_json::from_slice(&body).with_context(|| format!("the card at {url} is not JSON"))?;
    if !card.is_object() {
        bail!("the card at {url} is not a JSON object");
    }
    Ok(card)
}
