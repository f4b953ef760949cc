//! The kernels a context loads for itself ([`KernelSet`]): the built-in
//! element-wise kernels ([`crate::builtins`], loaded on their first launch),
//! the conditional nodes' setter kernels ([`crate::conditional_kernels`],
//! loaded when a recording first needs them), and the switch that lets
//! launches use programmatic dependent launch ([`crate::launch`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::builtin_kernels::Builtins;
use crate::conditional_kernels::CondKernels;
use crate::driver::RawCtx;
use crate::error::{Error, Result};
use crate::sync::lock;

/// The kernel part of a context. The PDL switch and the built-ins come
/// first: every built-in launch reads both.
#[repr(C)]
pub(crate) struct KernelSet {
    /// The context's programmatic-dependent-launch switch (see
    /// [`crate::Context::set_pdl`]); on by default.
    pdl_switch: AtomicBool,
    builtins: OnceLock<Builtins>,
    /// The conditional nodes' setter kernels, once a recording needed them.
    setters: Mutex<Option<Arc<CondKernels>>>,
}

impl Default for KernelSet {
    fn default() -> KernelSet {
        KernelSet { pdl_switch: AtomicBool::new(true), builtins: OnceLock::new(), setters: Mutex::new(None) }
    }
}

/// What [`KernelSet::take`] hands the context's teardown: the modules, to
/// unload while the context still exists.
pub(crate) struct Loaded {
    _builtins: Option<Builtins>,
    _setters: Option<Arc<CondKernels>>,
}

impl KernelSet {
    /// The PDL switch (on unless [`crate::Context::set_pdl`] turned it off).
    #[inline]
    pub(crate) fn pdl_switch_on(&self) -> bool {
        self.pdl_switch.load(Ordering::Relaxed)
    }

    /// Where the fields every built-in launch reads end (the context's
    /// layout test).
    #[cfg(test)]
    pub(crate) fn hot_end() -> usize {
        std::mem::offset_of!(KernelSet, builtins) + std::mem::size_of::<OnceLock<Builtins>>()
    }

    /// Turns the PDL switch on or off.
    pub(crate) fn set_pdl_switch(&self, on: bool) {
        self.pdl_switch.store(on, Ordering::Relaxed);
    }

    /// The built-in kernels, loaded into `raw` on first use (their PDL
    /// variant when `pdl_allowed()` says so).
    #[inline]
    pub(crate) fn builtins(&self, raw: RawCtx, pdl_allowed: impl FnOnce() -> bool) -> Result<&Builtins> {
        if let Some(b) = self.builtins.get() {
            return Ok(b);
        }
        // Two threads may race here; the loser's module is simply unloaded.
        let loaded = Builtins::load(raw, pdl_allowed())?;
        let _ = self.builtins.set(loaded);
        self.builtins.get().ok_or_else(|| Error::invalid("built-in kernels failed to register"))
    }

    /// Whether the loaded built-ins are the PDL variant; `None` before they
    /// are loaded.
    pub(crate) fn builtins_use_pdl(&self) -> Option<bool> {
        self.builtins.get().map(|b| b.pdl)
    }

    /// The conditional nodes' setter kernels, loaded into `raw` on first use
    /// (a failure is not kept: the next call tries again).
    pub(crate) fn setters(&self, raw: RawCtx) -> Result<Arc<CondKernels>> {
        let mut cell = lock(&self.setters);
        if let Some(k) = cell.as_ref() {
            return Ok(Arc::clone(k));
        }
        let k = CondKernels::load(raw)?;
        *cell = Some(Arc::clone(&k));
        Ok(k)
    }

    /// Takes every loaded module out (teardown: dropping them unloads them).
    pub(crate) fn take(&mut self) -> Loaded {
        Loaded { _builtins: self.builtins.take(), _setters: lock(&self.setters).take() }
    }
}
