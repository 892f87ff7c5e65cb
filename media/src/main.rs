//! `condense-media`: the one program of condense that links FFmpeg. A node starts it for
//! every piece of media work (transcode, helper, media), so a decoder's crash ends a child
//! and the node process never maps FFmpeg's libraries; `condense` hands its media
//! subcommands (probe, vmaf, crf-search, version) over to it.

use std::process::ExitCode;

use clap::Parser;
use condense::config::{Cli, Command};
use condense_media::cli;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match &cli.command {
        Command::Transcode => condense_media::child::child_main(),
        Command::Helper => condense_media::child::helper_main(),
        Command::Media => condense_media::child::media_main(),
        Command::Probe { file } => cli::probe(file),
        Command::Vmaf { reference, distorted } => cli::vmaf(reference, distorted),
        Command::CrfSearch { .. } => cli::crf_search(&cli.command),
        Command::Version => {
            cli::version();
            ExitCode::SUCCESS
        }
        Command::Serve(_) | Command::Migrate | Command::User { .. } | Command::Openapi | Command::License { .. } => {
            eprintln!("condense-media runs condense's media work only; run this with `condense`");
            ExitCode::from(2)
        }
    }
}
