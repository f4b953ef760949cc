//! The benchmark's shared code, used by the `fc-bench` binary and by
//! `fcgraph bench`: sample statistics and the JSON row format
//! ([`stats`]), and the per-step comparison of fc-graph against the bare
//! driver calls it wraps ([`steps`]).

pub mod stats;
pub mod steps;
