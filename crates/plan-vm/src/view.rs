//! Views of a run's slots that operands are resolved against: the committed slots when
//! the head executes, or the committed slots overlaid with finished look-ahead results
//! when the scheduler (`sched.rs`) evaluates ahead of the head.

use std::borrow::Cow;

use plan_bytecode::Slot;
use plan_value::Val;

/// Where values of slots come from while resolving.
pub(crate) trait SlotView {
    fn get(&self, slot: Slot) -> Option<&Val>;
}

/// The committed slots.
impl SlotView for [Option<Val>] {
    #[inline]
    fn get(&self, slot: Slot) -> Option<&Val> {
        self[slot as usize].as_ref()
    }
}

/// What the look-ahead knows of one slot at its current position.
#[derive(Clone)]
pub(crate) enum Over<'a> {
    /// No window entry so far writes it: the committed value holds.
    Base,
    /// The latest window writer has not finished: unknown (never read: an entry that
    /// reads it is not evaluated).
    Dirty,
    /// Written by the latest window writer, which has finished. Borrowed when the value
    /// is a pending request's answer as is (no copy per scan).
    Value(Cow<'a, Val>),
}

/// Committed slots overlaid with values produced by finished, not yet committed
/// look-ahead entries.
pub(crate) struct Overlay<'a> {
    pub(crate) base: &'a [Option<Val>],
    pub(crate) over: &'a [Over<'a>],
}

impl SlotView for Overlay<'_> {
    #[inline]
    fn get(&self, slot: Slot) -> Option<&Val> {
        let s = slot as usize;
        match &self.over[s] {
            Over::Value(v) => Some(v),
            Over::Base | Over::Dirty => self.base[s].as_ref(),
        }
    }
}
