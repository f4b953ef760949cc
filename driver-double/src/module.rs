//! Modules and their functions: PTX loaded (checked against the driver's
//! ISA and the device's architecture), or the double's own "cubin" that
//! its linker makes.

use cuda_sys::*;

use crate::kernels::Model;
use crate::ptx::{self, Entry};
use crate::state::{State, R};

/// The head of the images the double's linker makes.
pub const CUBIN_MAGIC: &[u8] = b"FC-DOUBLE-CUBIN\n";

/// The device runtime functions the double's JIT resolves at load.
const DEVICE_RUNTIME: &[&str] = &["cudaGraphSetConditional"];

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
pub unsafe fn read_image(image: *const u8) -> R<Image> {
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

impl State {
    /// Checks an image against the driver and the device of `ctx`, and
    /// loads it into `ctx`: the module's handle, or the status with the
    /// JIT's message.
    pub fn load_module(&mut self, ctx: u64, image: Image) -> Result<u64, (CUresult, String)> {
        let device_cc = self.cfg.cc.0 * 10 + self.cfg.cc.1;
        let max_isa = self.cfg.max_ptx_isa();
        let mut entries = Vec::new();
        for text in &image.ptx {
            let p = ptx::parse(text).map_err(|e| (CUDA_ERROR_INVALID_PTX, format!("ptxas fatal: {e}")))?;
            if p.isa > max_isa {
                return Err((
                    CUDA_ERROR_UNSUPPORTED_PTX_VERSION,
                    format!(
                        "PTX ISA {}.{} is newer than this driver ({}) compiles (at most {}.{})",
                        p.isa / 10,
                        p.isa % 10,
                        self.cfg.version,
                        max_isa / 10,
                        max_isa % 10
                    ),
                ));
            }
            if p.target > device_cc {
                return Err((
                    CUDA_ERROR_NO_BINARY_FOR_GPU,
                    format!(
                        "PTX for sm_{} cannot run on a device of compute capability {}.{}",
                        p.target,
                        device_cc / 10,
                        device_cc % 10
                    ),
                ));
            }
            for e in &p.externs {
                let resolvable =
                    DEVICE_RUNTIME.contains(&e.as_str()) && (image.device_runtime || self.cfg.version >= 12030);
                if !resolvable {
                    return Err((CUDA_ERROR_INVALID_PTX, format!("ptxas fatal: unresolved extern function '{e}'")));
                }
            }
            entries.extend(p.entries.into_iter().map(|e| (e, p.isa)));
        }
        let owner = self.owner(ctx);
        let serial = self.serial();
        let module = self.modules.insert(serial, Module { ctx: owner, funcs: Vec::new() });
        let mut funcs = Vec::new();
        for (entry, isa) in entries {
            let model = Model::for_entry(&entry);
            let name = entry.name.clone();
            let serial = self.serial();
            let f = self.funcs.insert(serial, Func { module, ctx: owner, entry, model, isa });
            funcs.push((name, f));
        }
        if let Ok(m) = self.modules.get_mut(module) {
            m.funcs = funcs;
        }
        Ok(module)
    }

    /// Unloads a module (its functions become invalid).
    pub fn unload_module(&mut self, module: u64) {
        if let Ok(m) = self.modules.remove(module) {
            for (_, f) in m.funcs {
                let _ = self.funcs.remove(f);
            }
        }
    }
}
