//! Goals none of whose plans has run yet (queued, being planned, failed before a plan
//! ran), as `runs list` and `runs show` render them beside runs.

use std::io::Write;

use plan_render::{SHOW_PREVIEW, exit, utc};
use plan_store::GoalInfo;
use serde_json::{Value, json};

use crate::args::Format;

/// Goal `g`'s line in `runs list`, its id padded to `width`.
pub(crate) fn line(g: &GoalInfo, width: usize, format: Format) -> String {
    let status = plan_runs::goal::listed_status(g.status);
    match format {
        Format::Json => json!({
            "id": g.id,
            "status": status,
            "plan": "goal",
            "goal": g.goal,
            "created_at": utc(g.created_at),
            "updated_at": utc(g.updated_at),
            "steps": 0,
            "tool_calls": 0,
            "error": g.error,
        })
        .to_string(),
        Format::Text => format!(
            "{:<width$}  {status:<11}  {:>6} steps  {:>4} calls  {}  goal: {}",
            g.id,
            0,
            0,
            utc(g.updated_at),
            plan_value::preview(&Value::String(g.goal.clone()), SHOW_PREVIEW)
        ),
    }
}

/// A goal none of whose plans has run yet, as `runs show` shows it.
pub(crate) fn show(out: &mut impl Write, goal: &GoalInfo, format: Format) -> u8 {
    let status = plan_runs::goal::listed_status(goal.status);
    let _ = match format {
        Format::Json => writeln!(out, "{}", json!({"goal": goal, "status": status})),
        Format::Text => {
            let mut t = format!(
                "goal {}  {status}\n  {}\n  created {}, updated {}; no plan of it has run yet\n",
                goal.id,
                goal.goal,
                utc(goal.created_at),
                utc(goal.updated_at)
            );
            if let Some(e) = &goal.error {
                t.push_str(&format!(
                    "  error[{}]: {}\n",
                    e["code"].as_str().unwrap_or("?"),
                    e["message"].as_str().unwrap_or("")
                ));
            }
            write!(out, "{t}")
        }
    };
    exit::OK
}
