//! Shared pieces of the integration tests: the GPU test harness (visible
//! skips without a driver or with too few devices), seeded random inputs
//! and small PTX kernels used as "user" device code.

use fc_graph::{Context, Device, DeviceBuffer, Result};
use libtest_mimic::{Arguments, Failed, Trial};

/// A GPU test: a name, the devices it needs, and its body.
pub struct GpuTest {
    pub name: &'static str,
    pub devices: usize,
    pub body: fn() -> Result<(), Failed>,
}

/// Runs `tests` with libtest-mimic. Without a driver, or with fewer devices
/// than a test needs, the test is reported as ignored and a `[SKIP]` line
/// with the reason is printed first, so a skip is never a silent pass.
pub fn run_gpu_tests(suite: &str, tests: Vec<GpuTest>) -> ! {
    run_with(suite, tests, Arguments::from_args())
}

/// [`run_gpu_tests`], one test at a time whatever `--test-threads` says:
/// for tests whose captures refuse other threads' calls (GLOBAL mode), or
/// which synchronise the whole device.
pub fn run_gpu_tests_one_at_a_time(suite: &str, tests: Vec<GpuTest>) -> ! {
    let mut args = Arguments::from_args();
    args.test_threads = Some(1);
    run_with(suite, tests, args)
}

fn run_with(suite: &str, tests: Vec<GpuTest>, args: Arguments) -> ! {
    let devices = match Device::count() {
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    };
    if let Err(reason) = &devices {
        println!("[SKIP] {suite}: all {} tests ignored: {reason}", tests.len());
    }
    let mut trials = Vec::new();
    for t in tests {
        let skip = match &devices {
            Err(_) => true,
            Ok(n) if *n < t.devices => {
                println!("[SKIP] {suite}::{}: needs {} CUDA devices, {n} visible", t.name, t.devices);
                true
            }
            Ok(_) => false,
        };
        trials.push(Trial::test(t.name, t.body).with_ignored_flag(skip));
    }
    libtest_mimic::run(&args, trials).exit()
}

/// The status of a checked driver call (cuda-sys's result layer):
/// `CUDA_SUCCESS`, or the code it failed with.
pub fn status<T>(r: std::result::Result<T, cuda_sys::DriverError>) -> cuda_sys::CUresult {
    r.err().map_or(cuda_sys::CUDA_SUCCESS, |e| e.code)
}

/// Turns any displayable error into a test failure.
pub fn fail(e: impl std::fmt::Display) -> Failed {
    Failed::from(e.to_string())
}

/// Asserts a condition, failing the test with a message.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(libtest_mimic::Failed::from(format!($($msg)+)));
        }
    };
}

/// A small deterministic generator (xorshift) for test inputs.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    /// Uniform in [lo, hi).
    pub fn f32_in(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }
    /// `n` floats in [-4, 4), never all zero.
    pub fn floats(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.f32_in(-4.0, 4.0)).collect()
    }
}

/// The seed test's layer body on `ctx`: `pairs` x (z = x + y; x = z * y)
/// over the first `n` floats.
pub fn chain_n(
    ctx: &Context,
    x: &DeviceBuffer,
    y: &DeviceBuffer,
    z: &DeviceBuffer,
    n: usize,
    pairs: usize,
) -> Result<()> {
    for _ in 0..pairs {
        ctx.add(x, y, z, n)?;
        ctx.mul(z, y, x, n)?;
    }
    Ok(())
}

/// The same chain on the CPU, one IEEE operation per element per step.
pub fn chain_cpu(x: &mut [f32], y: &[f32], pairs: usize) {
    for _ in 0..pairs {
        for i in 0..x.len() {
            let z = x[i] + y[i];
            x[i] = z * y[i];
        }
    }
}

