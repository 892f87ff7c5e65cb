//! LD_PRELOAD shims, written in C and built at test time with gcc: they make a real process
//! misbehave on one file (a decoder that crashes or hangs on it) without any hook in the
//! product.

use std::path::{Path, PathBuf};

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
