//! Edit distance for "did you mean" help and nearest-match messages, shared by the reader,
//! the compiler and the replay host so they agree on what "close" means.
//!
//! The strings compared often come from a plan or a tool call, and those can be megabytes:
//! only the first [`MAX_EDIT_CHARS`] chars of each side are compared, so one comparison
//! costs at most that squared, whatever the input.

/// Chars of each side that [`edit_distance`] compares.
pub const MAX_EDIT_CHARS: usize = 512;

/// Longest word (bytes) worth a "did you mean": nothing longer is a misspelt name.
pub const MAX_NAME_LEN: usize = 64;

/// Levenshtein distance (insert, delete, substitute: 1 each) between the first
/// [`MAX_EDIT_CHARS`] chars of `a` and of `b`, ASCII case ignored (`Calling` is
/// `calling` misspelt by nothing).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().take(MAX_EDIT_CHARS).collect();
    let b: Vec<char> = b.chars().take(MAX_EDIT_CHARS).collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(!ca.eq_ignore_ascii_case(cb));
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(edit_distance("", ""), 0);
        assert_eq!(edit_distance("abc", ""), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("Calling", "calling"), 0);
        assert_eq!(edit_distance("é", "e"), 1);
        // Megabytes cost what 512 chars cost.
        let long = "x".repeat(1 << 20);
        assert_eq!(edit_distance(&long, "y"), MAX_EDIT_CHARS);
    }
}
