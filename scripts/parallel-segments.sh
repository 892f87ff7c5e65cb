#!/bin/bash
# usage: scripts/parallel-segments.sh [BIN] (default target/debug/condense); SECS=20 clip length — 1080p25 H.264 clip (keyframe every 2 s), libx265 medium CRF 28: ffmpeg vs condense transcode with one session and with two
set -e
BIN=$(realpath "${1:-target/debug/condense}"); D=$(mktemp -d); trap "rm -rf $D" EXIT; cd $D
SECS=${SECS:-20}
[ -f clip.mkv ] || ffmpeg -v error -y -f lavfi -i testsrc2=size=1920x1080:rate=25 -t $SECS -c:v libx264 -preset veryfast -b:v 8M -maxrate 10M -bufsize 16M -g 50 -pix_fmt yuv420p clip.mkv
plan() { # sessions threads segseconds
  rm -rf $D/w-$1 && mkdir -p $D/w-$1 && cp clip.mkv $D/w-$1/clip.mkv
  python3 - "$D/w-$1/clip.mkv" $1 $2 $3 <<'PY'
import json, os, sys
p, s, t, seg = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
st = os.stat(p); d = os.path.dirname(p)
print(json.dumps({"input": p, "partialDir": d + "/.clip.mkv.condense-partial", "targetCodec": "hevc", "encoder": "libx265",
 "encoderOptions": [["crf", "28"], ["preset", "medium"]], "hardwareDecode": False, "bitDepth": 8, "retryProfile": "as_configured",
 "segmentSeconds": seg, "sessions": {"sessions": s, "threads": t}, "outputExtension": "mkv",
 "source": {"size": st.st_size, "mtimeNs": st.st_mtime_ns, "inode": st.st_ino}, "minFreeBytes": 0, "hdr": "SDR", "epoch": "bench"}))
PY
}
t0=$(date +%s.%N); ffmpeg -v error -y -i clip.mkv -c:v libx265 -crf 28 -preset medium -x265-params log-level=error ff.mkv; t1=$(date +%s.%N)
echo "ffmpeg: $(echo "$t1 - $t0" | bc) s, $(stat -c %s ff.mkv) bytes"
for cfg in "1 0 10" "2 1 10" "2 1 4"; do set -- $cfg
  plan $1 $2 $3 > $D/plan.json
  t0=$(date +%s.%N); $BIN transcode < $D/plan.json > $D/events-$1-$3.log; t1=$(date +%s.%N)
  out=$D/w-$1/.clip.mkv.condense-partial/output.mkv
  echo "condense transcode sessions=$1 threads=$2 segments=${3}s: $(echo "$t1 - $t0" | bc) s, $(stat -c %s $out) bytes, $(ffprobe -v error -count_frames -select_streams v:0 -show_entries stream=nb_read_frames -of csv=p=0 $out) frames"
done
