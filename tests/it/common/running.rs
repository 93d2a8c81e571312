//! A worker pool running in the background until the test stops it, as SIGTERM would.

use hookgate::worker::{Stopped, Worker};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub struct Running {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<Stopped>>,
}

/// Starts `workers`' claim loops on the test's runtime.
pub fn start(workers: impl IntoIterator<Item = Worker>) -> Running {
    let (stop, stopped) = watch::channel(false);
    let tasks = workers
        .into_iter()
        .map(|w| {
            let mut rx = stopped.clone();
            tokio::spawn(async move {
                w.run(async move {
                    let _ = rx.wait_for(|s| *s).await;
                })
                .await
            })
        })
        .collect();
    Running { stop, tasks }
}

impl Running {
    /// Shuts every worker down and waits for them to finish (grace period included); what each
    /// did with the claims it still held.
    pub async fn stop(self) -> Vec<Stopped> {
        self.stop.send(true).unwrap();
        let mut stopped = Vec::new();
        for t in self.tasks {
            stopped.push(t.await.unwrap());
        }
        stopped
    }
}
