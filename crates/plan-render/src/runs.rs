//! What `planvm` prints of runs, goals and sessions: a run's report (its answer, the
//! question it stopped at, or its error), what `ask` came to, the rows of `runs list`
//! and `sessions list`, and what `runs show` and `sessions show` show. Each comes as
//! text for the two streams ([`Printed`]) or as one JSON value; the binary writes it.

use std::fmt::Write;

use plan_host::{Question, RunReport};
use plan_planner::{AskOutcome, AskStatus};
use plan_runs::read::{SessionShown, Shown};
use plan_store::{CallRow, GoalInfo, RunInfo, SessionInfo, StepRow};
use serde_json::{Map, Value, json};

use crate::{SHOW_PREVIEW, utc};

/// Characters of a session's answer shown in text form.
const ANSWER_PREVIEW: usize = 200;

/// What a command prints: `out` on stdout, `err` on stderr.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Printed {
    pub out: String,
    pub err: String,
}

/// A run's report (`run_id`: where it is stored). As text: the answer on stdout (a string
/// raw, anything else as JSON), or the question it stopped at with how to answer it, or
/// its error on stderr. As JSON: the report, with `run_id` when stored.
pub fn report(report: &RunReport, json: bool, run_id: Option<&str>) -> Printed {
    let mut p = Printed::default();
    if json {
        p.out = format!("{}\n", report_json(report, run_id));
        return p;
    }
    if let Some(e) = &report.error {
        let _ = write!(p.err, "error[{}]: {}", e.code, e.message);
        match (e.seq_no, e.line) {
            (Some(s), Some(l)) => _ = write!(p.err, "\n  --> seq_no {s}, line {l}"),
            (Some(s), None) => _ = write!(p.err, "\n  --> seq_no {s}"),
            (None, Some(l)) => _ = write!(p.err, "\n  --> line {l}"),
            (None, None) => {}
        }
        p.err.push('\n');
        return p;
    }
    if let Some(q) = &report.question {
        return question(q, run_id);
    }
    p.out = match &report.final_answer {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if !p.out.ends_with('\n') {
        p.out.push('\n');
    }
    p
}

/// A run's report as `run --format json` prints it: with its `run_id` when stored.
fn report_json(report: &RunReport, run_id: Option<&str>) -> Value {
    let mut v = serde_json::to_value(report).unwrap_or_default();
    if let (Some(id), Some(obj)) = (run_id, v.as_object_mut()) {
        obj.insert("run_id".into(), id.into());
    }
    v
}

/// A run's question on stdout (its choices one a line), and on stderr how to answer it.
fn question(q: &Question, run_id: Option<&str>) -> Printed {
    let mut out = format!("{}\n", q.question.trim_end());
    for c in q.choices.iter().flatten() {
        let _ = writeln!(out, "  - {c}");
    }
    let err = match run_id {
        Some(id) => format!(
            "run {id} is waiting for input: answer with `planvm resume {id} --input TEXT`\n"
        ),
        None => "the run is waiting for input: with --store it can be answered later (`planvm resume ID --input TEXT`)\n".to_owned(),
    };
    Printed { out, err }
}

/// What `ask` came to (`run_id`: its last stored run). As JSON: the outcome with `run_id`, and the question and its
/// choices beside the status when it stopped at one.
pub fn ask_outcome(outcome: &AskOutcome, json: bool, run_id: Option<&str>) -> Printed {
    if json {
        let mut v = serde_json::to_value(outcome).unwrap_or_default();
        if let Some(obj) = v.as_object_mut() {
            obj.insert("run_id".into(), run_id.into());
            if let Some(q) = outcome.report.as_ref().and_then(|r| r.question.as_ref()) {
                obj.insert("question".into(), q.question.clone().into());
                obj.insert("choices".into(), json!(q.choices));
            }
        }
        return Printed {
            out: format!("{v}\n"),
            err: String::new(),
        };
    }
    let mut err = String::new();
    match (outcome.status, &outcome.report) {
        (AskStatus::Answered | AskStatus::RunFailed | AskStatus::NeedsInput, Some(r)) => {
            if let Some(e) = &outcome.error {
                let _ = writeln!(err, "error: {e}");
            }
            let p = report(r, false, run_id);
            err.push_str(&p.err);
            return Printed { out: p.out, err };
        }
        (AskStatus::InvalidPlan, _) => {
            // The last plan's diagnostics, as `planc check` shows them.
            if let Some(plan) = &outcome.plan {
                let color = crate::color_stderr();
                let diags = &outcome.diagnostics;
                err.push_str(&crate::render_human("the last plan", plan, diags, color));
            }
            let why = outcome.error.as_deref().unwrap_or("invalid plan");
            let _ = writeln!(err, "error: {why}");
        }
        _ => {
            let why = outcome.error.as_deref().unwrap_or("ask failed");
            let _ = writeln!(err, "error: {why}");
        }
    }
    Printed {
        out: String::new(),
        err,
    }
}

/// `planvm runs list`: a line per goal none of whose plans has run yet, then per run,
/// their ids in one column.
pub fn listing<'a>(
    runs: &'a [RunInfo],
    goals: &'a [GoalInfo],
    json: bool,
) -> impl Iterator<Item = String> + 'a {
    let ids = runs
        .iter()
        .map(|r| &r.id)
        .chain(goals.iter().map(|g| &g.id));
    let width = ids.map(String::len).max().unwrap_or(0);
    let goal_lines = goals.iter().map(move |g| goal_line(g, width, json));
    goal_lines.chain(runs.iter().map(move |r| run_line(r, width, json)))
}

