//! The benchmark's shared code, used by the `fc-bench` binary: sample
//! statistics and the JSON row format ([`stats`]), the per-step comparison
//! of fc-graph against the bare driver calls it wraps ([`steps`]) and its
//! table for people ([`steps_table`]).

pub mod stats;
pub mod steps;
pub mod steps_table;
