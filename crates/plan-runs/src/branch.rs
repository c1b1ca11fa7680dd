//! Branching a stored run: a new run that starts at a point of its parent with the
//! variables the parent had there, and runs another plan from there. The parent is not
//! changed.

use plan_bytecode::ValidatedProgram;
use plan_store::replay::{self, NotBefore};
use plan_store::{NewRun, Owner, RunInfo, RunStore, Seen};
use plan_vm::Limits;
use serde_json::{Map, Value};

use crate::load::Loaded;
use crate::open::{Access, StoreAt};
use crate::{Claimed, Error, ErrorKind, Going, Held};

/// A point of a stored run to branch from.
pub struct BranchPoint {
    at: StoreAt,
    store: Box<dyn RunStore>,
    parent: RunInfo,
    seq_no: i64,
    vars: Map<String, Value>,
}

/// A new run from a point of a stored run, going on with another plan (`planvm branch`,
/// the service's branch and its preview); see [`crate::engine::Engine::branch`].
pub struct BranchRequest<'a> {
    /// The run branched from, which is not changed.
    pub parent: &'a str,
    /// Just before the parent first executed this seq_no.
    pub at: i64,
    /// The new plan's name, in messages and in the runs listed.
    pub name: &'a str,
    /// The new plan: source, or `.pbc` bytes.
    pub plan: Vec<u8>,
    pub limits: Limits,
}

/// A branch ready to start or to preview: its point, and its plan compiled and checked
/// to go on from there.
pub struct Branch {
    pub point: BranchPoint,
    /// The new plan, with its warnings.
    pub loaded: Loaded,
    name: String,
    limits: Limits,
}

impl Branch {
    pub(crate) fn new(point: BranchPoint, loaded: Loaded, name: &str, limits: Limits) -> Branch {
        Branch {
            point,
            loaded,
            name: name.to_owned(),
            limits,
        }
    }

    /// Starts the new run `id`, held by this process (see [`BranchPoint::start`]).
    pub fn start(self, id: &str, warn: fn(&Error)) -> Result<Claimed, Error> {
        let Loaded {
            program, source, ..
        } = self.loaded;
        (self.point).start(
            id,
            &self.name,
            source.as_deref(),
            program,
            self.limits,
            warn,
        )
    }

    /// What the branch would reuse and call, nothing run (see [`BranchPoint::preview`]).
    pub fn preview(&self) -> Result<Preview, Error> {
        let source = self.loaded.source.as_deref().unwrap_or_default();
        self.point.preview(&self.loaded.program, source)
    }
}

/// [`branch_point`], where a goal none of whose plans has run yet is `busy`: its plan is
/// being written, or none was.
pub(crate) fn point_of(at: &StoreAt, parent: &str, seq_no: i64) -> Result<BranchPoint, Error> {
    branch_point(at, parent, seq_no).map_err(|e| {
        let goal = at.open(Access::Read).and_then(|s| Ok(s.goal(parent)?));
        match goal {
            Ok(Some(_)) if e.kind == ErrorKind::UnknownRun => Error::new(
                ErrorKind::Busy,
                format!("goal `{parent}` has no run yet to branch from: the planner is writing its plan, or wrote none"),
            ),
            _ => e,
        }
    })
}

/// The point of run `id` of the store at `at` just before it first executed `seq_no`,
/// with its variables there (found by running the parent again on its stored answers;
/// nothing is sent).
pub fn branch_point(at: &StoreAt, id: &str, seq_no: i64) -> Result<BranchPoint, Error> {
    let store = at.open(Access::Existing)?;
    let parent = store.run(id)?;
    let vars = variables_before(&*store, &parent, seq_no)?;
    Ok(BranchPoint {
        at: at.clone(),
        store,
        parent,
        seq_no,
        vars,
    })
}

/// Every variable of stored `run` just before it first executed `seq_no`.
pub fn variables_before(
    store: &dyn RunStore,
    run: &RunInfo,
    seq_no: i64,
) -> Result<Map<String, Value>, Error> {
    let (program, _, calls) = crate::read_run(store, run)?;
    replay::variables_before(
        &program,
        &run.presets,
        &run.limits,
        run.branch_seq,
        &calls,
        seq_no,
    )
    .map_err(|e| match e {
        NotBefore::Damaged(why) => Error::damaged(store.name(), &run.id, &why),
        NotBefore::NotReached(why) => {
            Error::new(ErrorKind::NotReached, format!("run `{}`: {why}", run.id))
        }
    })
}

impl BranchPoint {
    pub fn parent(&self) -> &RunInfo {
        &self.parent
    }

    /// The variables set at the point: a new plan is verified with them counted as set.
    pub fn vars(&self) -> &Map<String, Value> {
        &self.vars
    }

