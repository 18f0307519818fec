//! The one place that needs `unsafe`: marking every inherited descriptor close-on-exec.
#![allow(unsafe_code)]

/// Sets `FD_CLOEXEC` on every descriptor from 3 up, so the program inherits only stdin, stdout
/// and stderr, whatever the process that started toolgate left open.
pub(crate) fn close_inherited_on_exec() -> Result<(), String> {
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC closes nothing now; it only flags descriptors
    // to be closed by the coming execve. No Rust object's descriptor becomes invalid, and the
    // call takes no pointers.
    let rc = unsafe {
        libc::close_range(
            3,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC as libc::c_int,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(format!(
            "could not mark inherited descriptors close-on-exec (close_range needs Linux 5.11): {}",
            std::io::Error::last_os_error()
        ))
    }
}
