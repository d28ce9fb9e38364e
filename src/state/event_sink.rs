//! The sending side of the Event publisher's channel: the verbs and the timeout loop hand it
//! the model's notices and never wait for the API server (the publisher, on its own task, is
//! `cluster::events`). If the channel is full (an API server too slow to take Events), notices
//! are dropped and counted rather than slowing scheduling down.

use tokio::sync::mpsc;

use crate::model::Notice;

/// The sending side, cheap to clone, used by the HTTP handlers and the timeout loop.
#[derive(Clone)]
pub struct EventSink {
    tx: Option<mpsc::Sender<Notice>>,
    dropped: prometheus_client::metrics::counter::Counter,
}

impl EventSink {
    pub fn channel(capacity: usize) -> (EventSink, mpsc::Receiver<Notice>) {
        let (tx, rx) = mpsc::channel(capacity);
        (
            EventSink {
                tx: Some(tx),
                dropped: Default::default(),
            },
            rx,
        )
    }

    /// A sink that only logs (for tests and for runs without an API server).
    pub fn disabled() -> EventSink {
        EventSink {
            tx: None,
            dropped: Default::default(),
        }
    }

    pub fn send_all(&self, notices: Vec<Notice>) {
        for n in notices {
            tracing::info!(
                pod = %n.pod, reason = n.kind.reason(), message = %n.message, "gang event"
            );
            if let Some(tx) = &self.tx {
                if tx.try_send(n).is_err() {
                    self.dropped.inc();
                }
            }
        }
    }

    /// The counter of dropped notices, to register as a metric.
    pub fn dropped_counter(&self) -> prometheus_client::metrics::counter::Counter {
        self.dropped.clone()
    }
}
