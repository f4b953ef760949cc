#!/usr/bin/env bash
# The main job: installs build dependencies, builds libfcgraph.so (release)
# and runs the demo, which prints the driver and devices it finds and, with a
# GPU, captures, replays and checks a graph on each device.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cargo build --release -p fc-graph
echo "built: target/release/libfc_graph.so (soname libfcgraph.so)"
cargo run --release -q -p fc-graph --example demo -- "$@"
