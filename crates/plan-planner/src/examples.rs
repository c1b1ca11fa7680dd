//! Example plans for the prompt: a directory of JSON files `{"goal": "...", "labels":
//! [...], "plan": [...]}` (the plan may also be a string of plan source, as an LLM wrote
//! it). The examples most similar to the goal go into the prompt: BM25 over each
//! example's goal and labels (English stemming and stop words), highest score first, ties
//! in file-name order; examples that share no word with the goal fill the remaining
//! places, in file-name order.

use std::path::{Path, PathBuf};

use bm25::{Language, SearchEngineBuilder};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One example file may not be larger than this.
const MAX_EXAMPLE_BYTES: u64 = 1 << 20;
/// A directory may not hold more examples than this.
const MAX_EXAMPLES: usize = 10_000;

/// One example: a goal and a plan that reached it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Example {
    /// The file it came from (without `.json`).
    #[serde(skip)]
    pub name: String,
    pub goal: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    pub plan: Value,
}

/// The examples of one directory, ready to be searched.
#[derive(Clone, Debug, Default)]
pub struct Examples {
    list: Vec<Example>,
    /// The files that were skipped, and why.
    skipped: Vec<String>,
}

impl Examples {
    pub fn new(mut list: Vec<Example>) -> Examples {
        list.sort_by(|a, b| a.name.cmp(&b.name));
        Examples {
            list,
            skipped: Vec::new(),
        }
    }

    /// Reads every `*.json` file of `dir`. A file that is not an example (too large, not
    /// UTF-8, not JSON, not a goal and a plan) is skipped, and [`Examples::skipped`]
    /// says why, naming it: one bad file must not stop every `ask`. A directory that
    /// cannot be read, or holds too many examples, is an error.
    pub fn load(dir: &Path) -> Result<Examples, String> {
        let shown = dir.display();
        let entries = std::fs::read_dir(dir)
            .map_err(|e| format!("cannot read the examples directory {shown}: {e}"))?;
        let mut paths: Vec<PathBuf> = Vec::new();
        for entry in entries {
            let path = entry
                .map_err(|e| format!("cannot read the examples directory {shown}: {e}"))?
                .path();
            if path.extension().is_some_and(|x| x == "json") && path.is_file() {
                paths.push(path);
            }
        }
        if paths.len() > MAX_EXAMPLES {
            return Err(format!(
                "{shown} holds {} examples; at most {MAX_EXAMPLES} are read",
                paths.len()
            ));
        }
        paths.sort();
        let mut list = Vec::with_capacity(paths.len());
        let mut skipped = Vec::new();
        for p in &paths {
            match read_example(p) {
                Ok(e) => list.push(e),
                Err(why) => skipped.push(format!("{why}: skipped")),
            }
        }
        Ok(Examples {
            skipped,
            ..Examples::new(list)
        })
    }

