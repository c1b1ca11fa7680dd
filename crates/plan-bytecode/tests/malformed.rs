//! Never trust bytes: every damaged file is a clean `BytecodeError`, never a panic, and
//! small files never cause large allocations.

mod common;

use plan_bytecode::*;
use proptest::prelude::*;

fn sample_bytes() -> Vec<u8> {
    encode(&common::sample())
}

/// Builds a file from raw section bytes with a correct header and checksum.
fn file(body: &[u8]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
    out.extend_from_slice(body);
    out
}

fn decode_err(bytes: &[u8]) -> BytecodeError {
    match decode(bytes) {
        Ok(p) => panic!("expected an error, decoded {p:?}"),
        Err(e) => e,
    }
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = sample_bytes();
    for len in 0..bytes.len() {
        let e = decode_err(&bytes[..len]);
        assert!(e.offset().is_some(), "truncation at {len}: {e}");
    }
    // Truncation with the checksum recomputed reaches the section parser.
    for len in HEADER_LEN..bytes.len() {
        let mut cut = bytes[..len].to_vec();
        common::reseal(&mut cut);
        let e = decode_err(&cut);
        assert!(
            e.offset().is_some_and(|o| o <= len),
            "resealed truncation at {len}: {e}"
        );
    }
}

#[test]
fn every_byte_flip_is_an_error() {
    let bytes = sample_bytes();
    for i in 0..bytes.len() {
        for mask in [0x01u8, 0x80, 0xff] {
            let mut b = bytes.clone();
            b[i] ^= mask;
            // The checksum catches every single-byte change to the body; the header
            // fields are checked one by one.
            assert!(load(&b).is_err(), "flip {mask:#x} at {i} loaded");
        }
    }
}

#[test]
fn every_byte_flip_with_resealed_checksum_never_panics() {
    let bytes = sample_bytes();
    for i in HEADER_LEN..bytes.len() {
        for mask in [0x01u8, 0x02, 0x40, 0x80, 0xff] {
            let mut b = bytes.clone();
            b[i] ^= mask;
            common::reseal(&mut b);
            // May decode (e.g. a changed string byte) or fail; either way no panic, and
            // what loads is a validated program.
            if let Ok(p) = load(&b) {
                let _ = disasm(&p);
            }
        }
    }
}

#[test]
fn bad_magic() {
    let mut b = sample_bytes();
    b[1] = b'X';
    let e = decode_err(&b);
    assert_eq!(
        e.to_string(),
        "invalid bytecode at byte 0: not a .pbc file (bad magic)"
    );
    assert_eq!(decode_err(b"{}").message(), "truncated header");
}

#[test]
fn wrong_version_names_both() {
    let mut b = sample_bytes();
    b[8..10].copy_from_slice(&7u16.to_le_bytes());
    let e = decode_err(&b);
    assert_eq!(
        e.message(),
        "unsupported format version 7 (this build reads version 1)"
    );
    assert_eq!(e.offset(), Some(8));
}

#[test]
fn unknown_flags() {
    let mut b = sample_bytes();
    b[10] |= 0x04;
    assert_eq!(decode_err(&b).message(), "unknown header flags 0x0005");
}

#[test]
fn debug_flag_must_match_section() {
    let mut b = encode(&common::stripped());
    b[10] |= FLAG_DEBUG as u8;
    assert_eq!(
        decode_err(&b).message(),
        "header flags a debug section but none is present"
    );
    let mut b = sample_bytes();
    b[10] &= !(FLAG_DEBUG as u8);
    assert_eq!(
        decode_err(&b).message(),
        "debug section present but not flagged in the header"
    );
}

#[test]
fn checksum_mismatch() {
    let mut b = sample_bytes();
    let last = b.len() - 1;
    b[last] ^= 1;
    let e = decode_err(&b);
    assert!(
        e.message().starts_with("checksum mismatch (header says "),
        "{e}"
    );
    assert_eq!(e.offset(), Some(12));
}

#[test]
fn trailing_bytes_after_last_section_are_a_bad_section() {
    let mut b = sample_bytes();
    b.push(0);
    common::reseal(&mut b);
    assert_eq!(decode_err(&b).message(), "unknown section id 0");
}

#[test]
fn trailing_bytes_inside_a_section() {
    // slots section: id 2, length 3, count 1, "a", then one stray byte.
    let b = file(&[2, 4, 1, 1, b'a', 0xAA]);
    let e = decode_err(&b);
    assert_eq!(e.message(), "1 trailing bytes after section slots");
    assert_eq!(e.offset(), Some(HEADER_LEN + 5));
}

#[test]
fn empty_sections_are_rejected() {
    // The encoder omits empty tables, so each program has exactly one encoding.
    let e = decode_err(&file(&[2, 1, 0]));
    assert_eq!(
        e.message(),
        "empty section slots (empty tables are omitted)"
    );
    assert_eq!(e.offset(), Some(HEADER_LEN));
}

