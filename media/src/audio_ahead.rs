//! The plan's converted and added audio (issue 37's `convert` and `add` fates) encoded ahead,
//! beside the video, into one file of the partial folder (`layout::AUDIO_FILE`) that the mux
//! then copies: decoding and encoding a film's audio costs CPU the video's encoder mostly
//! leaves idle, so it no longer runs after the video, adding to the wall time. The thread
//! runs at the lowest priority (nice 19, on its own thread id), so it takes only the cycles
//! the video leaves and never slows it; once the video is done, what is left of the audio
//! is handed back to the run's own thread, at its priority (a thread may lower its priority
//! but never raise it again). See docs/ARCHITECTURE.md, "Audio encoded ahead".
//!
//! The file is written under `AUDIO_TEMP_FILE`, fsynced and renamed when whole, so its name
//! holds a finished file or nothing; it starts with a key saying what it was made for (the
//! source's identity, FFmpeg's versions, the planned audio outputs) and ends with a packet
//! count and a hash of everything before it. A file that is truncated, damaged or made for
//! another plan is not used: the run makes it again, or the mux encodes inline as before.
//!
//! The packets are kept in condense's own simple framing, not a container: the encoders'
//! time base (1 / sample rate) must reach the output exactly, and Matroska would round
//! every timestamp to 1 ms (verification allows the converted track one frame, and a
//! rounded start or length could spend it); NUT would keep it but through a muxer and
//! demuxer that reorder and interpret. Each output stream's codec parameters and time base
//! are in the header, then every packet as the encoder made it: stream, pts, dts, duration,
//! flags, side data and bytes, in the order the encoders made them.

