//! Rendering a message's parts into the session prompt (docs/protocol.md "A2A methods").

use crate::types::Part;

/// Renders parts as prompt text, one part per line: text as is, data as its JSON text, a `url`
/// part as text (never downloaded), a `raw` part as a readable placeholder (the attachments
/// service replaces it with a durable reference before this runs, when it is on).
pub fn render(parts: &[Part]) -> String {
    parts.iter().map(render_part).collect::<Vec<_>>().join("\n")
}

fn render_part(p: &Part) -> String {
    if let Some(t) = &p.text {
        return t.clone();
    }
    if let Some(d) = &p.data {
        return d.to_string();
    }
    let name = p.filename.as_deref().unwrap_or("file");
    let media = p
        .media_type
        .as_deref()
        .unwrap_or("application/octet-stream");
    if let Some(url) = &p.url {
        return format!("[file {name} {media} {url}]");
    }
    let size = p.raw.as_deref().map_or(0, base64_decoded_len);
    format!("[attachment {name} {media} {size} bytes]")
}

/// Decoded length of base64 text (standard or URL-safe, padded or not).
pub fn base64_decoded_len(b64: &str) -> usize {
    let n = b64.trim_end_matches('=').len();
    n / 4 * 3 + [0, 0, 1, 2][n % 4]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_every_part_kind() {
        let parts = vec![
            Part::text("hello"),
            Part::data(json!({"k": 1})),
            Part {
                url: Some("https://x/y.pdf".into()),
                filename: Some("y.pdf".into()),
                media_type: Some("application/pdf".into()),
                ..Default::default()
            },
            Part {
                raw: Some("aGVsbG8=".into()),
                filename: Some("h.txt".into()),
                media_type: Some("text/plain".into()),
                ..Default::default()
            },
            Part {
                raw: Some("aGk".into()),
                ..Default::default()
            },
        ];
        assert_eq!(
            render(&parts),
            "hello\n{\"k\":1}\n[file y.pdf application/pdf https://x/y.pdf]\n[attachment h.txt text/plain 5 bytes]\n[attachment file application/octet-stream 2 bytes]"
        );
    }

    #[test]
    fn base64_lengths() {
        assert_eq!(base64_decoded_len(""), 0);
        assert_eq!(base64_decoded_len("aGVsbG8="), 5);
        assert_eq!(base64_decoded_len("aGVsbG8"), 5);
        assert_eq!(base64_decoded_len("aGVsbG8h"), 6);
    }
}
