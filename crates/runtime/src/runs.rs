//! Runs and budgets as the front-ends use them: start a run of a principal (its configured
//! budget, tightened — never loosened — by the run's own), read its consumption and calls,
//! report a model turn, finish it. The pipeline's budget stage counts the calls (see
//! `toolgate_core::RunBudgetStage`); the state lives in the store.

use toolgate_core::{Budget, Principal, RunId};
use toolgate_store::{Admission, RunCall, StoredRun};

use crate::Runtime;
use crate::error::RuntimeError;

impl Runtime {
    /// The budget a run of `principal` starts with when it asks for none: `[principals.NAME.budget]`
    /// over `[budget]`.
    pub fn budget_of(&self, principal: &Principal) -> Budget {
        self.config().budget_for(principal.id.as_str())
    }

    /// Whether `principal` has a configured budget (an MCP session of it is then a run).
    pub fn has_budget(&self, principal: &Principal) -> bool {
        self.config().has_budget(principal.id.as_str())
    }

    /// Starts a run of `principal` with its budget tightened by `request`.
    ///
    /// # Errors
    ///
    /// [`RuntimeError::Budget`] for a budget with a zero or a value the store cannot hold,
    /// [`RuntimeError::BudgetCeiling`] naming a key of `request` looser than the principal's
    /// ceiling; a store error when the run cannot be written.
    pub async fn start_run(
        &self,
        principal: &Principal,
        request: &Budget,
    ) -> Result<StoredRun, RuntimeError> {
        request.check().map_err(RuntimeError::Budget)?;
        let budget = self
            .budget_of(principal)
            .tightened(request)
            .map_err(RuntimeError::BudgetCeiling)?;
        Ok(self
            .store()
            .create_run(principal.id.as_str(), &budget)
            .await?)
    }

    /// `principal`'s run `id` with the calls counted against it; `None` when there is no such
    /// run or it belongs to another principal.
    ///
    /// # Errors
    ///
    /// A store error when it cannot be read.
    pub async fn run_of(
        &self,
        principal: &Principal,
        id: RunId,
    ) -> Result<Option<(StoredRun, Vec<RunCall>)>, RuntimeError> {
        let Some(run) = self
            .store()
            .run(id)
            .await?
            .filter(|r| r.principal == principal.id.as_str())
        else {
            return Ok(None);
        };
        let calls = self.store().run_calls(id).await?;
        Ok(Some((run, calls)))
    }

    /// `principal`'s runs, newest first, at most `limit`.
    ///
    /// # Errors
    ///
    /// A store error when they cannot be read.
    pub async fn runs_of(
        &self,
        principal: &Principal,
        limit: u32,
    ) -> Result<Vec<StoredRun>, RuntimeError> {
        Ok(self
            .store()
            .runs(Some(principal.id.as_str()), limit)
            .await?)
    }

    /// Counts one model turn of `principal`'s run `id`.
    ///
    /// # Errors
    ///
    /// A store error when it cannot be counted.
    pub async fn run_turn(
        &self,
        principal: &Principal,
        id: RunId,
    ) -> Result<Admission, RuntimeError> {
        Ok(self.store().run_turn(id, principal.id.as_str()).await?)
    }

    /// Finishes `principal`'s open run `id`; `false` when it has no such open run.
    ///
    /// # Errors
    ///
    /// A store error when it cannot be written.
    pub async fn finish_run(&self, principal: &Principal, id: RunId) -> Result<bool, RuntimeError> {
        Ok(self.store().finish_run(id, principal.id.as_str()).await?)
    }
}
