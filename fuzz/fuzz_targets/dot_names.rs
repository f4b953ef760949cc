//! DOT output to file names from the input: fc_graph_debug_dot of a
//! recorded graph of two segments (and of an empty one) to a path inside
//! a scratch folder, the name taken byte for byte (any byte but NUL and
//! '/': non-UTF-8, very long, ".", "..", names of the library's own piece
//! files).
//!
//! A crash: a panic, a sanitizer report, an undocumented status, a
//! refusal of a name the file system takes, a success without the graph's
//! DOT at the path, a file written anywhere else
//! in the folder (a piece file left behind), a misuse report of the double.
#![no_main]

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::OnceLock;

use fc_graph_fuzz::*;
use fcgraph::*;
use libfuzzer_sys::fuzz_target;

unsafe extern "C" fn nothing(_c: *mut fc_cuda_ctx, _live: *mut std::ffi::c_void, _user: *mut std::ffi::c_void) -> i32 {
    0
}

struct Fixture {
    graphs: [usize; 2],
    dir: PathBuf,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        double();
        let c = fcgraph::fc_cuda_init_device(0);
        assert!(!c.is_null(), "no context on the double: {}", last_message());
        let x = fcgraph::fc_buffer_alloc_ctx(c, 1024);
        assert!(!x.is_null());
        let rec = |brk: bool| {
            assert_eq!(fcgraph::fc_graph_begin_ctx(c), 0, "{}", last_message());
            if brk {
                assert_eq!(fcgraph::fc_buffer_fill_ctx(c, x, 0, 1024, 1), 0);
                assert_eq!(fcgraph::fc_graph_break_ctx(c, Some(nothing), std::ptr::null_mut()), 0);
                assert_eq!(fcgraph::fc_add_ctx(c, x, x, x, 256), 0);
            }
            let g = fcgraph::fc_graph_end_ctx(c);
            assert!(!g.is_null(), "{}", last_message());
            g as usize
        };
        let graphs = [rec(true), rec(false)];
        let dir = std::env::temp_dir().join(format!("fc-fuzz-dot-names-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch folder");
        Fixture { graphs, dir }
    })
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let (which, name) = data.split_first().map(|(w, n)| (*w as usize % 2, n)).unwrap_or((0, &[][..]));
    let name: Vec<u8> = name.iter().map(|&b| if b == b'/' { b'_' } else { b }).take_while(|&b| b != 0).collect();
    let path = f.dir.join(std::ffi::OsStr::from_bytes(&name));
    let c_path = CString::new(path.as_os_str().as_bytes()).expect("no NUL");
    let g = f.graphs[which] as *const fc_graph;
    // SAFETY: a live graph and a NUL-terminated path.
    let rc = check("fc_graph_debug_dot", unsafe { fc_graph_debug_dot(g, c_path.as_ptr()) });
    let written: Vec<PathBuf> =
        std::fs::read_dir(&f.dir).expect("the scratch folder").flatten().map(|e| e.path()).collect();
    // A name the file system takes (1 to 255 bytes, not "." or "..") is
    // written, whatever its bytes and length.
    let writable = !name.is_empty() && name.len() <= 255 && name != b"." && name != b"..";
    assert!(!writable || rc == 0, "fc_graph_debug_dot refused {path:?} ({} bytes): {}", name.len(), last_message());
    if rc == 0 {
        let text = std::fs::read(&path).unwrap_or_else(|e| panic!("success without a file at {path:?}: {e}"));
        // Two segments with work: two digraphs; the empty graph: none.
        let digraphs = text.windows(7).filter(|w| *w == b"digraph").count();
        assert!(
            text.starts_with(b"// fc-graph: ") && digraphs == [2, 0][which],
            "not the graph's DOT: {:?}",
            String::from_utf8_lossy(&text[..text.len().min(200)])
        );
    }
    let stray: Vec<&PathBuf> = written.iter().filter(|p| **p != path).collect();
    assert!(stray.is_empty(), "files left beside {path:?}: {stray:?}");
    for p in written {
        let _ = std::fs::remove_file(p);
    }
    double().assert_no_misuse();
});
