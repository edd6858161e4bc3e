//! Workers on the database's run queue (PostgreSQL): each claims a pending run
//! (`FOR UPDATE SKIP LOCKED`), carries it out as the serving process would, and takes it out of
//! the queue when it ends; they wake up on `NOTIFY` (a slow poll is the fallback), stop a run
//! whose cancellation is notified, and a sweeper puts back the runs of workers that stopped.

use crate::assistant::Start;
use crate::record::{now_ms, Record, RunFailure, RunRecord, RunStatus, ThreadStatus};
use crate::records::Write;
use crate::runs::{metadata_json, Job, Live, Stop};
use crate::service::{plan, Plan, Service};
use agentstate_store::{ClaimedRun, RunClaim, RunNotice};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How many times a run is claimed before it is given up (its workers stopped each time).
pub(crate) const MAX_ATTEMPTS: u32 = 3;

/// How the workers of a process claim, sweep and stop ([`ServerBuilder::workers`]).
///
/// [`ServerBuilder::workers`]: crate::ServerBuilder::workers
#[derive(Debug, Clone)]
pub(crate) struct WorkerOptions {
    pub(crate) count: usize,
    pub(crate) sweep_every: Duration,
    pub(crate) sweep_grace: Duration,
    pub(crate) poll_every: Duration,
    pub(crate) shutdown_grace: Duration,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            count: 0,
            sweep_every: Duration::from_secs(10),
            sweep_grace: Duration::from_secs(10),
            poll_every: Duration::from_secs(5),
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// The workers of this process on the database's run queue, started by
/// [`Server::start_workers`](crate::Server::start_workers) (and by
/// [`serve`](crate::Server::serve)): they claim the runs any server on the database queued,
/// carry them out, and sweep the runs of workers that stopped.
/// [`shutdown`](Workers::shutdown) stops them gracefully: the runs still in progress after the
/// grace go back to the queue for another worker. Dropping it stops their claiming.
///
/// ```no_run
/// # async fn work(server: agentstate_server::Server) -> Result<(), agentstate_server::ApiError> {
/// // A worker-only process: no listener, its workers claim what the servers queue.
/// let workers = server.start_workers()?;
/// tokio::signal::ctrl_c().await.ok();
/// workers.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub struct Workers {
    service: Arc<Service>,
    owner: String,
    stop: watch::Sender<bool>,
    workers: Vec<JoinHandle<()>>,
    helpers: Vec<JoinHandle<()>>,
    grace: Duration,
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workers")
            .field("owner", &self.owner)
            .field("workers", &self.workers.len())
            .finish_non_exhaustive()
    }
}

