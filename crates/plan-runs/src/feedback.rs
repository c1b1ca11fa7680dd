//! A person's verdict on a stored run (`planvm runs feedback`, `POST
//! /v1/runs/{id}/feedback`): `good` or `bad`, with a note; the latest one counts.

use plan_store::Feedback;

use crate::open::{Access, StoreAt};
use crate::{Error, ErrorKind};

/// The longest note kept, in characters: a verdict's reason, not a document.
const MAX_NOTE_CHARS: usize = 4000;

/// Stores `verdict` (`good` or `bad`) and `note` as the person's verdict on run `id`.
pub fn feedback(at: &StoreAt, id: &str, verdict: &str, note: Option<String>) -> Result<(), Error> {
    if !matches!(verdict, "good" | "bad") {
        return Err(Error::new(
            ErrorKind::BadInput,
            format!("a verdict is `good` or `bad`, not `{verdict}`"),
        ));
    }
    if let Some(n) = &note
        && n.chars().count() > MAX_NOTE_CHARS
    {
        return Err(Error::new(
            ErrorKind::BadInput,
            format!("a note has at most {MAX_NOTE_CHARS} characters"),
        ));
    }
    at.open(Access::Existing)?.set_feedback(
        id,
        &Feedback {
            verdict: verdict.to_owned(),
            note: note.filter(|n| !n.trim().is_empty()),
            updated_at: 0,
        },
    )?;
    Ok(())
}
