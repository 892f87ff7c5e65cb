//! LD_PRELOAD shims, written in C and built at test time with gcc: they make a real process
//! misbehave on one file without any hook in the product.
//!
//! The EIO shim fails one read() of a source file with EIO, the way a network share does now
//! and then. It acts only in the transcoder child (argv[1] is `transcode`), so a test can
//! preload it into a whole `condense serve`. Environment of the process it is preloaded into:
//! - `CONDENSE_EIO_PREFIX`: a read of a file whose path starts with this (and is not one of
//!   condense's own `.condense-` files) may fail;
//! - `CONDENSE_EIO_PERCENT`: the first read at an offset past this share of the file fails
//!   (default 40);
//! - `CONDENSE_EIO_MARKERS`: a folder; a failure leaves a marker there per file, so each file
//!   fails once across all processes (the retry then reads it whole). Unset: once per process.
//! - `CONDENSE_EIO_TIMES`: with markers, how many processes fail on each file (default 1),
//!   one marker each.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const EIO_SOURCE: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static ssize_t (*real_read)(int, void *, size_t);
static int armed = -1;
static int fired;

static int in_transcoder(void) {
    char buf[4096];
    int fd = open("/proc/self/cmdline", O_RDONLY);
    if (fd < 0) return 0;
    ssize_t n = real_read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    size_t first = strlen(buf);
    if ((ssize_t)first + 1 >= n) return 0;
    return strcmp(buf + first + 1, "transcode") == 0;
}

ssize_t read(int fd, void *buf, size_t count) {
    if (!real_read) real_read = (ssize_t (*)(int, void *, size_t))dlsym(RTLD_NEXT, "read");
    if (armed < 0) armed = in_transcoder();
    const char *prefix = getenv("CONDENSE_EIO_PREFIX");
    if (armed && !fired && prefix) {
        char link[64], target[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n > 0) {
            target[n] = 0;
            if (strncmp(target, prefix, strlen(prefix)) == 0 && !strstr(target, ".condense-")) {
                struct stat st;
                off_t pos = lseek(fd, 0, SEEK_CUR);
                const char *p = getenv("CONDENSE_EIO_PERCENT");
                long percent = p ? atol(p) : 40;
                if (pos >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && pos >= st.st_size * percent / 100) {
                    const char *markers = getenv("CONDENSE_EIO_MARKERS");
                    int first = 1;
                    if (markers) {
                        char marker[4096];
                        char name[4096];
                        size_t i;
                        for (i = 0; target[i] && i < sizeof name - 1; i++) name[i] = target[i] == '/' ? '_' : target[i];
                        name[i] = 0;
                        const char *t = getenv("CONDENSE_EIO_TIMES");
                        long times = t ? atol(t) : 1;
                        first = 0;
                        for (long k = 0; k < times && !first; k++) {
                            if (k == 0) snprintf(marker, sizeof marker, "%s/%s", markers, name);
                            else snprintf(marker, sizeof marker, "%s/%s.%ld", markers, name, k);
                            int m = open(marker, O_CREAT | O_EXCL | O_WRONLY, 0644);
                            first = m >= 0;
                            if (m >= 0) close(m);
                        }
                    }
                    if (first) {
                        fired = 1;
                        errno = EIO;
                        return -1;
                    }
                }
            }
        }
    }
    return real_read(fd, buf, count);
}
"#;

/// Intercepts read(2). A read of the file named by `CONDENSE_SHIM_PATH` (an absolute,
/// canonical path) raises SIGSEGV, or with `CONDENSE_SHIM_MODE=hang` blocks for ever, in
/// whichever process makes it.
pub const READ_TRAP: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static ssize_t (*real_read)(int, void *, size_t);

static int is_target(int fd) {
    const char *want = getenv("CONDENSE_SHIM_PATH");
    if (!want || fd < 3) return 0;
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n < 0) return 0;
    target[n] = 0;
    return strcmp(target, want) == 0;
}

ssize_t read(int fd, void *buf, size_t count) {
    if (!real_read) real_read = (ssize_t (*)(int, void *, size_t))dlsym(RTLD_NEXT, "read");
    if (is_target(fd)) {
        const char *mode = getenv("CONDENSE_SHIM_MODE");
        if (mode && strcmp(mode, "hang") == 0) {
            for (;;) pause();
        }
        raise(SIGSEGV);
    }
    return real_read(fd, buf, count);
}
"#;

/// Builds `source` into `dir/name.so` and answers its path.
pub fn build(dir: &Path, name: &str, source: &str) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    let so = dir.join(format!("{name}.so"));
    std::fs::write(&c, source).unwrap();
    let out = std::process::Command::new("gcc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&so)
        .arg(&c)
        .arg("-ldl")
        .output()
        .expect("gcc");
    assert!(out.status.success(), "gcc: {}", String::from_utf8_lossy(&out.stderr));
    so
}

/// The EIO shim's shared object, built once per test process.
pub fn eio_shim() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("condense-eio-shim-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        build(&dir, "eio", EIO_SOURCE)
    })
}

/// The environment that preloads the EIO shim into a process: a read of each file whose
/// path starts with `prefix` fails once, past `percent` of the file (the shim's default when
/// None), with its marker left in `markers`.
pub fn eio_env(prefix: impl AsRef<OsStr>, percent: Option<u32>, markers: &Path) -> Vec<(&'static str, OsString)> {
    let mut env = vec![
        ("LD_PRELOAD", eio_shim().as_os_str().to_owned()),
        ("CONDENSE_EIO_PREFIX", prefix.as_ref().to_owned()),
        ("CONDENSE_EIO_MARKERS", markers.as_os_str().to_owned()),
    ];
    if let Some(percent) = percent {
        env.push(("CONDENSE_EIO_PERCENT", percent.to_string().into()));
    }
    env
}

/// `eio_env`, failing `times` processes on each file instead of one.
pub fn eio_env_times(
    prefix: impl AsRef<OsStr>,
    percent: Option<u32>,
    markers: &Path,
    times: u32,
) -> Vec<(&'static str, OsString)> {
    let mut env = eio_env(prefix, percent, markers);
    env.push(("CONDENSE_EIO_TIMES", times.to_string().into()));
    env
}

/// Frames of the first video stream, counted by decoding with the ffprobe program.
pub fn video_frames(path: &Path) -> u64 {
    let out = std::process::Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "v:0", "-count_frames", "-show_entries"])
        .args(["stream=nb_read_frames", "-of", "default=nokey=1:noprint_wrappers=1"])
        .arg(path)
        .output()
        .expect("ffprobe runs");
    assert!(out.status.success(), "ffprobe {}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0)
}
