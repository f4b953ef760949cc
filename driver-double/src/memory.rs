//! Device memory: host memory stands in, so a memset, a copy or a kernel
//! really changes bytes a test can read back. Each allocation remembers its
//! device and owning context; every access is checked against them.

use std::alloc::{alloc, dealloc, Layout};
use std::collections::BTreeMap;

use cuda_sys::*;

/// Allocations are aligned like the driver's (256 bytes).
pub const ALIGN: usize = 256;
/// New memory is filled with this byte (NaN as f32), as uninitialised
/// device memory holds garbage: a test that reads memory it never wrote
/// sees NaNs, not zeros. Allocations above [`FILL_LIMIT`] stay zero (the
/// host's pages are committed only when touched).
pub const FILL: u8 = 0xFF;
/// The largest allocation filled with [`FILL`].
pub const FILL_LIMIT: usize = 64 << 20;

/// One allocation.
#[derive(Debug)]
pub struct Alloc {
    /// Bytes asked for.
    pub size: usize,
    /// Its device.
    pub device: usize,
    /// The context that owns it (a green context's memory is its primary
    /// context's).
    pub ctx: u64,
    layout: Layout,
}

/// All device memory.
#[derive(Debug, Default)]
pub struct Memory {
    allocs: BTreeMap<usize, Alloc>,
    /// Bytes in use per device.
    used: BTreeMap<usize, usize>,
}

/// Why an access is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// No allocation holds the address.
    Unmapped(u64),
    /// The range runs past its allocation.
    PastEnd { ptr: u64, len: usize, alloc: u64, size: usize },
    /// The allocation is another device's.
    OtherDevice { ptr: u64, device: usize, want: usize },
}

impl Access {
    /// A sentence for a report.
    pub fn describe(&self) -> String {
        match self {
            Access::Unmapped(p) => format!("{p:#x} is not in any allocation of device memory"),
            Access::PastEnd { ptr, len, alloc, size } => {
                format!("{len} bytes at {ptr:#x} run past the allocation at {alloc:#x} of {size} bytes")
            }
            Access::OtherDevice { ptr, device, want } => {
                format!("{ptr:#x} is memory of device {device}, used on device {want} (no peer access)")
            }
        }
    }
}

impl Memory {
    /// Allocates `size` bytes on `device` for `ctx`, within `capacity`
    /// bytes per device.
    pub fn alloc(&mut self, size: usize, device: usize, ctx: u64, capacity: usize) -> Result<u64, CUresult> {
        if size == 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let used = self.used.get(&device).copied().unwrap_or(0);
        let rounded = size.checked_add(ALIGN - 1).map(|s| s / ALIGN * ALIGN).ok_or(CUDA_ERROR_OUT_OF_MEMORY)?;
        if rounded > capacity.saturating_sub(used) {
            return Err(CUDA_ERROR_OUT_OF_MEMORY);
        }
        let layout = Layout::from_size_align(rounded, ALIGN).map_err(|_| CUDA_ERROR_OUT_OF_MEMORY)?;
        // SAFETY: `layout` has a non-zero size.
        let p = unsafe { alloc(layout) };
        if p.is_null() {
            return Err(CUDA_ERROR_OUT_OF_MEMORY);
        }
        if rounded <= FILL_LIMIT {
            // SAFETY: `p` holds `rounded` writable bytes just allocated.
            unsafe { p.write_bytes(FILL, rounded) };
        } else {
            // SAFETY: as above.
            unsafe { p.write_bytes(0, rounded) };
        }
        self.allocs.insert(p as usize, Alloc { size, device, ctx, layout });
        *self.used.entry(device).or_insert(0) += rounded;
        Ok(p as u64)
    }

    /// Frees the allocation that starts at `ptr`.
    pub fn free(&mut self, ptr: u64) -> Result<Alloc, Access> {
        let a = self.allocs.remove(&(ptr as usize)).ok_or(Access::Unmapped(ptr))?;
        // SAFETY: `ptr` was returned by `alloc` with this layout, and is
        // removed from the table, so it is freed once.
        unsafe { dealloc(ptr as usize as *mut u8, a.layout) };
        if let Some(u) = self.used.get_mut(&a.device) {
            *u -= a.layout.size();
        }
        Ok(a)
    }

    /// Frees every allocation `ctx` owns (its destruction).
    pub fn free_owned_by(&mut self, ctx: u64) {
        let owned: Vec<usize> = self.allocs.iter().filter(|(_, a)| a.ctx == ctx).map(|(p, _)| *p).collect();
        for p in owned {
            let _ = self.free(p as u64);
        }
    }

    /// Bytes in use on `device`.
    pub fn used(&self, device: usize) -> usize {
        self.used.get(&device).copied().unwrap_or(0)
    }

    /// Live allocations.
    pub fn count(&self) -> usize {
        self.allocs.len()
    }

    /// The allocation holding `ptr`: (start, allocation).
    pub fn find(&self, ptr: u64) -> Option<(u64, &Alloc)> {
        let (start, a) = self.allocs.range(..=ptr as usize).next_back()?;
        (ptr as usize - start < a.size.max(1)).then_some((*start as u64, a))
    }

    /// Checks that `len` bytes at `ptr` lie in one allocation of `device`
    /// (any device when `None`); returns the host address.
    pub fn check(&self, ptr: u64, len: usize, device: Option<usize>) -> Result<*mut u8, Access> {
        let (start, a) = self.find(ptr).ok_or(Access::Unmapped(ptr))?;
        let offset = (ptr - start) as usize;
        if len > a.size - offset {
            return Err(Access::PastEnd { ptr, len, alloc: start, size: a.size });
        }
        if let Some(want) = device {
            if a.device != want {
                return Err(Access::OtherDevice { ptr, device: a.device, want });
            }
        }
        Ok(ptr as usize as *mut u8)
    }
}

impl Drop for Memory {
    fn drop(&mut self) {
        let all: Vec<usize> = self.allocs.keys().copied().collect();
        for p in all {
            let _ = self.free(p as u64);
        }
    }
}