/// Run `r`'s line in `runs list`, its id padded to `width`.
fn run_line(r: &RunInfo, width: usize, json: bool) -> String {
    if json {
        let mut line = json!({
            "id": r.id,
            "status": r.status,
            "plan": r.plan,
            "created_at": utc(r.created_at),
            "updated_at": utc(r.updated_at),
            "steps": r.steps,
            "tool_calls": r.tool_calls,
            "parent": r.parent,
            "branch_seq": r.branch_seq,
        });
        if let Some(q) = &r.question {
            line["question"] = q.clone();
        }
        if let Some(u) = &r.usage {
            line["usage"] = json!(u);
        }
        return line.to_string();
    }
    let branch = match (&r.parent, r.branch_seq) {
        (Some(p), Some(s)) => format!("  (branch of {p} at seq_no {s})"),
        _ => String::new(),
    };
    format!(
        "{:<width$}  {:<11}  {:>6} steps  {:>4} calls  {}  {}{branch}",
        r.id,
        r.status.as_str(),
        r.steps,
        r.tool_calls,
        utc(r.updated_at),
        r.plan,
    )
}

/// Goal `g`'s line in `runs list` (a goal none of whose plans has run yet), its id padded
/// to `width`.
fn goal_line(g: &GoalInfo, width: usize, json: bool) -> String {
    let status = plan_runs::goal::listed_status(g.status);
    if json {
        return json!({
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
        .to_string();
    }
    format!(
        "{:<width$}  {status:<11}  {:>6} steps  {:>4} calls  {}  goal: {}",
        g.id,
        0,
        0,
        utc(g.updated_at),
        plan_value::preview(&Value::String(g.goal.clone()), SHOW_PREVIEW)
    )
}

/// A goal none of whose plans has run yet, as `runs show` shows it.
pub fn goal_shown(goal: &GoalInfo, json: bool) -> String {
    let status = plan_runs::goal::listed_status(goal.status);
    if json {
        return format!("{}\n", json!({"goal": goal, "status": status}));
    }
    let mut t = format!(
        "goal {}  {status}\n  {}\n  created {}, updated {}; no plan of it has run yet\n",
        goal.id,
        goal.goal,
        utc(goal.created_at),
        utc(goal.updated_at)
    );
    if let Some(e) = &goal.error {
        error_line(&mut t, "  ", e);
    }
    t
}

/// A stored run as `runs show` shows it: its row, question, error, evaluation and a
/// person's verdict, then its steps with what each wrote, then its calls.
pub fn run_shown(shown: &Shown, json: bool) -> String {
    if json {
        return format!("{}\n", json!(shown));
    }
    let mut t = run_head(shown);
    steps(&mut t, &shown.steps);
    calls(&mut t, &shown.calls);
    t
}

/// Every variable as it was at a point of a run (`runs show --at`).
pub fn variables(vars: Map<String, Value>, json: bool) -> String {
    if json {
        return format!("{}\n", Value::Object(vars));
    }
    let mut t = String::new();
    for (name, v) in &vars {
        let _ = writeln!(t, "{name} = {}", plan_value::preview(v, SHOW_PREVIEW));
    }
    t
}

fn run_head(shown: &Shown) -> String {
    let Shown {
        run,
        feedback,
        eval,
        ..
    } = shown;
    let mut t = format!(
        "run {}  {}  {}\n  {} steps, {} tool calls, created {}, updated {}\n",
        run.id,
        run.status.as_str(),
        run.plan,
        run.steps,
        run.tool_calls,
        utc(run.created_at),
        utc(run.updated_at)
    );
    if let (Some(p), Some(s)) = (&run.parent, run.branch_seq) {
        let _ = writeln!(t, "  branch of {p} at seq_no {s}");
    }
    if let Some(a) = &run.final_answer {
        let _ = writeln!(
            t,
            "  final_answer: {}",
            plan_value::preview(a, SHOW_PREVIEW)
        );
    }
    if let Some(q) = plan_runs::question_of(run) {
        let seq = q.seq_no.unwrap_or(-1);
        let _ = writeln!(t, "  asks (seq_no {seq}): {}", q.question);
        if let Some(choices) = &q.choices {
            let _ = writeln!(t, "  choices: {}", choices.join(" | "));
        }
        let _ = writeln!(t, "  answer with: planvm resume {} --input TEXT", run.id);
    }
    if let Some(e) = &run.error {
        error_line(&mut t, "  ", e);
    }
    if let Some(e) = eval {
        let reason = match e.case.reason.as_str() {
            "" => String::new(),
            r => format!(": {r}"),
        };
        let _ = writeln!(
            t,
            "  evaluation {}, case {}: {} (score {:.2}){reason}",
            e.eval, e.case.case_id, e.case.verdict, e.case.score,
        );
    }
    if let Some(f) = feedback {
        let note = f
            .note
            .as_deref()
            .map_or(String::new(), |n| format!(": {n}"));
        let _ = writeln!(t, "  a person's verdict: {}{note}", f.verdict);
    }
    t
}

/// `error[CODE]: message` of a stored error (`{"code", "message"}`), on its own line.
fn error_line(t: &mut String, indent: &str, e: &Value) {
    let code = e["code"].as_str().unwrap_or("?");
    let message = e["message"].as_str().unwrap_or("");
    let _ = writeln!(t, "{indent}error[{code}]: {message}");
}

fn steps(t: &mut String, steps: &[StepRow]) {
    t.push_str("\nsteps:\n");
    for s in steps {
        let seq = s.seq_no.map_or("-".to_owned(), |n| n.to_string());
        let _ = writeln!(t, "  {:>5}  seq {seq:>3}  {}", s.step, s.op);
        for (name, v) in &s.writes {
            let v = plan_value::preview(v, SHOW_PREVIEW);
            let _ = writeln!(t, "           {name} = {v}");
        }
        for (name, bytes) in &s.omitted {
            let _ = writeln!(t, "           {name} = ({bytes} bytes, not kept)");
        }
    }
}

fn calls(t: &mut String, calls: &[CallRow]) {
    t.push_str("\ncalls:\n");
    for c in calls {
        let seq = c.seq_no.map_or("-".to_owned(), |n| n.to_string());
        let result = match (&c.output, &c.error) {
            (Some(v), _) => plan_value::preview(v, SHOW_PREVIEW),
            (None, Some(e)) => format!("error: {e}"),
            (None, None) => "(no answer)".to_owned(),
        };
        let latency = c.latency_ms.map_or(String::new(), |l| format!(" {l} ms"));
        let args = plan_value::preview(&Value::Object(c.args.clone()), SHOW_PREVIEW);
        let _ = writeln!(
            t,
            "  step {:>5}  seq {seq:>3}  {} [{}{latency}]\n    args: {args}\n    -> {result}",
            c.step,
            c.tool,
            c.state.as_str(),
        );
    }
}

/// Session `s`'s line in `sessions list`.
pub fn session_line(s: &SessionInfo, json: bool) -> String {
    if json {
        return json!(s).to_string();
    }
    let (first, latest) = (utc(s.created_at), utc(s.updated_at));
    format!("{}  {} goals  {first} .. {latest}", s.id, s.goals)
}

/// A session as `sessions show` shows it: its summary, then its goals oldest first, each
/// with its answer (or error) and runs.
pub fn session_shown(shown: &SessionShown, json: bool) -> String {
    if json {
        return format!("{}\n", json!(shown));
    }
    let mut t = format!("session {}\n", shown.id);
    if let Some(s) = &shown.summary {
        let upto = s["upto"].as_str().unwrap_or("?");
        let summary = s["summary"].as_str().unwrap_or("");
        let _ = writeln!(t, "  summary (up to {upto}): {summary}");
    }
    for g in &shown.goals {
        let _ = writeln!(
            t,
            "\n  {}  {}  {}",
            g["id"].as_str().unwrap_or("?"),
            g["status"].as_str().unwrap_or("?"),
            g["goal"].as_str().unwrap_or("")
        );
        match (&g["answer"], &g["error"]) {
            (Value::Null, Value::Null) => {}
            (Value::Null, e) => error_line(&mut t, "    ", e),
            (a, _) => {
                let a = plan_value::preview(a, ANSWER_PREVIEW);
                let _ = writeln!(t, "    answer: {a}");
            }
        }
        if let Some(runs) = g["runs"].as_array().filter(|r| !r.is_empty()) {
            let ids: Vec<&str> = runs.iter().filter_map(Value::as_str).collect();
            let _ = writeln!(t, "    runs: {}", ids.join(", "));
        }
    }
    t
}

/// One JSON line per run or goal a worker ended: the run's report as `run --format json`
/// prints it with its `run_id`, a goal as it stands, or what refused it (`None`: the
/// store was unreachable, which is no line but a warning).
pub fn worker_event(e: &plan_runs::queue::Event<'_>) -> Option<String> {
    use plan_runs::queue::Event;
    let line = match e {
        Event::Finished { id, report } => report_json(report, Some(id)),
        Event::Asked { goal } => json!({
            "goal_id": goal.id,
            "status": goal.status,
            "answer": goal.answer,
            "error": goal.error,
        }),
        Event::Refused { id, goal, error } => {
            let key = if *goal { "goal_id" } else { "run_id" };
            json!({key: id, "status": "refused", "error": error.to_json()})
        }
        Event::Unavailable { .. } => return None,
    };
    Some(line.to_string())
}

/// What the compiler `found` in a plan of `source`, rustc-style for stderr (nothing when
/// it found nothing, or the plan was bytecode).
pub fn found(found: &plan_runs::load::Found, source: Option<&str>) -> String {
    match source {
        Some(src) if !found.diagnostics.is_empty() => {
            let color = crate::color_stderr();
            crate::render_human(&found.shown, src, &found.diagnostics, color)
        }
        _ => String::new(),
    }
}

/// A run of a batch as its line of `planvm batch`'s output, into `text` (emptied first):
/// the `planvm run --format json` object preceded by `plan`, `line` (of a list) and
/// `run_id` (when stored), and a newline.
pub fn batch_line(
    text: &mut Vec<u8>,
    (plan, line, run_id): (&std::path::Path, Option<usize>, Option<&str>),
    report: &RunReport,
) {
    use std::io::Write;
    // NB: written straight into the line, the report's fields after the job's: the same
    // text as building a JSON object of both and printing it, which was a tenth of a
    // batch of replayed runs' instructions.
    text.clear();
    text.extend_from_slice(b"{\"plan\":");
    plan_value::json::write_str(text, &plan.to_string_lossy());
    if let Some(l) = line {
        let _ = write!(text, ",\"line\":{l}");
    }
    if let Some(id) = run_id {
        text.extend_from_slice(b",\"run_id\":");
        plan_value::json::write_str(text, id);
    }
    let fields = text.len();
    match serde_json::to_writer(&mut *text, report) {
        // `{"status":...}` goes on as `,"status":...}`.
        Ok(()) if text.len() > fields + 2 => text[fields] = b',',
        _ => {
            text.truncate(fields);
            text.push(b'}');
        }
    }
    text.push(b'\n');
}

/// The line `batch` ends with on stderr: runs by outcome, time and rate.
/// What a worker did, said as it stops.
pub fn worker_summary(t: &plan_runs::queue::Tally) -> String {
    format!(
        "worker: runs {} ok, {} failed; goals {} answered, {} unanswered, {} waiting for a person; {} refused, {} stopped to go on elsewhere",
        t.ok, t.failed, t.answered, t.unanswered, t.waiting, t.refused, t.stopped
    )
}

pub fn batch_summary(tally: &plan_runs::batch::Tally) -> String {
    let secs = tally.elapsed.as_secs_f64();
    let rate = if secs > 0.0 {
        tally.runs as f64 / secs
    } else {
        0.0
    };
    let waiting = match tally.needs_input {
        0 => String::new(),
        n => format!(", {n} waiting for input"),
    };
    format!(
        "batch: {} runs, {} ok, {} failed ({} not loaded){waiting} in {secs:.2} s ({rate:.1} runs/s)",
        tally.runs,
        tally.ok,
        tally.runs - tally.ok - tally.needs_input,
        tally.invalid
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use plan_host::RunStatus;
    use std::time::Duration;

    fn answered(answer: Value) -> RunReport {
        let mut r = RunReport::failed_before_start(String::new(), Duration::ZERO);
        r.status = RunStatus::Ok;
        r.error = None;
        r.final_answer = answer;
        r
    }

    #[test]
    fn an_answer_is_printed_raw_when_a_string_and_as_json_otherwise() {
        let text = report(&answered("hello".into()), false, None);
        assert_eq!(text.out, "hello\n");
        assert_eq!(text.err, "");
        let object = report(&answered(json!({"a": 1})), false, None);
        assert_eq!(object.out, "{\"a\":1}\n");
    }

    #[test]
    fn a_failed_run_says_its_code_and_where_on_stderr_only() {
        let mut r = RunReport::failed_before_start("no".into(), Duration::ZERO);
        if let Some(e) = &mut r.error {
            (e.seq_no, e.line) = (Some(3), Some(7));
        }
        let p = report(&r, false, Some("r1"));
        assert_eq!(p.out, "");
        let code = serde_json::to_value(r.error.as_ref().map(|e| e.code)).unwrap();
        let code = code.as_str().unwrap();
        assert_eq!(
            p.err,
            format!("error[{code}]: no\n  --> seq_no 3, line 7\n")
        );
    }

    #[test]
    fn a_question_lists_its_choices_and_how_to_answer_it() {
        let mut r = answered(Value::Null);
        r.status = RunStatus::NeedsInput;
        r.question = Some(Question {
            question: "Which region?\n".into(),
            choices: Some(vec!["eu".into(), "us".into()]),
            seq_no: Some(2),
        });
        let stored = report(&r, false, Some("r1"));
        assert_eq!(stored.out, "Which region?\n  - eu\n  - us\n");
        assert!(
            stored.err.contains("planvm resume r1 --input TEXT"),
            "{}",
            stored.err
        );
        let unstored = report(&r, false, None);
        assert!(unstored.err.contains("with --store"), "{}", unstored.err);
        let json: Value = serde_json::from_str(&report(&r, true, Some("r1")).out).unwrap();
        assert_eq!(json["run_id"], "r1");
        assert_eq!(json["question"], "Which region?\n");
        assert_eq!(json["choices"], json!(["eu", "us"]));
    }
}
