//! The web panel at `/a2a/ui`: plain ES modules, a stylesheet and one page, embedded in the
//! binary (no build step, nothing fetched at run time). It is a client of the control API and
//! sits behind the same guards (docs/control.md "Control API"); its own headers forbid framing, inline scripts and
//! any other origin, so what it shows of remote agents can never run as code.

use std::sync::OnceLock;

use http::{HeaderMap, Method, Response, header};
use sha2::{Digest, Sha256};

use crate::responses::{Body, full};

/// One embedded file: its path under `/a2a/ui`, media type and content.
struct Asset {
    path: &'static str,
    media: &'static str,
    content: &'static str,
}

macro_rules! assets {
    ($($path:literal => $media:expr),+ $(,)?) => {
        &[$(Asset { path: $path, media: $media, content: include_str!(concat!("ui/", $path)) }),+]
    };
}

const JS: &str = "text/javascript; charset=utf-8";

static ASSETS: &[Asset] = assets! {
    "index.html" => "text/html; charset=utf-8",
    "style.css" => "text/css; charset=utf-8",
    "app.js" => JS,
    "api.js" => JS,
    "auth.js" => JS,
    "dom.js" => JS,
    "charts.js" => JS,
    "overview.js" => JS,
    "instance.js" => JS,
    "console.js" => JS,
    "tasks.js" => JS,
    "trace.js" => JS,
    "sessions.js" => JS,
    "outbound.js" => JS,
    "components.js" => JS,
    "metrics.js" => JS,
};

/// What the page may do: its own scripts, styles and API, nothing else, never framed.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Bytes of every embedded file (the page weight).
pub fn weight() -> usize {
    ASSETS.iter().map(|a| a.content.len()).sum()
}

fn etags() -> &'static [String] {
    static TAGS: OnceLock<Vec<String>> = OnceLock::new();
    TAGS.get_or_init(|| {
        ASSETS
            .iter()
            .map(|a| format!("\"{}\"", &hex::encode(Sha256::digest(a.content))[..16]))
            .collect()
    })
}

/// Answers `GET`/`HEAD /a2a/ui[/<file>]` (the page for `/a2a/ui` itself); `None` for a path
/// that is not one of the panel's files.
pub fn serve(method: &Method, path: &str, headers: &HeaderMap) -> Option<Response<Body>> {
    let name = match path.strip_prefix("/a2a/ui")?.trim_start_matches('/') {
        "" => "index.html",
        name => name,
    };
    let i = ASSETS.iter().position(|a| a.path == name)?;
    let (asset, etag) = (&ASSETS[i], &etags()[i]);
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    let body = if fresh || method == Method::HEAD {
        full("")
    } else {
        full(asset.content)
    };
    let response = Response::builder()
        .status(if fresh { 304 } else { 200 })
        .header(header::CONTENT_TYPE, asset.media)
        .header(header::CACHE_CONTROL, "no-cache")
        .header(header::ETAG, etag.as_str())
        .header(header::CONTENT_SECURITY_POLICY, POLICY)
        .header(header::X_FRAME_OPTIONS, "DENY")
        .header(header::X_CONTENT_TYPE_OPTIONS, "nosniff")
        .header(header::REFERRER_POLICY, "no-referrer")
        .body(body)
        .expect("static response parts are valid");
    Some(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_each_file_with_its_type_and_policy_and_revalidates_by_etag() {
        let none = HeaderMap::new();
        let page = serve(&Method::GET, "/a2a/ui", &none).expect("the page");
        assert_eq!(
            page.headers()[header::CONTENT_TYPE],
            "text/html; charset=utf-8"
        );
        assert!(
            page.headers()[header::CONTENT_SECURITY_POLICY]
                .to_str()
                .unwrap()
                .contains("frame-ancestors 'none'")
        );
        let js = serve(&Method::GET, "/a2a/ui/app.js", &none).expect("a module");
        assert_eq!(js.headers()[header::CONTENT_TYPE], JS);
        let mut again = HeaderMap::new();
        again.insert(header::IF_NONE_MATCH, js.headers()[header::ETAG].clone());
        assert_eq!(
            serve(&Method::GET, "/a2a/ui/app.js", &again)
                .unwrap()
                .status(),
            304
        );
        assert!(serve(&Method::GET, "/a2a/ui/../api", &none).is_none());
        assert!(serve(&Method::GET, "/a2a/uix", &none).is_none());
        assert!(serve(&Method::GET, "/a2a/ui/nope.js", &none).is_none());
    }

    #[test]
    fn every_module_the_page_imports_is_embedded() {
        for a in ASSETS
            .iter()
            .filter(|a| a.path.ends_with(".js") || a.path.ends_with(".html"))
        {
            for import in a
                .content
                .split("from \"./")
                .skip(1)
                .chain(a.content.split("src=\"/a2a/ui/").skip(1))
            {
                let name = &import[..import.find('"').unwrap()];
                assert!(
                    ASSETS.iter().any(|b| b.path == name),
                    "{} imports {name}, which is not embedded",
                    a.path
                );
            }
        }
    }
}
