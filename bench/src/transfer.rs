//! A node without the share (issue 39): the benchmark's clip encoded by a linked node that
//! does not see the library (its own mount namespace, an empty tmpfs over the share), which
//! fetches the source over its link into WORK_DIR and uploads the output, against the same
//! linked node seeing the share, side by side. The main node only coordinates
//! (`MAX_JOBS=0`), so the linked node encodes in both; the difference is the transfer. Over
//! loopback the link is faster than any disk; so it is measured again under `TRANSFER_MBPS`
//! (`CAPPED_MBPS`, a Wi-Fi link's rate): reading the copy as it arrives (the download
//! ahead) and sending each finished segment while later ones encode (the upload while
//! encoding), then with the output muxed by the node and uploaded whole once encoded
//! (`CONDENSE_UPLOAD_PARTS=false`), then downloading the copy whole first too
//! (`CONDENSE_DOWNLOAD_AHEAD=false`), as before either overlap.

use std::path::Path;

use crate::cluster::{pro_key, wait_until_linked, CLUSTER_TOKEN};
use crate::encode::{fastest, make_clip, split_text, time_job, ServiceRun};
use crate::report::Report;
use crate::util::{Ctx, Res, Server, TempDir};
use crate::{command, Config};

const GOAL: f64 = 1.10;

/// The cap of the linked node's link in the capped runs, Mbit/s: a source of the clip's
/// size (about 61 MB) takes about 25 s to come, a third of its encode here.
const CAPPED_MBPS: u32 = 20;

/// How the linked node reaches the file.
#[derive(Clone, Copy, PartialEq)]
enum Side {
    /// It sees the share.
    Shared,
    /// It does not, and downloads the source at `mbps` (0: no cap), reading the copy as it
    /// arrives when `ahead`, sending the encoded segments as they finish when `parts`.
    Unshared { mbps: u32, ahead: bool, parts: bool },
}

impl Side {
    fn name(self) -> String {
        match self {
            Side::Shared => "linked node with the share".into(),
            Side::Unshared { mbps: 0, .. } => "linked node without the share".into(),
            Side::Unshared { mbps, ahead: true, parts: true } => {
                format!("without the share, {mbps} Mbit/s, copy read as it arrives, segments sent as they finish")
            }
            Side::Unshared { mbps, ahead: true, parts: false } => {
                format!("without the share, {mbps} Mbit/s, copy read as it arrives, output sent whole at the end")
            }
            Side::Unshared { mbps, ahead: false, .. } => {
                format!("without the share, {mbps} Mbit/s, copy downloaded whole first, output sent whole")
            }
        }
    }

    fn folder(self) -> String {
        match self {
            Side::Shared => "shared".into(),
            Side::Unshared { mbps, ahead, parts } => format!("unshared-{mbps}-{ahead}-{parts}"),
        }
    }
}

/// One run: a main node with no slot of its own and a linked node on `side`.
async fn run_once(cfg: &Config, clip: &Path, dir: &Path, side: Side, round: usize) -> Res<ServiceRun> {
    let root = dir.join(format!("{}-{round}", side.folder()));
    // The share holds the library; the blind node's namespace hides the whole share, so the
    // library's folder does not exist there.
    let share = root.join("share");
    let media = share.join("media");
    std::fs::create_dir_all(&media).ctx("media folder")?;
    let (key, public) = pro_key()?;
    let common = |name: &str, max_jobs: &str| {
        vec![
            ("NODE_NAME", name.to_string()),
            ("MAX_JOBS", max_jobs.to_string()),
            ("CLUSTER_TOKEN", CLUSTER_TOKEN.to_string()),
            ("HEARTBEAT_SECONDS", "1".to_string()),
        ]
    };
    let mut main_env = common("main", "0");
    main_env.push(("LICENSE_KEY", key));
    main_env.push(("LICENSE_PUBLIC_KEY", public));
    let main = Server::start(&cfg.bin, &root.join("main"), &main_env)?;
    let mut linked_env = common("linked", "1");
    linked_env.push(("ROLE", "linked".into()));
    linked_env.push(("MAIN_NODE_URL", format!("http://{}", main.addr)));
    let data = root.join("linked");
    let linked = match side {
        Side::Unshared { mbps, ahead, parts } => {
            linked_env.push(("TRANSFER_MBPS", mbps.to_string()));
            linked_env.push(("CONDENSE_DOWNLOAD_AHEAD", ahead.to_string()));
            linked_env.push(("CONDENSE_UPLOAD_PARTS", parts.to_string()));
            Server::start_blind(&cfg.bin, &data, &linked_env, &share, None)?
        }
        Side::Shared => Server::start(&cfg.bin, &data, &linked_env)?,
    };
    wait_until_linked(&main, &linked, "linked").await?;
    let tail = || format!("{}\n--- linked ---\n{}", main.tail(20), linked.tail(20));
    let timed = time_job(&main.addr, &media, clip, &[main.pid(), linked.pid()], &tail).await;
    drop(linked);
    drop(main);
    let _ = std::fs::remove_dir_all(&root);
    timed
}

