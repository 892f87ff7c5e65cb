#!/usr/bin/env bash
# How far a VMAF mean moves when only some frames are scored, for the encoders' frame
# patterns (B-frames, hierarchical layers): the figures behind
# `domain::quality::SEARCH_SCORE_EVERY` (BENCHMARKS.md, "scoring a block in two").
# A 20 s 640x360 clip is encoded nine ways with the system's ffmpeg; the independent
# libvmaf (imageio-ffmpeg's, `make bootstrap-test` installs it) scores every frame of each;
# the table gives, per encode, the mean of the frames a scheme keeps minus the whole mean:
# `sN`, every N-th frame (libvmaf's n_subsample); `bB/N`, the first B of every N x B frames
# (what condense's search scores: B = 32, N = 2). Usage: scripts/vmaf-thinning.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
vmaf_ffmpeg=$(compgen -G "target/tools/imageio-ffmpeg/imageio_ffmpeg/binaries/ffmpeg-linux-*" | head -n1) || {
  echo "no ffmpeg with libvmaf in target/tools: run make bootstrap-test" >&2
  exit 1
}
dir=${1:-$(mktemp -d)}
mkdir -p "$dir"
ff() { ffmpeg -v error -nostdin -y "$@"; }
ff -f lavfi -i testsrc2=size=640x360:rate=25 -t 20 -c:v libx264 -preset veryfast -b:v 2M -g 250 "$dir/src.mkv"
encode() {
  local name=$1
  shift
  ff -i "$dir/src.mkv" "$@" "$dir/$name.mkv" 2>/dev/null
  "$vmaf_ffmpeg" -hide_banner -nostdin -v error -i "$dir/$name.mkv" -i "$dir/src.mkv" -lavfi \
    "[0:v]setpts=PTS-STARTPTS[d];[1:v]setpts=PTS-STARTPTS[r];[d][r]libvmaf=model=version=vmaf_v0.6.1:n_threads=2:log_fmt=json:log_path=$dir/$name.json" \
    -f null -
}
x265() { echo "-c:v libx265 -preset $1 -crf $2 -x265-params log-level=error${3:+:$3}"; }
# shellcheck disable=SC2046
{
  encode x265-ultrafast $(x265 ultrafast 30)
  encode x265-superfast $(x265 superfast 34)
  encode x265-medium $(x265 medium 28)
  encode x265-slow $(x265 slow 28)
  encode x265-bframes2 $(x265 ultrafast 30 bframes=2:b-adapt=0)
  encode x265-bframes8 $(x265 medium 34 bframes=8:b-adapt=0)
  encode svtav1-p8 -c:v libsvtav1 -preset 8 -crf 35
  encode svtav1-p10 -c:v libsvtav1 -preset 10 -crf 55
  encode x264-medium -c:v libx264 -preset medium -crf 28
}
python3 - "$dir" <<'EOF'
import json, pathlib, sys
dir = pathlib.Path(sys.argv[1])
names = ["x265-ultrafast", "x265-superfast", "x265-medium", "x265-slow", "x265-bframes2", "x265-bframes8",
         "svtav1-p8", "svtav1-p10", "x264-medium"]
scores = {n: [f["metrics"]["vmaf"] for f in json.loads((dir / f"{n}.json").read_text())["frames"]] for n in names}
schemes = {f"s{n}": (lambda n: lambda i: i % n == 0)(n) for n in (2, 3, 7)}
for block in (8, 16, 32):
    schemes[f"b{block}/2"] = (lambda b: lambda i: (i // b) % 2 == 0)(block)
print("| scheme | " + " | ".join(names) + " | largest |")
print("|---" * (len(names) + 2) + "|")
print("| whole mean | " + " | ".join(f"{sum(v) / len(v):.3f}" for v in scores.values()) + " | |")
for scheme, keep in schemes.items():
    moved = []
    for v in scores.values():
        kept = [s for i, s in enumerate(v) if keep(i)]
        moved.append(sum(kept) / len(kept) - sum(v) / len(v))
    print(f"| {scheme} | " + " | ".join(f"{m:+.3f}" for m in moved) + f" | {max(map(abs, moved)):.3f} |")
EOF
