//! Modules and their functions, and the images they load from: PTX text,
//! or the double's own "cubin" that its linker makes (its encoding here).

use cuda_sys::*;

use crate::kernels::Model;
use crate::ptx::Entry;

/// The head of the images the double's linker makes.
pub const CUBIN_MAGIC: &[u8] = b"FC-DOUBLE-CUBIN\n";

/// A loaded module.
#[derive(Debug)]
pub struct Module {
    /// The context that owns it (a green context's modules are its primary
    /// context's).
    pub ctx: u64,
    /// Its functions, by name.
    pub funcs: Vec<(String, u64)>,
}

/// A module's function.
#[derive(Debug, Clone)]
pub struct Func {
    /// Its module.
    pub module: u64,
    /// Its owning context.
    pub ctx: u64,
    /// The kernel as the PTX declares it.
    pub entry: Entry,
    /// How it runs on the host, or why it cannot.
    pub model: Result<Model, String>,
    /// Its PTX ISA version.
    pub isa: i32,
}

/// A module image, decoded: PTX texts, and whether the device runtime was
/// linked in.
pub struct Image {
    /// The PTX texts.
    pub ptx: Vec<String>,
    /// Whether the device runtime library was linked in.
    pub device_runtime: bool,
}

/// Encodes a linked image: the magic, the whole image's length (u64, little
/// endian), the device-runtime flag, then each text with its length.
pub fn encode_cubin(ptx: &[String], device_runtime: bool) -> Vec<u8> {
    let mut body = vec![u8::from(device_runtime)];
    for p in ptx {
        body.extend_from_slice(&(p.len() as u64).to_le_bytes());
        body.extend_from_slice(p.as_bytes());
    }
    let mut out = CUBIN_MAGIC.to_vec();
    out.extend_from_slice(&((CUBIN_MAGIC.len() + 8 + body.len()) as u64).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

fn decode_cubin(b: &[u8]) -> Option<Image> {
    let rest = b.strip_prefix(CUBIN_MAGIC)?.get(8..)?;
    let (&flag, mut rest) = rest.split_first()?;
    let mut ptx = Vec::new();
    while !rest.is_empty() {
        let len = u64::from_le_bytes(rest.get(..8)?.try_into().ok()?) as usize;
        let text = rest.get(8..8usize.checked_add(len)?)?;
        ptx.push(String::from_utf8(text.to_vec()).ok()?);
        rest = &rest[8 + len..];
    }
    Some(Image { ptx, device_runtime: flag == 1 })
}

/// The bytes of an image argument: NUL-terminated PTX text, or a cubin of
/// the double's linker (its length is in its encoding).
///
/// # Safety
/// `image` points to a NUL-terminated text or to an image [`encode_cubin`]
/// made, as the driver API requires of `cuModuleLoadDataEx`'s argument.
pub unsafe fn read_image(image: *const u8) -> Result<Image, CUresult> {
    if image.is_null() {
        return Err(CUDA_ERROR_INVALID_VALUE);
    }
    let magic = CUBIN_MAGIC.len();
    // SAFETY: every image is at least as long as its first NUL or the
    // magic: read byte by byte, stopping at a NUL.
    let head: Vec<u8> = (0..magic).map(|i| unsafe { *image.add(i) }).take_while(|&b| b != 0).collect();
    if head == CUBIN_MAGIC {
        // SAFETY: an encoded cubin: the magic is followed by its length.
        let len = unsafe { std::ptr::read_unaligned(image.add(magic).cast::<u64>()) };
        if len > 256 << 20 {
            return Err(CUDA_ERROR_INVALID_IMAGE);
        }
        // SAFETY: the image holds `len` bytes, by its own encoding.
        let bytes = unsafe { std::slice::from_raw_parts(image, len as usize) };
        return decode_cubin(bytes).ok_or(CUDA_ERROR_INVALID_IMAGE);
    }
    if head.first() == Some(&0x7F) || head.starts_with(&[0x50, 0xED, 0x55, 0xBA]) {
        // ELF cubins and fatbinaries: machine code the double cannot run.
        return Err(CUDA_ERROR_NO_BINARY_FOR_GPU);
    }
    // SAFETY: a NUL-terminated text (the caller's promise).
    let text = unsafe { std::ffi::CStr::from_ptr(image.cast()) };
    let text = text.to_str().map_err(|_| CUDA_ERROR_INVALID_IMAGE)?;
    Ok(Image { ptx: vec![text.to_string()], device_runtime: false })
}