pub async fn run(cfg: &Config, report: &mut Report) -> Res<()> {
    let tmp = TempDir::new(&cfg.tmp, "transfer")?;
    let clip = make_clip(tmp.path(), cfg.clip_seconds)?;
    let size = std::fs::metadata(&clip).ctx("clip")?.len();
    let mut log = String::new();
    let sides = [
        Side::Shared,
        Side::Unshared { mbps: 0, ahead: true, parts: true },
        Side::Unshared { mbps: CAPPED_MBPS, ahead: true, parts: true },
        Side::Unshared { mbps: CAPPED_MBPS, ahead: true, parts: false },
        Side::Unshared { mbps: CAPPED_MBPS, ahead: false, parts: false },
    ];
    let mut runs: Vec<Vec<ServiceRun>> = sides.iter().map(|_| Vec::new()).collect();
    for round in 0..cfg.encode_rounds {
        for (side, of_side) in sides.iter().zip(runs.iter_mut()) {
            let r = run_once(cfg, &clip, tmp.path(), *side, round).await?;
            let by: Vec<String> = r.by_node.iter().map(|(n, c)| format!("{n} {c}")).collect();
            log.push_str(&format!(
                "| {} | {} | {:.2} s | {:.1} s | {} | {} |\n",
                round + 1,
                side.name(),
                r.seconds,
                r.cpu_seconds,
                r.size,
                by.join(", "),
            ));
            of_side.push(r);
        }
    }
    let best: Vec<&ServiceRun> = runs.iter().map(|r| fastest(r).ctx("no run")).collect::<Res<_>>()?;
    let [with, without, overlapped, whole_output, whole] = best.as_slice() else { return Err("five sides".into()) };
    // Where each side's time went, by the service's own clocks: without the share, the
    // node's download and upload are phases of their own (a download beside the encode
    // overlaps the video phase).
    let splits: String =
        sides.iter().zip(&best).map(|(side, run)| format!("- {}: {}\n", side.name(), split_text(run))).collect();
    let cmd = command("transfer");
    report.row(
        format!("{} s 1080p clip on a node without the share / with it", cfg.clip_seconds),
        format!("{:.2} / {:.2} s = {:.3}", without.seconds, with.seconds, without.seconds / with.seconds),
        &format!("<= {GOAL:.2}"),
        &cmd,
    );
    report.row(
        format!(
            "the same over a link capped at {CAPPED_MBPS} Mbit/s, the copy read as it arrives and the \
             segments sent as they finish / with the share"
        ),
        format!("{:.2} / {:.2} s = {:.3}", overlapped.seconds, with.seconds, overlapped.seconds / with.seconds),
        &format!("<= {GOAL:.2}"),
        &cmd,
    );
    report.row(
        "the same, the output muxed by the node and sent whole at the end (as before the upload while encoding) \
         / with the share",
        format!("{:.2} / {:.2} s = {:.3}", whole_output.seconds, with.seconds, whole_output.seconds / with.seconds),
        "",
        &cmd,
    );
    report.row(
        "the same, the copy downloaded whole first too (as before the download ahead) / with the share",
        format!("{:.2} / {:.2} s = {:.3}", whole.seconds, with.seconds, whole.seconds / with.seconds),
        "",
        &cmd,
    );
    report.section(
        "A node without the share",
        format!(
            "The clip of \"Encode time and parallel segments\" ({size} bytes). A main node that only \
             coordinates (`MAX_JOBS=0`, a PRO licence made at run time) and one linked node \
             (`MAX_JOBS=1`, the service's defaults otherwise), both release builds on this machine, the \
             link over loopback. With the share, the linked node encodes the file where it lies; without \
             it (its own mount namespace with an empty tmpfs over the share) it downloads the source into \
             its WORK_DIR, encodes it there and sends each finished segment (then the audio) to the main \
             node, which muxes the output, verifies it and puts it in place. The capped sides run the \
             linked node with `TRANSFER_MBPS={CAPPED_MBPS}`: reading its copy as it arrives (the source's \
             end fetched first, then the rest beside the analysis and the encode) and sending segments as \
             they finish; then with `CONDENSE_UPLOAD_PARTS=false` (the node muxes and uploads the output \
             whole once encoded); then with `CONDENSE_DOWNLOAD_AHEAD=false` too (the download whole \
             before anything reads it). Timed as in the encode measure, from the scan call to COMPLETED; CPU time adds both \
             nodes and their children. {} round(s), interleaved; the row compares each side's fastest.\n\n\
             | round | what | wall time | CPU time | output bytes | segments by node |\n\
             |---|---|---|---|---|---|\n{log}\nWhere the fastest run of each side went (the COMPLETED \
             event's `phases`; a phase the linked node reported is named with it):\n\n{splits}\n\
             Command: `{cmd}` (as root: the namespace needs the right to mount).\n",
            cfg.encode_rounds,
        ),
    );
    Ok(())
}
