//! The provider round trip's middle: the tool calls a model asked for in one turn, parsed by
//! `toolgate_export`'s per-provider parsers, run through the production pipeline
//! ([`Runtime::call`], so each call is authorized, validated, approved, audited and tracked like
//! any other), with the results in the model's order for the provider's formatter.
//!
//! Order: a run of consecutive calls to read-only tools (`effect = "read"`) runs concurrently;
//! every other call runs alone, after everything the model asked for before it has finished and
//! before anything after it starts. So reads never wait for each other, and a write, a delete or a
//! side effect sees exactly what the model expected it to see. A call to a tool the caller cannot
//! see (unknown, hidden, withheld) counts as not read-only: the pipeline refuses it in its turn.
//! A call whose arguments are not a JSON object runs nothing: it gets its `validation` error.

use futures_util::future::join_all;
use toolgate_core::{CallRequest, Effect, ToolResult};
use toolgate_export::{ToolCall, ToolOutcome};

use crate::Runtime;

impl Runtime {
    /// Runs one model turn's tool calls (see the module docs for the order) and returns one
    /// outcome per call, in the order given. `prepare` sets what every request shares — the
    /// principal, the origin, an approval handler — on each call's [`CallRequest`].
    ///
    /// ```no_run
    /// # async fn demo(runtime: &toolgate_runtime::Runtime, response: serde_json::Value)
    /// # -> Result<(), toolgate_export::CallsError> {
    /// use toolgate_export::anthropic_calls;
    ///
    /// let calls = anthropic_calls::parse_message(&response)?;
    /// let outcomes = runtime.run_tool_calls(calls, |request| request).await;
    /// let next_message = anthropic_calls::tool_results_message(&outcomes)?;
    /// # let _ = next_message;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn run_tool_calls(
        &self,
        calls: Vec<ToolCall>,
        prepare: impl Fn(CallRequest) -> CallRequest,
    ) -> Vec<ToolOutcome> {
        let mut results: Vec<Option<ToolResult>> = Vec::with_capacity(calls.len());
        // (position, request, read-only) for the calls that can run.
        let mut runnable = Vec::with_capacity(calls.len());
        for (i, call) in calls.iter().enumerate() {
            match call.request() {
                Ok(request) => {
                    let request = prepare(request);
                    let read_only = self.is_read_only(&request);
                    runnable.push((i, request, read_only));
                    results.push(None);
                }
                Err(refused) => results.push(Some(*refused)),
            }
        }
        let mut pending = runnable.into_iter().peekable();
        while let Some((i, request, read_only)) = pending.next() {
            if !read_only {
                results[i] = Some(self.call(request, None).await);
                continue;
            }
            let mut group = vec![(i, request)];
            while let Some((j, next, _)) = pending.next_if(|(_, _, read_only)| *read_only) {
                group.push((j, next));
            }
            let (positions, requests): (Vec<usize>, Vec<CallRequest>) = group.into_iter().unzip();
            let done = join_all(requests.into_iter().map(|r| self.call(r, None))).await;
            for (position, result) in positions.into_iter().zip(done) {
                results[position] = Some(result);
            }
        }
        calls
            .into_iter()
            .zip(results)
            .filter_map(|(call, result)| result.map(|result| ToolOutcome { call, result }))
            .collect()
    }

    /// Whether the request's tool is one its principal may call and that only reads.
    fn is_read_only(&self, request: &CallRequest) -> bool {
        request.principal.may_call(&request.tool)
            && self
                .registry()
                .get(&request.tool)
                .is_some_and(|tool| tool.spec().resolved().effect == Effect::Read)
    }
}
