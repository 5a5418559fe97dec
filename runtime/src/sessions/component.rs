//! The `component` backend: the preset's agent component runs each turn
//! (docs/agents.md "What an agent component is"), through the runtime's [`Agents`], within the
//! preset's wall-clock timeout and concurrent-turns limit. Memory and CPU are limited where the
//! agent runs.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use a2a_protocol::execution::Progress;

use super::preset::ComponentSettings;
use super::{Agents, Backend, BoxFuture, EventSink, TurnInput};

/// The backend of one preset.
#[derive(Clone)]
pub struct Component {
    settings: Arc<ComponentSettings>,
    agents: Arc<OnceLock<Arc<dyn Agents>>>,
    slots: Arc<Semaphore>,
}

impl Component {
    /// The backend of `settings`, running on the agents set in `agents` once the runtime has
    /// started them.
    pub fn new(settings: &ComponentSettings, agents: Arc<OnceLock<Arc<dyn Agents>>>) -> Self {
        Component {
            slots: Arc::new(Semaphore::new(settings.limits.concurrent_turns as usize)),
            settings: Arc::new(settings.clone()),
            agents,
        }
    }

    async fn turn(
        &self,
        input: TurnInput,
        events: EventSink,
        cancel: CancellationToken,
    ) -> Progress {
        let Some(agents) = self.agents.get().cloned() else {
            return Progress::Unavailable(
                "agent components are not running in this process".into(),
            );
        };
        let limits = self.settings.limits;
        let timeout_ms = limits.timeout_ms;
        let started = std::sync::atomic::AtomicBool::new(false);
        let run = async {
            let Ok(_slot) = self.slots.acquire().await else {
                return Progress::Unavailable("the preset's turn slots are closed".into());
            };
            started.store(true, std::sync::atomic::Ordering::Relaxed);
            agents
                .turn(self.settings.clone(), input, events, cancel.clone())
                .await
        };
        tokio::select! {
            () = cancel.cancelled() => Progress::Failed("canceled".into()),
            () = tokio::time::sleep(Duration::from_millis(timeout_ms)) => Progress::Failed(
                if started.load(std::sync::atomic::Ordering::Relaxed) {
                    format!("timeout: the agent ran longer than {timeout_ms} ms (the preset's limits.timeoutMs)")
                } else {
                    format!(
                        "timeout: the turn waited {timeout_ms} ms (the preset's limits.timeoutMs) for one of the preset's {} concurrent turns (limits.concurrentTurns) and never started",
                        limits.concurrent_turns
                    )
                },
            ),
            last = run => last,
        }
    }
}

impl Backend for Component {
    fn run(&self, input: TurnInput, events: EventSink, cancel: CancellationToken) -> BoxFuture {
        let this = self.clone();
        Box::pin(async move {
            let last = this.turn(input, events.clone(), cancel).await;
            let _ = events.send(last);
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An agent whose turns never end.
    struct Endless;

    impl Agents for Endless {
        fn turn(
            &self,
            _: Arc<ComponentSettings>,
            _: TurnInput,
            _: EventSink,
            _: CancellationToken,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Progress> + Send>> {
            Box::pin(std::future::pending())
        }
    }

    async fn timed_out(backend: &Component) -> String {
        let (events, _rx) = tokio::sync::mpsc::unbounded_channel();
        let input = TurnInput::sample("hi", Vec::new());
        match backend.turn(input, events, CancellationToken::new()).await {
            Progress::Failed(why) => why,
            other => panic!("{other:?}"),
        }
    }

    /// A turn that found every slot taken until its timeout says so, not that it ran too long.
    #[tokio::test]
    async fn a_timeout_says_whether_the_turn_ran_or_waited_for_a_slot() {
        let mut settings = ComponentSettings::default();
        settings.limits.timeout_ms = 50;
        settings.limits.concurrent_turns = 1;
        let agents = Arc::new(OnceLock::new());
        let _ = agents.set(Arc::new(Endless) as Arc<dyn Agents>);
        let backend = Component::new(&settings, agents);
        let ran = timed_out(&backend).await;
        assert!(ran.contains("ran longer than 50 ms"), "{ran}");
        let held = backend.slots.clone().acquire_owned().await.unwrap();
        let waited = timed_out(&backend).await;
        assert!(
            waited.contains("waited 50 ms")
                && waited.contains("1 concurrent turns")
                && waited.contains("never started"),
            "{waited}"
        );
        drop(held);
    }
}
