//! Hardware devices: opening one, and the frames pool on it that Quick Sync and VAAPI
//! encoders take their pictures from (they cannot read system memory). NVENC needs
//! neither: it uploads system-memory pictures itself.

use std::ffi::CString;

use rsmpeg::avutil::AVFrame;
use rsmpeg::ffi;
use rsmpeg::UnsafeDerefMut;

use condense::domain::encoding::Hardware;

/// The FFmpeg device type of the hardware an encoder runs on.
pub fn device_type(hardware: Hardware) -> Option<ffi::AVHWDeviceType> {
    match hardware {
        Hardware::Cpu => None,
        Hardware::Nvidia => Some(ffi::AVHWDeviceType_AV_HWDEVICE_TYPE_CUDA),
        Hardware::IntelQsv => Some(ffi::AVHWDeviceType_AV_HWDEVICE_TYPE_QSV),
        Hardware::Vaapi => Some(ffi::AVHWDeviceType_AV_HWDEVICE_TYPE_VAAPI),
    }
}

/// The pixel format of pictures on the device.
fn device_format(hardware: Hardware) -> Option<ffi::AVPixelFormat> {
    match hardware {
        Hardware::IntelQsv => Some(ffi::AVPixelFormat_AV_PIX_FMT_QSV),
        Hardware::Vaapi => Some(ffi::AVPixelFormat_AV_PIX_FMT_VAAPI),
        Hardware::Cpu | Hardware::Nvidia => None,
    }
}

/// A reference to an opened device (FFmpeg's default one of its type), or why there is none.
pub struct Device(*mut ffi::AVBufferRef);

impl Device {
    pub fn open(hardware: Hardware) -> Result<Device, String> {
        let kind = device_type(hardware).ok_or("the CPU is no device")?;
        let mut device: *mut ffi::AVBufferRef = std::ptr::null_mut();
        // SAFETY: creates a reference we own (released in Drop).
        let ret = unsafe { ffi::av_hwdevice_ctx_create(&mut device, kind, std::ptr::null(), std::ptr::null_mut(), 0) };
        if ret < 0 || device.is_null() {
            return Err(format!("no {hardware} device: {}", rsmpeg::error::RsmpegError::AVError(ret)));
        }
        Ok(Device(device))
    }

    /// A new reference, for a context that takes one (and releases it).
    pub fn new_ref(&self) -> *mut ffi::AVBufferRef {
        // SAFETY: self.0 is a valid reference while self lives.
        unsafe { ffi::av_buffer_ref(self.0) }
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: releases the reference this value owns.
        unsafe { ffi::av_buffer_unref(&mut self.0) };
    }
}

/// A pool of pictures on a device, of one size, uploaded from `sw_format`.
pub struct DeviceFrames {
    frames: *mut ffi::AVBufferRef,
    pub hw_format: ffi::AVPixelFormat,
    pub sw_format: ffi::AVPixelFormat,
}

// SAFETY: the pool is used by the one session that made it; FFmpeg's frames contexts are
// reference-counted buffers, safe to release from another thread.
unsafe impl Send for DeviceFrames {}

impl DeviceFrames {
    /// Opens the device and a pool of `width`x`height` pictures uploaded from
    /// `upload_format` (an FFmpeg pixel format name, see `EncoderProfile::frame_input`).
    pub fn open(hardware: Hardware, upload_format: &str, width: i32, height: i32) -> Result<DeviceFrames, String> {
        let hw_format = device_format(hardware).ok_or_else(|| format!("{hardware} encoders take system memory"))?;
        let name = CString::new(upload_format).map_err(|_| "bad pixel format name".to_string())?;
        // SAFETY: looks a name up in FFmpeg's static table.
        let sw_format = unsafe { ffi::av_get_pix_fmt(name.as_ptr()) };
        if sw_format == ffi::AVPixelFormat_AV_PIX_FMT_NONE {
            return Err(format!("unknown pixel format {upload_format}"));
        }
        let device = Device::open(hardware)?;
        // SAFETY: allocates a frames context on the device (it takes its own reference
        // to it), fills it before av_hwframe_ctx_init, and releases it on any failure.
        unsafe {
            let mut frames = ffi::av_hwframe_ctx_alloc(device.0);
            if frames.is_null() {
                return Err("out of memory".into());
            }
            let ctx = (*frames).data.cast::<ffi::AVHWFramesContext>();
            (*ctx).format = hw_format;
            (*ctx).sw_format = sw_format;
            (*ctx).width = width;
            (*ctx).height = height;
            // Quick Sync needs a fixed pool; the encoder's lookahead and reordering hold a
            // few pictures at once.
            (*ctx).initial_pool_size = 32;
            let ret = ffi::av_hwframe_ctx_init(frames);
            if ret < 0 {
                ffi::av_buffer_unref(&mut frames);
                return Err(format!(
                    "{hardware} cannot hold {width}x{height} {upload_format} pictures: {}",
                    rsmpeg::error::RsmpegError::AVError(ret)
                ));
            }
            Ok(DeviceFrames { frames, hw_format, sw_format })
        }
    }

