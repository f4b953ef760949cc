//! The capture pool's bookkeeping: a best-fit sub-allocator over device
//! slabs, with coalescing frees. Pure arithmetic, no driver calls: the
//! context asks it for a block and, when nothing fits, gives it a new slab.
//!
//! Blocks handed out while a context captures keep their addresses for the
//! life of the slab, so graphs may bake them in. A freed block returns here,
//! not to the driver, and a later capture of the same context reuses it:
//! replays of one context's graphs run in order on its one stream, so a
//! capture's dead intermediates may alias another's.

use std::collections::BTreeMap;

/// Every block is a multiple of this and aligned to it.
pub const BLOCK_ALIGN: u64 = 512;
/// New slabs are at least this large, and a multiple of it.
pub const SLAB_GRANULE: u64 = 2 << 20;

/// One contiguous device range owned by the pool.
#[derive(Debug)]
struct Slab {
    base: u64,
    size: u64,
    /// Free ranges: offset -> length, never adjacent (coalesced).
    free: BTreeMap<u64, u64>,
}

/// The sub-allocator.
#[derive(Debug, Default)]
pub struct PoolAllocator {
    slabs: Vec<Slab>,
    in_use: u64,
}

/// Rounds `bytes` up to the block alignment (at least one block); `None`
/// when the rounded size does not fit in 64 bits.
pub fn block_size(bytes: usize) -> Option<u64> {
    u64::try_from(bytes).ok()?.max(1).checked_next_multiple_of(BLOCK_ALIGN)
}

/// The slab size to request when a block of `block` bytes does not fit;
/// `None` when it does not fit in 64 bits.
pub fn slab_size_for(block: u64) -> Option<u64> {
    block.checked_next_multiple_of(SLAB_GRANULE)
}

impl PoolAllocator {
    /// Bytes of device memory the pool holds.
    pub fn reserved(&self) -> u64 {
        self.slabs.iter().map(|s| s.size).sum()
    }

    /// Bytes currently handed out.
    pub fn in_use(&self) -> u64 {
        self.in_use
    }

    /// Base addresses and sizes of the slabs (to free them at the end).
    pub fn slabs(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.slabs.iter().map(|s| (s.base, s.size))
    }

    /// Best fit among the free ranges: the smallest that holds `block`,
    /// lowest address on ties. Returns the device address.
    pub fn alloc(&mut self, block: u64) -> Option<u64> {
        let mut best: Option<(usize, u64, u64)> = None; // (slab, offset, len)
        for (i, slab) in self.slabs.iter().enumerate() {
            for (&off, &len) in &slab.free {
                if len >= block && best.is_none_or(|(_, _, l)| len < l) {
                    best = Some((i, off, len));
                }
            }
        }
        let (i, off, len) = best?;
        let slab = &mut self.slabs[i];
        slab.free.remove(&off);
        if len > block {
            slab.free.insert(off + block, len - block);
        }
        self.in_use += block;
        Some(slab.base + off)
    }

    /// Adds a new slab at `base` of `size` bytes, all free.
    pub fn add_slab(&mut self, base: u64, size: u64) {
        let mut free = BTreeMap::new();
        free.insert(0, size);
        self.slabs.push(Slab { base, size, free });
    }

