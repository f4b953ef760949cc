//! The benchmark's workload: three buffers of `n` f32 on one context and
//! the chain of K element-wise built-ins over them, `z = x + y; x = z * y;
//! ...` (the workload of `bench/raw/raw_bench.c` and `bench/torch_bench.py`
//! too). `fc-bench`'s rows, its `--isolated` rows and the library side of
//! `--steps` all run it.

use fc_graph::{BinaryOp, CaptureMode, Context, DeviceBuffer, Graph, Result, UpdateReport};

/// Three buffers of `n` f32 on one context; the chain is
/// `z = x + y; x = z * y; ...` (K kernels).
pub struct Chain {
    /// The context the buffers and the kernels are on.
    pub ctx: Context,
    /// The chain's input and (after each mul) output.
    pub x: DeviceBuffer,
    /// The other operand of every kernel.
    pub y: DeviceBuffer,
    /// The output of each add.
    pub z: DeviceBuffer,
    /// Elements per buffer.
    pub n: usize,
}

impl Chain {
    /// The three buffers on `ctx`, their contents undefined.
    pub fn alloc(ctx: Context, n: usize) -> Result<Chain> {
        let bytes = n * std::mem::size_of::<f32>();
        let x = ctx.alloc(bytes)?;
        let y = ctx.alloc(bytes)?;
        let z = ctx.alloc(bytes)?;
        Ok(Chain { ctx, x, y, z, n })
    }

    /// The three buffers on `ctx`, [`Chain::reset`].
    pub fn new(ctx: Context, n: usize) -> Result<Chain> {
        let c = Chain::alloc(ctx, n)?;
        c.reset()?;
        Ok(c)
    }

    /// Enqueues the K kernels on the context's stream (no synchronization).
    #[inline]
    pub fn enqueue(&self, k: usize) -> Result<()> {
        for i in 0..k {
            if i & 1 == 0 {
                self.ctx.add(&self.x, &self.y, &self.z, self.n)?;
            } else {
                self.ctx.mul(&self.z, &self.y, &self.x, self.n)?;
            }
        }
        Ok(())
    }

    /// Begin capture, K enqueues, end capture + instantiate.
    #[inline]
    pub fn capture(&self, k: usize) -> Result<Graph<()>> {
        let cap = self.ctx.begin_capture(CaptureMode::ThreadLocal)?;
        self.enqueue(k)?;
        cap.end()
    }

    /// Re-captures the K kernels into `g` (updated in place where the
    /// driver can).
    #[inline]
    pub fn recapture(&self, g: &mut Graph<()>, k: usize) -> Result<UpdateReport> {
        let cap = self.ctx.begin_capture(CaptureMode::ThreadLocal)?;
        self.enqueue(k)?;
        cap.end_update(g)
    }

    /// Node `i`'s operation and operands in variant `swap` (the commuted
    /// operands: other parameters, the same results).
    pub fn node(&self, i: usize, swap: bool) -> (BinaryOp, &DeviceBuffer, &DeviceBuffer, &DeviceBuffer) {
        match (i % 2 == 0, swap) {
            (true, false) => (BinaryOp::Add, &self.x, &self.y, &self.z),
            (true, true) => (BinaryOp::Add, &self.y, &self.x, &self.z),
            (false, false) => (BinaryOp::Mul, &self.z, &self.y, &self.x),
            (false, true) => (BinaryOp::Mul, &self.y, &self.z, &self.x),
        }
    }

    /// Re-records the K-kernel chain into `g` (node `i` in variant
    /// `swap(i)`, see [`Chain::node`]) through the library's recording
    /// API: what an engine does.
    pub fn rerecord(&self, g: &mut Graph<()>, k: usize, swap: impl Fn(usize) -> bool) -> Result<UpdateReport> {
        let cap = self.ctx.begin_capture(CaptureMode::ThreadLocal)?;
        for i in 0..k {
            let (op, a, b, o) = self.node(i, swap(i));
            self.ctx.binary(op, a, b, o, self.n)?;
        }
        cap.end_update(g)
    }

    /// x = 0, y = 1, z = 0.
    pub fn reset(&self) -> Result<()> {
        self.ctx.synchronize()?;
        self.x.upload(&vec![0.0f32; self.n])?;
        self.y.upload(&vec![1.0f32; self.n])?;
        self.z.upload(&vec![0.0f32; self.n])?;
        Ok(())
    }

    /// Waits for the context's stream, then the first element of x that is
    /// not `want`: (index, value), `None` when x == `want` everywhere.
    /// After one chain of K kernels from [`Chain::reset`], x == K/2.
    pub fn x_mismatch(&self, want: f32) -> Result<Option<(usize, f32)>> {
        self.ctx.synchronize()?;
        let mut h = vec![0.0f32; self.n];
        self.x.download(&mut h)?;
        Ok(h.iter().position(|&v| v != want).map(|i| (i, h[i])))
    }

    /// The breaks' kernel of the breakable-replay rows, `x = x + y` (x += 1
    /// after [`Chain::reset`]), enqueued on `ctx`'s stream.
    #[inline]
    pub fn break_kernel(&self, ctx: &Context) -> Result<()> {
        ctx.add(&self.x, &self.y, &self.x, self.n)
    }
}
