//! Devices: count, handle, name, attributes, memory, UUID. All safe: a
//! `CUdevice` is an ordinal the driver checks.

use std::os::raw::{c_char, c_int};

use super::{DriverError, Result};
use crate::functions::DriverFns;
use crate::types::*;

/// `cuDeviceGetCount`.
#[inline]
pub fn get_count(d: &DriverFns) -> Result<c_int> {
    let mut n: c_int = 0;
    // SAFETY: valid out-pointer.
    DriverError::check("cuDeviceGetCount", unsafe { (d.cuDeviceGetCount)(&mut n) })?;
    Ok(n)
}

/// `cuDeviceGet(ordinal)`.
#[inline]
pub fn get(d: &DriverFns, ordinal: c_int) -> Result<CUdevice> {
    let mut dev: CUdevice = 0;
    // SAFETY: valid out-pointer; the driver checks the ordinal.
    DriverError::check("cuDeviceGet", unsafe { (d.cuDeviceGet)(&mut dev, ordinal) })?;
    Ok(dev)
}

/// Longest device name read, with its NUL.
const NAME_BYTES: usize = 256;

/// `cuDeviceGetName`: the name up to its NUL (255 bytes at most), lossily
/// decoded as UTF-8.
pub fn get_name(d: &DriverFns, dev: CUdevice) -> Result<String> {
    let mut buf = [0 as c_char; NAME_BYTES];
    // SAFETY: the buffer holds `len` bytes; the driver NUL-terminates within them.
    DriverError::check("cuDeviceGetName", unsafe { (d.cuDeviceGetName)(buf.as_mut_ptr(), buf.len() as c_int, dev) })?;
    Ok(name_of(&buf))
}

/// The text before the first NUL of `buf` (all of it without one).
pub(crate) fn name_of(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// `cuDeviceGetAttribute(attrib, dev)`.
#[inline]
pub fn get_attribute(d: &DriverFns, attrib: CUdevice_attribute, dev: CUdevice) -> Result<c_int> {
    let mut v: c_int = 0;
    // SAFETY: valid out-pointer.
    DriverError::check("cuDeviceGetAttribute", unsafe { (d.cuDeviceGetAttribute)(&mut v, attrib, dev) })?;
    Ok(v)
}

/// `cuDeviceTotalMem`: bytes of device memory.
#[inline]
pub fn total_mem(d: &DriverFns, dev: CUdevice) -> Result<usize> {
    let mut bytes = 0usize;
    // SAFETY: valid out-pointer.
    DriverError::check("cuDeviceTotalMem", unsafe { (d.cuDeviceTotalMem)(&mut bytes, dev) })?;
    Ok(bytes)
}

/// `cuDeviceGetUuid`.
#[inline]
pub fn get_uuid(d: &DriverFns, dev: CUdevice) -> Result<CUuuid> {
    let mut u = CUuuid { bytes: [0; 16] };
    // SAFETY: valid out-pointer to a CUuuid.
    DriverError::check("cuDeviceGetUuid", unsafe { (d.cuDeviceGetUuid)(&mut u, dev) })?;
    Ok(u)
}