#[test]
fn unknown_section_id() {
    let e = decode_err(&file(&[99, 0]));
    assert_eq!(e.message(), "unknown section id 99");
    assert_eq!(e.offset(), Some(HEADER_LEN));
}

#[test]
fn sections_out_of_order_or_repeated() {
    let e = decode_err(&file(&[3, 2, 1, 0, 2, 2, 1, 0]));
    assert_eq!(e.message(), "section slots (2) is out of order or repeated");
    let e = decode_err(&file(&[3, 2, 1, 0, 3, 2, 1, 0]));
    assert_eq!(e.message(), "section code (3) is out of order or repeated");
}

#[test]
fn huge_counts_in_small_files_are_rejected_before_allocating() {
    // consts section claiming 1M constants in 3 bytes.
    let e = decode_err(&file(&[1, 4, 0x80, 0x80, 0x40, 0]));
    assert_eq!(
        e.message(),
        "constant count: count 1048576 needs more bytes than the 1 left"
    );
    // Above the limit.
    let e = decode_err(&file(&[1, 5, 0xff, 0xff, 0xff, 0xff, 0x0f]));
    assert_eq!(
        e.message(),
        "constant count: count 4294967295 exceeds the limit of 1048576"
    );
    // A string longer than the input.
    let e = decode_err(&file(&[2, 4, 1, 0xff, 0xff, 0x03]));
    assert_eq!(e.message(), "truncated slot name");
    // A section longer than the file.
    let e = decode_err(&file(&[2, 0x7f, 1]));
    assert_eq!(e.message(), "truncated slots");
}

#[test]
fn constant_decoding_errors() {
    // consts section with one constant: `body`.
    let one = |c: &[u8]| {
        let mut s = vec![1, (c.len() + 1) as u8, 1];
        s.extend_from_slice(c);
        decode_err(&file(&s)).message().to_owned()
    };
    assert_eq!(one(&[42]), "unknown constant tag 42");
    assert_eq!(
        one(&[5, 0, 0, 0, 0, 0, 0, 0xf8, 0x7f]),
        "float constant is not finite"
    );
    assert_eq!(
        one(&[4, 5]),
        "non-canonical unsigned integer constant (fits in i64)"
    );
    assert_eq!(one(&[6, 2, 0xc3, 0x28]), "string constant: invalid UTF-8");
    assert_eq!(
        one(&[8, 2, 1, b'k', 0, 1, b'k', 0]),
        "duplicate key \"k\" in object constant"
    );
    assert_eq!(one(&[3, 0x80, 0x00]), "integer constant: overlong varint");
    // 200 nested arrays.
    let mut deep = Vec::new();
    for _ in 0..200 {
        deep.extend_from_slice(&[7, 1]);
    }
    deep.push(0);
    let mut s = vec![
        1,
        0x80 | ((deep.len() + 1) & 0x7f) as u8,
        ((deep.len() + 1) >> 7) as u8,
        1,
    ];
    s.extend_from_slice(&deep);
    assert_eq!(
        decode_err(&file(&s)).message(),
        "constant nested deeper than the limit of 128"
    );
}

#[test]
fn instruction_decoding_errors() {
    // code section, one instruction.
    let code = |i: &[u8]| {
        let mut s = vec![3, (i.len() + 1) as u8, 1];
        s.extend_from_slice(i);
        decode_err(&file(&s)).message().to_owned()
    };
    assert_eq!(code(&[0xee]), "unknown opcode 0xee");
    assert_eq!(code(&[0x01, 0, 9, 0]), "set.src: unknown operand tag 9");
    assert_eq!(code(&[0x05, 0, 0]), "truncated branch.if_false");
}

#[test]
fn errors_display_with_offset() {
    let e = decode_err(&file(&[99, 0]));
    assert_eq!(
        e.to_string(),
        "invalid bytecode at byte 16: unknown section id 99"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = load(&bytes);
    }

    #[test]
    fn random_bodies_never_panic(body in proptest::collection::vec(any::<u8>(), 0..256)) {
        // A valid header and checksum, so the section parser sees the random bytes.
        if let Ok(p) = load(&file(&body)) {
            let _ = disasm(&p);
        }
    }

    #[test]
    fn random_mutations_with_resealed_checksum_never_panic(
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
        cut in any::<usize>(),
    ) {
        let mut b = sample_bytes();
        for (pos, byte) in edits {
            let i = HEADER_LEN + pos % (b.len() - HEADER_LEN);
            b[i] = byte;
        }
        let keep = HEADER_LEN + cut % (b.len() - HEADER_LEN + 1);
        b.truncate(keep);
        common::reseal(&mut b);
        match decode(&b) {
            Ok(p) => {
                // Whatever decodes re-encodes to the same bytes (canonical format) and
                // either validates or fails cleanly.
                prop_assert_eq!(encode(&p), b);
                let _ = disasm(&p);
                let _ = validate(p);
            }
            Err(e) => prop_assert!(e.offset().is_some()),
        }
    }
}
