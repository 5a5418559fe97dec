//! Several nodes on one shared store: the leases of this node's running tasks, the sweep for
//! tasks whose node is gone (settled by [`crate::settlement`]), what other nodes' changes mean
//! here (a frame to read, a turn to stop), and following their instance changes. On one node
//! (SQLite) only the frame-log retention runs.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::clock::now_ms;
use crate::store::Change;

/// How often the frame logs of old settled tasks are pruned.
const PRUNE_EVERY: Duration = Duration::from_secs(600);

/// Leases settled per sweep at most.
const SWEEP: u32 = 100;

/// Starts what this node does for the others until `stop`.
pub fn start(app: &Arc<App>, stop: &CancellationToken) {
    tokio::spawn(prune(app.clone(), stop.clone()));
    let store = &app.services().store;
    if !store.is_shared() {
        return;
    }
    let s = app.services();
    let (events, sessions) = (s.events.clone(), s.sessions.clone());
    store.watch(Arc::new(move |change| match change {
        Change::Frames(key) => events.poke(&key),
        Change::Canceled(key) => {
            if sessions.cancel_task(&key) {
                tracing::info!(task = %key, "stopped the turn of a task another node canceled");
            }
            events.poke(&key);
        }
    }));
    tokio::spawn(keep_leases(app.clone(), stop.clone()));
    tokio::spawn(follow(app.clone(), stop.clone()));
}

/// How often a node on a shared database looks for instance changes made on other nodes.
const FOLLOW: Duration = Duration::from_millis(250);

/// On a shared database, takes up what other nodes change: every [`FOLLOW`] the secrets,
/// the connection records and the instance records are read again; the instance table is
/// reassembled when a record or a secret differs. Runs until `stop`.
async fn follow(app: Arc<App>, stop: CancellationToken) {
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(FOLLOW) => {}
        }
        let secrets_changed = match app.credentials.refresh().await {
            Ok(changed) => changed,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the shared secrets");
                false
            }
        };
        if let Err(e) = app.outbound.follow().await {
            tracing::warn!(error = %e, "cannot take up the connections other nodes changed");
        }
        match app.store.instances().await {
            Ok(stored) if secrets_changed || stored != app.records() => {
                if let Err(e) = app.reassemble().await {
                    tracing::warn!(error = %e, "cannot take up the instances other nodes changed");
                }
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "cannot read the instance records"),
        }
    }
}

/// Every third of the lease time: renews the leases of the tasks whose turns run here (a task
/// with no turn running is not renewed, so one a failed write left behind runs out and is
/// settled), stops the turns of tasks this node no longer holds (another node settled them
/// while this one was stopped or cut off), then settles FAILED ([`crate::settlement::NODE_LOST`]) the running
/// tasks whose lease ran out. A task is settled once: the settling write is a compare-and-swap.
async fn keep_leases(app: Arc<App>, stop: CancellationToken) {
    let every = Duration::from_millis((app.config.cluster.lease_ms / 3).max(100));
    let settle = app.host.settle();
    let (store, sessions) = (app.store.clone(), app.services().sessions.clone());
    let metrics = app.services().metrics.clone();
    // Turns seen running at the previous renewal: a turn younger than that may belong to a
    // task whose first write is still on its way.
    let mut before: Vec<String> = Vec::new();
    // The first renewal at once: a node is ready (`/readyz`) once it has renewed.
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let running = sessions.running_tasks();
        let ids = running
            .iter()
            .filter_map(|key| key.split_once('/').map(|(_, id)| id.to_owned()))
            .collect();
        let now = now_ms();
        let renewed = match store.renew_leases(now, ids).await {
            Ok(renewed) => {
                metrics.leases_renewed(now);
                renewed
            }
            Err(e) => {
                metrics.lease_renewal_failed();
                tracing::warn!(error = %e, "cannot renew this node's task leases");
                continue;
            }
        };
        for key in running.iter().filter(|k| before.contains(k)) {
            let held = key
                .split_once('/')
                .is_some_and(|(_, id)| renewed.iter().any(|r| r == id));
            if !held && sessions.cancel_task(key) {
                tracing::warn!(task = %key, "stopped the turn of a task this node no longer holds: settled elsewhere, or its lease ran out");
            }
        }
        before = running;
        match settle.lost_nodes(&*store, SWEEP).await {
            Ok(settled) => metrics.failed_over(settled),
            Err(e) => tracing::warn!(error = %e, "cannot look for tasks of lost nodes"),
        }
    }
}

/// Every [`PRUNE_EVERY`], removes the frame logs of tasks settled longer ago than the retention.
async fn prune(app: Arc<App>, stop: CancellationToken) {
    let keep = Duration::from_secs(app.config.storage.frame_retention_secs);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(PRUNE_EVERY) => {}
        }
        let before = now_ms().saturating_sub(keep.as_millis() as u64);
        match app.services().store.prune_frames(before).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(frames = n, "pruned the frame logs of old settled tasks"),
            Err(e) => tracing::warn!(error = %e, "cannot prune the frame logs"),
        }
    }
}
