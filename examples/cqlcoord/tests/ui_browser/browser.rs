//! A chromedriver process and a headless Chromium driven through it, for the dashboard's
//! browser tests.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder};
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use serde_json::json;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// How long a condition is polled for before the test fails.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// A chromedriver process and a headless Chromium session driven through it.
pub struct Browser {
    pub client: Client,
    driver: tokio::process::Child,
}

impl Browser {
    /// The browser, or `None` when Chromium or chromedriver is missing and not required.
    pub async fn start() -> Option<Browser> {
        let required = std::env::var("CQLCOORD_BROWSER_TESTS").is_ok_and(|v| v == "require");
        for path in [CHROMIUM, CHROMEDRIVER] {
            if Path::new(path).exists() {
                continue;
            }
            let why = format!(
                "{path} is missing: the dashboard's browser tests need Debian's chromium and \
                 chromium-driver (apt-get install chromium chromium-driver; .ci/run installs them)"
            );
            assert!(!required, "{why}");
            eprintln!("browser test not run: {why}");
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let driver = tokio::process::Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own process group, so that the Chromium it starts goes with it (Drop).
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .expect("start chromedriver");
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".to_owned(),
            json!({"binary": CHROMIUM, "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1200,800",
            ]}),
        );
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let url = format!("http://127.0.0.1:{port}");
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let client = loop {
            match ClientBuilder::new(connector.clone())
                .capabilities(capabilities.clone())
                .connect(&url)
                .await
            {
                Ok(client) => break client,
                Err(e) if tokio::time::Instant::now() < deadline => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("no browser session through chromedriver within 20 s: {e}"),
            }
        };
        Some(Browser { client, driver })
    }

    /// The text of the first element matching `selector` now (`None`: no such element).
    pub async fn text(&self, selector: &str) -> Option<String> {
        let script = "const e = document.querySelector(arguments[0]); return e && e.textContent;";
        let value = self
            .client
            .execute(script, vec![json!(selector)])
            .await
            .expect("run a script in the page");
        value.as_str().map(str::to_owned)
    }

    /// How many times the page has read its JSON.
    pub async fn refreshes(&self) -> u64 {
        let script = "return Number(document.body.dataset.refreshes || 0);";
        let value = self.client.execute(script, vec![]).await.expect("script");
        value.as_u64().unwrap_or(0)
    }

    /// Polls (up to 20 s) until the text of `selector` satisfies `done`; returns it.
    pub async fn wait_text(&self, selector: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let text = self.text(selector).await;
            if let Some(text) = text.as_deref().filter(|t| done(t)) {
                return text.to_owned();
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{selector}: still {text:?} after 20 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Saves a screenshot of the page as `name` in `CQLCOORD_UI_SCREENSHOTS` (relative to
    /// the workspace), else in the test target's temporary directory: a test run leaves the
    /// docs' images alone unless asked.
    pub async fn screenshot(&self, name: &str) {
        let png = self.client.screenshot().await.expect("screenshot");
        let dir = match std::env::var_os("CQLCOORD_UI_SCREENSHOTS") {
            Some(dir) => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../..")
                .join(dir),
            None => PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ui"),
        };
        std::fs::create_dir_all(&dir).expect("the screenshot directory");
        std::fs::write(dir.join(name), png).expect("write the screenshot");
    }

    pub async fn close(self) {
        self.client
            .clone()
            .close()
            .await
            .expect("close the browser");
    }
}

impl Drop for Browser {
    /// Chromedriver and the Chromium it started end with the test, even a failed one.
    fn drop(&mut self) {
        if let Some(id) = self.driver.id() {
            let _ = nix::sys::signal::killpg(pid_of(id), Signal::SIGKILL);
        }
    }
}

pub fn pid_of(id: u32) -> Pid {
    Pid::from_raw(i32::try_from(id).expect("pid"))
}
