//! The units of device work (a kernel launch, a memset, a copy), as
//! streams queue them and graph nodes hold them.

/// A kernel launch with its parameters copied (as the driver copies them
/// at launch and when a node is added or set).
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    /// The function.
    pub func: u64,
    /// Grid and block dimensions.
    pub grid: [u32; 3],
    /// Block dimensions.
    pub block: [u32; 3],
    /// Dynamic shared memory.
    pub shared: u32,
    /// The parameter buffer, laid out as the kernel declares.
    pub params: Vec<u8>,
    /// The device it runs on.
    pub device: usize,
    /// The context that owns its function.
    pub ctx: u64,
}

/// A memset (`elementSize` 1, 2 or 4; 2-D with `pitch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memset {
    /// Destination.
    pub dst: u64,
    /// Bytes between rows.
    pub pitch: usize,
    /// The value (its low `element` bytes).
    pub value: u32,
    /// Element size.
    pub element: u32,
    /// Elements per row.
    pub width: usize,
    /// Rows.
    pub height: usize,
    /// The device.
    pub device: usize,
}

/// Either end of a copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// Device memory.
    Device(u64),
    /// Host memory (the client's).
    Host(usize),
    /// Bytes staged from host memory at enqueue (a pageable copy to the
    /// device copies its source before returning).
    Staged(Vec<u8>),
}

/// A copy of `len` bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copy {
    /// Destination.
    pub dst: Place,
    /// Source.
    pub src: Place,
    /// Bytes.
    pub len: usize,
}

/// One unit of device work.
#[derive(Debug, Clone, PartialEq)]
pub enum Work {
    /// A kernel.
    Kernel(Launch),
    /// A memset.
    Memset(Memset),
    /// A copy.
    Copy(Copy),
}

impl Memset {
    /// The bytes it spans (rows times pitch, the last row only its width).
    pub fn span(&self) -> Option<usize> {
        let row = self.width.checked_mul(self.element as usize)?;
        if self.height <= 1 {
            return Some(row);
        }
        self.pitch.checked_mul(self.height - 1)?.checked_add(row)
    }
}