    /// How a new plan for the point is compiled against `manifest`: entered at the
    /// point's seq_no, its variables counted as set.
    pub fn compile_options(
        &self,
        manifest: plan_manifest::Manifest,
    ) -> plan_compiler::CompileOptions {
        plan_compiler::CompileOptions {
            manifest,
            entry: Some(plan_compiler::Entry {
                seq_no: self.seq_no,
                vars: self.vars.keys().cloned().collect(),
            }),
            ..plan_compiler::CompileOptions::default()
        }
    }

    /// Whether `program` can start at the point under `limits` (its instruction at the
    /// point's seq_no, with the point's variables), before anything else is set up.
    pub fn check(
        &self,
        program: &ValidatedProgram,
        limits: &Limits,
        plan: &str,
    ) -> Result<(), Error> {
        self.fresh_state(program, limits, plan).map(drop)
    }

    fn fresh_state(
        &self,
        program: &ValidatedProgram,
        limits: &Limits,
        plan: &str,
    ) -> Result<plan_vm::VmState, Error> {
        replay::fresh_state(program, &self.vars, limits, Some(self.seq_no))
            .map_err(|e| Error::new(ErrorKind::Invalid, format!("{plan}: {e}")))
    }

    /// Creates the branch, run `id` of `program` (named `plan`, from `source`) under
    /// `limits`, held by this process; `program` starts at its own instruction with the
    /// point's seq_no.
    pub fn start(
        self,
        id: &str,
        plan: &str,
        source: Option<&str>,
        program: ValidatedProgram,
        limits: Limits,
        warn: fn(&Error),
    ) -> Result<Claimed, Error> {
        let state = self.fresh_state(&program, &limits, plan)?;
        let BranchPoint {
            at,
            mut store,
            parent,
            seq_no,
            vars,
        } = self;
        let new = NewRun {
            id,
            plan,
            source,
            pbc: &plan_bytecode::encode(&program),
            presets: &vars,
            limits: &limits,
            parent: Some((&parent.id, seq_no)),
        };
        plan_store::check_run_id(id)
            .map_err(|e| Error::new(ErrorKind::BadRunId, format!("run id `{id}`: {e}")))?;
        let owner = Owner::for_run();
        store.create_run(&new, &owner)?;
        Ok(Claimed {
            held: Held::new(store, &at, id, owner, warn),
            going: Going {
                program,
                seen: Seen::default(),
                calls: Vec::new(),
                steps_done: 0,
                state,
                input: None,
            },
            limits,
            goal: None,
        })
    }
}

/// What a branch would do, before it runs (`BranchPoint::preview`).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Preview {
    /// The seq_no the branch starts at.
    pub at: i64,
    /// The parent's variables at the point: the new run starts with them.
    pub variables: Vec<String>,
    /// The parent's calls before the point: their answers live on in those variables, and
    /// are not requested again.
    pub reused: Vec<PreviewCall>,
    /// The new plan's calls (and LLM conditions) that can be reached from the point: they
    /// are made anew, `always` when every way from the point to the end passes them.
    pub calls: Vec<PreviewCall>,
    /// The new plan's instructions before the point that differ from the parent's: the
    /// branch does not run them (the parent's results stand), so the edit has no effect.
    pub ignored: Vec<i64>,
}

/// One call of a [`Preview`].
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PreviewCall {
    pub seq_no: Option<i64>,
    /// The tool, or `condition` for an LLM-evaluated `jmp`.
    pub tool: String,
    /// The parent's: its step; the new plan's: whether it is made on every way to the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub always: Option<bool>,
}

impl BranchPoint {
    /// What branching here with `program` (from `source`) would reuse and what it would
    /// call, from the parent's journal and the new program's control flow; nothing runs.
    pub fn preview(&self, program: &ValidatedProgram, source: &str) -> Result<Preview, Error> {
        let steps = self.store.steps(&self.parent.id)?;
        let calls = self.store.calls(&self.parent.id)?;
        // NB: the point is the parent's first execution of `at`; a call belongs to the
        // step after the `step` instructions executed before it.
        let point = steps
            .iter()
            .find(|s| s.seq_no == Some(self.seq_no))
            .map_or(u64::MAX, |s| s.step);
        let reused = calls
            .iter()
            .filter(|c| c.step + 1 < point && c.state == plan_store::CallState::Committed)
            .map(|c| PreviewCall {
                seq_no: c.seq_no,
                tool: c.tool.clone(),
                step: Some(c.step),
                always: None,
            })
            .collect();
        let parent_source = crate::read::source(&*self.store, &self.parent);
        Ok(Preview {
            at: self.seq_no,
            variables: self.vars.keys().cloned().collect(),
            reused,
            calls: reachable_calls(program, self.seq_no),
            ignored: parent_source
                .map_or_else(Vec::new, |p| edited_before(&p, source, self.seq_no)),
        })
    }
}

