//! The mapped source: its blocks, digests, and the files it refuses.

use super::*;
use std::io::Write;

/// Blocks are whole chunks, cover the file exactly, hold its bytes, and the digest matches a
/// one-shot hash, mapped and read alike.
#[test]
fn blocks_cover_file_in_whole_chunks() {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    let data: Vec<u8> = (0..3_000_001u32).map(|i| (i % 251) as u8).collect();
    f.write_all(&data).unwrap();
    for access in [Access::Map, Access::Read] {
        let mut s = Source::open_with(f.path(), 102, 1, access).unwrap();
        assert_eq!(s.access(), access);
        assert_eq!(s.len(), data.len() as u64);
        let mut seen = Vec::new();
        let mut bytes = Vec::new();
        loop {
            // Both ways of taking a block hand out the same bytes.
            let b = if seen.len() % 2 == 0 {
                s.next_block().unwrap()
            } else {
                let (b, waited) = s.next_block_waited().unwrap();
                assert!(waited < std::time::Duration::from_secs(60));
                b
            };
            if b.is_empty() {
                break;
            }
            seen.push(b.len());
            bytes.extend_from_slice(b);
        }
        assert!(bytes == data, "{access:?}");
        assert!(
            seen[..seen.len() - 1]
                .iter()
                .all(|n| n % 102 == 0 && *n >= BLOCK_TARGET)
        );
        assert_eq!(s.digest(), xxhash_rust::xxh3::xxh3_64(&data));
    }
}

/// A file longer than several populate steps is handed out whole and in order.
#[test]
fn populates_step_by_step() {
    let f = tempfile::NamedTempFile::new().unwrap();
    let len = POPULATE_FIRST + 2 * POPULATE_STEP + 12_345;
    f.as_file().set_len(len as u64).unwrap();
    let mut s = Source::open(f.path(), 10240, 1).unwrap();
    assert_eq!(s.access(), Access::Map);
    let mut total = 0;
    let mut zeros = XxHash3_64::new();
    loop {
        let b = s.next_block().unwrap();
        if b.is_empty() {
            break;
        }
        assert!(b.iter().all(|&x| x == 0));
        zeros.write(b);
        total += b.len();
    }
    assert_eq!(total, len);
    assert_eq!(s.digest(), zeros.finish());
    let Blocks::Mapped { populated, .. } = s.blocks else {
        panic!("not mapped")
    };
    assert_eq!(populated, len);
}

/// An empty file is refused (issue 14: there is nothing to measure); a file that shrinks
/// before it is read is the "shrank" error, naming the file.
#[test]
fn empty_and_shrunk_files() {
    let f = tempfile::NamedTempFile::new().unwrap();
    let e = Source::open(f.path(), 1024, 1).err().unwrap().to_string();
    assert!(e.contains("is empty: there is nothing to measure"), "{e}");
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(&[7u8; 300_000]).unwrap();
    let mut s = Source::open_with(f.path(), 1024, 1, Access::Read).unwrap();
    f.as_file().set_len(1000).unwrap();
    let e = s.next_block().err().unwrap().to_string();
    assert!(
        e.contains("shrank while it was read: 1000 of 300000 bytes"),
        "{e}"
    );
    assert!(e.contains(&f.path().display().to_string()), "{e}");
}

/// The background checksum equals the one-shot hash; a batch widens the block to hold it.
#[test]
fn background_digest_and_batch_blocks() {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    let data: Vec<u8> = (0..1_000_003u32).map(|i| (i % 253) as u8).collect();
    f.write_all(&data).unwrap();
    let mut s = Source::open(f.path(), 10240, 64).unwrap();
    let bg = s.digest_in_background().unwrap().join().unwrap();
    assert_eq!(bg, xxhash_rust::xxh3::xxh3_64(&data));
    assert_eq!(s.next_block().unwrap().len(), 64 * 10240);
    let e = Source::open(f.path(), 16 << 20, 1024)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("lower --batch or --chunk"), "{e}");
}

/// A directory is refused by name.
#[test]
fn directory_refused() {
    let d = tempfile::tempdir().unwrap();
    let e = Source::open(d.path(), 1024, 1).err().unwrap().to_string();
    assert!(e.contains("is a directory"), "{e}");
}

