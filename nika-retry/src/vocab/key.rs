//! [`IdempotencyKey`]: the 128 random bits that name one call of an annotated fn.

use core::fmt;

/// 128 random bits naming one call of an annotated fn, for an
/// `Idempotency-Key` header; `Display` writes them as UUID text
/// (`8-4-4-4-12` lowercase hex digits).
///
/// ```
/// use nika_retry::IdempotencyKey;
///
/// let key = IdempotencyKey::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
/// assert_eq!(key.to_string(), "01234567-89ab-cdef-0123-456789abcdef");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IdempotencyKey {
    // Two halves rather than a `u128`, whose 16-byte alignment would pad
    // every future that holds a call.
    hi: u64,
    lo: u64,
}

impl IdempotencyKey {
    /// Not drawn yet: never the value of a drawn key.
    pub(crate) const UNDRAWN: IdempotencyKey = IdempotencyKey { hi: 0, lo: 0 };

    /// A fresh key (never all zeros).
    ///
    /// Not from the jitter's generator (`fastrand`'s thread generator, which
    /// [`seed_thread_jitter`](crate::engine::seed_thread_jitter) seeds), so
    /// that reading a key does not shift a seeded schedule and a seed does
    /// not make keys repeat: each key is SipHash under a fresh `RandomState`,
    /// whose keys std draws from the OS once per thread and steps per use.
    pub(crate) fn draw() -> IdempotencyKey {
        use std::hash::{BuildHasher, RandomState};
        loop {
            let state = RandomState::new();
            let key = IdempotencyKey {
                hi: state.hash_one(0u8),
                lo: state.hash_one(1u8),
            };
            if key != IdempotencyKey::UNDRAWN {
                return key;
            }
        }
    }

    /// The key of these 128 bits.
    pub const fn from_u128(bits: u128) -> IdempotencyKey {
        IdempotencyKey {
            hi: (bits >> 64) as u64,
            lo: bits as u64,
        }
    }

    /// The key's 128 bits.
    pub const fn as_u128(self) -> u128 {
        ((self.hi as u128) << 64) | self.lo as u128
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (hi, lo) = (self.hi, self.lo);
        write!(
            f,
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            hi >> 32,
            (hi >> 16) & 0xffff,
            hi & 0xffff,
            lo >> 48,
            lo & 0xffff_ffff_ffff
        )
    }
}

impl fmt::Debug for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IdempotencyKey({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_fresh_and_print_as_uuid_text() {
        let (a, b) = (IdempotencyKey::draw(), IdempotencyKey::draw());
        assert_ne!(a, b);
        // A jitter seed does not make keys repeat, nor do keys shift the jitter.
        crate::engine::seed_thread_jitter(7);
        let (c, seeded) = (IdempotencyKey::draw(), fastrand::u64(..));
        crate::engine::seed_thread_jitter(7);
        assert_ne!(IdempotencyKey::draw(), c);
        assert_eq!(fastrand::u64(..), seeded);
        let text = a.to_string();
        let groups: Vec<usize> = text.split('-').map(str::len).collect();
        assert_eq!(groups, [8, 4, 4, 4, 12], "{text}");
        assert_eq!(
            u128::from_str_radix(&text.replace('-', ""), 16),
            Ok(a.as_u128())
        );
        assert_eq!(IdempotencyKey::from_u128(a.as_u128()), a);
        assert_eq!(
            IdempotencyKey::from_u128(u128::MAX).to_string(),
            "ffffffff-ffff-ffff-ffff-ffffffffffff"
        );
    }
}