/// The calls and conditions of `program` reachable from its instruction `at`, each with
/// whether every way from there to the end passes it.
fn reachable_calls(program: &ValidatedProgram, at: i64) -> Vec<PreviewCall> {
    use plan_bytecode::Instr;
    let code = &program.code;
    let end = code.len();
    let Some(entry) = replay::pc_of_seq(program, at).map(|pc| pc as usize) else {
        return Vec::new();
    };
    let next = |pc: usize| -> Vec<usize> {
        match code[pc] {
            Instr::Jump { target } => vec![target as usize],
            Instr::Branch {
                if_true, if_false, ..
            } => vec![if_true as usize, if_false as usize],
            _ => vec![pc + 1],
        }
    };
    // Every pc reachable from the entry, avoiding `without`; whether the end is.
    let walk = |without: Option<usize>| {
        let mut seen = vec![false; end + 1];
        let mut todo = vec![entry];
        while let Some(pc) = todo.pop() {
            if Some(pc) == without || pc > end || std::mem::replace(&mut seen[pc], true) {
                continue;
            }
            if pc < end {
                todo.extend(next(pc));
            }
        }
        seen
    };
    let reach = walk(None);
    (entry..end)
        .chain(0..entry)
        .filter(|&pc| reach[pc])
        .filter_map(|pc| {
            let tool = match code[pc] {
                Instr::Call { call } => {
                    let def = program.calls.get(call as usize)?;
                    program.tools.get(def.tool as usize)?.name.clone()
                }
                Instr::Branch { .. } => "condition".to_owned(),
                _ => return None,
            };
            // NB: plans are small (hundreds of instructions): a walk per call is cheap.
            let always = !walk(Some(pc))[end];
            Some(PreviewCall {
                seq_no: program.seq_no_at(pc as plan_bytecode::Pc),
                tool,
                step: None,
                always: Some(always),
            })
        })
        .collect()
}

/// The seq_nos before `at` whose instruction in `new` differs from the one in `old`
/// (both plan sources, as any reader form).
fn edited_before(old: &str, new: &str, at: i64) -> Vec<i64> {
    let by_seq = |src: &str| -> std::collections::BTreeMap<i64, Value> {
        plan_syntax::read(src)
            .value
            .map(|n| n.to_value())
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default()
            .into_iter()
            .filter_map(|i| Some((i.get("seq_no")?.as_i64()?, i)))
            .filter(|(s, _)| *s < at)
            .collect()
    };
    let (old, new) = (by_seq(old), by_seq(new));
    let mut seqs: Vec<i64> = old.keys().chain(new.keys()).copied().collect();
    seqs.sort_unstable();
    seqs.dedup();
    seqs.retain(|s| old.get(s) != new.get(s));
    seqs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(src: &str) -> ValidatedProgram {
        let opts = plan_compiler::CompileOptions::default();
        plan_compiler::compile(src, &opts)
            .validate()
            .expect("the plan compiles")
    }

    #[test]
    fn a_call_on_one_side_of_a_condition_may_be_made_one_after_it_always_is() {
        let p = program(
            r#"[
 {"seq_no": 0, "type": "jmp", "parameters": {"condition_prompt": "Deep?", "jump_if_true": 1, "jump_if_false": 2}},
 {"seq_no": 1, "type": "calling", "parameters": {"tool_name": "vector_search", "tool_params": {"query": "deep"}, "output_vars": ["d"]}},
 {"seq_no": 2, "type": "calling", "parameters": {"tool_name": "llm_generate", "tool_params": {"prompt": "sum up"}, "output_vars": ["final_answer"]}}
]"#,
        );
        let shown = |at| -> Vec<(Option<i64>, String, Option<bool>)> {
            reachable_calls(&p, at)
                .into_iter()
                .map(|c| (c.seq_no, c.tool, c.always))
                .collect()
        };
        assert_eq!(
            shown(0),
            [
                (Some(0), "condition".to_owned(), Some(true)),
                (Some(1), "vector_search".to_owned(), Some(false)),
                (Some(2), "llm_generate".to_owned(), Some(true)),
            ]
        );
        assert_eq!(shown(2), [(Some(2), "llm_generate".to_owned(), Some(true))]);
    }

    #[test]
    fn only_edits_before_the_point_are_ignored() {
        let old = r#"[{"seq_no": 0, "type": "assign", "parameters": {"a": 1}},
                      {"seq_no": 1, "type": "assign", "parameters": {"b": 2}},
                      {"seq_no": 2, "type": "assign", "parameters": {"final_answer": "x"}}]"#;
        let new = r#"[{"seq_no": 0, "type": "assign", "parameters": {"a": 1}},
                      {"seq_no": 1, "type": "assign", "parameters": {"b": 3}},
                      {"seq_no": 2, "type": "assign", "parameters": {"final_answer": "y"}}]"#;
        assert_eq!(edited_before(old, new, 2), [1]);
        assert_eq!(edited_before(old, new, 1), Vec::<i64>::new());
    }
}