    /// A new reference to the pool, for the encoder's `hw_frames_ctx` (it releases it).
    pub fn new_ref(&self) -> *mut ffi::AVBufferRef {
        // SAFETY: self.frames is valid while self lives.
        unsafe { ffi::av_buffer_ref(self.frames) }
    }

    /// The picture `frame` (in `sw_format`) on the device, with its timestamps and colour
    /// properties.
    pub fn upload(&self, frame: &AVFrame) -> Result<AVFrame, String> {
        let mut on_device = AVFrame::new();
        // SAFETY: takes a picture from our pool into a frame we own, then copies pixels
        // and properties from a frame of the pool's software format and size.
        unsafe {
            let ret = ffi::av_hwframe_get_buffer(self.frames, on_device.as_mut_ptr(), 0);
            if ret < 0 {
                return Err(format!("no picture free on the device: {}", rsmpeg::error::RsmpegError::AVError(ret)));
            }
            let ret = ffi::av_hwframe_transfer_data(on_device.as_mut_ptr(), frame.as_ptr(), 0);
            if ret < 0 {
                return Err(format!("upload to the device failed: {}", rsmpeg::error::RsmpegError::AVError(ret)));
            }
            ffi::av_frame_copy_props(on_device.deref_mut(), frame.as_ptr());
        }
        Ok(on_device)
    }
}

impl Drop for DeviceFrames {
    fn drop(&mut self) {
        // SAFETY: releases the reference this value owns.
        unsafe { ffi::av_buffer_unref(&mut self.frames) };
    }
}

/// The hardware this machine can decode on: each device type whose default device opens
/// (decoding there is then tried for the hardware encoder of the same kind, and falls back
/// to the CPU for a codec the device does not decode).
pub fn decoders() -> Vec<String> {
    [Hardware::Nvidia, Hardware::IntelQsv, Hardware::Vaapi]
        .into_iter()
        .filter(|&h| Device::open(h).is_ok())
        .map(|h| h.as_str().to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_hardware_decodes_on_its_own_device_and_the_cpu_on_none() {
        assert_eq!(device_type(Hardware::Cpu), None);
        assert_eq!(device_type(Hardware::Nvidia), Some(ffi::AVHWDeviceType_AV_HWDEVICE_TYPE_CUDA));
        assert_eq!(device_type(Hardware::IntelQsv), Some(ffi::AVHWDeviceType_AV_HWDEVICE_TYPE_QSV));
        assert_eq!(device_type(Hardware::Vaapi), Some(ffi::AVHWDeviceType_AV_HWDEVICE_TYPE_VAAPI));
        // Pictures on the device for Quick Sync and VAAPI only.
        assert_eq!(device_format(Hardware::IntelQsv), Some(ffi::AVPixelFormat_AV_PIX_FMT_QSV));
        assert_eq!(device_format(Hardware::Vaapi), Some(ffi::AVPixelFormat_AV_PIX_FMT_VAAPI));
        assert_eq!((device_format(Hardware::Nvidia), device_format(Hardware::Cpu)), (None, None));
    }

    #[test]
    fn without_devices_nothing_opens_and_each_says_why() {
        // The development and CI machines have no GPU: every device is missing, and the
        // reason names it. (On a machine with one, this test says so instead of passing
        // for the wrong reason.)
        let dri = std::path::Path::new("/dev/dri").exists();
        let nvidia = std::path::Path::new("/dev/nvidiactl").exists();
        if dri || nvidia {
            eprintln!("this machine has a GPU device: skipping the no-device checks");
            return;
        }
        assert!(decoders().is_empty());
        for hardware in [Hardware::IntelQsv, Hardware::Vaapi] {
            let err = DeviceFrames::open(hardware, "nv12", 320, 240).err().unwrap();
            assert!(err.starts_with(&format!("no {hardware} device")), "{err}");
        }
        assert!(DeviceFrames::open(Hardware::Nvidia, "nv12", 320, 240).is_err());
        assert!(Device::open(Hardware::Cpu).is_err());
    }
}
