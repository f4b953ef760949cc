//! What the checks share: the failure type, the seed's kernel chain and its
//! CPU reference, seeded inputs and exact comparison.

use fc_graph::{Context, DeviceBuffer};

/// Why a check failed, in one line for the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure(pub String);

impl From<fc_graph::Error> for Failure {
    fn from(e: fc_graph::Error) -> Failure {
        Failure(e.to_string())
    }
}

impl Failure {
    /// Prefixes the message with what was being done.
    pub fn context(self, what: &str) -> Failure {
        Failure(format!("{what}: {}", self.0))
    }
}

/// A check's outcome: `Ok(detail)` or `Err(why)`.
pub type Outcome = Result<String, Failure>;

/// Adds "what was being done" to a fallible step's error.
pub trait Doing<T> {
    /// Maps the error to a [`Failure`] saying what failed.
    fn doing(self, what: &str) -> Result<T, Failure>;
}

impl<T, E: Into<Failure>> Doing<T> for Result<T, E> {
    fn doing(self, what: &str) -> Result<T, Failure> {
        self.map_err(|e| e.into().context(what))
    }
}

/// Fails the check with a formatted message unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err($crate::selftest::common::Failure(format!($($msg)+)));
        }
    };
}
pub(crate) use ensure;

/// Floats per buffer in the chain checks (the seed test's size).
pub const N: usize = 4096;
/// Add/mul pairs of the seed's layer body: 13 pairs = 26 kernels.
pub const PAIRS: usize = 13;

/// The seed's layer body on the GPU: `pairs` x (z = x + y; x = z * y).
pub fn chain(ctx: &Context, bufs: (&DeviceBuffer, &DeviceBuffer, &DeviceBuffer), pairs: usize) -> fc_graph::Result<()> {
    let (x, y, z) = bufs;
    for _ in 0..pairs {
        ctx.add(x, y, z, N)?;
        ctx.mul(z, y, x, N)?;
    }
    Ok(())
}

/// The same chain on the CPU: one IEEE single-precision operation per
/// element per kernel, as the GPU does, so results match bit for bit.
pub fn chain_cpu(x: &mut [f32], y: &[f32], pairs: usize) {
    for _ in 0..pairs {
        for (xi, yi) in x.iter_mut().zip(y) {
            let z = *xi + *yi;
            *xi = z * *yi;
        }
    }
}

/// A small deterministic generator (xorshift) for inputs.
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// `n` floats uniform in [lo, hi).
    pub fn floats(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n)
            .map(|_| {
                let u = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
                lo + (hi - lo) * u
            })
            .collect()
    }
}

/// The first element where `got` and `want` differ in bits, described.
pub fn first_difference(what: &str, got: &[f32], want: &[f32]) -> Option<String> {
    if got.len() != want.len() {
        return Some(format!("{what}: {} values, expected {}", got.len(), want.len()));
    }
    let i = (0..got.len()).find(|&i| got[i].to_bits() != want[i].to_bits())?;
    let differing = (0..got.len()).filter(|&i| got[i].to_bits() != want[i].to_bits()).count();
    Some(format!(
        "{what}: {differing} of {} values differ, first at [{i}]: {:e} ({:#010x}), expected {:e} ({:#010x})",
        got.len(),
        got[i],
        got[i].to_bits(),
        want[i],
        want[i].to_bits()
    ))
}

/// Fails unless `got` equals `want` bit for bit.
pub fn expect_exact(what: &str, got: &[f32], want: &[f32]) -> Result<(), Failure> {
    match first_difference(what, got, want) {
        Some(msg) => Err(Failure(msg)),
        None => Ok(()),
    }
}

/// A buffer holding `data`.
pub fn upload(ctx: &Context, data: &[f32]) -> fc_graph::Result<DeviceBuffer> {
    let b = ctx.alloc(std::mem::size_of_val(data))?;
    b.upload(data)?;
    Ok(b)
}

/// The first `n` floats of `b`.
pub fn download(b: &DeviceBuffer, n: usize) -> fc_graph::Result<Vec<f32>> {
    let mut v = vec![f32::NAN; n];
    b.download(&mut v)?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_chain_is_the_seed_body() {
        // One pair: z = x + y; x = z * y.
        let mut x = vec![1.0f32, -2.0, 0.5];
        chain_cpu(&mut x, &[2.0, 0.5, -1.0], 1);
        assert_eq!(x, [6.0, -0.75, 0.5]);
        // Two pairs compose: x = ((1 + 2) * 2 + 2) * 2 = 16.
        let mut x = vec![1.0f32];
        chain_cpu(&mut x, &[2.0], 2);
        assert_eq!(x, [16.0]);
    }

    #[test]
    fn cpu_chain_rounds_each_operation() {
        // (2^24 + 1) is not representable: the add rounds before the mul.
        let mut x = vec![16_777_216.0f32];
        chain_cpu(&mut x, &[1.0], 1);
        assert_eq!(x, [16_777_216.0]);
    }

    #[test]
    fn comparison_is_bitwise() {
        assert_eq!(first_difference("t", &[1.0, 2.0], &[1.0, 2.0]), None);
        let msg = first_difference("t", &[0.0, 1.0, 3.0], &[-0.0, 1.0, 2.0]).expect("differ");
        assert!(msg.starts_with("t: 2 of 3 values differ, first at [0]"), "{msg}");
        assert!(first_difference("t", &[f32::NAN], &[f32::NAN]).is_none(), "same NaN bits are equal");
        assert!(first_difference("t", &[1.0], &[1.0, 2.0]).expect("length").contains("1 values, expected 2"));
        assert!(expect_exact("t", &[1.0], &[1.5]).is_err());
    }

    #[test]
    fn rng_is_deterministic_and_in_range() {
        let (a, b) = (Rng::new(7).floats(100, -1.0, 1.0), Rng::new(7).floats(100, -1.0, 1.0));
        assert_eq!(a, b);
        assert!(a.iter().all(|v| (-1.0..1.0).contains(v)));
        assert_ne!(a, Rng::new(8).floats(100, -1.0, 1.0));
    }

    #[test]
    fn failures_say_what_failed() {
        let r: Result<(), fc_graph::Error> = Err(fc_graph::Error::invalid("bad"));
        assert_eq!(r.doing("alloc x").unwrap_err(), Failure("alloc x: invalid argument: bad".into()));
    }
}
