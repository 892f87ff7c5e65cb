//! NVIDIA GPUs through NVML (nvml-wrapper). Without an NVIDIA driver NVML does not load, and
//! the node simply has no GPUs to report: never an error, never a panic.

use std::sync::OnceLock;

use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
use nvml_wrapper::Nvml;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GpuInfo {
    pub name: String,
    /// Bytes; null where the driver does not say.
    pub memory_total: Option<u64>,
    pub memory_used: Option<u64>,
    pub utilization_percent: Option<u32>,
    pub temperature_c: Option<u32>,
    /// NVENC load.
    pub encoder_utilization_percent: Option<u32>,
}

/// NVML, loaded once per process; `None` where it cannot load.
fn nvml() -> Option<&'static Nvml> {
    static NVML: OnceLock<Option<Nvml>> = OnceLock::new();
    NVML.get_or_init(|| {
        // The driver installs libnvidia-ml.so.1 (the crate's default); the unversioned name
        // exists where the development files are installed.
        let loaded = Nvml::init().or_else(|_| Nvml::builder().lib_path("libnvidia-ml.so".as_ref()).init());
        match loaded {
            Ok(nvml) => Some(nvml),
            Err(error) => {
                tracing::debug!(%error, "NVML is not available; no NVIDIA GPUs to report");
                None
            }
        }
    })
    .as_ref()
}

/// The NVIDIA GPUs of this machine; empty without NVML. Blocking (NVML calls into the
/// driver): call it from a blocking thread.
pub fn gpus() -> Vec<GpuInfo> {
    let Some(nvml) = nvml() else { return Vec::new() };
    let count = nvml.device_count().unwrap_or(0);
    (0..count)
        .filter_map(|index| {
            let device = nvml.device_by_index(index).ok()?;
            let memory = device.memory_info().ok();
            Some(GpuInfo {
                name: device.name().unwrap_or_else(|_| format!("NVIDIA GPU {index}")),
                memory_total: memory.as_ref().map(|m| m.total),
                memory_used: memory.as_ref().map(|m| m.used),
                utilization_percent: device.utilization_rates().ok().map(|u| u.gpu),
                temperature_c: device.temperature(TemperatureSensor::Gpu).ok(),
                encoder_utilization_percent: device.encoder_utilization().ok().map(|u| u.utilization),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpus_never_fail_and_are_stable_across_calls() {
        // Without a driver (CI) the list is empty; with one, each GPU has a name.
        let first = gpus();
        assert!(first.iter().all(|gpu| !gpu.name.is_empty()));
        assert_eq!(gpus().len(), first.len());
    }
}
