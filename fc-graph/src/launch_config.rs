//! What a launch asks for ([`LaunchConfig`]) and what it may ask for
//! ([`LaunchLimits`]), checked before anything reaches the driver.

use crate::error::{Error, Result};

/// What one launch of a kernel may ask for: the device's block and grid
/// dimensions, and the kernel's own threads per block (its registers may
/// allow fewer than the device) and dynamic shared memory. Launches past
/// them are refused before `cuLaunchKernel`, which would fail and, while
/// the context captures, invalidate the capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchLimits {
    /// Threads per block (product of the block dimensions).
    pub threads: u32,
    /// Block dimensions.
    pub block: (u32, u32, u32),
    /// Grid dimensions.
    pub grid: (u32, u32, u32),
    /// Bytes of dynamic shared memory per block.
    pub dynamic_shared: u32,
}

impl LaunchLimits {
    /// Checks a launch of `kernel` against the limits.
    pub fn check(&self, kernel: &str, cfg: &LaunchConfig) -> Result<()> {
        let (b, g) = (cfg.block, cfg.grid);
        let past = |(x, y, z): (u32, u32, u32), (mx, my, mz): (u32, u32, u32)| x > mx || y > my || z > mz;
        let refuse = |what: String| Err(Error::invalid(format!("{kernel}: {what}")));
        if past(b, self.block) {
            return refuse(format!("block {b:?} exceeds the device's maximum block dimensions {:?}", self.block));
        }
        let threads = u64::from(b.0) * u64::from(b.1) * u64::from(b.2);
        if threads > u64::from(self.threads) {
            return refuse(format!("{threads} threads per block exceeds the kernel's limit of {}", self.threads));
        }
        if past(g, self.grid) {
            return refuse(format!("grid {g:?} exceeds the device's maximum grid dimensions {:?}", self.grid));
        }
        if cfg.shared_mem_bytes > self.dynamic_shared {
            return refuse(format!(
                "{} bytes of dynamic shared memory exceeds the kernel's limit of {}",
                cfg.shared_mem_bytes, self.dynamic_shared
            ));
        }
        Ok(())
    }
}

/// Grid, block and dynamic shared memory of a launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks in x, y, z (each at least 1).
    pub grid: (u32, u32, u32),
    /// Threads per block in x, y, z (each at least 1).
    pub block: (u32, u32, u32),
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
}

impl LaunchConfig {
    /// A 1-D launch covering `n` threads with `block` threads per block.
    pub fn for_elements(n: u32, block: u32) -> LaunchConfig {
        LaunchConfig { grid: (n.div_ceil(block.max(1)).max(1), 1, 1), block: (block.max(1), 1, 1), shared_mem_bytes: 0 }
    }

    pub(crate) fn validate(&self) -> Result<()> {
        let (g, b) = (self.grid, self.block);
        if [g.0, g.1, g.2, b.0, b.1, b.2].contains(&0) {
            return Err(Error::invalid(format!("launch dimensions must be non-zero: grid {g:?}, block {b:?}")));
        }
        Ok(())
    }
}
