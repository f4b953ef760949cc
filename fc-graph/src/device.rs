//! Devices: counting, naming, attributes.

use std::os::raw::c_int;

use cuda_sys::result::device;
use cuda_sys::*;

use crate::driver::driver;
use crate::error::{Error, Result};

/// One visible CUDA device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Device {
    ordinal: usize,
    handle: CUdevice,
}

impl Device {
    /// How many devices the driver sees.
    pub fn count() -> Result<usize> {
        let n = device::get_count(driver()?)?;
        Ok(n.max(0) as usize)
    }

    /// Device number `ordinal` (0-based, as `CUDA_VISIBLE_DEVICES` orders them).
    pub fn get(ordinal: usize) -> Result<Device> {
        let count = Self::count()?;
        if ordinal >= count {
            return Err(Error::invalid(format!("device {ordinal} does not exist ({count} visible)")));
        }
        // The ordinal is checked against the count.
        let handle = device::get(driver()?, ordinal as c_int)?;
        Ok(Device { ordinal, handle })
    }

    /// The ordinal this device was opened with.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    pub(crate) fn handle(&self) -> CUdevice {
        self.handle
    }

    /// The marketing name, e.g. "NVIDIA H200".
    pub fn name(&self) -> Result<String> {
        Ok(device::get_name(driver()?, self.handle)?)
    }

    /// Total device memory in bytes.
    pub fn total_memory(&self) -> Result<usize> {
        Ok(device::total_mem(driver()?, self.handle)?)
    }

    /// An integer attribute.
    pub fn attribute(&self, attr: CUdevice_attribute) -> Result<i32> {
        Ok(device::get_attribute(driver()?, attr, self.handle)?)
    }

    /// Compute capability as (major, minor).
    pub fn compute_capability(&self) -> Result<(i32, i32)> {
        Ok((
            self.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            self.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ))
    }

    /// The device UUID in the usual `GPU-xxxxxxxx-...` form.
    pub fn uuid(&self) -> Result<String> {
        let u = device::get_uuid(driver()?, self.handle)?;
        let b: Vec<u8> = u.bytes.iter().map(|&c| c as u8).collect();
        let hex = |r: std::ops::Range<usize>| b[r].iter().map(|x| format!("{x:02x}")).collect::<String>();
        Ok(format!("GPU-{}-{}-{}-{}-{}", hex(0..4), hex(4..6), hex(6..8), hex(8..10), hex(10..16)))
    }
}
