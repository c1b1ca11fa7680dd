//! Byte spans and the line index that turns them into 1-based line/column.

use std::sync::Arc;

/// Half-open byte range `[start, end)` into the original source text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Self {
        // NB: sources are capped well below 4 GiB by the reader (limits), so this cannot truncate.
        Span {
            start: start as u32,
            end: end as u32,
        }
    }

    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
}

/// Maps byte offsets to 1-based line and column (columns count chars, not bytes).
#[derive(Clone, Debug)]
pub struct LineIndex {
    line_starts: Vec<u32>,
    /// The text, needed to count chars for columns; `None` when it is all ASCII (a column
    /// is then a byte distance). NB: shared (`Arc`) and usually absent, because `compile`
    /// hands the index out with every result and plans can be megabytes.
    text: Option<Arc<str>>,
    len: u32,
}

impl LineIndex {
    pub fn new(text: &str) -> Self {
        LineIndex {
            line_starts: line_starts(text.as_bytes()),
            text: (!text.is_ascii()).then(|| Arc::from(text)),
            len: text.len() as u32,
        }
    }

    /// 1-based (line, column) of byte `offset`; offsets past the end clamp to the end.
    pub fn line_col(&self, offset: u32) -> (u32, u32) {
        let offset = offset.min(self.len);
        let line = self.line_starts.partition_point(|&s| s <= offset) - 1;
        let start = self.line_starts[line] as usize;
        let mut end = offset as usize;
        let col = match &self.text {
            Some(text) => {
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                text[start..end].chars().count()
            }
            None => end - start,
        } + 1;
        (line as u32 + 1, col as u32)
    }

    /// 1-based line of byte `offset`.
    pub fn line(&self, offset: u32) -> u32 {
        self.line_col(offset).0
    }

    /// Byte range of the line holding `offset`, without its line break. Constant work
    /// per call whatever the line's length (renderers window long lines with it).
    pub fn line_bounds(&self, offset: u32) -> std::ops::Range<usize> {
        let offset = offset.min(self.len);
        let line = self.line_starts.partition_point(|&s| s <= offset) - 1;
        let start = self.line_starts[line] as usize;
        let end = match self.line_starts.get(line + 1) {
            // The `\n` is not part of it (a `\r` before it is: callers trim it).
            Some(&next) => (next as usize).saturating_sub(1).max(start),
            None => self.len as usize,
        };
        start..end
    }
}

/// Offsets just after each `\n`, after a leading 0. Eight bytes are tested at once (a
/// word with 0x80 in each byte that is a `\n`, exact: no carry crosses bytes) and only the
/// hits are visited: a byte-at-a-time loop with a push per hit was a measurable part of
/// compiling a large plan.
fn line_starts(b: &[u8]) -> Vec<u32> {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const NEWLINES: u64 = 0x0a0a_0a0a_0a0a_0a0a;
    let mut starts = Vec::with_capacity(b.len() / 32 + 1);
    starts.push(0);
    let mut words = b.chunks_exact(8);
    let mut base = 0u32;
    for word in &mut words {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        let x = u64::from_le_bytes(bytes) ^ NEWLINES;
        // Bit 7 of a byte: set iff the byte of `x` is zero, i.e. the input byte is `\n`.
        let mut hits = !(((x & LOW7) + LOW7) | x | LOW7);
        while hits != 0 {
            starts.push(base + hits.trailing_zeros() / 8 + 1);
            hits &= hits - 1;
        }
        base += 8;
    }
    for (i, &c) in words.remainder().iter().enumerate() {
        if c == b'\n' {
            starts.push(base + i as u32 + 1);
        }
    }
    starts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_starts_match_a_byte_loop() {
        // Line breaks next to each other, at word edges, and bytes that differ from `\n`
        // in one bit or have the high bit set (a borrow or carry would show there).
        let text: Vec<u8> = (0..300u32)
            .map(|i| match i % 11 {
                0 | 1 | 7 => b'\n',
                2 => 0x0b,
                3 => 0x8a,
                4 => 0x0e,
                5 => 0xff,
                6 => 0,
                _ => b'x',
            })
            .collect();
        for len in [0, 1, 7, 8, 9, 15, 16, 17, 299, 300] {
            let t = &text[..len];
            let mut naive = vec![0u32];
            naive.extend(
                t.iter()
                    .enumerate()
                    .filter(|&(_, &c)| c == b'\n')
                    .map(|(i, _)| i as u32 + 1),
            );
            assert_eq!(line_starts(t), naive, "length {len}");
        }
    }
}
