//! Approved calls running in this process, by approval id, so that one can be cancelled while
//! it runs (an MCP client's `tasks/cancel` of its task). Each entry lives as long as its run:
//! [`RunningApprovals::enter`] returns a guard that removes it when the run ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use toolgate_core::CancellationToken;
use toolgate_store::Cancel;

use crate::Runtime;

/// The approved calls running here (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct RunningApprovals {
    runs: Arc<Mutex<HashMap<String, Cancel>>>,
}

impl RunningApprovals {
    /// Registers the run of approval `id`, cancelled also when `shutdown` fires (the end of
    /// the shutdown grace period); the entry goes when the guard is dropped.
    pub(crate) fn enter(&self, id: &str, shutdown: &CancellationToken) -> RunGuard {
        let cancel = Cancel {
            token: shutdown.child_token(),
            note: toolgate_core::CancelNote::default(),
        };
        self.lock().insert(id.to_owned(), cancel.clone());
        RunGuard {
            runs: Arc::clone(&self.runs),
            id: id.to_owned(),
            cancel,
        }
    }

    /// Cancels the run of approval `id`, noting `who`; `false` when it does not run here.
    fn cancel(&self, id: &str, who: &str) -> bool {
        match self.lock().get(id) {
            Some(cancel) => {
                cancel.note.set(who);
                cancel.token.cancel();
                true
            }
            None => false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Cancel>> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One registered run; dropping it forgets the run.
pub(crate) struct RunGuard {
    runs: Arc<Mutex<HashMap<String, Cancel>>>,
    id: String,
    cancel: Cancel,
}

impl RunGuard {
    /// The run's cancellation, for the call.
    pub(crate) fn cancel(&self) -> Cancel {
        self.cancel.clone()
    }
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        self.runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.id);
    }
}

impl Runtime {
    /// Cancels approval `id`'s call if it is running in this process, noting `who` cancelled
    /// (the audit record keeps it); the call ends `cancelled` and that envelope is recorded as
    /// the approval's result. `false` when it is not running here (not started, finished, or
    /// run by another instance).
    pub fn cancel_running_approval(&self, id: &str, who: &str) -> bool {
        self.running.cancel(id, who)
    }
}
