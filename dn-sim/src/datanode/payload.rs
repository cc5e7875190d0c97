//! Response payloads cut from buffers filled once, so no request allocates or generates its
//! payload: a `Bytes` slice shares the buffer by reference count.

use bytes::Bytes;
use std::sync::OnceLock;

/// Small payloads come from a buffer made on first need; the full 32 MiB one too. Both are the
/// process's, shared by every DataNode it serves (`--datanodes`): their bytes are fixed.
const SMALL: usize = 1 << 20;

static SMALL_BUFFER: OnceLock<Bytes> = OnceLock::new();
static LARGE_BUFFER: OnceLock<Bytes> = OnceLock::new();

#[derive(Default)]
pub struct PayloadSource;

impl PayloadSource {
    pub fn new() -> Self {
        Self
    }

    /// `len` bytes of pseudo-random data (at most `common::MAX_MESSAGE_SIZE`).
    pub fn slice(&self, len: usize) -> Bytes {
        if len <= SMALL {
            SMALL_BUFFER
                .get_or_init(|| random_bytes(SMALL, 0x9e37_79b9_7f4a_7c15))
                .slice(..len)
        } else {
            let large = LARGE_BUFFER
                .get_or_init(|| random_bytes(common::MAX_MESSAGE_SIZE, 0xd1b5_4a32_d192_ed03));
            large.slice(..len.min(large.len()))
        }
    }
}

/// Fills `len` bytes with xorshift64* output: incompressible, deterministic, fast.
fn random_bytes(len: usize, seed: u64) -> Bytes {
    let mut state = seed;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        out.extend_from_slice(&state.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    out.truncate(len);
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_have_the_asked_length_and_share_memory() {
        let p = PayloadSource::new();
        assert_eq!(p.slice(0).len(), 0);
        assert_eq!(p.slice(10).len(), 10);
        let a = p.slice(1000);
        let b = p.slice(1000);
        assert_eq!(a.as_ptr(), b.as_ptr());
        assert_eq!(p.slice(SMALL + 1).len(), SMALL + 1);
        assert_eq!(
            p.slice(common::MAX_MESSAGE_SIZE).len(),
            common::MAX_MESSAGE_SIZE
        );
        // Not all zero: a compressing transport must not make payloads free.
        assert!(a.iter().filter(|&&x| x == 0).count() < 50);
    }
}
