//! Tests that need what a machine may lack (PostgreSQL, Chromium), run as libtest trials: where
//! it is missing they are reported ignored, with what to install said once; where CI requires it
//! (`A2A_EDGE_REQUIRE_*` set) they fail instead. None of them passes without running.

use std::future::Future;
use std::pin::Pin;

/// One test: an async function run on a two-worker runtime.
pub type Flow = Box<dyn Fn() -> Pin<Box<dyn Future<Output = ()>>> + Send + Sync>;

/// `test` as a [`Flow`].
pub fn flow<F: Future<Output = ()> + 'static>(test: fn() -> F) -> Flow {
    Box::new(move || Box::pin(test()))
}

/// The flows named, as `(name, flow)` pairs for [`run`]; `flow` must be in scope.
#[macro_export]
macro_rules! flows {
    ($($test:ident),* $(,)?) => {
        vec![$((stringify!($test), flow($test))),*]
    };
}

/// Runs this binary's tests: `needing` want what `missing` says the machine lacks (none when it
/// has everything), and a lack fails them where `required` names a variable that is set; `always`
/// run anyway.
pub fn run(
    missing: Option<String>,
    required: &str,
    needing: Vec<(&'static str, Flow)>,
    always: Vec<(&'static str, Flow)>,
) -> std::process::ExitCode {
    let args = libtest_mimic::Arguments::from_args();
    let must = std::env::var_os(required).is_some();
    if let Some(why) = &missing {
        let verdict = if must {
            format!("failing: {required} is set")
        } else {
            "ignored".into()
        };
        eprintln!("{} tests {verdict}: {why}", needing.len());
    }
    let lacking = |needs: bool| if needs { missing.clone() } else { None };
    let trials = needing
        .into_iter()
        .map(|t| (t, lacking(true)))
        .chain(always.into_iter().map(|t| (t, None)))
        .map(|((name, test), lacking)| {
            let ignored = lacking.is_some() && !must;
            libtest_mimic::Trial::test(name, move || {
                if let Some(why) = lacking {
                    return Err(why.into());
                }
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .map_err(|e| e.to_string())?
                    .block_on(test());
                Ok(())
            })
            .with_ignored_flag(ignored)
        })
        .collect();
    libtest_mimic::run(&args, trials).exit_code()
}
