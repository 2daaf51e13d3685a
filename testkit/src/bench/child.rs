//! Servers a bench starts end with it: killed by a signal, a bench runs no `Drop`, and
//! a query-api or Redis left behind would take CPU from the next run's measurements.

use std::os::unix::process::CommandExt;
use std::process::Command;

/// Asks the kernel to send the child SIGTERM when the thread that starts it ends. Call
/// it from the main thread (whose end is the bench's), as every bench here does.
pub fn ends_with_this_process(command: &mut Command) -> &mut Command {
    // SAFETY: the closure runs in the forked child before exec and only calls prctl,
    // which is async-signal-safe; the setting survives exec (it is not a set-uid binary).
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}