/// A repeated source hands the file out again after a rewind, its checksum going on over every
/// pass, and gives the digest of a run stopped inside a block; mapped and read alike.
#[test]
fn repeated_passes_and_a_stop_inside_a_block() {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    let data: Vec<u8> = (0..300_007u32).map(|i| (i * 3 % 253) as u8).collect();
    f.write_all(&data).unwrap();
    for access in [Access::Map, Access::Read] {
        let mut s = Source::open_with(f.path(), 1000, 1, access).unwrap();
        s.repeat();
        let mut sent = Vec::new();
        for _ in 0..2 {
            loop {
                let b = s.next_block().unwrap();
                if b.is_empty() {
                    break;
                }
                sent.extend_from_slice(b);
            }
            s.rewind().unwrap();
        }
        assert_eq!(s.digest(), xxhash_rust::xxh3::xxh3_64(&sent), "{access:?}");
        // The third pass stops 777 bytes into its second block.
        let first = s.next_block().unwrap().to_vec();
        sent.extend_from_slice(&first);
        let second = s.next_block().unwrap().to_vec();
        sent.extend_from_slice(&second[..777]);
        assert_eq!(
            s.digest_sent(777),
            xxhash_rust::xxh3::xxh3_64(&sent),
            "{access:?}"
        );
        assert_eq!(sent.len(), 2 * data.len() + first.len() + 777);
    }
}

/// A stripe hands out exactly its bytes, from any offset (page-aligned or not), mapped and
/// read alike, again after a rewind; one that does not fit the file is refused.
#[test]
fn stripes_hand_out_their_bytes_only() {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    let data: Vec<u8> = (0..1_000_003u32).map(|i| (i * 7 % 241) as u8).collect();
    f.write_all(&data).unwrap();
    for access in [Access::Map, Access::Read] {
        for (offset, len) in [
            (0usize, 333_334usize),
            (333_334, 333_334),
            (666_668, 333_335),
        ] {
            let mut s = Source::open_with(f.path(), 1000, 1, access)
                .unwrap()
                .stripe(offset as u64, len as u64)
                .unwrap();
            assert_eq!((s.len(), s.offset()), (len as u64, offset as u64));
            for _ in 0..2 {
                let mut got = Vec::new();
                loop {
                    let b = s.next_block().unwrap();
                    if b.is_empty() {
                        break;
                    }
                    got.extend_from_slice(b);
                }
                assert!(got == data[offset..offset + len], "{access:?} {offset}");
                s.rewind().unwrap();
            }
            let background = s.digest_in_background().unwrap().join().unwrap();
            assert_eq!(
                background,
                xxhash_rust::xxh3::xxh3_64(&data[offset..offset + len])
            );
        }
        let s = Source::open_with(f.path(), 1000, 1, access).unwrap();
        assert!(s.stripe(999_999, 10).is_err());
    }
}

/// Issue 33: a cycled source hands out the file again and again to its length, blocks ending
/// at the file's end, and its stripes are the same bytes as the whole one's; `file_span` says
/// where each byte is in the file. Mapped and read alike.
#[test]
fn a_cycled_source_repeats_the_file_to_its_length() {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    let data: Vec<u8> = (0..1_000_003u32).map(|i| (i % 251) as u8).collect();
    f.write_all(&data).unwrap();
    let len = 3_500_000u64;
    let want: Vec<u8> = data.iter().copied().cycle().take(len as usize).collect();
    let drain = |s: &mut Source| {
        let mut got = Vec::new();
        loop {
            let b = s.next_block().unwrap();
            if b.is_empty() {
                break got;
            }
            got.extend_from_slice(b);
        }
    };
    for access in [Access::Map, Access::Read] {
        let mut s = Source::open_with(f.path(), 10240, 1, access)
            .unwrap()
            .cycled(len);
        assert_eq!(s.len(), len);
        assert_eq!(s.file_span(0), (0, data.len() as u64));
        assert_eq!(s.file_span(1_000_005), (2, data.len() as u64 - 2));
        assert_eq!(s.file_span(len - 7), ((len - 7) % data.len() as u64, 7));
        assert!(drain(&mut s) == want, "{access:?}");
        assert_eq!(s.digest(), xxhash_rust::xxh3::xxh3_64(&want), "{access:?}");
        let (at, n) = (1_700_000u64, 1_500_000u64);
        let mut stripe = Source::open_with(f.path(), 10240, 1, access)
            .unwrap()
            .cycled(len)
            .stripe(at, n)
            .unwrap();
        let part = &want[at as usize..(at + n) as usize];
        assert!(drain(&mut stripe) == part, "{access:?}");
        assert_eq!(stripe.digest(), xxhash_rust::xxh3::xxh3_64(part));
        let whole = stripe.digest_in_background().unwrap().join().unwrap();
        assert_eq!(whole, xxhash_rust::xxh3::xxh3_64(part), "{access:?}");
    }
}

