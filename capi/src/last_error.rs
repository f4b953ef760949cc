//! The per-thread error slot behind `fc_last_error()`.
//!
//! The slot is a fixed-size buffer in a thread-local without a destructor,
//! so it is usable at every moment of a thread's life, including in pthread
//! key destructors, C++ `thread_local` destructors and `atexit` handlers
//! that run after Rust's own thread-locals are gone: a failing call there
//! records its message like anywhere else and nothing aborts. Messages
//! longer than the slot are cut at a character boundary and end in "...".
//!
//! The pointer `fc_last_error()` returns points into this buffer: it never
//! dangles while the thread lives, and its text changes when the next
//! failing call on the thread records a new message.

use std::cell::{Cell, RefCell};
use std::os::raw::{c_char, c_int};

/// Bytes of the slot, NUL included.
const CAPACITY: usize = 2048;

thread_local! {
    static CODE: Cell<c_int> = const { Cell::new(0) };
    static MESSAGE: RefCell<[u8; CAPACITY]> = const { RefCell::new([0; CAPACITY]) };
}

/// Stored when the slot cannot be reached (never expected; see the module doc).
static UNAVAILABLE: &[u8] = b"(fc-graph: this thread's error message is unavailable)\0";

/// Records `code` and `message` as this thread's last error.
pub(crate) fn record(code: c_int, message: &str) {
    let _ = CODE.try_with(|c| c.set(code));
    let _ = MESSAGE.try_with(|m| {
        if let Ok(mut buf) = m.try_borrow_mut() {
            write_truncated(&mut buf[..], message);
        }
    });
}

/// Clears this thread's last error (code FC_OK, empty message).
pub(crate) fn clear() {
    record(0, "");
}

/// Copies `message` into `buf` as a NUL-terminated string, cutting it at a
/// character boundary with a trailing "..." when it does not fit. NUL bytes
/// inside the message become spaces.
fn write_truncated(buf: &mut [u8], message: &str) {
    let room = buf.len() - 1;
    let text: &str = if message.len() <= room {
        message
    } else {
        let mut end = room - 3;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        &message[..end]
    };
    let mut n = 0;
    for b in text.bytes() {
        buf[n] = if b == 0 { b' ' } else { b };
        n += 1;
    }
    if text.len() < message.len() {
        buf[n..n + 3].copy_from_slice(b"...");
        n += 3;
    }
    buf[n] = 0;
}

/// This thread's last error code.
pub(crate) fn code() -> c_int {
    CODE.try_with(Cell::get).unwrap_or(0)
}

/// Pointer to this thread's last error message (NUL-terminated).
pub(crate) fn message_ptr() -> *const c_char {
    MESSAGE.try_with(|m| m.as_ptr().cast::<c_char>().cast_const()).unwrap_or(UNAVAILABLE.as_ptr().cast())
}

/// Copies this thread's last message into `dst` (`len` bytes, NUL-terminated
/// when `len > 0`) and returns the message's full length, as snprintf does.
///
/// # Safety
/// A non-null `dst` must be valid for writing `len` bytes.
pub(crate) unsafe fn copy_to(dst: *mut c_char, len: usize) -> usize {
    let copy = |msg: &[u8]| {
        let full = msg.iter().position(|&b| b == 0).unwrap_or(msg.len());
        if !dst.is_null() && len > 0 {
            let n = full.min(len - 1);
            // SAFETY: `dst` holds `len > n` bytes per the caller's contract;
            // `msg` holds at least `n` bytes; the two do not overlap (ours is
            // a thread-local the caller cannot name).
            unsafe {
                std::ptr::copy_nonoverlapping(msg.as_ptr(), dst.cast::<u8>(), n);
                *dst.add(n) = 0;
            }
        }
        full
    };
    MESSAGE
        .try_with(|m| match m.try_borrow() {
            Ok(buf) => copy(&buf[..]),
            Err(_) => copy(UNAVAILABLE),
        })
        .unwrap_or_else(|_| copy(UNAVAILABLE))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn message() -> String {
        // SAFETY: the slot always holds a NUL-terminated string.
        unsafe { CStr::from_ptr(message_ptr()) }.to_string_lossy().into_owned()
    }

    #[test]
    fn records_and_clears() {
        record(3, "cuLaunchKernel failed");
        assert_eq!((code(), message()), (3, "cuLaunchKernel failed".to_string()));
        clear();
        assert_eq!((code(), message()), (0, String::new()));
    }

    #[test]
    fn long_messages_are_cut_at_a_character_boundary() {
        let long = "é".repeat(CAPACITY);
        record(1, &long);
        let m = message();
        assert!(m.len() < CAPACITY && m.ends_with("...") && m.starts_with("éé"), "{}", m.len());
        record(1, "a\0b");
        assert_eq!(message(), "a b");
    }

    #[test]
    fn the_pointer_stays_valid_across_later_failures() {
        record(1, "first");
        let p = message_ptr();
        record(2, "second, longer message");
        // SAFETY: the same thread-local buffer, still alive and NUL-terminated.
        assert_eq!(unsafe { CStr::from_ptr(p) }.to_str().unwrap(), "second, longer message");
    }

    #[test]
    fn copies_like_snprintf() {
        record(1, "hello world");
        let mut buf = [1 as c_char; 6];
        // SAFETY: `buf` holds 6 bytes.
        let n = unsafe { copy_to(buf.as_mut_ptr(), buf.len()) };
        assert_eq!(n, 11);
        // SAFETY: NUL-terminated by copy_to.
        assert_eq!(unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap(), "hello");
        // SAFETY: a null destination only asks for the length.
        assert_eq!(unsafe { copy_to(std::ptr::null_mut(), 0) }, 11);
    }

    /// A failure recorded from a thread-local destructor, after other
    /// thread-locals are gone, neither panics nor aborts.
    #[test]
    fn usable_from_thread_local_destructors() {
        struct Late;
        impl Drop for Late {
            fn drop(&mut self) {
                record(9, "from a destructor");
                assert_eq!(code(), 9);
                assert_eq!(message(), "from a destructor");
            }
        }
        thread_local!(static LATE: Late = const { Late });
        std::thread::spawn(|| LATE.with(|_| ())).join().expect("no panic in the destructor");
    }
}
