//! Devices, contexts (primary, created, green) and resource descriptors.

/// One simulated device.
#[derive(Debug)]
pub struct Device {
    /// Its primary context's handle (the same for the device's life).
    pub primary: u64,
    /// Retains of the primary context not yet released.
    pub primary_refs: u32,
}

/// What kind of context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CtxKind {
    /// A device's primary context.
    Primary,
    /// `cuCtxCreate`'s.
    Created,
    /// The `CUcontext` of a green context (its handle is the green one).
    Green(u64),
}

/// A context.
#[derive(Debug)]
pub struct Ctx {
    /// Its device's ordinal.
    pub device: usize,
    /// Its kind.
    pub kind: CtxKind,
    /// Whether it is active (a primary context between its first retain
    /// and its last release; others from creation to destruction).
    pub active: bool,
    /// Its legacy (NULL) stream.
    pub legacy: u64,
}

/// A green context.
#[derive(Debug)]
pub struct Green {
    /// Its device.
    pub device: usize,
    /// The `CUcontext` that stands for it.
    pub ctx: u64,
    /// Its SMs.
    pub sm_count: u32,
}

/// A resource descriptor (`cuDevResourceGenerateDesc`).
#[derive(Debug)]
pub struct ResourceDesc {
    /// The SMs it describes.
    pub sm_count: u32,
    /// Their device.
    pub device: Option<usize>,
}
