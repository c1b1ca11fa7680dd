//! [`SlotNames`]: a program's variable names, interned once per program and shared by every
//! run of it, so that a finished run's variables (`plan_vm::Vars`) name their slots
//! without copying a string or hashing a key per variable.

use std::sync::OnceLock;

use crate::Slot;

/// The names of a program's slots, by slot number, with a lookup by name.
#[derive(Debug, Default)]
pub struct SlotNames {
    names: Vec<String>,
    /// Slots sorted by name (ties by slot), built on the first lookup in a program with
    /// many slots: a binary search instead of a scan, and no hasher to seed.
    sorted: OnceLock<Vec<Slot>>,
}

/// Up to this many slots a lookup scans the names: faster than building the index.
const SCAN: usize = 16;

impl SlotNames {
    pub(crate) fn new(names: Vec<String>) -> Self {
        SlotNames {
            names,
            sorted: OnceLock::new(),
        }
    }

    /// The name of `slot` (`None` past the last slot).
    #[inline]
    pub fn get(&self, slot: Slot) -> Option<&str> {
        self.names.get(slot as usize).map(String::as_str)
    }

    /// The first slot named `name`.
    pub fn slot_of(&self, name: &str) -> Option<Slot> {
        if self.names.len() <= SCAN {
            return self.names.iter().position(|n| n == name).map(|i| i as Slot);
        }
        let sorted = self.sorted.get_or_init(|| {
            let mut slots: Vec<Slot> = (0..self.names.len() as Slot).collect();
            slots.sort_by(|&a, &b| self.names[a as usize].cmp(&self.names[b as usize]));
            slots
        });
        let i = sorted.partition_point(|&s| self.names[s as usize].as_str() < name);
        let &s = sorted.get(i)?;
        (self.names[s as usize] == name).then_some(s)
    }

    /// Number of slots.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The names in slot order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> {
        self.names.iter().map(String::as_str)
    }
}

/// Two name tables are equal when they hold the same names (the index is a cache).
impl PartialEq for SlotNames {
    fn eq(&self, other: &Self) -> bool {
        self.names == other.names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_scans_small_tables_and_searches_large_ones() {
        for n in [3usize, 40] {
            let mut names: Vec<String> = (0..n).map(|i| format!("v{}", n - i)).collect();
            names.push("v1".into()); // a duplicate: the first slot wins, as in a scan
            let t = SlotNames::new(names.clone());
            for (i, name) in names.iter().enumerate().take(n) {
                assert_eq!(t.slot_of(name), Some(i as Slot), "{name} of {n}");
            }
            assert_eq!(t.slot_of("v1"), Some(n as Slot - 1));
            assert_eq!(t.slot_of("v0"), None);
            assert_eq!(t.slot_of(""), None);
            assert_eq!(t.slot_of("zzz"), None);
            assert_eq!(t.get(n as Slot), Some("v1"));
            assert_eq!(t.get(n as Slot + 1), None);
        }
    }
}
