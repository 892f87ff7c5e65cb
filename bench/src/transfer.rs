//! A node without the share (issue 39): the benchmark's clip encoded by a linked node that
//! does not see the library (its own mount namespace, an empty tmpfs over the share), which
//! fetches the source over its link into WORK_DIR and uploads the output, against the same
//! linked node seeing the share, side by side. The main node only coordinates
//! (`MAX_JOBS=0`), so the linked node encodes in both; the difference is the transfer.

use std::path::Path;

use crate::cluster::{pro_key, wait_until_linked, CLUSTER_TOKEN};
use crate::encode::{make_clip, split_text, time_job, ServiceRun};
use crate::report::Report;
use crate::util::{Ctx, Res, Server, TempDir};
use crate::{command, Config};

const GOAL: f64 = 1.10;

/// One run: a main node with no slot of its own and a linked node, `blind` or not.
async fn run_once(cfg: &Config, clip: &Path, dir: &Path, blind: bool, round: usize) -> Res<ServiceRun> {
    let root = dir.join(format!("{}-{round}", if blind { "unshared" } else { "shared" }));
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
    let linked = if blind {
        Server::start_blind(&cfg.bin, &data, &linked_env, &share, None)?
    } else {
        Server::start(&cfg.bin, &data, &linked_env)?
    };
    wait_until_linked(&main, &linked, "linked").await?;
    let tail = || format!("{}\n--- linked ---\n{}", main.tail(20), linked.tail(20));
    let timed = time_job(&main.addr, &media, clip, &[main.pid(), linked.pid()], &tail).await;
    drop(linked);
    drop(main);
    let _ = std::fs::remove_dir_all(&root);
    timed
}

/// The run of `runs` that took the least wall time.
fn fastest(runs: &[ServiceRun]) -> Option<&ServiceRun> {
    runs.iter().min_by(|a, b| a.seconds.total_cmp(&b.seconds))
}

pub async fn run(cfg: &Config, report: &mut Report) -> Res<()> {
    let tmp = TempDir::new(&cfg.tmp, "transfer")?;
    let clip = make_clip(tmp.path(), cfg.clip_seconds)?;
    let size = std::fs::metadata(&clip).ctx("clip")?.len();
    let mut log = String::new();
    let (mut shared, mut unshared) = (Vec::new(), Vec::new());
    for round in 0..cfg.encode_rounds {
        for blind in [false, true] {
            let r = run_once(cfg, &clip, tmp.path(), blind, round).await?;
            let by: Vec<String> = r.by_node.iter().map(|(n, c)| format!("{n} {c}")).collect();
            log.push_str(&format!(
                "| {} | {} | {:.2} s | {:.1} s | {} | {} |\n",
                round + 1,
                if blind { "linked node without the share" } else { "linked node with the share" },
                r.seconds,
                r.cpu_seconds,
                r.size,
                by.join(", "),
            ));
            if blind { &mut unshared } else { &mut shared }.push(r);
        }
    }
    let (with, without) = (fastest(&shared).ctx("no run")?, fastest(&unshared).ctx("no run")?);
    // Where each side's time went, by the service's own clocks: without the share, the
    // node's download and upload are phases of their own.
    let splits = format!("- with the share: {}\n- without it: {}\n", split_text(with), split_text(without));
    let (with, without) = (with.seconds, without.seconds);
    let cmd = command("transfer");
    report.row(
        format!("{} s 1080p clip on a node without the share / with it", cfg.clip_seconds),
        format!("{without:.2} / {with:.2} s = {:.3}", without / with),
        &format!("<= {GOAL:.2}"),
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
             its WORK_DIR, encodes it there and uploads the output, which the main node verifies and puts \
             in place. Timed as in the encode measure, from the scan call to COMPLETED; CPU time adds both \
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
