//! How the double runs kernels on the host. fc-graph's built-ins
//! (`fc_add_f32`, `fc_mul_f32`), the conditional nodes' setters
//! (`fc_cond_set`, `fc_cond_load`, `fc_cond_countdown`) and the C suite's
//! user kernels (`scale_f32`, `axpy_f32`) have native models, chosen by
//! name and parameter signature (fast: the engine's seed test runs
//! thousands of them); their unit tests check them against the PTX
//! interpreter on the library's own PTX. Every other kernel runs through
//! the interpreter ([`crate::interp`]). Both do what the PTX does, thread
//! by thread: element kernels index `blockIdx.x * blockDim.x + threadIdx.x`
//! and stop at `n`, so a grid smaller than `n` leaves the rest untouched,
//! as on a GPU; both reach memory and the graph's conditions through a
//! [`Run`] ([`crate::kernel_run`]).
//!
//! A kernel the interpreter cannot run (barriers, shared memory, other
//! calls) has no model: its launch is reported as a misuse.

use crate::kernel_run::{Fault, Run};
use crate::ptx::{Entry, ParamType};

/// How a kernel runs.
#[derive(Debug, Clone)]
pub enum Model {
    /// A native model.
    Native(Native),
    /// The interpreter.
    Interpreted(std::sync::Arc<crate::interp::Program>),
}

impl Model {
    /// The model of a PTX entry: native when its name and signature are
    /// known, else interpreted; why there is none otherwise.
    pub fn for_entry(e: &Entry) -> Result<Model, String> {
        if let Some(n) = Native::for_entry(e) {
            return Ok(Model::Native(n));
        }
        crate::interp::compile(e).map(|p| Model::Interpreted(std::sync::Arc::new(p)))
    }
}

/// A kernel with a native model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Native {
    /// `out[i] = a[i] + b[i]` (f32).
    Add,
    /// `out[i] = a[i] * b[i]` (f32).
    Mul,
    /// `x[i] = x[i] * s`.
    Scale,
    /// `out[i] = x[i] * s` (the Rust suites' `scale_f32`, `pdl_scale_f32`).
    ScaleTo,
    /// `out[i] = max(x[i], 0)`.
    Relu,
    /// `y[i] = y[i] + a * x[i]` (two roundings).
    Axpy,
    /// `condition = *src`.
    CondSet,
    /// `*counter = *n; condition = *n != 0`.
    CondLoad,
    /// `if *counter: --*counter; condition = *counter != 0`.
    CondCountdown,
}

use ParamType::{F32, U32, U64};

impl Native {
    /// The native model of a PTX entry, if its name and signature are known.
    pub fn for_entry(e: &Entry) -> Option<Native> {
        let sig: Vec<ParamType> = e.params.iter().map(|p| p.ty).collect();
        let (model, want): (Native, &[ParamType]) = match e.name.as_str() {
            "fc_add_f32" => (Native::Add, &[U64, U64, U64, U32]),
            "fc_mul_f32" => (Native::Mul, &[U64, U64, U64, U32]),
            "scale_f32" if e.params.len() == 3 => (Native::Scale, &[U64, F32, U32]),
            "scale_f32" | "pdl_scale_f32" => (Native::ScaleTo, &[U64, F32, U64, U32]),
            "relu_f32" => (Native::Relu, &[U64, U64, U32]),
            "axpy_f32" => (Native::Axpy, &[U64, U64, F32, U32]),
            "fc_cond_set" => (Native::CondSet, &[U64, U64]),
            "fc_cond_load" => (Native::CondLoad, &[U64, U64, U64]),
            "fc_cond_countdown" => (Native::CondCountdown, &[U64, U64]),
            _ => return None,
        };
        (sig == want).then_some(model)
    }
}

fn word<const N: usize>(params: &[u8], offset: usize) -> [u8; N] {
    let mut w = [0u8; N];
    if let Some(s) = params.get(offset..offset + N) {
        w.copy_from_slice(s);
    }
    w
}