/// Issue 33: a period held in memory is the seed's text, and a source of it hands out what a
/// source of the same text in a file does: cycled to any length, in stripes, with the same
/// digest. It has no file, so sendfile's background checksum refuses it by name; a period of
/// nothing is refused.
#[test]
fn a_held_period_hands_out_what_its_file_would() {
    let period = 1_000_003usize;
    let held = Held::text(period).unwrap();
    let text = crate::testdata::text(period);
    assert!(held.bytes() == &text[..]);
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(&text).unwrap();
    let drain = |s: &mut Source| {
        let (mut got, mut blocks) = (Vec::new(), Vec::new());
        loop {
            let b = s.next_block().unwrap();
            if b.is_empty() {
                break (got, blocks);
            }
            blocks.push(b.len());
            got.extend_from_slice(b);
        }
    };
    let path = Path::new("generated");
    for (chunk, batch, len) in [
        (10240u32, 1u32, 3_500_000u64),
        (102, 3, 999),
        (1000, 64, 2_000_006),
    ] {
        let mut from_file = Source::open_with(f.path(), chunk, batch, Access::Map)
            .unwrap()
            .cycled(len);
        let mut from_memory = Source::held(held.clone(), path, chunk, batch)
            .unwrap()
            .cycled(len);
        assert_eq!((from_memory.len(), from_memory.name()), (len, "generated"));
        assert!(
            drain(&mut from_memory) == drain(&mut from_file),
            "{chunk} {len}"
        );
        assert_eq!(from_memory.digest(), from_file.digest());
        let (at, n) = (len / 3, len / 2);
        let mut stripe = Source::held(held.clone(), path, chunk, batch)
            .unwrap()
            .cycled(len)
            .stripe(at, n)
            .unwrap();
        let want: Vec<u8> = text
            .iter()
            .copied()
            .cycle()
            .skip(at as usize)
            .take(n as usize)
            .collect();
        assert!(drain(&mut stripe).0 == want, "{chunk} {len}");
        assert_eq!(stripe.digest(), xxhash_rust::xxh3::xxh3_64(&want));
        assert!(stripe.file().is_none() && !stripe.changed());
        let e = stripe
            .digest_in_background()
            .err()
            .expect("no file to read");
        assert!(
            format!("{e:#}").contains("'generated' is held in memory"),
            "{e:#}"
        );
    }
    // Not cycled: the period once, or a stripe of it.
    let mut once = Source::held(held.clone(), path, 4096, 1).unwrap();
    assert!(drain(&mut once).0 == text);
    let mut part = Source::held(held.clone(), path, 4096, 1)
        .unwrap()
        .stripe(5, 100_000)
        .unwrap();
    assert!(drain(&mut part).0 == text[5..100_005]);
    assert!(
        Source::held(held, path, 4096, 1)
            .unwrap()
            .stripe(period as u64, 1)
            .is_err()
    );
    let e = Held::text(0).expect_err("an empty period");
    assert!(format!("{e:#}").contains("expected at least 1"), "{e:#}");
}

/// A server's generated reverse stream is the whole seed's text, its xxh3 the seed file's; a
/// test's own bytes make a period of exactly those bytes; either derefs to its bytes.
#[test]
fn the_seed_period_is_the_seed_file() {
    let seed = Held::seed();
    assert_eq!(seed.len() as u64, crate::testdata::SEED_FILE_LEN);
    assert_eq!(xxhash_rust::xxh3::xxh3_64(&seed), 0xec40_a45b_cc9c_239d);
    let own = Held::of(b"not the text");
    assert_eq!(&own[..], b"not the text");
    assert!(&own[..] == own.bytes());
}

/// A background checksum runs no further ahead of the bytes sent than its lead
/// ([`CHECKSUM_LEAD`]): a reader that takes a stream slowly (a reverse stream's client) costs
/// the sender no more hashing than the bytes it took, however long the stream. Told of what
/// went, it goes on; joined, it finishes the whole length.
#[test]
fn a_background_checksum_keeps_within_its_lead_of_the_bytes_sent() {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    let data: Vec<u8> = (0..(CHECKSUM_LEAD as u32 * 3))
        .map(|i| (i % 249) as u8)
        .collect();
    f.write_all(&data).unwrap();
    let s = Source::open(f.path(), 128 << 10, 1).unwrap();
    let sum = s.digest_in_background_within(CHECKSUM_LEAD).unwrap();
    // Waits (bounded) until the thread waits for more to be sent, or has finished.
    let settle = |sum: &Checksum| {
        let by = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !sum.waiting() && !sum.finished() && std::time::Instant::now() < by {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    };
    settle(&sum);
    assert!(
        sum.hashed() <= CHECKSUM_LEAD,
        "{} bytes hashed with nothing sent",
        sum.hashed()
    );
    sum.sent(CHECKSUM_LEAD);
    let by = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while sum.hashed() <= CHECKSUM_LEAD && std::time::Instant::now() < by {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    settle(&sum);
    let hashed = sum.hashed();
    assert!(
        hashed > CHECKSUM_LEAD && hashed <= 2 * CHECKSUM_LEAD,
        "{hashed} bytes hashed with {CHECKSUM_LEAD} sent"
    );
    assert_eq!(sum.join().unwrap(), xxhash_rust::xxh3::xxh3_64(&data));
}
