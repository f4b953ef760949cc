//! The benchmark's shared code, used by the `fc-bench` binary: the
//! workload ([`chain`]), sample statistics and the JSON row format
//! ([`stats`]), loops timed on several threads at once ([`rates`]), the
//! per-step comparison of fc-graph against the bare driver calls it wraps
//! ([`steps`]) and its table for people ([`steps_table`]).

pub mod chain;
pub mod rates;
pub mod stats;
pub mod steps;
pub mod steps_table;
