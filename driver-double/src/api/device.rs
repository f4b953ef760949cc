//! Devices: count, ordinals, names, attributes, memory, UUIDs.

use cuda_sys::*;

use crate::state::{entry, out, State, R};

impl State {
    /// A device attribute's value.
    fn attribute(&self, attr: CUdevice_attribute, dev: usize) -> R<c_int> {
        let (major, minor) = self.cfg.cc;
        let sms = if major >= 9 { 132 } else { 13 };
        Ok(match attr {
            1..=3 => 1024,             // threads a block; block x, y
            4 => 64,                   // block z
            5 => 0x7fff_ffff,          // grid x
            6 | 7 => 65535,            // grid y, z
            8 => 48 << 10,             // shared memory a block
            9 => 64 << 10,             // constant memory
            10 => 32,                  // warp size
            12 => 65536,               // registers a block
            13 => 1_980_000,           // clock (kHz)
            14 => 512,                 // texture alignment
            15 => 1,                   // GPU overlap
            16 => sms,                 // multiprocessors
            17 => 0,                   // kernel exec timeout
            18 => 0,                   // integrated
            19 => 1,                   // can map host memory
            20 => 0,                   // compute mode: default
            31 => 1,                   // concurrent kernels
            32 => 0,                   // ECC
            33 => 0x10 + dev as c_int, // PCI bus
            34 => 0,                   // PCI device
            35 => 0,                   // TCC driver
            36 => 3_201_000,           // memory clock
            37 => 6144,                // memory bus width
            38 => 60 << 20,            // L2 size
            39 => 2048,                // threads an SM
            40 => 2,                   // async engines
            41 => 1,                   // unified addressing
            50 => 0,                   // PCI domain
            75 => major,
            76 => minor,
            81 => 228 << 10, // shared memory an SM
            82 => 65536,     // registers an SM
            83 => 1,         // managed memory
            86 => 1,         // concurrent managed access
            97 => 227 << 10, // shared memory a block, opt-in
            _ => 0,
        })
    }
}

/// `cuDeviceGetCount` (2000).
pub unsafe extern "C" fn cuDeviceGetCount_v2000(n: *mut c_int) -> CUresult {
    entry("cuDeviceGetCount", 2000, |s| {
        *out(n)? = s.devices.len() as c_int;
        Ok(())
    })
}

/// `cuDeviceGet` (2000).
pub unsafe extern "C" fn cuDeviceGet_v2000(dev: *mut CUdevice, ordinal: c_int) -> CUresult {
    entry("cuDeviceGet", 2000, |s| {
        let o = out(dev)?;
        let d = s.device(ordinal)?;
        *o = d as CUdevice;
        Ok(())
    })
}

/// `cuDeviceGetName` (2000).
pub unsafe extern "C" fn cuDeviceGetName_v2000(name: *mut c_char, len: c_int, dev: CUdevice) -> CUresult {
    entry("cuDeviceGetName", 2000, |s| {
        let d = s.device(dev)?;
        if name.is_null() || len <= 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let text = format!("fc driver double {d} (compute capability {}.{})", s.cfg.cc.0, s.cfg.cc.1);
        let n = text.len().min(len as usize - 1);
        // SAFETY: `name` holds `len` bytes (the call's contract); `n + 1 <= len`.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr().cast::<c_char>(), name, n);
            *name.add(n) = 0;
        }
        Ok(())
    })
}

/// `cuDeviceGetAttribute` (2000): a Hopper-like device (132 SMs) from
/// compute capability 9.0, a K80-like one (13 SMs) below; unknown
/// attributes read 0.
pub unsafe extern "C" fn cuDeviceGetAttribute_v2000(
    v: *mut c_int,
    attr: CUdevice_attribute,
    dev: CUdevice,
) -> CUresult {
    entry("cuDeviceGetAttribute", 2000, |s| {
        let o = out(v)?;
        let d = s.device(dev)?;
        *o = s.attribute(attr, d)?;
        Ok(())
    })
}

/// `cuDeviceTotalMem` (3020).
pub unsafe extern "C" fn cuDeviceTotalMem_v3020(bytes: *mut usize, dev: CUdevice) -> CUresult {
    entry("cuDeviceTotalMem", 3020, |s| {
        let o = out(bytes)?;
        s.device(dev)?;
        *o = s.cfg.memory;
        Ok(())
    })
}

/// `cuDeviceGetUuid` (11040).
pub unsafe extern "C" fn cuDeviceGetUuid_v11040(uuid: *mut CUuuid, dev: CUdevice) -> CUresult {
    entry("cuDeviceGetUuid", 11040, |s| {
        let o = out(uuid)?;
        let d = s.device(dev)?;
        let mut bytes = *b"fc-double-dev\0\0\0";
        bytes[14] = d as u8;
        for (dst, b) in o.bytes.iter_mut().zip(bytes) {
            *dst = b as c_char;
        }
        Ok(())
    })
}
