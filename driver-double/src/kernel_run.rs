//! What a running kernel sees, for both ways the double runs kernels
//! (the native models and the PTX interpreter): [`Run`], its device's
//! memory, every access checked, and the condition values of the graph
//! launch it is part of; and [`Fault`], why a kernel stopped.

use std::collections::HashMap;

use crate::memory::{Access, Memory};

/// Where a kernel runs: its device's memory, and the conditions of the
/// graph launch it is part of (none outside a graph).
pub struct Run<'a> {
    /// Device memory.
    pub memory: &'a Memory,
    /// The device the kernel runs on.
    pub device: usize,
    /// The condition values of the executing graph, by handle.
    pub conditions: Option<&'a mut HashMap<u64, u32>>,
    /// The allocation the last access found: start, end (memory does not
    /// change while a kernel runs).
    pub last: std::cell::Cell<(u64, u64)>,
}

/// Why a kernel faulted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// An access outside the kernel's device memory.
    Memory(Access),
    /// `cudaGraphSetConditional` on a handle the executing graph does not
    /// own, or outside a graph.
    Condition(u64),
    /// A thread ran more instructions than a kernel of the double may (a
    /// loop that never ends).
    Runaway,
}

impl Run<'_> {
    /// `len` (at most 8) bytes of device memory at `p`, little endian.
    pub fn load(&self, p: u64, len: usize) -> Result<u64, Fault> {
        let at = self.ptr(p, len)?;
        let mut w = [0u8; 8];
        // SAFETY: `check` proved `len` bytes of a live allocation at `at`.
        unsafe { std::ptr::copy_nonoverlapping(at, w.as_mut_ptr(), len.min(8)) };
        Ok(u64::from_le_bytes(w))
    }

    /// Stores the low `len` (at most 8) bytes of `v` at `p`.
    pub fn store(&self, p: u64, len: usize, v: u64) -> Result<(), Fault> {
        let at = self.ptr(p, len)?;
        // SAFETY: as in `load`.
        unsafe { std::ptr::copy_nonoverlapping(v.to_le_bytes().as_ptr(), at, len.min(8)) };
        Ok(())
    }

    /// The host address of `len` bytes of device memory at `p`, checked
    /// against the kernel's device.
    pub fn ptr(&self, p: u64, len: usize) -> Result<*mut u8, Fault> {
        let (start, end) = self.last.get();
        if p >= start && p.checked_add(len as u64).is_some_and(|e| e <= end) {
            return Ok(p as usize as *mut u8);
        }
        let at = self.memory.check(p, len, Some(self.device)).map_err(Fault::Memory)?;
        if let Some((s, a)) = self.memory.find(p) {
            self.last.set((s, s + a.size as u64));
        }
        Ok(at)
    }

    /// The `u32` at `p`.
    pub fn read_u32(&self, p: u64) -> Result<u32, Fault> {
        let at = self.ptr(p, 4)?;
        // SAFETY: `check` proved 4 bytes of a live allocation at `at`.
        Ok(unsafe { at.cast::<u32>().read_unaligned() })
    }

    /// Stores `v` at `p`.
    pub fn write_u32(&self, p: u64, v: u32) -> Result<(), Fault> {
        let at = self.ptr(p, 4)?;
        // SAFETY: as in `read_u32`.
        unsafe { at.cast::<u32>().write_unaligned(v) };
        Ok(())
    }

    /// `cudaGraphSetConditional(handle, value)` of the executing graph.
    pub fn set_condition(&mut self, handle: u64, value: u32) -> Result<(), Fault> {
        match self.conditions.as_deref_mut() {
            Some(c) if c.contains_key(&handle) => {
                c.insert(handle, value);
                Ok(())
            }
            _ => Err(Fault::Condition(handle)),
        }
    }
}
