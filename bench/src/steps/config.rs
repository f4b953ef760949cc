//! What `fc-bench --steps` measures: the device, the buffers' size, the
//! chain lengths and how many samples of each.

/// What to measure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepsConfig {
    /// The device to measure on.
    pub device: usize,
    /// Elements per buffer (f32).
    pub n: usize,
    /// Chain lengths K, each with its number of timed iterations per row.
    pub chains: Vec<(usize, usize)>,
    /// Samples of each single driver call (`ctx_get_current`,
    /// `capture_mode_exchange_pair`).
    pub single_call_samples: usize,
    /// Also probe which hot-path calls work with no context current.
    pub probe_without_context: bool,
}

impl StepsConfig {
    /// `fc-bench --steps`: K = 26 (400 iterations per row), 260 (200) and
    /// 2600 (50), 2000 samples of each single call, and the no-context
    /// probe. (Run 48 took 100 / 50 / 20: its medians of record +
    /// instantiate moved by more than the 5% a goal asks for between rows
    /// that time the same steps, so the rows now take 4x / 4x / 2.5x the
    /// samples.)
    pub fn full(device: usize, n: usize) -> StepsConfig {
        StepsConfig {
            device,
            n,
            chains: vec![(26, 400), (260, 200), (2600, 50)],
            single_call_samples: 2000,
            probe_without_context: true,
        }
    }

    /// About a second: K = 26 only, 40 iterations, 500 single-call samples.
    pub fn quick(device: usize, n: usize) -> StepsConfig {
        StepsConfig { device, n, chains: vec![(26, 40)], single_call_samples: 500, probe_without_context: false }
    }
}
