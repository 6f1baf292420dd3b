//! Captures warnings the `scylla` driver logs, so tests can fail on them.

use std::fmt::Write as _;
use std::sync::{Mutex, OnceLock};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;

static WARNINGS: Mutex<Vec<String>> = Mutex::new(Vec::new());
static INSTALLED: OnceLock<()> = OnceLock::new();

struct Capture;

struct Text(String);

impl Visit for Text {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, "{}={value:?} ", field.name());
    }
}

impl<S: Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        if *meta.level() <= Level::WARN && meta.target().starts_with("scylla") {
            let mut text = Text(format!("{}: ", meta.target()));
            event.record(&mut text);
            if let Ok(mut w) = WARNINGS.lock() {
                w.push(text.0);
            }
        }
    }
}

/// Installs the capture (and `RUST_LOG`-filtered output) once per test process.
pub fn install() {
    INSTALLED.get_or_init(|| {
        let fmt = tracing_subscriber::fmt::layer()
            .with_test_writer()
            .with_filter(tracing_subscriber::EnvFilter::from_default_env());
        let _ = tracing_subscriber::registry()
            .with(Capture)
            .with(fmt)
            .try_init();
    });
}

/// Every driver warning (and error) logged so far in this process.
pub fn warnings() -> Vec<String> {
    install();
    WARNINGS.lock().map(|w| w.clone()).unwrap_or_default()
}