/// Inputs of the chain (`chain_n`, `chain_cpu`) over `n` floats, from
/// `seed`: x in [-4, 4), y from {1, 1, -1, 0.5, 1, 0.75}, so that the chain
/// stays finite and exact comparisons are meaningful.
pub fn chain_inputs(seed: u64, n: usize) -> (Vec<f32>, Vec<f32>) {
    let mut rng = Rng::new(seed);
    let xs: Vec<f32> = (0..n).map(|_| rng.f32_in(-4.0, 4.0)).collect();
    let pick = [1.0f32, 1.0, -1.0, 0.5, 1.0, 0.75];
    let ys: Vec<f32> = (0..n).map(|_| pick[(rng.next_u64() % pick.len() as u64) as usize]).collect();
    (xs, ys)
}

/// Allocates a buffer holding `data`.
/// Runs the test binary again for `test` alone, with `env=value` set (for
/// settings read once per process), and prints its output indented under a
/// `[env=value]` tag. Fails unless that run passed its one test.
pub fn rerun_with_env(test: &str, env: &str, value: &str) -> Result<(), Failed> {
    let exe = std::env::current_exe().map_err(fail)?;
    let out = std::process::Command::new(&exe)
        .args([test, "--exact", "--test-threads=1"])
        .env(env, value)
        .output()
        .map_err(fail)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    print!("{}", stdout.lines().map(|l| format!("  [{env}={value}] {l}\n")).collect::<String>());
    if out.status.success() && stdout.contains("1 passed") {
        return Ok(());
    }
    Err(format!("the {env}={value} run failed ({}): {stdout}{}", out.status, String::from_utf8_lossy(&out.stderr))
        .into())
}

pub fn upload(ctx: &Context, data: &[f32]) -> Result<DeviceBuffer> {
    let b = ctx.alloc(std::mem::size_of_val(data))?;
    b.upload(data)?;
    Ok(b)
}

/// The chain's buffers: `x` and `y` holding `xs` and `ys`, and a scratch
/// `z` of as many floats.
pub fn chain_buffers(ctx: &Context, xs: &[f32], ys: &[f32]) -> Result<(DeviceBuffer, DeviceBuffer, DeviceBuffer)> {
    Ok((upload(ctx, xs)?, upload(ctx, ys)?, ctx.alloc(std::mem::size_of_val(xs))?))
}

/// Downloads `n` floats.
pub fn download(b: &DeviceBuffer, n: usize) -> Result<Vec<f32>> {
    let mut v = vec![f32::NAN; n];
    b.download(&mut v)?;
    Ok(v)
}

/// Compares exactly (each element is one IEEE operation on both sides).
pub fn assert_exact(what: &str, got: &[f32], want: &[f32]) -> Result<(), Failed> {
    if got.len() != want.len() {
        return Err(Failed::from(format!("{what}: length {} vs {}", got.len(), want.len())));
    }
    if let Some(i) = (0..got.len()).find(|&i| got[i].to_bits() != want[i].to_bits()) {
        return Err(Failed::from(format!("{what}: element {i}: got {} want {}", got[i], want[i])));
    }
    Ok(())
}

/// Compares with a relative tolerance.
pub fn assert_close(what: &str, got: &[f32], want: &[f32], tol: f32) -> Result<(), Failed> {
    if got.len() != want.len() {
        return Err(Failed::from(format!("{what}: length {} vs {}", got.len(), want.len())));
    }
    for i in 0..got.len() {
        let (g, w) = (got[i], want[i]);
        if !(g - w).abs().le(&(tol * (1.0 + w.abs()))) {
            return Err(Failed::from(format!("{what}: element {i}: got {g} want {w}")));
        }
    }
    Ok(())
}

/// User PTX for the tests: `relu_f32(x, out, n)`, `scale_f32(x, s, out, n)`
/// (out = x * s) and `rowsum_half_f32` is not needed; kept small.
pub const TEST_PTX: &str = include_str!("test_kernels.ptx");

/// User PTX written for programmatic dependent launch (ISA 7.8, sm_90):
/// `pdl_scale_f32(x, s, out, n)` (out = x * s), which waits with
/// `griddepcontrol.wait` before touching memory.
pub const PDL_TEST_PTX: &str = include_str!("pdl_kernels.ptx");
