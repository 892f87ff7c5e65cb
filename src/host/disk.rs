//! Space on the filesystem holding a path (statvfs), as `df` reports it.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Bytes on one filesystem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskSpace {
    pub total: u64,
    /// Blocks in use (reserved blocks excluded).
    pub used: u64,
    /// Available to an unprivileged process such as this one.
    pub free: u64,
}

impl DiskSpace {
    /// Used share of the space a process can use, in percent, as `df` computes it:
    /// used / (used + available). Root-reserved blocks are usable by nobody here.
    pub fn used_percent(&self) -> f64 {
        let usable = self.used.saturating_add(self.free);
        if usable == 0 {
            0.0
        } else {
            self.used as f64 / usable as f64 * 100.0
        }
    }
}

/// Space of the filesystem that holds `path`. Blocking: call it from a blocking thread (an
/// NFS mount that does not answer can hang).
pub fn space(path: &Path) -> std::io::Result<DiskSpace> {
    let c_path = CString::new(path.as_os_str().as_bytes()).map_err(|_| std::io::Error::other("NUL in path"))?;
    // SAFETY: a zeroed statvfs is a valid value of this plain C struct.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: statvfs fills the struct we own from a valid, NUL-terminated path.
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // fsblkcnt_t and c_ulong are 64-bit on the Linux targets condense ships for.
    let (block, blocks, free_blocks, available) = (stat.f_frsize, stat.f_blocks, stat.f_bfree, stat.f_bavail);
    Ok(DiskSpace {
        total: blocks.saturating_mul(block),
        used: blocks.saturating_sub(free_blocks).saturating_mul(block),
        free: available.saturating_mul(block),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_temp_dir_has_space() {
        let dir = std::env::temp_dir();
        let space = space(&dir).unwrap();
        assert!(space.total > 0, "{space:?}");
        assert!(space.used <= space.total && space.free <= space.total, "{space:?}");
        let percent = space.used_percent();
        assert!((0.0..=100.0).contains(&percent), "{percent}");
        assert!(super::space(Path::new("/no/such/dir/anywhere")).is_err());
    }

    #[test]
    fn used_percent_is_used_over_usable() {
        assert_eq!(DiskSpace { total: 100, used: 45, free: 45 }.used_percent(), 50.0);
        assert_eq!(DiskSpace { total: 0, used: 0, free: 0 }.used_percent(), 0.0);
    }
}
