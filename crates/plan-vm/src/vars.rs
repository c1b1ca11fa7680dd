//! [`Vars`]: the variables of a finished run, handed over without copying a name.
//!
//! A run's variables live in slots; their names belong to the program. Building a
//! `Map<String, Value>` at the end of every run copied each name and hashed it (SipHash,
//! serde_json's map) only for most hosts to serialize the map once: about 15% of a short
//! run. `Vars` keeps the slots as they are and a shared handle on the program's names
//! ([`SlotNames`]), and reads like the map it replaces.

use std::sync::Arc;

use plan_bytecode::{Slot, SlotNames};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Every variable set at the end of a run, by name: the program's variables in slot
/// order, then presets the program has no slot for. Serializes as a JSON object in that
/// order.
#[derive(Clone, Debug, Default)]
pub struct Vars {
    names: Arc<SlotNames>,
    /// One entry per slot of `names`; `None` = never set.
    values: Vec<Option<Value>>,
    /// Presets whose name has no slot.
    extra: Map<String, Value>,
    /// Set slots plus `extra` entries.
    len: usize,
}

impl Vars {
    /// `values` has one entry per name in `names`.
    pub(crate) fn new(
        names: Arc<SlotNames>,
        values: Vec<Option<Value>>,
        extra: Map<String, Value>,
    ) -> Self {
        debug_assert_eq!(names.len(), values.len());
        // A preset has a name no slot has, except in a state edited by hand: then the
        // slot's value is the variable's, as a map filled slots first would keep it.
        let mut extra = extra;
        if !extra.is_empty() && !names.is_empty() {
            extra.retain(|k, _| {
                names
                    .slot_of(k)
                    .is_none_or(|s| values.get(s as usize).is_none_or(Option::is_none))
            });
        }
        let len = values.iter().filter(|v| v.is_some()).count() + extra.len();
        Vars {
            names,
            values,
            extra,
            len,
        }
    }

    /// The value of variable `name`, if it was set.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.names
            .slot_of(name)
            .and_then(|s| self.values.get(s as usize)?.as_ref())
            .or_else(|| self.extra.get(name))
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.get(name).is_some()
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
            .values
            .iter()
            .enumerate()
            .filter_map(|(i, v)| Some((self.names.get(i as Slot)?, v.as_ref()?)));
        slots.chain(self.extra.iter().map(|(k, v)| (k.as_str(), v)))
    }

    /// The names of the variables set, in the order of [`Vars::iter`].
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.iter().map(|(k, _)| k)
    }

    /// The variables as a JSON map (names copied here, once, for a caller that needs it).
    pub fn into_map(self) -> Map<String, Value> {
        let mut map = Map::with_capacity(self.len);
        for (i, v) in self.values.into_iter().enumerate() {
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
        s.collect_map(self.iter())
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
            vec![Some(json!(1)), None],
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
