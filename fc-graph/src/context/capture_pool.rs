//! The context's capture pool ([`CapturePool`]): device memory handed out
//! while the context records, kept for the context's life so that graphs
//! may bake its addresses in. The bookkeeping is [`crate::pool`]'s; this
//! part owns it behind a lock and asks its caller for a new slab when no
//! block fits.

use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::pool::PoolAllocator;
use crate::sync::lock;

/// The capture pool of one context.
#[derive(Debug, Default)]
pub(crate) struct CapturePool {
    blocks: Mutex<PoolAllocator>,
}

impl CapturePool {
    /// A block of `block` bytes (a [`crate::pool::block_size`]); when none
    /// fits, `new_slab(block)` allocates a slab (its address and size) that
    /// joins the pool. The pool stays locked meanwhile, so concurrent
    /// allocations never make two slabs for one shortage.
    pub(crate) fn alloc(&self, block: u64, new_slab: impl FnOnce(u64) -> Result<(u64, u64)>) -> Result<u64> {
        let mut pool = lock(&self.blocks);
        if let Some(p) = pool.alloc(block) {
            return Ok(p);
        }
        let (base, slab) = new_slab(block)?;
        pool.add_slab(base, slab);
        pool.alloc(block).ok_or_else(|| Error::invalid("capture pool: a fresh slab did not fit its block"))
    }

    /// Gives `block` bytes at `ptr` back to the pool.
    pub(crate) fn free(&self, ptr: u64, block: u64) {
        lock(&self.blocks).free(ptr, block);
    }

    /// Bytes of device memory the pool holds.
    pub(crate) fn reserved(&self) -> u64 {
        lock(&self.blocks).reserved()
    }

    /// Bytes handed out to live buffers.
    pub(crate) fn in_use(&self) -> u64 {
        lock(&self.blocks).in_use()
    }

    /// The slabs' base addresses and sizes, for freeing them at teardown.
    pub(crate) fn slabs(&self) -> Vec<(u64, u64)> {
        lock(&self.blocks).slabs().collect()
    }
}
