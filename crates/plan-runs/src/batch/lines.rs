//! Where a batch's lines go ([`Lines`]): its output file, or standard output.

use std::io::Write;
use std::path::Path;

use crate::{Error, ErrorKind};

/// The batch's output, one line per run as it ends; it keeps the first failure to write
/// and writes nothing after it.
pub struct Lines {
    out: Box<dyn Write + Send>,
    /// The output file's name; `None`: standard output.
    name: Option<String>,
    error: Option<String>,
}

impl Lines {
    /// The file at `path`, created (emptied if it was there); `None`: standard output.
    pub fn create(path: Option<&Path>) -> Result<Lines, Error> {
        let Some(path) = path else {
            return Ok(Lines::to(std::io::stdout(), None));
        };
        let file = std::fs::File::create(path).map_err(|e| {
            let message = format!("cannot create {}: {e}", path.display());
            Error::new(ErrorKind::CannotCreate, message)
        })?;
        Ok(Lines::to(file, Some(path.display().to_string())))
    }

    fn to(out: impl Write + Send + 'static, name: Option<String>) -> Lines {
        Lines {
            out: Box::new(std::io::BufWriter::new(out)),
            name,
            error: None,
        }
    }

    /// Writes `line` (its end included) and flushes it: a reader (`tail -f`, a pipe) sees
    /// each run as it ends.
    pub fn write(&mut self, line: &[u8]) {
        if self.error.is_some() {
            return;
        }
        if let Err(e) = self.out.write_all(line).and_then(|()| self.out.flush()) {
            self.failed(&e);
        }
    }

    /// The first failure to write, if any, once the rest is flushed.
    pub fn finish(mut self) -> Option<String> {
        if let Err(e) = self.out.flush() {
            self.failed(&e);
        }
        self.error
    }

    fn failed(&mut self, e: &std::io::Error) {
        let to = match &self.name {
            Some(name) => name.as_str(),
            // NB: a closed standard output (`| head`) is the reader's choice, not a
            // failure of the batch.
            None if e.kind() == std::io::ErrorKind::BrokenPipe => return,
            None => "stdout",
        };
        self.error
            .get_or_insert(format!("cannot write to {to}: {e}"));
    }
}
