//! Gangs preemption disrupts whole, queued for the eviction task (`cluster::evictor`).

use parking_lot::Mutex;
use tokio::sync::mpsc;

use crate::model::GangDisruption;

/// Gangs to evict whole, handed from the preempt verb (which must not wait for the API
/// server) to the eviction task.
pub struct DisruptionQueue {
    tx: mpsc::UnboundedSender<GangDisruption>,
    rx: Mutex<Option<mpsc::UnboundedReceiver<GangDisruption>>>,
}

impl Default for DisruptionQueue {
    fn default() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        DisruptionQueue {
            tx,
            rx: Mutex::new(Some(rx)),
        }
    }
}

impl DisruptionQueue {
    pub fn submit(&self, disruption: GangDisruption) {
        // The receiver lives as long as the process: a send error means shutting down.
        let _ = self.tx.send(disruption);
    }

    /// The receiving side, once (for the eviction task, or a test).
    pub fn take_receiver(&self) -> Option<mpsc::UnboundedReceiver<GangDisruption>> {
        self.rx.lock().take()
    }
}
