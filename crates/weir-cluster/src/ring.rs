//! Owners by rendezvous hashing (highest random weight): every member scores every
//! key, the highest score owns it. A member joining takes only the keys it now scores
//! highest on, one leaving gives only its own keys away, and every node agrees given
//! the same member list. The hash is FNV-1a with a 64-bit finalizer, fixed here so
//! that nodes of different builds agree.

/// FNV-1a over the bytes, then splitmix64's finalizer (FNV alone mixes the last bytes
/// poorly).
fn hash(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in *part {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        // A separator, so that ("ab", "c") and ("a", "bc") differ.
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The member of `members` that owns `key`; `None` without members.
pub fn owner<'a, I>(members: I, key: &str) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    members
        .into_iter()
        .max_by_key(|m| (hash(&[m.as_bytes(), key.as_bytes()]), *m))
}

/// The share of keys each member owns, estimated over a fixed sample of keys.
pub fn shares<'a>(members: &[&'a str]) -> Vec<(&'a str, f64)> {
    const SAMPLE: usize = 4096;
    let mut counts = vec![0usize; members.len()];
    for i in 0..SAMPLE {
        let key = format!("sample/{i}");
        if let Some(o) = owner(members.iter().copied(), &key) {
            if let Some(at) = members.iter().position(|m| *m == o) {
                counts[at] += 1;
            }
        }
    }
    members
        .iter()
        .zip(counts)
        .map(|(m, c)| (*m, c as f64 / SAMPLE as f64))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_leaving_moves_only_its_own_keys() {
        let three = ["a", "b", "c"];
        let two = ["a", "b"];
        let mut moved = 0;
        for i in 0..2000 {
            let key = format!("http://h/{i}");
            let before = owner(three, &key).unwrap();
            let after = owner(two, &key).unwrap();
            if before != "c" {
                assert_eq!(before, after, "{key} moved though its owner stayed");
            } else {
                moved += 1;
            }
        }
        assert!((500..830).contains(&moved), "c owned {moved} of 2000");
        assert_eq!(owner(Vec::<&str>::new(), "k"), None);
    }

    #[test]
    fn shares_are_even() {
        for (_, share) in shares(&["a", "b", "c", "d"]) {
            assert!((0.2..0.3).contains(&share), "{share}");
        }
    }
}