    /// The files [`Examples::load`] skipped, each with why (for warnings).
    pub fn skipped(&self) -> &[String] {
        &self.skipped
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The `k` examples most similar to `goal` (see the module docs).
    pub fn select(&self, goal: &str, k: usize) -> Vec<&Example> {
        if k == 0 || self.list.is_empty() {
            return Vec::new();
        }
        let corpus = self
            .list
            .iter()
            .map(|e| format!("{} {}", e.goal, e.labels.join(" ")));
        let engine = SearchEngineBuilder::<u32>::with_corpus(Language::English, corpus).build();
        let mut hits: Vec<(f32, usize)> = engine
            .search(goal, self.list.len())
            .into_iter()
            .filter(|r| r.score > 0.0)
            .map(|r| (r.score, r.document.id as usize))
            .collect();
        // NB: the engine's order of equal scores is not stable; file-name order is.
        hits.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut chosen: Vec<usize> = hits.into_iter().map(|(_, i)| i).take(k).collect();
        for i in 0..self.list.len() {
            if chosen.len() >= k {
                break;
            }
            if !chosen.contains(&i) {
                chosen.push(i);
            }
        }
        chosen.into_iter().map(|i| &self.list[i]).collect()
    }
}

fn read_example(path: &Path) -> Result<Example, String> {
    let shown = path.display();
    let size = std::fs::metadata(path)
        .map_err(|e| format!("cannot read example {shown}: {e}"))?
        .len();
    if size > MAX_EXAMPLE_BYTES {
        return Err(format!(
            "example {shown} is larger than {MAX_EXAMPLE_BYTES} bytes"
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::InvalidData => format!("example {shown} is not UTF-8 text"),
        _ => format!("cannot read example {shown}: {e}"),
    })?;
    let mut e: Example = serde_json::from_str(&text)
        .map_err(|e| format!("example {shown} is not a JSON object with `goal` and `plan`: {e}"))?;
    if let Value::String(src) = &e.plan {
        e.plan = plan_value(src).ok_or_else(|| {
            format!("example {shown}: `plan` is a string that holds no readable plan")
        })?;
    }
    if !e.plan.is_array() || e.goal.trim().is_empty() {
        return Err(format!(
            "example {shown}: `goal` must be a non-empty string and `plan` an array of instructions"
        ));
    }
    e.name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(e)
}

/// The plan in `src` (any form the reader accepts) as JSON.
pub fn plan_value(src: &str) -> Option<Value> {
    plan_syntax::read(src).value.map(|n| n.to_value())
}

/// Saves a goal (with its labels) and the plan that reached it as a new example in `dir`
/// (created if missing), named after the goal; returns the file written.
pub fn save_example(
    dir: &Path,
    goal: &str,
    labels: &[String],
    plan_source: &str,
) -> Result<PathBuf, String> {
    let plan = plan_value(plan_source).ok_or("the plan cannot be read back")?;
    std::fs::create_dir_all(dir).map_err(|e| {
        format!(
            "cannot create the examples directory {}: {e}",
            dir.display()
        )
    })?;
    let example = Example {
        name: String::new(),
        goal: goal.trim().to_owned(),
        labels: labels.to_vec(),
        plan,
    };
    let text = serde_json::to_string_pretty(&example).map_err(|e| e.to_string())? + "\n";
    let stem = slug(goal);
    for n in 1..1000 {
        let name = if n == 1 {
            format!("{stem}.json")
        } else {
            format!("{stem}-{n}.json")
        };
        let path = dir.join(name);
        // NB: create_new, so an existing example is never overwritten.
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(mut f) => {
                use std::io::Write;
                f.write_all(text.as_bytes())
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                return Ok(path);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("cannot create {}: {e}", path.display())),
        }
    }
    Err(format!(
        "{} already holds 999 examples named after this goal",
        dir.display()
    ))
}

/// A file name from a goal: lower-case ASCII words joined by `-`, at most 60 characters.
fn slug(goal: &str) -> String {
    let mut s = String::new();
    for word in goal
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if s.len() + word.len() + 1 > 60 {
            break;
        }
        if !s.is_empty() {
            s.push('-');
        }
        s.push_str(&word.to_ascii_lowercase());
    }
    if s.is_empty() {
        s.push_str("example");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ex(name: &str, goal: &str, labels: &[&str]) -> Example {
        Example {
            name: name.into(),
            goal: goal.into(),
            labels: labels.iter().map(|l| (*l).to_owned()).collect(),
            plan: json!([]),
        }
    }

    #[test]
    fn the_most_similar_goals_come_first() {
        let examples = Examples::new(vec![
            ex("a", "What is TiDB?", &["overview"]),
            ex(
                "b",
                "How do I tune slow SQL queries in TiDB?",
                &["performance"],
            ),
            ex("c", "Compare the weather in two cities", &[]),
            ex(
                "d",
                "Which SQL statements does TiDB support?",
                &["sql", "compatibility"],
            ),
        ]);
        let names = |goal: &str, k| -> Vec<String> {
            examples
                .select(goal, k)
                .iter()
                .map(|e| e.name.clone())
                .collect()
        };
        assert_eq!(names("does tidb support sql?", 2), ["d", "b"]);
        assert_eq!(names("slow queries", 1), ["b"]);
        // Nothing in common: file-name order fills the places.
        assert_eq!(names("zebra", 2), ["a", "b"]);
        assert_eq!(names("anything", 9).len(), 4);
        assert!(names("x", 0).is_empty());
    }

    #[test]
    fn slugs_are_file_names() {
        assert_eq!(slug("Does TiDB support SQL?"), "does-tidb-support-sql");
        assert_eq!(slug("???"), "example");
        assert!(slug(&"word ".repeat(100)).len() <= 60);
    }

    #[test]
    fn saved_examples_load_back_and_never_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let plan = "```json\n[{\"seq_no\": 0, \"type\": \"assign\", \"parameters\": {\"final_answer\": 1}}]\n```";
        let a = save_example(dir.path(), "Why?", &[], plan).unwrap();
        let b = save_example(dir.path(), "Why?", &[], plan).unwrap();
        assert_ne!(a, b);
        let loaded = Examples::load(dir.path()).unwrap();
        assert_eq!(loaded.len(), 2);
        assert_eq!(
            loaded.list[0].plan[0]["parameters"]["final_answer"],
            json!(1)
        );
    }

    #[test]
    fn a_file_that_is_not_an_example_is_skipped_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let plan = "[{\"seq_no\": 0, \"type\": \"assign\", \"parameters\": {\"final_answer\": 1}}]";
        save_example(dir.path(), "Why?", &[], plan).unwrap();
        let bad: [(&str, Vec<u8>, &str); 4] = [
            (
                "shape.json",
                b"{\"goal\": 1}".to_vec(),
                "not a JSON object with `goal` and `plan`",
            ),
            ("prose.json", b"just words".to_vec(), "not a JSON object"),
            (
                "latin1.json",
                b"{\"goal\": \"caf\xe9\"}".to_vec(),
                "not UTF-8",
            ),
            (
                "huge.json",
                vec![b' '; (MAX_EXAMPLE_BYTES + 1) as usize],
                "larger than",
            ),
        ];
        for (name, bytes, _) in &bad {
            std::fs::write(dir.path().join(name), bytes).unwrap();
        }
        let loaded = Examples::load(dir.path()).unwrap();
        assert_eq!(loaded.len(), 1);
        assert_eq!(loaded.skipped().len(), bad.len(), "{:?}", loaded.skipped());
        for (name, _, why) in &bad {
            assert!(
                loaded
                    .skipped()
                    .iter()
                    .any(|w| w.contains(name) && w.contains(why) && w.ends_with("skipped")),
                "{name}: {:?}",
                loaded.skipped()
            );
        }
        assert!(Examples::load(&dir.path().join("missing")).is_err());
    }
}
