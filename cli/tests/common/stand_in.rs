//! Builds the stand-in CUDA driver (`cli/tests/stand_in_driver.c`) with the
//! host C compiler: two fake devices whose calls all succeed and do
//! nothing. Included (`#[path]`) by cli/tests/stand_in_driver.rs and
//! bench/tests/steps_stand_in.rs.

use std::path::{Path, PathBuf};

const SOURCE: &str = include_str!("../stand_in_driver.c");

/// Builds the stand-in once per test process; `None` (after a `[SKIP]`
/// line) without a C compiler.
pub fn stand_in() -> Option<PathBuf> {
    static BUILT: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fcgraph-stand-in");
            std::fs::create_dir_all(&dir).ok()?;
            let src = dir.join(format!("stand_in_driver.{}.c", std::process::id()));
            std::fs::write(&src, SOURCE).ok()?;
            let lib = dir.join("libcuda-stand-in.so");
            // Built under a name of its own, then renamed: test processes
            // running at once never load a half-written file.
            let tmp = dir.join(format!("libcuda-stand-in.so.{}.tmp", std::process::id()));
            let triple = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
            let compiler = cc::Build::new()
                .cargo_metadata(false)
                .cargo_warnings(false)
                .target(&triple)
                .host(&triple)
                .opt_level(0)
                .try_get_compiler();
            let mut cmd = match compiler {
                Ok(c) => c.to_command(),
                Err(e) => {
                    println!("[SKIP] stand-in driver tests: no C compiler: {e}");
                    return None;
                }
            };
            let status = cmd.args(["-shared", "-fPIC", "-O0", "-Wall", "-o"]).arg(&tmp).arg(&src).status();
            match status {
                Ok(s) if s.success() => std::fs::rename(&tmp, &lib).ok().map(|()| lib),
                other => {
                    println!("[SKIP] stand-in driver tests: compiling the stand-in failed: {other:?}");
                    None
                }
            }
        })
        .clone()
}
