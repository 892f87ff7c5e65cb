//! `condense-media`: the one program of condense that links FFmpeg. A node starts it for
//! every piece of media work (transcode, helper, media), so a decoder's crash ends a child
//! and the node process never maps FFmpeg's libraries; `condense` hands its media
//! subcommands (probe, vmaf, crf-search, version) over to it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::process::ExitCode;

use clap::Parser;
use condense::config::{Cli, Command};
use condense_media::cli;

/// The system allocator, except that an allocation it refuses ends the process at once,
/// with std's own words ("memory allocation of N bytes failed", which the node reads as
/// out of memory). std's hook for that case reads `RUST_BACKTRACE` (an allocation) while
/// it holds the lock that panics take: at the address-space limit the second allocation
/// failed inside the first one's hook, and the child hung instead of ending (issue 34's
/// memory limit, seen when a session thread ran out of it).
struct EndOnRefusal;

// SAFETY: every call goes to the system allocator with the same arguments; only a refusal
// (null) is handled differently, by ending the process, which returns nothing.
unsafe impl GlobalAlloc for EndOnRefusal {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as the caller's contract.
        refused_ends(unsafe { System.alloc(layout) }, layout.size())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as the caller's contract.
        refused_ends(unsafe { System.alloc_zeroed(layout) }, layout.size())
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as the caller's contract.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as the caller's contract.
        refused_ends(unsafe { System.realloc(ptr, layout, new_size) }, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: EndOnRefusal = EndOnRefusal;

/// `ptr`, or, where it is null, the end of the process: the message written with one
/// `write` from the stack, then `abort` (what std does after its hook), nothing allocated.
fn refused_ends(ptr: *mut u8, size: usize) -> *mut u8 {
    if !ptr.is_null() {
        return ptr;
    }
    let mut line = [0u8; 64];
    let mut at = 0;
    for part in [&b"memory allocation of "[..], digits(size, &mut [0u8; 20]), b" bytes failed\n"] {
        for byte in part {
            if let Some(slot) = line.get_mut(at) {
                *slot = *byte;
                at += 1;
            }
        }
    }
    // SAFETY: writes bytes of a stack buffer to stderr, then ends the process.
    unsafe {
        libc::write(2, line.as_ptr().cast(), at);
        libc::abort()
    }
}

/// `n` in decimal, written at the end of `buffer`.
fn digits(mut n: usize, buffer: &mut [u8; 20]) -> &[u8] {
    let mut start = buffer.len();
    loop {
        start -= 1;
        if let Some(slot) = buffer.get_mut(start) {
            *slot = b'0' + (n % 10) as u8;
        }
        n /= 10;
        if n == 0 || start == 0 {
            break;
        }
    }
    buffer.get(start..).unwrap_or_default()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match &cli.command {
        Command::Transcode => condense_media::child::child_main(),
        Command::Helper => condense_media::child::helper_main(),
        Command::Media => condense_media::child::media_main(),
        Command::Probe { file } => cli::probe(file),
        Command::Vmaf { reference, distorted } => cli::vmaf(reference, distorted),
        Command::CrfSearch { .. } => cli::crf_search(&cli.command),
        Command::Version => {
            cli::version();
            ExitCode::SUCCESS
        }
        Command::Serve(_) | Command::Migrate | Command::User { .. } | Command::Openapi | Command::License { .. } => {
            eprintln!("condense-media runs condense's media work only; run this with `condense`");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::digits;

    #[test]
    fn sizes_are_written_in_decimal_without_allocating() {
        for (n, text) in [(0, "0"), (7, "7"), (1_048_576, "1048576"), (usize::MAX, "18446744073709551615")] {
            assert_eq!(digits(n, &mut [0u8; 20]), text.as_bytes());
        }
    }
}