impl Run<'_> {
    /// Runs `model` over `threads` threads (grid x block, x only: the
    /// models index in x) with the parameter buffer `params` laid out as
    /// `entry` declares.
    pub fn kernel(&mut self, model: Native, entry: &Entry, params: &[u8], threads: u64) -> Result<(), Fault> {
        let at = |i: usize| entry.params.get(i).map(|p| p.offset).unwrap_or(usize::MAX);
        let u64_at = |i: usize| u64::from_le_bytes(word::<8>(params, at(i)));
        let u32_at = |i: usize| u32::from_le_bytes(word::<4>(params, at(i)));
        let f32_at = |i: usize| f32::from_le_bytes(word::<4>(params, at(i)));
        match model {
            Native::Add | Native::Mul => {
                let (a, b, out, n) = (u64_at(0), u64_at(1), u64_at(2), u32_at(3));
                let n = u64::from(n).min(threads) as usize;
                if n == 0 {
                    return Ok(());
                }
                let (pa, pb, po) = (self.ptr(a, 4 * n)?, self.ptr(b, 4 * n)?, self.ptr(out, 4 * n)?);
                for i in 0..n {
                    // SAFETY: `check` proved 4n bytes at each pointer; element
                    // by element, reads before the write (they may alias).
                    unsafe {
                        let x = pa.cast::<f32>().add(i).read_unaligned();
                        let y = pb.cast::<f32>().add(i).read_unaligned();
                        let r = if model == Native::Add { x + y } else { x * y };
                        po.cast::<f32>().add(i).write_unaligned(r);
                    }
                }
            }
            Native::Scale => {
                let (x, s, n) = (u64_at(0), f32_at(1), u32_at(2));
                let n = u64::from(n).min(threads) as usize;
                if n == 0 {
                    return Ok(());
                }
                let px = self.ptr(x, 4 * n)?;
                for i in 0..n {
                    // SAFETY: `check` proved 4n bytes at `px`.
                    unsafe {
                        let p = px.cast::<f32>().add(i);
                        p.write_unaligned(p.read_unaligned() * s);
                    }
                }
            }
            Native::ScaleTo | Native::Relu => {
                let (x, s, out, n) = if model == Native::Relu {
                    (u64_at(0), 0.0, u64_at(1), u32_at(2))
                } else {
                    (u64_at(0), f32_at(1), u64_at(2), u32_at(3))
                };
                let n = u64::from(n).min(threads) as usize;
                if n == 0 {
                    return Ok(());
                }
                let (px, po) = (self.ptr(x, 4 * n)?, self.ptr(out, 4 * n)?);
                for i in 0..n {
                    // SAFETY: `check` proved 4n bytes at each pointer; read
                    // before the write (they may alias).
                    unsafe {
                        let v = px.cast::<f32>().add(i).read_unaligned();
                        let r = if model == Native::Relu { v.max(0.0) } else { v * s };
                        po.cast::<f32>().add(i).write_unaligned(r);
                    }
                }
            }
            Native::Axpy => {
                let (y, x, a, n) = (u64_at(0), u64_at(1), f32_at(2), u32_at(3));
                let n = u64::from(n).min(threads) as usize;
                if n == 0 {
                    return Ok(());
                }
                let (py, px) = (self.ptr(y, 4 * n)?, self.ptr(x, 4 * n)?);
                for i in 0..n {
                    // SAFETY: `check` proved 4n bytes at each pointer.
                    unsafe {
                        let yi = py.cast::<f32>().add(i);
                        let ax = a * px.cast::<f32>().add(i).read_unaligned();
                        yi.write_unaligned(yi.read_unaligned() + ax);
                    }
                }
            }
            Native::CondSet | Native::CondLoad | Native::CondCountdown => {
                // One thread each in fc-graph's launches; more threads run
                // the body again, as on a GPU.
                for _ in 0..threads.min(1 << 20) {
                    let handle = u64_at(0);
                    let value = match model {
                        Native::CondSet => self.read_u32(u64_at(1))?,
                        Native::CondLoad => {
                            let n = self.read_u32(u64_at(2))?;
                            self.write_u32(u64_at(1), n)?;
                            u32::from(n != 0)
                        }
                        _ => {
                            let c = self.read_u32(u64_at(1))?;
                            let c = c - u32::from(c != 0);
                            self.write_u32(u64_at(1), c)?;
                            u32::from(c != 0)
                        }
                    };
                    self.set_condition(handle, value)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::memory::Memory;
    use crate::ptx;

    const USER_PTX: &str = "\
.version 7.0\n.target sm_35\n.address_size 64\n\
.visible .entry scale_f32(.param .u64 x, .param .f32 s, .param .u32 n)\n{\n\
.reg .pred %p<2>; .reg .b32 %r<6>; .reg .f32 %f<4>; .reg .b64 %rd<6>;\n\
ld.param.u64 %rd1, [x]; ld.param.f32 %f1, [s]; ld.param.u32 %r1, [n];\n\
mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mov.u32 %r4, %tid.x; mad.lo.s32 %r5, %r2, %r3, %r4;\n\
setp.ge.u32 %p1, %r5, %r1; @%p1 bra $L__scale_done;\n\
cvta.to.global.u64 %rd2, %rd1; mul.wide.u32 %rd3, %r5, 4; add.s64 %rd4, %rd2, %rd3;\n\
ld.global.f32 %f2, [%rd4]; mul.rn.f32 %f3, %f2, %f1; st.global.f32 [%rd4], %f3;\n\
$L__scale_done:\nret;\n}\n";

    fn entries() -> Vec<Entry> {
        let mut out = Vec::new();
        for src in [
            include_str!("../../fc-graph/kernels/elementwise.ptx"),
            include_str!("../../fc-graph/kernels/elementwise_sm90.ptx"),
            include_str!("../../fc-graph/kernels/conditional.ptx"),
            USER_PTX,
            include_str!("../../tests/src/test_kernels.ptx"),
            include_str!("../../tests/src/pdl_kernels.ptx"),
        ] {
            out.extend(ptx::parse(src).expect("parses").entries);
        }
        out
    }

    fn params(e: &Entry, words: &[u64]) -> Vec<u8> {
        let mut p = vec![0u8; e.param_bytes()];
        for (prm, w) in e.params.iter().zip(words) {
            p[prm.offset..prm.offset + prm.size].copy_from_slice(&w.to_le_bytes()[..prm.size]);
        }
        p
    }

    /// Every native model does what the interpreter does with the
    /// library's own PTX (and the C suite's), bit for bit, with a grid
    /// that covers part of `n` only.
    #[test]
    fn native_models_match_the_ptx() {
        let mut checked = Vec::new();
        for e in entries() {
            let Some(native) = Native::for_entry(&e) else { continue };
            let program = crate::interp::compile(&e).unwrap_or_else(|err| panic!("{}: {err}", e.name));
            let run_both = |words: &dyn Fn(&[u64]) -> Vec<u64>, setup: &dyn Fn(&mut Memory) -> Vec<u64>| {
                let mut results = Vec::new();
                for interpreted in [false, true] {
                    let mut mem = Memory::default();
                    let bufs = setup(&mut mem);
                    let w = words(&bufs);
                    let p = params(&e, &w);
                    let handle = 0xC0DE;
                    let mut conds = HashMap::from([(handle, 7u32)]);
                    let mut run =
                        Run { memory: &mem, device: 0, conditions: Some(&mut conds), last: Default::default() };
                    let (grid, block) = ([3u32, 1, 1], [64u32, 1, 1]);
                    let r = if interpreted {
                        program.run(&mut run, &p, grid, block)
                    } else {
                        run.kernel(native, &e, &p, u64::from(grid[0] * block[0]))
                    };
                    assert_eq!(r, Ok(()), "{} interpreted={interpreted}", e.name);
                    let mut bytes = Vec::new();
                    for &b in &bufs {
                        let (_, a) = mem.find(b).expect("allocated");
                        let ptr = mem.check(b, a.size, None).expect("mapped");
                        // SAFETY: `check` proved `a.size` bytes at `ptr`.
                        bytes.extend_from_slice(unsafe { std::slice::from_raw_parts(ptr, a.size) });
                    }
                    results.push((bytes, conds[&handle]));
                }
                assert_eq!(results[0], results[1], "{}: native and interpreted differ", e.name);
            };
            let floats = |mem: &mut Memory, k: usize| -> Vec<u64> {
                (0..k)
                    .map(|j| {
                        let p = mem.alloc(4 * 256, 0, 1, 1 << 30).expect("alloc");
                        for i in 0..256u64 {
                            let v = (i as f32) * 0.37 - (j as f32) * 11.5;
                            let at = mem.check(p + 4 * i, 4, Some(0)).expect("mapped");
                            // SAFETY: `check` proved 4 bytes at `at`.
                            unsafe { at.cast::<f32>().write_unaligned(v) };
                        }
                        p
                    })
                    .collect()
            };
            match native {
                Native::Add | Native::Mul => run_both(&|b| vec![b[0], b[1], b[2], 250], &|m| floats(m, 3)),
                Native::Scale => run_both(&|b| vec![b[0], u64::from(1.75f32.to_bits()), 250], &|m| floats(m, 1)),
                Native::ScaleTo => {
                    run_both(&|b| vec![b[0], u64::from(1.75f32.to_bits()), b[1], 250], &|m| floats(m, 2))
                }
                Native::Relu => run_both(&|b| vec![b[0], b[1], 250], &|m| floats(m, 2)),
                Native::Axpy => run_both(&|b| vec![b[0], b[1], u64::from((-0.5f32).to_bits()), 250], &|m| floats(m, 2)),
                Native::CondSet | Native::CondCountdown => {
                    run_both(&|b| vec![0xC0DE, b[0]], &|m| floats(m, 1));
                }
                Native::CondLoad => run_both(&|b| vec![0xC0DE, b[0], b[1]], &|m| floats(m, 2)),
            }
            checked.push(e.name.clone());
        }
        for want in [
            "fc_add_f32",
            "fc_mul_f32",
            "fc_cond_set",
            "fc_cond_load",
            "fc_cond_countdown",
            "scale_f32",
            "relu_f32",
            "pdl_scale_f32",
        ] {
            assert!(checked.iter().any(|c| c == want), "{want} not checked: {checked:?}");
        }
    }
}
