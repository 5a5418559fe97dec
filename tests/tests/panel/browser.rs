//! Headless Chromium through ChromeDriver (Debian's `chromium` and `chromium-driver`), driven
//! by fantoccini: one fresh browser and profile per flow, its screenshots under
//! `target/ui-screenshots/`, and its console read at the end.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

const CHROMIUM: &str = "/usr/bin/chromium";
const DRIVER: &str = "/usr/bin/chromedriver";

/// How long a flow waits for the page to show something.
const PATIENCE: Duration = Duration::from_secs(20);

/// One browser, for one flow.
pub struct Browser {
    /// The WebDriver session.
    pub client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
    flow: String,
}

/// Serialises the flows: two cores run one browser well, several badly.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// What this machine lacks to run the flows, if anything.
pub fn missing() -> Option<String> {
    let here = Path::new(CHROMIUM).exists() && Path::new(DRIVER).exists();
    (!here).then(|| {
        format!("{CHROMIUM} or {DRIVER} is missing: apt-get install chromium chromium-driver")
    })
}

/// Reads the browser's console (ChromeDriver's log endpoint).
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base: &url::Url,
        session: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or("")))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (
            http::Method::POST,
            Some(json!({ "type": "browser" }).to_string()),
        )
    }
}

impl Browser {
    /// Starts ChromeDriver and a headless Chromium of `width`×`height` for `flow`.
    pub async fn open(
        flow: &str,
        width: u32,
        height: u32,
    ) -> (Browser, tokio::sync::MutexGuard<'static, ()>) {
        let turn = ONE_AT_A_TIME.lock().await;
        let port = a2a_edge_tests::binary::free_port();
        // A process group of its own, so the browser it starts goes with it, even when a flow
        // fails half-way.
        let driver = Command::new(DRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("chromedriver starts");
        let profile = tempfile::tempdir().unwrap();
        let args = [
            "--headless=new".to_owned(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-quic".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--disable-dev-shm-usage".into(),
            format!("--window-size={width},{height}"),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let caps = json!({
            "browserName": "chrome",
            "goog:chromeOptions": { "binary": CHROMIUM, "args": args },
            "goog:loggingPrefs": { "browser": "ALL" },
        });
        let Value::Object(caps) = caps else {
            unreachable!()
        };
        let url = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        let client = loop {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            match ClientBuilder::new(connector)
                .capabilities(caps.clone())
                .connect(&url)
                .await
            {
                Ok(c) => break c,
                Err(e) if started.elapsed() < PATIENCE => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("no WebDriver session from {DRIVER}: {e}"),
            }
        };
        client.set_window_size(width, height).await.unwrap();
        let browser = Browser {
            client,
            driver,
            _profile: profile,
            flow: flow.to_owned(),
        };
        (browser, turn)
    }

    /// Goes to `url`.
    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.unwrap();
    }

    /// The first element matching `css`, once it exists.
    pub async fn find(&self, css: &str) -> Element {
        match self
            .client
            .wait()
            .at_most(PATIENCE)
            .for_element(Locator::Css(css))
            .await
        {
            Ok(e) => e,
            Err(e) => self.fail(&format!("no element {css}: {e}")).await,
        }
    }

    /// The first element matching `css` whose text contains `needle`, once there is one.
    pub async fn find_text(&self, css: &str, needle: &str) -> Element {
        let started = Instant::now();
        loop {
            for e in self
                .client
                .find_all(Locator::Css(css))
                .await
                .unwrap_or_default()
            {
                if e.text().await.unwrap_or_default().contains(needle) {
                    return e;
                }
            }
            if started.elapsed() > PATIENCE {
                self.fail(&format!("no {css} shows {needle:?}")).await;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Runs `script` in the page (its `return` value).
    pub async fn eval(&self, script: &str) -> Value {
        self.client.execute(script, vec![]).await.unwrap()
    }

    /// Waits until `script` returns true.
    pub async fn until(&self, what: &str, script: &str) {
        let started = Instant::now();
        while self.eval(script).await != Value::Bool(true) {
            if started.elapsed() > PATIENCE {
                self.fail(&format!("gave up waiting for {what}")).await;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Types `text` into the field labelled `label` (its `<label>`), after clearing it.
    pub async fn fill(&self, label: &str, text: &str) {
        let field = self.labelled(label).await;
        field.clear().await.unwrap();
        field.send_keys(text).await.unwrap();
    }

    /// The form field whose label is `label`.
    pub async fn labelled(&self, label: &str) -> Element {
        let label = self.find_text("label", label).await;
        let id = label
            .attr("for")
            .await
            .unwrap()
            .expect("labels name their field");
        self.find(&format!("[id='{id}']")).await
    }

    /// Clicks the first button or link whose text contains `text`.
    pub async fn click(&self, text: &str) {
        let target = self.find_text("button, a", text).await;
        self.press(&target).await;
    }

    /// Clicks `target` as a person would, once it is in the middle of the window (never under
    /// the sticky header).
    pub async fn press(&self, target: &Element) {
        let at = serde_json::to_value(target).unwrap();
        self.client
            .execute("arguments[0].scrollIntoView({block: 'center'})", vec![at])
            .await
            .unwrap();
        if let Err(e) = target.click().await {
            self.fail(&format!("cannot click: {e}")).await;
        }
    }

    /// Saves a screenshot as `target/ui-screenshots/<flow>-<step>.png`.
    pub async fn shot(&self, step: &str) -> PathBuf {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/ui-screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{}-{step}.png", self.flow));
        std::fs::write(&path, self.client.screenshot().await.unwrap()).unwrap();
        path
    }

    /// Every form field on the page without a label (none may be).
    pub async fn unlabelled(&self) -> Value {
        self.eval("return [...document.querySelectorAll('input, select, textarea')].filter(e => !e.labels?.length && !e.getAttribute('aria-label')).map(e => e.outerHTML)").await
    }

    /// Console errors: scripts' errors and `console.error` always count; failed requests count
    /// unless their text contains one of `expected` (a flow that provokes a refusal says so).
    pub async fn console_errors(&self, expected: &[&str]) -> Vec<String> {
        let log = self.client.issue_cmd(BrowserLog).await.unwrap();
        log.as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["level"] == "SEVERE")
            .map(|e| e["message"].as_str().unwrap_or("").to_owned())
            .filter(|m| {
                !(m.contains("Failed to load resource") && expected.iter().any(|x| m.contains(x)))
            })
            .collect()
    }

    /// Ends the flow: a last screenshot, every field labelled, no console error (but the
    /// `expected` failed requests), then the browser closes.
    pub async fn finish(self, expected: &[&str]) {
        self.shot("end").await;
        let unlabelled = self.unlabelled().await;
        let errors = self.console_errors(expected).await;
        let _ = self.client.clone().close().await;
        assert_eq!(unlabelled, json!([]), "every form field has a label");
        assert!(errors.is_empty(), "the page logged errors: {errors:#?}");
    }

    /// Saves a screenshot and fails with `why`.
    async fn fail(&self, why: &str) -> ! {
        let shot = self.shot("failed").await;
        let errors = self.console_errors(&[]).await;
        panic!("{why} (screenshot {}; console: {errors:?})", shot.display());
    }
}

impl Drop for Browser {
    /// Ends ChromeDriver and every browser process it started (its process group).
    fn drop(&mut self) {
        let group = format!("-{}", self.driver.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.driver.wait();
    }
}
