//! Facts about the machine this node runs on (sysinfo; disks through statvfs in `disk`; GPUs
//! through NVML in `gpu`; memory over time in `memory_trend`; which library folders it sees
//! in `sight`). Every call here may block: async code calls it from a blocking thread.

pub mod clean_stop;
pub mod clock;
pub mod disk;
pub mod gpu;
pub mod memory_trend;
pub mod sight;

use sysinfo::{MemoryRefreshKind, RefreshKind, System};

/// The host name, or "localhost" when it cannot be read.
pub fn hostname() -> String {
    System::host_name().filter(|h| !h.is_empty()).unwrap_or_else(|| "localhost".to_string())
}

/// Logical CPU cores available to this process.
pub fn cores() -> usize {
    std::thread::available_parallelism().map(std::num::NonZero::get).unwrap_or(1)
}

/// Memory in bytes: (used, total).
pub fn memory() -> (u64, u64) {
    let sys = System::new_with_specifics(RefreshKind::nothing().with_memory(MemoryRefreshKind::nothing().with_ram()));
    (sys.used_memory(), sys.total_memory())
}

/// 1-minute load average.
pub fn load1() -> f64 {
    System::load_average().one
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_are_plausible() {
        assert!(!hostname().is_empty());
        assert!(cores() >= 1);
        let (used, total) = memory();
        assert!(total > 0 && used <= total, "{used} / {total}");
        assert!(load1() >= 0.0);
    }
}
