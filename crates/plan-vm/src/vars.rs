//! [`Vars`]: the variables of a finished run, handed over without copying a name.
//!
//! A run's variables live in slots; their names belong to the program. Building a
//! `Map<String, Value>` at the end of every run copied each name and hashed it (SipHash,
//! serde_json's map) only for most hosts to serialize the map once: about 15% of a short
//! run. `Vars` keeps the slots as they are and a shared handle on the program's names
//! ([`SlotNames`]), and reads like the map it replaces. The values stay the VM's own
//! ([`Val`]) until someone reads one as JSON: a host that only reads the final answer, or
//! serializes the variables (a `Val` serializes as its JSON value), never converts them.

use std::sync::{Arc, OnceLock};

use plan_bytecode::{Slot, SlotNames};
use plan_value::Val;
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Every variable set at the end of a run, by name: the program's variables in slot
/// order, then presets the program has no slot for. Serializes as a JSON object in that
/// order.
#[derive(Clone, Debug, Default)]
pub struct Vars {
    names: Arc<SlotNames>,
    /// One entry per slot of `names`; `None` = never set.
    vals: Vec<Option<Val>>,
    /// The same values as JSON, made on the first read.
    json: OnceLock<Vec<Option<Value>>>,
    /// Presets whose name has no slot.
    extra: Map<String, Value>,
    /// Set slots plus `extra` entries.
    len: usize,
}

impl Vars {
    /// `vals` has one entry per name in `names`.
    pub(crate) fn new(
        names: Arc<SlotNames>,
        vals: Vec<Option<Val>>,
        extra: Map<String, Value>,
    ) -> Self {
        debug_assert_eq!(names.len(), vals.len());
        // A preset has a name no slot has, except in a state edited by hand: then the
        // slot's value is the variable's, as a map filled slots first would keep it.
        let mut extra = extra;
        if !extra.is_empty() && !names.is_empty() {
            extra.retain(|k, _| {
                names
                    .slot_of(k)
                    .is_none_or(|s| vals.get(s as usize).is_none_or(Option::is_none))
            });
        }
        let len = vals.iter().filter(|v| v.is_some()).count() + extra.len();
        Vars {
            names,
            vals,
            json: OnceLock::new(),
            extra,
            len,
        }
    }

    /// The slots' values as JSON (converted once, on the first call).
    fn json(&self) -> &[Option<Value>] {
        self.json.get_or_init(|| {
            self.vals
                .iter()
                .map(|v| v.as_ref().map(Val::to_value))
                .collect()
        })
    }

    /// The value of variable `name`, if it was set.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.names
            .slot_of(name)
            .and_then(|s| self.json().get(s as usize)?.as_ref())
            .or_else(|| self.extra.get(name))
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.names
            .slot_of(name)
            .is_some_and(|s| matches!(self.vals.get(s as usize), Some(Some(_))))
            || self.extra.contains_key(name)
    }

    /// Number of variables set.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `(name, value)` of every variable set, in slot order, then the other presets.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        let slots = self
            .json()
            .iter()
            .enumerate()
            .filter_map(|(i, v)| Some((self.names.get(i as Slot)?, v.as_ref()?)));
        slots.chain(self.extra.iter().map(|(k, v)| (k.as_str(), v)))
    }

    /// The names of the variables set, in the order of [`Vars::iter`].
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        let slots = self
            .vals
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.as_ref().and(self.names.get(i as Slot)));
        slots.chain(self.extra.keys().map(String::as_str))
    }

    /// The variables as a JSON map (names copied here, once, for a caller that needs it;
    /// values moved).
    pub fn into_map(self) -> Map<String, Value> {
        let mut map = Map::with_capacity(self.len);
        let values: Vec<Option<Value>> = match self.json.into_inner() {
            Some(json) => json,
            None => self
                .vals
                .into_iter()
                .map(|v| v.map(Val::into_value))
                .collect(),
        };
        for (i, v) in values.into_iter().enumerate() {
            if let (Some(v), Some(name)) = (v, self.names.get(i as Slot)) {
                map.insert(name.to_owned(), v);
            }
        }
        for (k, v) in self.extra {
            map.entry(k).or_insert(v);
        }
        map
    }
}

impl From<Map<String, Value>> for Vars {
    fn from(extra: Map<String, Value>) -> Self {
        Vars::new(Arc::default(), Vec::new(), extra)
    }
}

/// Equal when they hold the same names with equal values, as two maps are (whether the
/// names came from a program or not).
impl PartialEq for Vars {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

impl Serialize for Vars {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // NB: from the `Val`s themselves: serializing needs no JSON copy of them.
        let mut map = s.serialize_map(Some(self.len))?;
        for (i, v) in self.vals.iter().enumerate() {
            if let (Some(v), Some(name)) = (v, self.names.get(i as Slot)) {
                map.serialize_entry(name, v)?;
            }
        }
        for (k, v) in &self.extra {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Vars {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Map::deserialize(d).map(Vars::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plan_bytecode::{Instr, Program, validate};
    use serde_json::json;

    #[test]
    fn a_preset_named_like_a_slot_yields_to_the_slots_value() {
        // Only a state edited by hand holds such a preset; the outcome must still name
        // each variable once, as the map it replaces did.
        let program = validate(Program {
            slots: vec!["a".into(), "b".into()],
            code: vec![Instr::Nop],
            ..Program::default()
        })
        .unwrap();
        let extra: Map<String, Value> =
            serde_json::from_value(json!({"a": 9, "b": 2, "c": 3})).unwrap();
        let vars = Vars::new(
            program.slot_names().clone(),
            vec![Some(Val::Int(1)), None],
            extra,
        );
        let pairs: Vec<(&str, &Value)> = vars.iter().collect();
        assert_eq!(
            pairs,
            [("a", &json!(1)), ("b", &json!(2)), ("c", &json!(3))]
        );
        assert_eq!(vars.len(), 3);
        assert_eq!(vars.get("a"), Some(&json!(1)));
        assert_eq!(vars.get("b"), Some(&json!(2)));
        assert_eq!(
            serde_json::to_value(&vars).unwrap(),
            json!({"a": 1, "b": 2, "c": 3})
        );
        assert_eq!(vars.clone().into_map().len(), 3);
        assert_eq!(Vars::from(vars.clone().into_map()), vars);
    }
}
