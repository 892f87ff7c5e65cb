//! The media subcommands that `condense` hands over to `condense-media`
//! (`condense::cli::hand_to_media_binary`): version, probe, vmaf and crf-search.

/// `condense version` (run by `condense-media`): this release and the FFmpeg it links.
pub fn version() {
    println!("condense {}", env!("CARGO_PKG_VERSION"));
    println!("FFmpeg {}", crate::ffmpeg_release());
    for lib in crate::ffmpeg_versions() {
        println!("  {lib}");
    }
}

/// `condense probe FILE`: the probe as JSON on stdout; a clear error and exit 1 otherwise.
pub fn probe(file: &std::path::Path) -> std::process::ExitCode {
    // SAFETY: sets FFmpeg's global log level before any other FFmpeg call.
    unsafe { rsmpeg::ffi::av_log_set_level(rsmpeg::ffi::AV_LOG_ERROR as i32) };
    match crate::probe::probe(file) {
        Ok(info) => condense::cli::print_json(&info),
        Err(e) => {
            eprintln!("condense: {} ({})", e.message, e.code.as_str());
            std::process::ExitCode::FAILURE
        }
    }
}

/// `condense vmaf REFERENCE DISTORTED`: the score as JSON on stdout; a clear error and exit 1
/// otherwise. libvmaf gets every core this process may use.
pub fn vmaf(reference: &std::path::Path, distorted: &std::path::Path) -> std::process::ExitCode {
    // SAFETY: sets FFmpeg's global log level before any other FFmpeg call.
    unsafe { rsmpeg::ffi::av_log_set_level(rsmpeg::ffi::AV_LOG_ERROR as i32) };
    let threads = std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(1));
    match crate::vmaf::compare(reference, distorted, threads) {
        Ok(score) => condense::cli::print_json(&score),
        Err(e) => {
            eprintln!("condense: {} ({})", e.message, e.code.as_str());
            std::process::ExitCode::FAILURE
        }
    }
}

/// `condense crf-search FILE ...`: the search's result as JSON on stdout (with the seconds it
/// took); a clear error and exit 1 otherwise.
pub fn crf_search(command: &condense::config::Command) -> std::process::ExitCode {
    let condense::config::Command::CrfSearch {
        file,
        encoder,
        preset,
        target,
        start,
        max_size_percent,
        fixed,
        score_every,
    } = command
    else {
        return std::process::ExitCode::FAILURE;
    };
    // SAFETY: sets FFmpeg's global log level before any other FFmpeg call.
    unsafe { rsmpeg::ffi::av_log_set_level(rsmpeg::ffi::AV_LOG_ERROR as i32) };
    let fail = |message: String| {
        eprintln!("condense: {message}");
        std::process::ExitCode::FAILURE
    };
    let Ok(encoder) = encoder.parse::<condense::domain::encoding::Encoder>() else {
        return fail(format!("unknown encoder {encoder:?}"));
    };
    if !(condense::domain::quality::TARGET_VMAF_MIN..=condense::domain::quality::TARGET_VMAF_MAX).contains(target) {
        return fail(format!("--target must be 80 to 99, not {target}"));
    }
    let most = condense::domain::quality::SEARCH_SCORE_EVERY_MAX;
    if !(1..=most).contains(score_every) {
        return fail(format!("--score-every must be 1 to {most}, not {score_every}"));
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(1));
    let sessions = condense::domain::segments::sessions(condense::domain::segments::Parallelism::Auto, cores, 1, false);
    let asked = condense::media::plan::QualitySearch { target_vmaf: *target, max_size_percent: *max_size_percent };
    let started = std::time::Instant::now();
    let request = crate::search::FileSearch {
        encoder,
        preset: preset.clone(),
        start: *start,
        fixed: *fixed,
        asked,
        sessions,
        score_every: *score_every,
    };
    match crate::search::search_file(file, request, &std::env::temp_dir()) {
        Ok(result) => {
            let seconds = started.elapsed().as_secs_f64();
            condense::cli::print_json(
                &serde_json::json!({ "result": result, "tooLarge": result.too_large(), "seconds": seconds }),
            )
        }
        Err(e) => fail(format!("{} ({})", e.message, e.code.as_str())),
    }
}
