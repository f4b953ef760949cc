//! Device-side loops (issue 20): one WHILE node against the host loop an
//! engine writes without conditional nodes, `while_loop_32x26`.

use std::time::Instant;

use fc_graph::{CaptureMode, Context, Graph, KernelArg, LaunchConfig, Module, RecordingMode, Result};

use super::rigs::ChainRun;
use super::rows::StepOutput;
use super::timing::{alternate_blocks, emit_alternated};
use crate::stats::us_since;

/// The steps of [`while_rows`], in the order it emits them.
pub(super) const STEPS: &[&str] = &["while_loop_32x26"];

/// A one-thread kernel that counts a u32 flag down (the loop body's own
/// stop condition in `while_rows`).
const COUNTDOWN_PTX: &str = r#"
.version 7.0
.target sm_50
.address_size 64

.visible .entry bench_flag_countdown(
	.param .u64 flag
)
{
	.reg .b32 	%r<3>;
	.reg .b64 	%rd<3>;

	ld.param.u64 	%rd1, [flag];
	cvta.to.global.u64 	%rd2, %rd1;
	ld.global.u32 	%r1, [%rd2];
	sub.u32 	%r2, %r1, 1;
	st.global.u32 	[%rd2], %r2;
	ret;
}
"#;

/// Device-side loops (issue 20): 32 iterations of a body of the rig's 26
/// built-ins (PDL where the rig uses it) and a one-thread kernel that
/// counts a flag down. `while_loop_32x26` fc column: one recording holding
/// the body in a WHILE node (`Context::while_loop`, stopped when the flag
/// the body counts down reaches 0), launch + sync; bare column: the loop
/// an engine writes without conditional nodes, over a recording of the
/// body alone: launch it, copy the flag back and synchronize
/// (`DeviceBuffer::download`: cuMemcpyDtoHAsync + cuStreamSynchronize),
/// decide on the host. The flag is set to 32 before each run, untimed.
/// Both runs must leave the same `x`, bit for bit, and the flag at 0.
/// Measured at K = 26 only (other chain lengths: no rows).
pub(super) fn while_rows(at: ChainRun, out: &mut dyn FnMut(StepOutput)) -> Result<()> {
    let ChainRun { rig, k, iters, .. } = at;
    const TRIPS: u32 = 32;
    if k != 26 {
        return Ok(());
    }
    if !fc_graph::conditional::support().if_while {
        eprintln!("[fc] while_loop_32x26: the driver has no conditional nodes (CUDA 12.3+); skipped");
        return Ok(());
    }
    let module = Module::from_ptx(&rig.chain.ctx, COUNTDOWN_PTX)?;
    let countdown = module.kernel("bench_flag_countdown")?;
    let one = LaunchConfig { grid: (1, 1, 1), block: (1, 1, 1), shared_mem_bytes: 0 };
    let flag = rig.chain.ctx.alloc(4)?;
    let body = |c: &Context| -> Result<()> {
        for i in 0..26 {
            let (op, a, b, o) = rig.chain.node(i, false);
            c.binary(op, a, b, o, rig.chain.n)?;
        }
        countdown.launch_on(c, one, &[KernelArg::Buffer(&flag)])
    };
    let mode = rig.chain.ctx.recording_mode();
    rig.chain.ctx.set_recording_mode(RecordingMode::Build);
    let recorded = (|| -> Result<(Graph, Graph)> {
        let cap = rig.chain.ctx.begin_capture(CaptureMode::ThreadLocal)?;
        rig.chain.ctx.while_loop(&flag, body)?;
        let looped = cap.end()?;
        let cap = rig.chain.ctx.begin_capture(CaptureMode::ThreadLocal)?;
        body(&rig.chain.ctx)?;
        Ok((looped, cap.end()?))
    })();
    rig.chain.ctx.set_recording_mode(mode);
    let (looped, one_trip) = recorded?;
    let device_loop = || -> Result<f64> {
        flag.upload(&[TRIPS])?;
        let t0 = Instant::now();
        looped.launch()?;
        rig.chain.ctx.synchronize()?;
        Ok(us_since(t0, Instant::now()))
    };
    let host_loop = || -> Result<f64> {
        flag.upload(&[TRIPS])?;
        let t0 = Instant::now();
        loop {
            one_trip.launch()?;
            let mut f = [0u32];
            flag.download(&mut f)?;
            if f[0] == 0 {
                break;
            }
        }
        Ok(us_since(t0, Instant::now()))
    };
    // Equal results: both from the same x.
    let mut start = vec![0f32; rig.chain.n];
    rig.chain.x.download(&mut start)?;
    let after = |run: &dyn Fn() -> Result<f64>| -> Result<(Vec<f32>, u32)> {
        rig.chain.x.upload(&start)?;
        run()?;
        let (mut x, mut f) = (vec![0f32; rig.chain.n], [1u32]);
        rig.chain.x.download(&mut x)?;
        flag.download(&mut f)?;
        Ok((x, f[0]))
    };
    let (on_device, on_host) = (after(&device_loop)?, after(&host_loop)?);
    let same = on_device.0.iter().zip(&on_host.0).all(|(a, b)| a.to_bits() == b.to_bits());
    if !same || on_device.1 != 0 || on_host.1 != 0 {
        return Err(fc_graph::Error::invalid(format!(
            "while_loop_32x26: the WHILE node and the host loop differ (same x: {same}, flags {} and {})",
            on_device.1, on_host.1
        )));
    }
    let (mut fc, mut bare) = alternate_blocks(iters, |_| device_loop(), |_| host_loop())?;
    rig.chain.x.upload(&start)?;
    emit_alternated(out, "while_loop_32x26", 26, iters, &mut fc, &mut bare);
    Ok(())
}
