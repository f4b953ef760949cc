//! The JIT linker: PTX inputs (from memory or files) and the device
//! runtime library, linked into one of the double's cubins
//! ([`encode_cubin`](crate::objects::module::encode_cubin)), which `cuModuleLoadDataEx` loads.

/// A link in progress.
#[derive(Debug, Default)]
pub struct Link {
    /// The PTX inputs, in order.
    pub ptx: Vec<String>,
    /// Whether the device runtime (`libcudadevrt.a`) was added.
    pub device_runtime: bool,
    /// Inputs added.
    pub inputs: usize,
    /// The linked image, once complete (owned by the link until it is
    /// destroyed, as the driver's is).
    pub cubin: Option<Vec<u8>>,
}