impl Workers {
    /// Starts `options.count` workers, the queue's listener and the sweeper.
    pub(crate) fn start(service: Arc<Service>, options: &WorkerOptions) -> Workers {
        let owner = format!(
            "worker-{}-{}",
            std::process::id(),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let (stop, _) = watch::channel(false);
        // A queue notice wakes one waiting worker (a worker claims again after each run before
        // it waits): not all of them, each to run a claim that all but one find empty.
        let ready = Arc::new(tokio::sync::Notify::new());
        let listener = tokio::spawn(listen(
            Arc::clone(&service),
            Arc::clone(&ready),
            stop.subscribe(),
        ));
        let sweeper = tokio::spawn(sweep(
            Arc::clone(&service),
            options.clone(),
            stop.subscribe(),
        ));
        let workers = (0..options.count)
            .map(|_| {
                tokio::spawn(work(
                    Arc::clone(&service),
                    owner.clone(),
                    Arc::clone(&ready),
                    stop.subscribe(),
                    options.poll_every,
                ))
            })
            .collect();
        Workers {
            service,
            owner,
            stop,
            workers,
            helpers: vec![listener, sweeper],
            grace: options.shutdown_grace,
        }
    }

    /// The name its workers claim runs and take threads' leases under
    /// (`worker-{pid}-{random}`).
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Stops claiming runs, gives the runs in progress the grace to end (10 s by default:
    /// [`ServerBuilder::worker_timing`](crate::ServerBuilder::worker_timing)), then stops
    /// the others and puts them back in the queue (their committed steps stay: the worker that
    /// claims them next continues from there).
    pub async fn shutdown(mut self) {
        self.stop.send_replace(true);
        let until = tokio::time::Instant::now() + self.grace;
        while !self.workers.iter().all(JoinHandle::is_finished)
            && tokio::time::Instant::now() < until
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for live in self.service.runs.all() {
            live.stop(Stop::HandBack);
        }
        futures_util::future::join_all(std::mem::take(&mut self.workers)).await;
    }
}

/// Dropped without [`shutdown`](Workers::shutdown): its workers claim nothing more (the runs
/// in progress go on to their end; if the process ends first, they are swept back to the queue
/// once their threads' leases expire).
impl Drop for Workers {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        for helper in &self.helpers {
            helper.abort();
        }
    }
}

/// Wakes the workers on the queue's notices, and stops the runs whose cancellation is
/// notified; listens again after a lost connection.
async fn listen(
    service: Arc<Service>,
    ready: Arc<tokio::sync::Notify>,
    mut stop: watch::Receiver<bool>,
) {
    while !*stop.borrow() {
        let mut notices = match service.records.listen().await {
            Ok(notices) => notices,
            Err(_) => {
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        loop {
            let notice = tokio::select! {
                notice = notices.recv() => notice,
                _ = stop.changed() => return,
            };
            match notice {
                Some(RunNotice::Ready) => {
                    ready.notify_one();
                }
                // For the streams that follow runs ([`Followers`](crate::runs::Followers)).
                Some(RunNotice::Appended(_) | RunNotice::Ended(_)) => {}
                Some(RunNotice::Cancel { run, rollback }) => {
                    let why = if rollback {
                        Stop::Rollback
                    } else {
                        Stop::Cancel
                    };
                    service.runs.stop(&run, why);
                }
                None => break,
            }
        }
    }
}

/// One worker: claims a run, carries it out, claims the next; waits for a notice (or the slow
/// poll) when there is none.
async fn work(
    service: Arc<Service>,
    owner: String,
    ready: Arc<tokio::sync::Notify>,
    mut stop: watch::Receiver<bool>,
    poll: Duration,
) {
    while !*stop.borrow() {
        match service.records.claim(&owner, MAX_ATTEMPTS).await {
            Ok(Some(claimed)) => carry_out(&service, &owner, claimed).await,
            Ok(None) => {
                tokio::select! {
                    () = ready.notified() => {}
                    _ = stop.changed() => {}
                    () = tokio::time::sleep(poll) => {}
                }
            }
            Err(_) => tokio::time::sleep(poll).await,
        }
    }
}

/// Carries out the run `claimed`, as this process's runs are, until it ends or is handed back.
async fn carry_out(service: &Arc<Service>, owner: &str, claimed: ClaimedRun) {
    // What fences every write of this attempt: a worker paused past its lease, whose run was
    // put back and claimed again, writes nothing more.
    let claim = RunClaim {
        run: claimed.run.clone(),
        owner: owner.to_owned(),
        attempt: claimed.attempt,
    };
    let mut run = match service.records.run(&claimed.run).await {
        Ok(Some(run)) if !run.status.is_final() => run,
        // Deleted, or ended (its worker stopped between its end and the queue's).
        Ok(_) => {
            let _ = service
                .records
                .finish_queued(&claimed.run, Vec::new(), Some(&claim))
                .await;
            return;
        }
        Err(_) => {
            let _ = service.records.release(&claimed.run, owner).await;
            return;
        }
    };
    let planned = service
        .graph(&run.graph_id)
        .map_err(|e| e.to_string())
        .and_then(|served| Ok((served, plan(&run.kwargs)?)));
    let (
        served,
        Plan {
            mut start,
            options,
            modes,
        },
    ) = match planned {
        Ok(planned) => planned,
        Err(why) => {
            let message = format!(
                "run `{}` on thread `{}` cannot be carried out by worker `{owner}`: {why}",
                run.run_id, run.thread_id
            );
            end_queued(
                service,
                run,
                RunStatus::Error,
                Some(("run_invalid", message)),
                Some(&claim),
            )
            .await;
            return;
        }
    };
    // Answers an earlier attempt committed are not given again: the run continues from them.
    if let (Start::Resume(_), true) = (&start, claimed.attempt > 1) {
        if let Ok(snapshot) = served.assistant.snapshot(&run.thread_id, None).await {
            if snapshot.interrupts.is_empty() {
                start = Start::Input(None);
            }
        }
    }
    // The events of its earlier attempts stay; this one's are numbered after them. The server
    // that queued it wrote its first `metadata`: an attempt with nothing after that event is
    // the one it announced.
    let stored = service
        .records
        .events(&run.run_id, 0, usize::MAX)
        .await
        .unwrap_or_default();
    let announced = matches!(stored.as_slice(), [only]
        if only.event == "metadata" && only.data == metadata_json(&run.run_id, claimed.attempt));
    run.attempt = claimed.attempt;
    let live = match announced {
        true => Live::announced(&run.run_id, &run.thread_id, stored.len()),
        false => Live::attempt(&run.run_id, &run.thread_id, claimed.attempt, stored.len()),
    };
    service.runs.register(&live, |_| Ok::<_, ()>(())).ok();
    Job {
        options,
        modes,
        claim: Some(claim),
        ..service.job(served, &live, run, start)
    }
    .spawn();
    live.result().await;
}

/// Ends `run`, taken out of the queue without being carried out, with `status` (and a
/// failure's category and sentence), its thread `error` (a failure) or `interrupted`: in one
/// transaction, fenced by the claim of the worker that took it out, if one did.
async fn end_queued(
    service: &Service,
    mut run: RunRecord,
    status: RunStatus,
    failure: Option<(&str, String)>,
    claim: Option<&RunClaim>,
) {
    run.status = status;
    run.updated_ms = now_ms();
    run.error = failure.map(|(error, message)| RunFailure {
        error: error.to_owned(),
        message,
    });
    let thread_status = match status {
        RunStatus::Error => ThreadStatus::Error,
        _ => ThreadStatus::Interrupted,
    };
    let (run_id, thread_id) = (run.run_id.clone(), run.thread_id.clone());
    let mut fields = serde_json::Map::new();
    fields.insert("status".to_owned(), serde_json::json!(thread_status));
    fields.insert("updated_ms".to_owned(), serde_json::json!(now_ms()));
    let records = vec![Record::Run(run).into(), Write::Thread(thread_id, fields)];
    let _ = service.records.finish_queued(&run_id, records, claim).await;
}

/// Every `sweep_every`: puts back the runs whose workers stopped (their thread's lease
/// expired; a live lease is never swept), and ends those whose attempts are used up or that
/// were cancelled meanwhile.
async fn sweep(service: Arc<Service>, options: WorkerOptions, mut stop: watch::Receiver<bool>) {
    while !*stop.borrow() {
        tokio::select! {
            () = tokio::time::sleep(options.sweep_every) => {}
            _ = stop.changed() => return,
        }
        let Ok(swept) = service
            .records
            .sweep(options.sweep_grace, MAX_ATTEMPTS)
            .await
        else {
            continue;
        };
        let gone = swept
            .exhausted
            .into_iter()
            .map(|r| (r, RunStatus::Error))
            .chain(
                swept
                    .cancelled
                    .into_iter()
                    .map(|r| (r, RunStatus::Interrupted)),
            );
        for (claimed, status) in gone {
            let Ok(Some(run)) = service.records.run(&claimed.run).await else {
                continue;
            };
            let failure = (status == RunStatus::Error).then(|| {
                (
                    "run_attempts_exhausted",
                    format!(
                        "run `{}` on thread `{}` was attempted {} times, and each time its worker stopped before it ended",
                        claimed.run, claimed.thread, claimed.attempt
                    ),
                )
            });
            end_queued(&service, run, status, failure, None).await;
        }
    }
}
