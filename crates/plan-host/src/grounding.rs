//! Grounding for the planner: the tables, columns and values of each `sql` tool's
//! database that matter for a goal (`plan_sql::ground`), as the prompt's `{{schema}}`
//! section. Each database's index is built at first use and kept by the host, and built
//! again when SQLite says the schema changed. With `[grounding] embeddings`, the tables
//! are embedded by that model when the index is built (kept on disk between processes).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use plan_embed::Model;

use plan_manifest::BackendConfig;
use plan_sql::ground::{Budget, Index, Selection};

use crate::host::Host;

/// The embedding model in `dir`, loaded once a process: hosts of one manifest (a batch
/// makes one a run) share it.
fn model(dir: &str) -> Result<Arc<Model>, String> {
    static MODELS: Mutex<BTreeMap<String, Arc<Model>>> = Mutex::new(BTreeMap::new());
    let mut models = MODELS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(m) = models.get(dir) {
        return Ok(m.clone());
    }
    let model = Model::load(Path::new(dir))
        .map_err(|e| format!("[grounding] embeddings = {dir:?}: {e}"))?;
    let model = Arc::new(model);
    models.insert(dir.to_owned(), model.clone());
    Ok(model)
}

/// The databases' parts that matter for a goal.
#[derive(Debug, Default)]
pub struct Grounded {
    /// Each tool grounding covers, with what it chose, best first.
    pub selections: Vec<(String, Selection)>,
    /// The prompt's `{{schema}}` section (empty when no database is covered).
    pub text: String,
    /// The databases that could not be read, and why.
    pub warnings: Vec<String>,
}

impl Host {
    /// The parts of every database `[grounding]` covers (every `sql` tool's by default)
    /// that matter for `goal`. Reads the databases (their schemas, when they changed):
    /// blocking.
    pub fn ground(&self, goal: &str) -> Grounded {
        let manifest = self.manifest();
        let cfg = manifest.grounding.clone().unwrap_or_default();
        let budget = Budget {
            tables: cfg.max_tables.unwrap_or(Budget::default().tables),
            columns: cfg.max_columns.unwrap_or(Budget::default().columns),
            values: cfg.max_values.unwrap_or(Budget::default().values),
            min_score: cfg.min_score.map(|s| s as f32),
        };
        let mut out = Grounded::default();
        let mut parts = Vec::new();
        for tool in manifest.grounded_tools() {
            let Some(backend @ BackendConfig::Sql { .. }) = &tool.backend else {
                continue;
            };
            let (index, dialect) = match self.index(&tool.name, backend) {
                Ok(found) => found,
                Err(why) => {
                    out.warnings.push(format!(
                        "the planner is not shown the database of tool `{}`: {why}",
                        tool.name
                    ));
                    continue;
                }
            };
            let selection = index.ground(goal, budget);
            parts.push(index.text(&tool.name, dialect, &selection));
            out.selections.push((tool.name.clone(), selection));
        }
        if !parts.is_empty() {
            out.text = format!("# Databases\n\n{}\n", parts.join("\n"));
        }
        out
    }

    /// Tool `tool`'s database index, built again when its schema changed, and the SQL
    /// the database speaks.
    fn index(
        &self,
        tool: &str,
        backend: &BackendConfig,
    ) -> Result<(Arc<Index>, &'static str), String> {
        let db = crate::sql::database(tool, backend, &self.options().env, self.redactor())
            .map_err(|e| e.message)?;
        let version = db.schema_version().map_err(|e| e.to_string())?;
        let mut cache = self.grounds.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((v, index)) = cache.get(tool)
            && *v == version
        {
            return Ok((index.clone(), db.dialect()));
        }
        let schema = match plan_manifest::cache_dir("grounding") {
            Some(dir) => db.cached_schema(&dir),
            None => db.schema(),
        }
        .map_err(|e| e.to_string())?;
        let mut index = Index::new(schema);
        if let Some(dir) = self
            .manifest()
            .grounding
            .as_ref()
            .and_then(|g| g.embeddings.as_deref())
        {
            let model = model(dir)?;
            let kept = plan_manifest::cache_dir("embeddings");
            index = plan_sql::embedded::embedded(index, model, kept.as_deref());
        }
        let index = Arc::new(index);
        cache.insert(tool.to_owned(), (version, index.clone()));
        Ok((index, db.dialect()))
    }
}