    /// Returns the block at `addr` of `block` bytes, merging with its free
    /// neighbours. Returns false when `addr` is not in any slab.
    pub fn free(&mut self, addr: u64, block: u64) -> bool {
        let Some(slab) = self.slabs.iter_mut().find(|s| addr >= s.base && addr + block <= s.base + s.size) else {
            return false;
        };
        let mut off = addr - slab.base;
        let mut len = block;
        if let Some((&prev_off, &prev_len)) = slab.free.range(..off).next_back() {
            if prev_off + prev_len == off {
                slab.free.remove(&prev_off);
                off = prev_off;
                len += prev_len;
            }
        }
        if let Some(&next_len) = slab.free.get(&(off + len)) {
            slab.free.remove(&(off + len));
            len += next_len;
        }
        slab.free.insert(off, len);
        self.in_use -= block;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Allocates from the pool, adding a slab from a fake address space
    /// when nothing fits, as the context does with cuMemAlloc.
    fn alloc(p: &mut PoolAllocator, next_base: &mut u64, bytes: usize) -> u64 {
        let b = block_size(bytes).unwrap();
        if let Some(a) = p.alloc(b) {
            return a;
        }
        let size = slab_size_for(b).unwrap();
        p.add_slab(*next_base, size);
        *next_base += size + (1 << 30);
        p.alloc(b).expect("fresh slab fits")
    }

    #[test]
    fn blocks_are_aligned_and_rounded() {
        assert_eq!(block_size(0), Some(512));
        assert_eq!(block_size(1), Some(512));
        assert_eq!(block_size(513), Some(1024));
        assert_eq!(slab_size_for(1), Some(SLAB_GRANULE));
        assert_eq!(slab_size_for(SLAB_GRANULE + 1), Some(2 * SLAB_GRANULE));
    }

    /// Sizes near the top of the range must not wrap to small blocks.
    #[test]
    fn huge_sizes_do_not_wrap() {
        assert_eq!(block_size(usize::MAX), None);
        assert_eq!(block_size(usize::MAX - 256), None);
        assert_eq!(block_size((u64::MAX - 511) as usize), Some(u64::MAX - 511));
        assert_eq!(slab_size_for(u64::MAX - 511), None);
        assert_eq!(slab_size_for(SLAB_GRANULE * 4), Some(SLAB_GRANULE * 4));
    }

    #[test]
    fn free_coalesces_and_reuses() {
        let mut p = PoolAllocator::default();
        let mut base = 1 << 32;
        let a = alloc(&mut p, &mut base, 1 << 20);
        let b = alloc(&mut p, &mut base, 1 << 20);
        assert_eq!(b, a + (1 << 20));
        assert_eq!(p.reserved(), SLAB_GRANULE);
        assert!(p.free(a, 1 << 20));
        assert!(p.free(b, 1 << 20));
        assert_eq!(p.in_use(), 0);
        // The two halves merged: a 2 MiB block fits without a new slab.
        let c = alloc(&mut p, &mut base, 2 << 20);
        assert_eq!(c, a);
        assert_eq!(p.reserved(), SLAB_GRANULE);
        assert!(!p.free(12345, 512), "foreign address is refused");
    }

    #[test]
    fn best_fit_prefers_the_smallest_hole() {
        let mut p = PoolAllocator::default();
        p.add_slab(0, 10 * 4096);
        let blocks: Vec<u64> = (0..10).map(|_| p.alloc(4096).unwrap()).collect();
        // Holes of 1 and 3 blocks.
        p.free(blocks[1], 4096);
        for &b in &blocks[5..8] {
            p.free(b, 4096);
        }
        assert_eq!(p.alloc(4096), Some(blocks[1]));
        assert_eq!(p.alloc(8192), Some(blocks[5]));
    }

    /// The reference suite's pool case: a 4-layer forward whose
    /// intermediates (n x 2048 f32) die inside the capture while each
    /// capture's output (n x 512 f32) stays alive, captured at 4096, 2048,
    /// then 4096 rows. The later captures must reuse the first one's memory:
    /// each adds less than max(2 MiB, 10% of the first capture's growth).
    #[test]
    fn capture_sequence_reuses_memory() {
        let (d, d2, depth) = (512usize, 2048usize, 4);
        let mut p = PoolAllocator::default();
        let mut base = 1 << 32;
        let mut deltas = Vec::new();
        let mut kept = Vec::new();
        for n in [4096usize, 2048, 4096] {
            let before = p.reserved();
            let mut x: Option<(u64, usize)> = None; // the input is outside the pool
            for _ in 0..depth {
                let h = alloc(&mut p, &mut base, n * d2 * 4);
                let dst = alloc(&mut p, &mut base, n * d2 * 4);
                p.free(h, block_size(n * d2 * 4).unwrap());
                let nx = alloc(&mut p, &mut base, n * d * 4);
                p.free(dst, block_size(n * d2 * 4).unwrap());
                if let Some((a, bytes)) = x.take() {
                    p.free(a, block_size(bytes).unwrap());
                }
                x = Some((nx, n * d * 4));
            }
            kept.push(x);
            deltas.push((p.reserved() - before) as f64 / (1 << 20) as f64);
        }
        let bound = f64::max(2.0, deltas[0] * 0.1);
        assert!(deltas[1] < bound && deltas[2] < bound, "deltas {deltas:?} MiB, bound {bound}");
    }
}
