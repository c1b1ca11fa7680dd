//! The stored run ids of a batch's runs, and pairing a list's lines with the runs an
//! earlier pass stored (`--resume`).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde_json::{Map, Value};

use super::drive::merge_vars;
use super::list::Job;
use super::list::stem;

/// The stored run id of each run: `<batch>.<name>`, made of the characters run ids
/// allow, numbered (`.2`, `.3`, ...) where two names give one id.
pub(crate) fn run_ids(batch: &str, jobs: &[Job]) -> HashMap<String, String> {
    let mut taken = HashSet::new();
    jobs.iter()
        .map(|j| {
            let base = plan_store::run_id_from(&format!("{batch}.{}", j.name));
            (j.name.clone(), free_id(&base, &mut taken))
        })
        .collect()
}

/// `--resume` of a list: pairs the lines with the batch's `stored` runs (oldest first) by
/// what they run, so that lines moved since (a comment added at the top, lines reordered,
/// added or removed) are not paired with other lines' runs: the lines and the runs of
/// the same plan and variables are paired in order (only runs named after a line of that
/// plan: not another batch's whose ids merely start the same way). A line left over runs
/// anew, under its line number's id numbered past every stored run.
pub(crate) fn pair_by_content(
    ids: &mut HashMap<String, String>,
    batch: &str,
    jobs: &[Job],
    global: &[(String, Value)],
    stored: &[plan_store::RunInfo],
) {
    fn key(plan: &str, vars: &Map<String, Value>) -> Vec<u8> {
        let mut k = plan.as_bytes().to_vec();
        k.push(0);
        plan_value::json::write_canonical_object(&mut k, vars);
        k
    }
    let mut lines: HashMap<Vec<u8>, Vec<&Job>> = HashMap::new();
    for j in jobs.iter().filter(|j| j.line.is_some()) {
        let vars: Map<String, Value> = merge_vars(global, j.vars.clone()).into_iter().collect();
        lines
            .entry(key(&j.plan.display().to_string(), &vars))
            .or_default()
            .push(j);
    }
    let mut runs: HashMap<Vec<u8>, Vec<&str>> = HashMap::new();
    for r in stored.iter().filter(|r| r.parent.is_none()) {
        let named = format!("{batch}.{}.line", stem(Path::new(&r.plan)));
        if r.id.starts_with(&plan_store::run_id_from(&named)) {
            runs.entry(key(&r.plan, &r.presets))
                .or_default()
                .push(&r.id);
        }
    }
    let mut paired: HashMap<&str, &str> = HashMap::new();
    for (k, js) in &lines {
        for (j, id) in js.iter().zip(runs.get(k).into_iter().flatten()) {
            paired.insert(&j.name, id);
        }
    }
    let mut taken: HashSet<String> = stored.iter().map(|r| r.id.clone()).collect();
    for j in jobs.iter().filter(|j| j.line.is_some()) {
        let id = match paired.get(j.name.as_str()) {
            Some(id) => (*id).to_owned(),
            None => free_id(ids.get(&j.name).map_or("", String::as_str), &mut taken),
        };
        ids.insert(j.name.clone(), id);
    }
}

/// `base`, or `base.2`, `base.3`, ...: the first not in `taken`, which it joins. NB: run
/// ids are ASCII (`run_id_from`), so any cut is a char boundary; room is left for the
/// number within the 128 bytes.
fn free_id(base: &str, taken: &mut HashSet<String>) -> String {
    let mut id = base.to_owned();
    let mut k = 1;
    while !taken.insert(id.clone()) {
        k += 1;
        id = format!("{}.{k}", &base[..base.len().min(116)]);
    }
    id
}

#[cfg(test)]
mod run_id_tests {
    use super::{Job, run_ids};

    fn job(name: &str) -> Job {
        Job {
            plan: name.into(),
            cassette: None,
            vars: Vec::new(),
            line: None,
            name: name.into(),
        }
    }

    #[test]
    fn names_that_map_to_one_id_are_numbered() {
        let long = "x".repeat(200);
        let jobs = [
            job("my plan"),
            job("my_plan"),
            job(&format!("{long}a")),
            job(&format!("{long}b")),
        ];
        let ids = run_ids("b", &jobs);
        assert_eq!(ids["my plan"], "b.my_plan");
        assert_eq!(ids["my_plan"], "b.my_plan.2");
        let (a, b) = (&ids[&format!("{long}a")], &ids[&format!("{long}b")]);
        assert_ne!(a, b);
        assert!(a.len() <= 128 && b.len() <= 128);
    }
}
