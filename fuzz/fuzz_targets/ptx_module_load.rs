//! PTX text from the input through fc_module_load_ptx's checks and the
//! driver's JIT (the double's PTX checks), then every `.entry` name it
//! declares (and a name from the input) through fc_module_get_kernel and
//! fc_kernel_param_count, on one context of the driver double.
//!
//! A crash: a panic, a sanitizer report, an undocumented status, NULL
//! without an error, a handle left alive, a driver module left loaded, a
//! misuse report of the double.
#![no_main]
#![allow(unused_unsafe)]

use std::ffi::CString;
use std::sync::OnceLock;

use fc_graph_fuzz::*;
use fcgraph::*;
use libfuzzer_sys::fuzz_target;

/// The context every input loads into (a handle value, kept for the process).
fn context() -> *mut fc_cuda_ctx {
    static C: OnceLock<usize> = OnceLock::new();
    *C.get_or_init(|| {
        double();
        let c = fcgraph::fc_cuda_init_device(0);
        assert!(!c.is_null(), "no context on the double: {}", last_message());
        c as usize
    }) as *mut fc_cuda_ctx
}

/// The names after `.entry` in `text`.
fn entries(text: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.windows(6).position(|w| w == b".entry") {
        rest = &rest[i + 6..];
        let name: Vec<u8> = rest
            .iter()
            .skip_while(|c| c.is_ascii_whitespace())
            .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_' || **c == b'$')
            .copied()
            .collect();
        if !name.is_empty() && out.len() < 16 {
            out.push(name);
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let c = context();
    let d = double();
    let modules_before = d.live().into_iter().find(|(k, _)| *k == "modules").map(|(_, n)| n);
    let (mut handles_before, mut handles_after) = (0usize, 0usize);
    // SAFETY: valid out-pointer.
    check("fc_live_objects", unsafe { fc_live_objects(&mut handles_before, std::ptr::null_mut()) });

    // The input up to its first NUL is the text; what follows is a name.
    let (text, tail) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let ptx = CString::new(text).expect("no NUL before the first NUL");
    // SAFETY: a NUL-terminated string and a live context.
    let m = check_ptr("fc_module_load_ptx", unsafe { fc_module_load_ptx(c, ptx.as_ptr()) });
    if !m.is_null() {
        let mut names = entries(text);
        names.push(tail.iter().copied().take_while(|&b| b != 0).collect());
        for name in names {
            let name = CString::new(name).expect("no NUL in a name");
            // SAFETY: a live module and a NUL-terminated name.
            let k = check_ptr("fc_module_get_kernel", unsafe { fc_module_get_kernel(m, name.as_ptr()) });
            if !k.is_null() {
                let n = fc_kernel_param_count(k);
                assert!(n >= 0, "fc_kernel_param_count of a live kernel: {n}");
                fc_kernel_free(k);
            }
        }
        fc_module_free(m);
    }
    // SAFETY: valid out-pointer.
    check("fc_live_objects", unsafe { fc_live_objects(&mut handles_after, std::ptr::null_mut()) });
    assert_eq!(handles_after, handles_before, "handles left alive");
    let modules_after = d.live().into_iter().find(|(k, _)| *k == "modules").map(|(_, n)| n);
    assert_eq!(modules_after, modules_before, "driver modules left loaded");
    d.assert_no_misuse();
});
