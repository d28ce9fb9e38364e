//! Binding orchestration: what muster does with a bind call once kube-scheduler's request is
//! decoded, and until the API server has answered for every pod the call started binding.
//!
//! [`call::bind`]: one bind call, from the table's decision to its answer: bind the pod now,
//! hold the call while the gang waits for quorum, bind the whole gang at quorum, or answer with a
//! binding muster is already making. What it shares with other calls lives in the shared
//! state: [`Bindings`](crate::state::bindings::Bindings), the bindings muster is making, by pod,
//! and how each ended; [`HeldBinds`](crate::state::held::HeldBinds), bind calls held open while
//! their gang waits for quorum.
//!
//! The HTTP layer (`http/bind.rs`) only translates kube-scheduler's wire form to a
//! [`BindRequest`](crate::model::BindRequest) and the outcome back; the model decides
//! (`model/bind.rs`), the retrying binder talks to the API server (`cluster/binder.rs`).

mod call;

pub use call::{bind, BindCall};
