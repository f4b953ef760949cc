//! Placeholder, replaced by the breakable-graph suite.
use fc_graph_tests::run_gpu_tests;
fn main() {
    run_gpu_tests("gpu_breakable", vec![]);
}