use std::fs::File;
use std::io::{BufReader, BufWriter, ErrorKind, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use rsmpeg::avcodec::{AVCodecParameters, AVPacket};
use rsmpeg::ffi;
use rsmpeg::UnsafeDerefMut;

use crate::audio::AudioEncode;
use crate::probe::{open_input, read_packet};
use condense::media::layout::{AUDIO_FILE, AUDIO_TEMP_FILE};
use condense::media::manifest::sync_dir;
use condense::media::plan::EncodePlan;
use condense::media::stream_plan::Fate;
use condense::media::MediaError;

/// The framing's first bytes; the digit is its version.
const MAGIC: &[u8; 8] = b"CNDSAUD1";
const PACKET: u8 = b'P';
const END: u8 = b'E';
/// No encoder's packet or header comes near this; a larger length is damage.
const MAX_BLOB: u32 = 64 << 20;

/// One planned audio output the mux would encode: `convert` (the source track in another
/// codec) or `add` (a stereo downmix of it).
#[derive(Debug, Clone, PartialEq)]
pub struct AudioOutput {
    pub source_index: usize,
    pub codec: String,
    pub bit_rate: Option<u64>,
    pub stereo: bool,
}

/// The plan's audio outputs that are encoded, in output order (the order of the mux's
/// `Made::Audio` streams).
pub fn audio_outputs(plan: &EncodePlan) -> Vec<AudioOutput> {
    let Some(streams) = &plan.streams else { return Vec::new() };
    streams
        .streams
        .iter()
        .filter(|p| p.kind == "audio" && matches!(p.fate, Fate::Convert | Fate::Add))
        .map(|p| AudioOutput {
            source_index: p.source_index,
            codec: p.codec.clone(),
            bit_rate: p.bit_rate,
            stereo: p.fate == Fate::Add,
        })
        .collect()
}

/// What a file must have been made for to be used: the same source (size, time, inode),
/// the same FFmpeg, the same audio outputs. Rules changed between attempts change it.
pub fn key(plan: &EncodePlan, outputs: &[AudioOutput]) -> String {
    let tracks: Vec<String> = outputs
        .iter()
        .map(|o| {
            let rate = o.bit_rate.map_or_else(|| "-".to_string(), |b| b.to_string());
            format!("{}:{}:{rate}:{}", o.source_index, o.codec, if o.stereo { "stereo" } else { "kept" })
        })
        .collect();
    format!(
        "source {}:{}:{}|{}|{}",
        plan.source.size,
        plan.source.mtime_ns,
        plan.source.inode,
        crate::ffmpeg_versions().join(","),
        tracks.join(";")
    )
}

/// FNV-1a, 64 bits: catches a damaged byte; the file is condense's own, in a folder only
/// condense writes, so no adversary is assumed.
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    fn update(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

fn damaged(what: &str) -> std::io::Error {
    std::io::Error::new(ErrorKind::InvalidData, what.to_string())
}

fn len_u32(n: usize) -> std::io::Result<u32> {
    u32::try_from(n).ok().filter(|n| *n <= MAX_BLOB).ok_or_else(|| damaged("a record too large"))
}

/// Writes the file, hashing what it writes.
struct Sink {
    out: BufWriter<File>,
    hash: Fnv,
    packets: u64,
}

impl Sink {
    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.hash.update(bytes);
        self.out.write_all(bytes)
    }

    fn i64(&mut self, v: i64) -> std::io::Result<()> {
        self.put(&v.to_le_bytes())
    }

    fn u32(&mut self, v: u32) -> std::io::Result<()> {
        self.put(&v.to_le_bytes())
    }

    fn blob(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.u32(len_u32(bytes.len())?)?;
        self.put(bytes)
    }

    fn header(&mut self, key: &str, streams: &[(AVCodecParameters, ffi::AVRational)]) -> std::io::Result<()> {
        self.put(MAGIC)?;
        self.blob(key.as_bytes())?;
        self.u32(len_u32(streams.len())?)?;
        for (par, tb) in streams {
            self.i64(i64::from(tb.num))?;
            self.i64(i64::from(tb.den))?;
            put_codecpar(self, par)?;
        }
        Ok(())
    }

    fn packet(&mut self, stream: usize, p: &AVPacket) -> std::io::Result<()> {
        self.put(&[PACKET])?;
        self.u32(len_u32(stream)?)?;
        self.i64(p.pts)?;
        self.i64(p.dts)?;
        self.i64(p.duration)?;
        self.i64(i64::from(p.flags))?;
        let sides = usize::try_from(p.side_data_elems).unwrap_or(0);
        self.u32(len_u32(sides)?)?;
        for i in 0..sides {
            // SAFETY: the packet holds `side_data_elems` entries, each `size` bytes at `data`.
            let (kind, bytes) = unsafe {
                let side = &*p.side_data.add(i);
                (side.type_, std::slice::from_raw_parts(side.data, side.size))
            };
            self.u32(kind)?;
            self.blob(bytes)?;
        }
        let size = usize::try_from(p.size).unwrap_or(0);
        let bytes = if size == 0 || p.data.is_null() {
            &[][..]
        } else {
            // SAFETY: a packet's `data` holds `size` bytes.
            unsafe { std::slice::from_raw_parts(p.data, size) }
        };
        self.blob(bytes)?;
        self.packets += 1;
        Ok(())
    }

    /// The end record: the packet count, then the hash of everything before it.
    fn end(mut self) -> std::io::Result<File> {
        self.put(&[END])?;
        let count = self.packets;
        self.put(&count.to_le_bytes())?;
        let hash = self.hash.0;
        self.out.write_all(&hash.to_le_bytes())?;
        self.out.into_inner().map_err(std::io::IntoInnerError::into_error)
    }
}

/// The codec parameters an audio encoder fills, field by field.
fn put_codecpar(s: &mut Sink, par: &ffi::AVCodecParameters) -> std::io::Result<()> {
    for v in [
        i64::from(par.codec_type),
        i64::from(par.codec_id),
        i64::from(par.format),
        par.bit_rate,
        i64::from(par.bits_per_coded_sample),
        i64::from(par.bits_per_raw_sample),
        i64::from(par.profile),
        i64::from(par.level),
        i64::from(par.sample_rate),
        i64::from(par.block_align),
        i64::from(par.frame_size),
        i64::from(par.initial_padding),
        i64::from(par.trailing_padding),
        i64::from(par.seek_preroll),
        i64::from(par.ch_layout.order),
        i64::from(par.ch_layout.nb_channels),
    ] {
        s.i64(v)?;
    }
    // SAFETY: the mask is the union's member for a native order, and unused otherwise.
    let mask = unsafe { par.ch_layout.u.mask };
    s.put(&mask.to_le_bytes())?;
    let extra = match usize::try_from(par.extradata_size) {
        // SAFETY: `extradata` holds `extradata_size` bytes.
        Ok(n) if n > 0 && !par.extradata.is_null() => unsafe { std::slice::from_raw_parts(par.extradata, n) },
        _ => &[][..],
    };
    s.blob(extra)
}

/// Reads the file, hashing what it reads.
struct Source {
    input: BufReader<File>,
    hash: Fnv,
    packets: u64,
}

/// What a read record holds.
enum Record {
    /// A packet of output `stream` (None when only checking).
    Packet(Option<(usize, AVPacket)>),
    End,
}

fn narrow<T: TryFrom<i64>>(v: i64) -> std::io::Result<T> {
    T::try_from(v).map_err(|_| damaged("a value out of range"))
}

impl Source {
    fn take(&mut self, buf: &mut [u8]) -> std::io::Result<()> {
        self.input.read_exact(buf)?;
        self.hash.update(buf);
        Ok(())
    }

    fn i64(&mut self) -> std::io::Result<i64> {
        let mut b = [0u8; 8];
        self.take(&mut b)?;
        Ok(i64::from_le_bytes(b))
    }

    fn u64(&mut self) -> std::io::Result<u64> {
        let mut b = [0u8; 8];
        self.take(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn u32(&mut self) -> std::io::Result<u32> {
        let mut b = [0u8; 4];
        self.take(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    fn blob(&mut self) -> std::io::Result<Vec<u8>> {
        let n = self.u32()?;
        if n > MAX_BLOB {
            return Err(damaged("a record too large"));
        }
        let mut bytes = vec![0u8; usize::try_from(n).map_err(|_| damaged("a record too large"))?];
        self.take(&mut bytes)?;
        Ok(bytes)
    }

    /// The header: the key it was made for, and each output stream's parameters and time base.
    fn header(&mut self) -> std::io::Result<(String, Vec<(AVCodecParameters, ffi::AVRational)>)> {
        let mut magic = [0u8; 8];
        self.take(&mut magic)?;
        if &magic != MAGIC {
            return Err(damaged("not an audio file of this version"));
        }
        let key = String::from_utf8(self.blob()?).map_err(|_| damaged("a key that is not text"))?;
        let count = self.u32()?;
        let mut streams = Vec::new();
        for _ in 0..count.min(64) {
            let tb = ffi::AVRational { num: narrow(self.i64()?)?, den: narrow(self.i64()?)? };
            if tb.num <= 0 || tb.den <= 0 {
                return Err(damaged("a time base that is not one"));
            }
            streams.push((self.codecpar()?, tb));
        }
        if streams.len() != usize::try_from(count).unwrap_or(usize::MAX) {
            return Err(damaged("too many streams"));
        }
        Ok((key, streams))
    }

    fn codecpar(&mut self) -> std::io::Result<AVCodecParameters> {
        let mut v = [0i64; 16];
        for slot in &mut v {
            *slot = self.i64()?;
        }
        let mask = self.u64()?;
        let extra = self.blob()?;
        let [codec_type, codec_id, format, bit_rate, coded_bits, raw_bits, profile, level, sample_rate, block_align, frame_size, initial_padding, trailing_padding, seek_preroll, order, channels] =
            v;
        let mut par = AVCodecParameters::new();
        // SAFETY: field writes on parameters we own; the layout is set by FFmpeg's own
        // functions after freeing the old one; the extradata is allocated with FFmpeg's
        // allocator, padded as FFmpeg requires, and freed with the parameters.
        unsafe {
            let raw = par.deref_mut();
            raw.codec_type = narrow(codec_type)?;
            raw.codec_id = narrow(codec_id)?;
            raw.format = narrow(format)?;
            raw.bit_rate = bit_rate;
            raw.bits_per_coded_sample = narrow(coded_bits)?;
            raw.bits_per_raw_sample = narrow(raw_bits)?;
            raw.profile = narrow(profile)?;
            raw.level = narrow(level)?;
            raw.sample_rate = narrow(sample_rate)?;
            raw.block_align = narrow(block_align)?;
            raw.frame_size = narrow(frame_size)?;
            raw.initial_padding = narrow(initial_padding)?;
            raw.trailing_padding = narrow(trailing_padding)?;
            raw.seek_preroll = narrow(seek_preroll)?;
            let order: ffi::AVChannelOrder = narrow(order)?;
            let channels: i32 = narrow(channels)?;
            ffi::av_channel_layout_uninit(&mut raw.ch_layout);
            let set = if order == ffi::AVChannelOrder_AV_CHANNEL_ORDER_NATIVE {
                ffi::av_channel_layout_from_mask(&mut raw.ch_layout, mask)
            } else {
                ffi::av_channel_layout_default(&mut raw.ch_layout, channels);
                0
            };
            if set < 0 || raw.ch_layout.nb_channels != channels {
                return Err(damaged("a channel layout that is not one"));
            }
            if !extra.is_empty() {
                let padded = extra.len() + ffi::AV_INPUT_BUFFER_PADDING_SIZE as usize;
                let buf = ffi::av_mallocz(padded).cast::<u8>();
                if buf.is_null() {
                    return Err(std::io::Error::from(ErrorKind::OutOfMemory));
                }
                std::ptr::copy_nonoverlapping(extra.as_ptr(), buf, extra.len());
                raw.extradata = buf;
                raw.extradata_size = narrow(i64::from(len_u32(extra.len())?))?;
            }
        }
        Ok(par)
    }

    /// The next record; `build` makes its packet, else it is only read.
    fn record(&mut self, build: bool, streams: usize) -> std::io::Result<Record> {
        let mut tag = [0u8; 1];
        self.take(&mut tag)?;
        match tag {
            [PACKET] => {}
            [END] => {
                let count = self.u64()?;
                let expected = self.hash.0;
                let mut stored = [0u8; 8];
                self.input.read_exact(&mut stored)?;
                if count != self.packets || u64::from_le_bytes(stored) != expected {
                    return Err(damaged("the packet count or hash does not match"));
                }
                if self.input.read(&mut [0u8; 1])? != 0 {
                    return Err(damaged("bytes after the end"));
                }
                return Ok(Record::End);
            }
            _ => return Err(damaged("an unknown record")),
        }
        let stream = usize::try_from(self.u32()?).map_err(|_| damaged("a stream out of range"))?;
        if stream >= streams {
            return Err(damaged("a packet of a stream the header has not"));
        }
        let (pts, dts, duration, flags) = (self.i64()?, self.i64()?, self.i64()?, narrow::<i32>(self.i64()?)?);
        let sides = self.u32()?;
        let mut side_data = Vec::new();
        for _ in 0..sides.min(64) {
            side_data.push((self.u32()?, self.blob()?));
        }
        if side_data.len() != usize::try_from(sides).unwrap_or(usize::MAX) {
            return Err(damaged("too much side data"));
        }
        let bytes = self.blob()?;
        self.packets += 1;
        if !build {
            return Ok(Record::Packet(None));
        }
        let mut packet = AVPacket::new();
        // SAFETY: av_new_packet allocates `bytes.len()` bytes (padded) into the packet we
        // own; side data buffers are allocated by FFmpeg at the size asked for.
        unsafe {
            let raw = packet.as_mut_ptr();
            if ffi::av_new_packet(raw, narrow(i64::from(len_u32(bytes.len())?))?) < 0 {
                return Err(std::io::Error::from(ErrorKind::OutOfMemory));
            }
            if !bytes.is_empty() {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), (*raw).data, bytes.len());
            }
            for (kind, data) in &side_data {
                let at = ffi::av_packet_new_side_data(raw, *kind, data.len());
                if at.is_null() {
                    return Err(std::io::Error::from(ErrorKind::OutOfMemory));
                }
                std::ptr::copy_nonoverlapping(data.as_ptr(), at, data.len());
            }
        }
        packet.set_pts(pts);
        packet.set_dts(dts);
        packet.set_duration(duration);
        packet.set_flags(flags);
        Ok(Record::Packet(Some((stream, packet))))
    }
}

/// Opens `dir/name`, never following a link there.
fn open_file(dir: &Path, name: &str) -> std::io::Result<File> {
    std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(dir.join(name))
}

/// A finished audio file, being read by the mux.
pub struct AheadAudio {
    /// Each output stream's codec parameters and time base, in output order.
    pub streams: Vec<(AVCodecParameters, ffi::AVRational)>,
    source: Source,
}

impl AheadAudio {
    /// The next packet and the output (its place among the audio outputs) it belongs to.
    pub fn next_packet(&mut self) -> Result<Option<(usize, AVPacket)>, MediaError> {
        let io = |e: std::io::Error| MediaError::from_io("reading the audio encoded ahead", &e);
        match self.source.record(true, self.streams.len()).map_err(io)? {
            Record::Packet(p) => Ok(p),
            Record::End => Ok(None),
        }
    }
}

/// The finished file in `dir` made for `key`, read through once to check it is whole; None
/// (and why, in the log) when there is none or it is not whole or not for `key`.
pub fn open_valid(dir: &Path, key: &str) -> Option<AheadAudio> {
    match check(dir, key) {
        Ok(Some(audio)) => Some(audio),
        Ok(None) => None,
        Err(e) => {
            tracing::info!(error = %e, "the audio encoded ahead is not used");
            None
        }
    }
}

fn check(dir: &Path, key: &str) -> std::io::Result<Option<AheadAudio>> {
    let open = || -> std::io::Result<Option<Source>> {
        match open_file(dir, AUDIO_FILE) {
            Ok(f) => Ok(Some(Source { input: BufReader::with_capacity(1 << 16, f), hash: Fnv::new(), packets: 0 })),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    };
    let Some(mut whole) = open()? else { return Ok(None) };
    let (made_for, streams) = whole.header()?;
    if made_for != key {
        return Err(damaged("made for another plan"));
    }
    // Every record read and hashed, up to the end record's check.
    while let Record::Packet(_) = whole.record(false, streams.len())? {}
    let Some(mut source) = open()? else { return Ok(None) };
    let (_, streams) = source.header()?;
    Ok(Some(AheadAudio { streams, source }))
}

/// An audio file being written under its temp name: `finish` makes it the finished file
/// (fsynced, renamed, the folder fsynced); dropped before that, it is removed.
pub struct Writer {
    sink: Option<Sink>,
    dir: PathBuf,
}

fn write_error(e: std::io::Error) -> MediaError {
    MediaError::from_io("writing the audio encoded ahead", &e)
}

impl Writer {
    /// Starts the file in `dir` for `key`, with each output stream's codec parameters and
    /// time base (a temp file left by an earlier run is replaced).
    pub fn create(
        dir: &Path,
        key: &str,
        streams: &[(AVCodecParameters, ffi::AVRational)],
    ) -> Result<Writer, MediaError> {
        let _ = std::fs::remove_file(dir.join(AUDIO_TEMP_FILE));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(dir.join(AUDIO_TEMP_FILE))
            .map_err(write_error)?;
        let mut sink = Sink { out: BufWriter::with_capacity(1 << 16, file), hash: Fnv::new(), packets: 0 };
        sink.header(key, streams).map_err(write_error)?;
        Ok(Writer { sink: Some(sink), dir: dir.to_path_buf() })
    }

    /// Adds a packet of output stream `stream`.
    pub fn packet(&mut self, stream: usize, p: &AVPacket) -> Result<(), MediaError> {
        let sink = self.sink.as_mut().ok_or_else(|| MediaError::misc("the audio file is already finished"))?;
        sink.packet(stream, p).map_err(write_error)
    }

    /// Ends the file and gives it its name.
    pub fn finish(mut self) -> Result<(), MediaError> {
        let sink = self.sink.take().ok_or_else(|| MediaError::misc("the audio file is already finished"))?;
        let done = (|| {
            let file = sink.end()?;
            file.sync_all()?;
            drop(file);
            std::fs::rename(self.dir.join(AUDIO_TEMP_FILE), self.dir.join(AUDIO_FILE))?;
            sync_dir(&self.dir)
        })();
        if done.is_err() {
            let _ = std::fs::remove_file(self.dir.join(AUDIO_TEMP_FILE));
        }
        done.map_err(write_error)
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // Unfinished: the part written is of no use to anyone.
        if self.sink.take().is_some() {
            let _ = std::fs::remove_file(self.dir.join(AUDIO_TEMP_FILE));
        }
    }
}

/// The audio being encoded: the source's demuxer, one encoder per output, the file.
struct Work {
    source: crate::growing::Input,
    /// For each source stream, the outputs made of it.
    routes: Vec<Vec<usize>>,
    encodes: Vec<AudioEncode>,
    writer: Option<Writer>,
}

// SAFETY: FFmpeg's demuxer, decoder, encoder and resampler contexts are not tied to the
// thread that made them; a `Work` is used by one thread at a time, and moves only through
// a thread's join (the audio thread hands it to the run's thread).
unsafe impl Send for Work {}

impl Work {
    fn open(plan: &EncodePlan, outputs: &[AudioOutput], key: &str) -> Result<Work, MediaError> {
        let source = open_input(&plan.input)?;
        let count = source.streams().into_iter().count();
        let mut routes = vec![Vec::new(); count];
        let mut encodes = Vec::new();
        let mut streams = Vec::new();
        for (k, o) in outputs.iter().enumerate() {
            let stream = source.streams().get(o.source_index).ok_or_else(|| {
                MediaError::invalid(format!(
                    "the stream plan names stream {}, which the source has not",
                    o.source_index
                ))
            })?;
            let job = AudioEncode::open(&stream.codecpar(), stream.time_base, &o.codec, o.bit_rate, o.stereo)?;
            streams.push((job.codecpar(), job.time_base()));
            encodes.push(job);
            if let Some(r) = routes.get_mut(o.source_index) {
                r.push(k);
            }
        }
        // SAFETY: plain field writes on the streams of an input we own, before reading:
        // the demuxer skips what no output is made of.
        unsafe {
            let raw = source.as_ptr();
            for (i, r) in routes.iter().enumerate() {
                if r.is_empty() {
                    (**(*raw).streams.add(i)).discard = ffi::AVDiscard_AVDISCARD_ALL;
                }
            }
        }
        let writer = Writer::create(&plan.partial_dir, key, &streams)?;
        Ok(Work { source, routes, encodes, writer: Some(writer) })
    }

    /// Encodes until the source ends (true: the file is finished) or `interrupt` says to
    /// stop (false: what is encoded so far is kept in memory and the file left open, so
    /// another thread can go on).
    fn run(&mut self, interrupt: &dyn Fn() -> bool) -> Result<bool, MediaError> {
        let Some(writer) = self.writer.as_mut() else { return Ok(true) };
        loop {
            if interrupt() {
                return Ok(false);
            }
            let Some(packet) = read_packet(&mut self.source, "the source's audio")? else { break };
            let idx = usize::try_from(packet.stream_index).unwrap_or(usize::MAX);
            for k in self.routes.get(idx).map(Vec::as_slice).unwrap_or_default() {
                let Some(job) = self.encodes.get_mut(*k) else { continue };
                for p in job.push(&packet)? {
                    writer.packet(*k, &p)?;
                }
            }
        }
        for (k, job) in self.encodes.iter_mut().enumerate() {
            for p in job.finish()? {
                writer.packet(k, &p)?;
            }
        }
        if let Some(writer) = self.writer.take() {
            writer.finish()?;
        }
        Ok(true)
    }
}

/// How the audio thread ended.
enum Step {
    Done,
    Stopped,
    /// Asked to hurry (the video is done): what is left, for the run's thread.
    Handed(Box<Work>),
}

/// The audio thread of a run.
pub struct Ahead {
    cancel: Arc<AtomicBool>,
    hurry: Arc<AtomicBool>,
    thread: Option<JoinHandle<Step>>,
}

/// Starts encoding the plan's converted and added audio beside the video, unless the plan
/// has none or a finished file made for it is already there (a resumed run).
pub fn start(plan: &EncodePlan) -> Option<Ahead> {
    let outputs = audio_outputs(plan);
    if outputs.is_empty() {
        return None;
    }
    let key = key(plan, &outputs);
    if open_valid(&plan.partial_dir, &key).is_some() {
        return None;
    }
    let cancel = Arc::new(AtomicBool::new(false));
    let hurry = Arc::new(AtomicBool::new(false));
    let (c, h) = (Arc::clone(&cancel), Arc::clone(&hurry));
    let plan = plan.clone();
    let thread = std::thread::Builder::new().name("audio-ahead".into()).spawn(move || {
        lower_priority();
        let mut work = match Work::open(&plan, &outputs, &key) {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(error = %e.message, "the audio could not be encoded ahead; the mux encodes it");
                return Step::Stopped;
            }
        };
        match work.run(&|| c.load(Ordering::SeqCst) || h.load(Ordering::SeqCst)) {
            Ok(true) => Step::Done,
            Ok(false) if c.load(Ordering::SeqCst) => Step::Stopped,
            Ok(false) => Step::Handed(Box::new(work)),
            Err(e) => {
                tracing::warn!(error = %e.message, "the audio could not be encoded ahead; the mux encodes it");
                Step::Stopped
            }
        }
    });
    match thread {
        Ok(t) => Some(Ahead { cancel, hurry, thread: Some(t) }),
        Err(e) => {
            tracing::warn!(error = %e, "no thread for the audio; the mux encodes it");
            None
        }
    }
}

/// Nice 19 for the calling thread only (Linux takes a thread id for PRIO_PROCESS): it runs
/// when the video's threads leave a core idle. A failure leaves it at the run's priority.
fn lower_priority() {
    // SAFETY: gettid has no preconditions; setpriority changes this thread's nice value.
    let ret = unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, libc::id_t::try_from(tid).unwrap_or(0), 19)
    };
    if ret != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "the audio thread keeps the run's priority");
    }
}

impl Ahead {
    /// The video is done: waits for the audio, going on with what is left in this thread
    /// (at its own priority). A failure leaves no file; the mux then encodes inline.
    pub fn finish(mut self) {
        self.hurry.store(true, Ordering::SeqCst);
        let Some(thread) = self.thread.take() else { return };
        if let Ok(Step::Handed(mut work)) = thread.join() {
            if let Err(e) = work.run(&|| false) {
                tracing::warn!(error = %e.message, "the audio could not be encoded ahead; the mux encodes it");
            }
        }
    }
}

impl Drop for Ahead {
    /// A run that ends without muxing (paused, stopped, failed) stops the audio; a file
    /// not finished is removed.
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            self.cancel.store(true, Ordering::SeqCst);
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_fnv_1a() {
        // The published FNV-1a 64 values.
        let mut h = Fnv::new();
        h.update(b"");
        assert_eq!(h.0, 0xcbf2_9ce4_8422_2325);
        let mut h = Fnv::new();
        h.update(b"a");
        assert_eq!(h.0, 0xaf63_dc4c_8601_ec8c);
    }
}
