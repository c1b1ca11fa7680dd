//! Helpers shared by the workspace tests that save and resume runs.
#![allow(dead_code, unreachable_pub)]

use plan_host::{CassetteEntry, Journal, TraceEvent};

/// A call as the sequential run knows it: (tool, args, step).
pub type CallKey = (String, String, u64);

pub fn key(req: &plan_vm::ToolRequest) -> CallKey {
    (
        req.tool.to_string(),
        serde_json::to_string(&req.args).unwrap(),
        req.instance,
    )
}

/// Saves what a store would: the state at each commit point and the answers that arrive
/// after it. Fails (the "crash") at event number `crash_at`.
#[derive(Default)]
pub struct Saving {
    pub crash_at: Option<usize>,
    pub events: usize,
    pub state: Option<String>,
    /// Every successful answer so far, as a store keeps them.
    pub answers: Vec<CassetteEntry>,
    /// Calls sent to the host (not answered from saved results).
    pub sent: Vec<CallKey>,
    /// Calls answered from saved results.
    pub reused: usize,
    /// Every commit point: (state, how many answers were saved then).
    pub history: Vec<(String, usize)>,
}

impl Journal for Saving {
    fn wants_states(&self) -> bool {
        true
    }

    fn record(&mut self, event: &TraceEvent<'_>) -> Result<(), String> {
        self.events += 1;
        if self.crash_at == Some(self.events) {
            return Err("simulated crash".into());
        }
        match event {
            TraceEvent::Suspended { state } => {
                let json = serde_json::to_string(state).unwrap();
                self.history.push((json.clone(), self.answers.len()));
                self.state = Some(json);
            }
            TraceEvent::CallAnswered {
                request,
                result: Ok(output),
                ..
            } => self.answers.push(CassetteEntry {
                tool: request.tool.to_string(),
                args: request.args.to_map(),
                output: (*output).clone(),
                latency_ms: None,
                step: Some(request.instance),
                usage: None,
            }),
            TraceEvent::CallIssued {
                request,
                reused: false,
                ..
            } => self.sent.push(key(request)),
            TraceEvent::CallIssued { reused: true, .. } => self.reused += 1,
            _ => {}
        }
        Ok(())
    }
}
