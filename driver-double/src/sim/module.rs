//! Loading modules: PTX checked against the driver's ISA and the device's
//! architecture, externs resolved, each kernel given its model; and
//! unloading them.

use cuda_sys::*;

use crate::kernels::Model;
use crate::objects::module::{Func, Image, Module};
use crate::ptx;
use crate::state::State;

/// The device runtime functions the double's JIT resolves at load.
const DEVICE_RUNTIME: &[&str] = &["cudaGraphSetConditional"];

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
