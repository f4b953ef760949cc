//! Devices: counting, naming, attributes.

use std::os::raw::{c_char, c_int};

use cuda_sys::*;

use crate::driver::{check, driver};
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
        let d = driver()?;
        let mut n: c_int = 0;
        // SAFETY: valid out-pointer.
        check("cuDeviceGetCount", unsafe { (d.cuDeviceGetCount)(&mut n) })?;
        Ok(n.max(0) as usize)
    }

    /// Device number `ordinal` (0-based, as `CUDA_VISIBLE_DEVICES` orders them).
    pub fn get(ordinal: usize) -> Result<Device> {
        let count = Self::count()?;
        if ordinal >= count {
            return Err(Error::invalid(format!("device {ordinal} does not exist ({count} visible)")));
        }
        let d = driver()?;
        let mut handle: CUdevice = 0;
        // SAFETY: valid out-pointer; ordinal checked against the count.
        check("cuDeviceGet", unsafe { (d.cuDeviceGet)(&mut handle, ordinal as c_int) })?;
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
        let d = driver()?;
        let mut buf = [0 as c_char; 256];
        // SAFETY: the buffer holds `len` bytes; the driver NUL-terminates.
        check("cuDeviceGetName", unsafe { (d.cuDeviceGetName)(buf.as_mut_ptr(), buf.len() as c_int, self.handle) })?;
        let bytes: Vec<u8> = buf.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Total device memory in bytes.
    pub fn total_memory(&self) -> Result<usize> {
        let d = driver()?;
        let mut bytes = 0usize;
        // SAFETY: valid out-pointer.
        check("cuDeviceTotalMem", unsafe { (d.cuDeviceTotalMem)(&mut bytes, self.handle) })?;
        Ok(bytes)
    }

    /// An integer attribute.
    pub fn attribute(&self, attr: CUdevice_attribute) -> Result<i32> {
        let d = driver()?;
        let mut v: c_int = 0;
        // SAFETY: valid out-pointer.
        check("cuDeviceGetAttribute", unsafe { (d.cuDeviceGetAttribute)(&mut v, attr, self.handle) })?;
        Ok(v)
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
        let d = driver()?;
        let mut u = CUuuid { bytes: [0; 16] };
        // SAFETY: valid out-pointer to a CUuuid.
        check("cuDeviceGetUuid", unsafe { (d.cuDeviceGetUuid)(&mut u, self.handle) })?;
        let b: Vec<u8> = u.bytes.iter().map(|&c| c as u8).collect();
        let hex = |r: std::ops::Range<usize>| b[r].iter().map(|x| format!("{x:02x}")).collect::<String>();
        Ok(format!("GPU-{}-{}-{}-{}-{}", hex(0..4), hex(4..6), hex(6..8), hex(8..10), hex(10..16)))
    }
}
